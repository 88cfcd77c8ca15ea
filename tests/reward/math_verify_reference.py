"""Reference verdicts for tests/reward/math_verify_test.cpp: math-verify's (PyPI) on each case.

    math_verify_reference.py CASES OUT

CASES: JSON lines {"completion": ..., "answer": ...}; OUT: a JSON line per case, true when
math_verify.verify(parse(answer), parse(completion)) holds, with parse's and verify's defaults,
the call TRL's accuracy rewards and the Open R1 recipes build on.
"""
import json
import sys

from math_verify import parse, verify


def main():
    cases, out = sys.argv[1], sys.argv[2]
    with open(cases, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as w:
        for line in f:
            case = json.loads(line)
            w.write(json.dumps(bool(verify(parse(case["answer"]), parse(case["completion"])))) + "\n")


if __name__ == "__main__":
    main()
