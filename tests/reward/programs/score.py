"""A reward program for tests/reward/reward_program_test.cpp, as a user would write one.

    score.py          each completion: 1 if it contains the record's "answer", plus a thousandth
                      of its length in characters (so the test sees each text arrive whole)
    score.py count    each completion: how many requests this process has answered before

Reads one JSON request per line on stdin and answers one line on stdout; exits 3 when a request
does not carry the record's own prompt.
"""
import json
import sys


def main():
    count_mode = sys.argv[1:] == ["count"]
    for answered, line in enumerate(sys.stdin):
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
