#!/usr/bin/env python3
"""The slowest steps of a build, from Ninja's own record of it (BUILD_DIR/.ninja_log); with
--fresh, the build times of a fresh clone, recorded as a results file.

Each output's latest build counts once: its seconds, what share of the build's compile time it
took, and its name. The total is the time all steps took one after another (on N cores the build
takes about total / N plus the longest chain).

--fresh clones this repository's HEAD into a temporary directory and builds it as `scripts/dev`
does (Release, Ninja, nproc jobs), without ccache: first `ampt` alone (what `scripts/dev train`
waits for), then the rest (the tests). It writes the wall time of each, the build tree's size and
the slowest steps to benchmarks/results/build-times-cpu-<date>.md. The clone borrows this
checkout's .venv and .deps (a link each), so the bootstrap's downloads are not part of the times.
Usage: scripts/build_times.py [BUILD_DIR] [--top N]
       scripts/build_times.py --fresh [--top N]
"""
import argparse
import datetime
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


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


def slowest(seconds: dict, top: int) -> list:
    total = sum(seconds.values())
    return [(output, s, 100 * s / total)
            for output, s in sorted(seconds.items(), key=lambda item: -item[1])[:top]]


def tree_bytes(path: pathlib.Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def fresh(top: int) -> int:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import machine  # the results files' record header
    env = dict(os.environ, CCACHE_DISABLE="1")
    jobs = str(os.cpu_count() or 2)
    with tempfile.TemporaryDirectory(prefix="ampt-build-times-") as work:
        clone = pathlib.Path(work) / "ampt"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        for borrowed in (".venv", ".deps"):
            if (ROOT / borrowed).exists():
                (clone / borrowed).symlink_to(ROOT / borrowed)
        build = clone / "build"
        subprocess.run(["cmake", "-S", str(clone), "-B", str(build), "-G", "Ninja",
                        "-DCMAKE_BUILD_TYPE=Release"], check=True, env=env, stdout=subprocess.DEVNULL)
        times = {}
        for label, target in (("ampt", ["--target", "ampt"]), ("the tests (the rest)", [])):
            start = time.monotonic()
            subprocess.run(["cmake", "--build", str(build), "-j", jobs, *target], check=True,
                           env=env, stdout=subprocess.DEVNULL)
            times[label] = time.monotonic() - start
        size = tree_bytes(build)
        steps = read_log(build / ".ninja_log")
    load = os.getloadavg()[0]
    lines = [f"# Build times of a fresh clone, CPU ({datetime.date.today()})", "",
             "`scripts/build_times.py --fresh`: the repository's HEAD cloned and built as "
             f"`scripts/dev` builds it (Release, Ninja, -j {jobs}), without ccache; the clone "
             "borrows .venv and .deps, so no download is timed. Load average at the end: "
             f"{load:.1f}"
             + (" (above the core count: other work shared the machine)." if load > int(jobs) else "."),
             "",
             "| build | wall time |", "|---|---:|"]
    lines += [f"| {label} | {t / 60:.1f} min |" for label, t in times.items()]
    lines += [f"| both | {sum(times.values()) / 60:.1f} min |", "",
              f"Build tree: {size / 2**30:.2f} GiB. Compiler and linker time of all "
              f"{len(steps)} steps one after another: {sum(steps.values()) / 60:.1f} min.", "",
              f"The {top} slowest steps:", "", "| seconds | share | output |", "|---:|---:|---|"]
    lines += [f"| {s:.1f} | {share:.1f}% | `{output}` |" for output, s, share in slowest(steps, top)]
    out = ROOT / "benchmarks" / "results" / f"build-times-cpu-{datetime.date.today()}.md"
    machine.write_record(out, "\n".join(lines) + "\n", "cpu")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir", nargs="?", default="build")
    parser.add_argument("--top", type=int, default=20, help="how many steps to list (default 20)")
    parser.add_argument("--fresh", action="store_true",
                        help="build a fresh clone and record its times in benchmarks/results/")
    args = parser.parse_args()
    if args.fresh:
        return fresh(args.top)
    log = pathlib.Path(args.build_dir) / ".ninja_log"
    if not log.is_file():
        print(f"build_times: no {log}: build with Ninja first (scripts/dev build)", file=sys.stderr)
        return 1
    seconds = read_log(log)
    total = sum(seconds.values())
    print(f"{len(seconds)} steps, {total:.0f} s of compiler and linker time in all")
    for output, s, share in slowest(seconds, args.top):
        print(f"{s:8.1f} s {share:5.1f}%  {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
