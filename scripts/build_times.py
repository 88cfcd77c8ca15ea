#!/usr/bin/env python3
"""The slowest steps of a build, from Ninja's own record of it (BUILD_DIR/.ninja_log).

Each output's latest build counts once: its seconds, what share of the build's compile time it
took, and its name. The total is the time all steps took one after another (on N cores the build
takes about total / N plus the longest chain).
Usage: scripts/build_times.py [BUILD_DIR] [--top N]
"""
import argparse
import pathlib
import sys


def read_log(path: pathlib.Path) -> dict:
    """{output: seconds} from a .ninja_log (format v5: start end mtime output hash)."""
    lines = path.read_text().splitlines()
    if not lines or not lines[0].startswith("# ninja log v"):
        raise SystemExit(f"{path}: not a Ninja log (its first line should be '# ninja log vN')")
    steps = {}  # output -> (start, end, command hash); later lines are later builds
    for line in lines[1:]:
        fields = line.split("\t")
        if len(fields) == 5:
            steps[fields[3]] = (int(fields[0]), int(fields[1]), fields[4])
    # A step with several outputs has a line for each: count it once, by its first output.
    seconds, seen = {}, set()
    for output, (start, end, command) in steps.items():
        if (start, end, command) not in seen:
            seen.add((start, end, command))
            seconds[output] = (end - start) / 1000.0
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir", nargs="?", default="build")
    parser.add_argument("--top", type=int, default=20, help="how many steps to list (default 20)")
    args = parser.parse_args()
    log = pathlib.Path(args.build_dir) / ".ninja_log"
    if not log.is_file():
        print(f"build_times: no {log}: build with Ninja first (scripts/dev build)", file=sys.stderr)
        return 1
    seconds = read_log(log)
    total = sum(seconds.values())
    print(f"{len(seconds)} steps, {total:.0f} s of compiler and linker time in all")
    for output, s in sorted(seconds.items(), key=lambda item: -item[1])[: args.top]:
        print(f"{s:8.1f} s {100 * s / total:5.1f}%  {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
