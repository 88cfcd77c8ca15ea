#!/usr/bin/env python3
"""A results file of a whole test run: each pass's closing line (scripts/test_summary.py), its
wall time, and its slowest tests, with the record header benchmarks/machine.py writes.

Each pass is LABEL=JUNIT_XML[:WALL_SECONDS], the JUnit file `ctest --output-junit` wrote and, when
known, the pass's wall time (`time ctest ...`); a test's own seconds come from the JUnit file.
Usage: scripts/suite_record.py --pass native=build/a.xml:1450 --pass avx2=build/b.xml:1600
                               [--command "scripts/dev test ..."] [--top 10] [--note TEXT]
Writes benchmarks/results/suite-cpu-<date>.md.
"""
import argparse
import datetime
import pathlib
import sys
import xml.etree.ElementTree as ElementTree

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "benchmarks"))
import machine  # noqa: E402
from test_summary import summarize  # noqa: E402


def slowest(path, top):
    cases = [(float(case.get("time", 0)), case.get("name", "")) for case in
             ElementTree.parse(path).getroot().iter("testcase")]
    return sorted(cases, reverse=True)[:top], sum(t for t, _ in cases), len(cases)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pass", dest="passes", action="append", required=True,
                        metavar="LABEL=JUNIT[:SECONDS]")
    parser.add_argument("--command", default="scripts/dev test (ctest -j2), then the AVX2 pass of .ci/run")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--note", default="", help="a paragraph after the title: what a reader must know of the run")
    args = parser.parse_args()
    today = datetime.date.today()
    lines = [f"# The test suite on a CPU ({today})", ""]
    if args.note:
        lines += [args.note, ""]
    for spec in args.passes:
        label, _, rest = spec.partition("=")
        path, _, wall = rest.partition(":")
        cases, total, count = slowest(path, args.top)
        lines += [f"## {label}", "", f"    {summarize(path)}", "",
                  f"{count} tests; {total / 60:.1f} min of test time in all"
                  + (f", {float(wall) / 60:.1f} min of wall time" if wall else "") + ".", "",
                  f"The {args.top} slowest:", "", "| seconds | test |", "|---:|---|"]
        lines += [f"| {t:.0f} | {name.replace('|', '/')} |" for t, name in cases]
        lines.append("")
    out = ROOT / "benchmarks" / "results" / f"suite-cpu-{today}.md"
    machine.write_record(out, "\n".join(lines), "cpu", args.command)
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
