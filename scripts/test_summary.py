#!/usr/bin/env python3
"""One closing line for a test run: how many tests passed, failed and were skipped, and why.

Reads the JUnit file `ctest --output-junit` wrote. A skipped test says why in its output:
"ampt-test-skipped (<reason>): ..." (tests/support/skip.h), or the Slurm fixture's "Slurm tests
skipped: ..." (tests/slurm/cluster.sh).
Usage: scripts/test_summary.py JUNIT_XML
"""
import collections
import re
import sys
import xml.etree.ElementTree as ElementTree

MARKER = re.compile(r"ampt-test-skipped \(([^)]+)\)")


def skip_reason(output: str) -> str:
    match = MARKER.search(output)
    if match:
        return match.group(1)
    if "Slurm tests skipped:" in output:
        return "no Slurm"
    return "other"


def summarize(path: str) -> str:
    counts = collections.Counter()
    reasons = collections.Counter()
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        status = case.get("status", "run")
        if case.find("skipped") is not None or status in ("notrun", "disabled"):
            counts["skipped"] += 1
            reasons[skip_reason(case.findtext("system-out") or "")] += 1
        elif case.find("failure") is not None or status == "fail":
            counts["failed"] += 1
        else:
            counts["passed"] += 1
    line = f"tests: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
    if reasons:
        line += " (" + "; ".join(f"{reason}: {n}" for reason, n in sorted(reasons.items())) + ")"
    return line


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: scripts/test_summary.py JUNIT_XML", file=sys.stderr)
        return 2
    try:
        print(summarize(sys.argv[1]))
    except (OSError, ElementTree.ParseError) as error:
        print(f"test_summary: cannot read {sys.argv[1]}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
