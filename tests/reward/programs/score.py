"""A reward program for tests/reward/reward_program_test.cpp, as a user would write one.

    score.py          each completion: 1 if it contains the record's "answer", plus a thousandth
                      of its length in characters (so the test sees each text arrive whole)
    score.py count    each completion: how many requests this process has answered before

Reads one JSON request per line on stdin, decoded as strict UTF-8 (as Python does under a UTF-8
locale: a byte that is not UTF-8 is an error), and answers one line on stdout; exits 3 when a
request does not carry the record's own prompt.
"""
import io
import json
import sys


def main():
    count_mode = sys.argv[1:] == ["count"]
    requests = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="strict")
    for answered, line in enumerate(requests):
        request = json.loads(line)
        if request["prompt"] != request["record"].get("prompt"):
            print(f"score.py: the request's prompt {request['prompt']!r} is not the record's", file=sys.stderr)
            sys.exit(3)
        completions = request["completions"]
        if count_mode:
            rewards = [answered] * len(completions)
        else:
            answer = str(request["record"]["answer"])
            rewards = [float(answer in c) + len(c) / 1000 for c in completions]
        print(json.dumps({"rewards": rewards}), flush=True)


if __name__ == "__main__":
    main()
