#!/usr/bin/env python3
"""Where a training step's time goes: ampt against PyTorch eager (and torch.compile), per operator.

Runs `build/ampt train --profile A-B` and `benchmarks/reference.py --profile A-B` (eager, then
compile) on the same model, batch and precision, reads their operator tables and writes
benchmarks/results/profile-<device>-<model>-<precision>-<date>.md: time per step phase, then every
operator and kernel with its calls per step in each implementation (the ones ampt calls more often
first), so each operation ampt runs that eager does not stands out.

    .venv/bin/python benchmarks/op_profile.py --model gpt-tiny --precision bf16 --batch_size 16
"""
import argparse
import datetime
import pathlib
import subprocess
import sys
import tempfile
import machine  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
AMPT = ROOT / "build" / "ampt"
REFERENCE = ROOT / "benchmarks" / "reference.py"


def read_table(path):
    """{(kind, name): (calls per step, ms per step)} from a profile-steps-A-B.txt."""
    rows = {}
    for line in pathlib.Path(path).read_text().splitlines()[2:]:
        *name, kind, calls, ms = line.split()
        rows[(kind, " ".join(name))] = (float(calls), float(ms))
    return rows


def ampt_profile(args, steps, out):
    mixed = {"fp32": "no"}.get(args.precision, args.precision)
    cmd = [str(AMPT), "train", "--device", args.device, "--model", args.model, "--mixed_precision",
           mixed, "--max_steps", str(args.last + 1), "--batch_size", str(args.batch_size),
           "--log_every", str(args.last + 1), "--val_fraction", "0", "--output_dir", str(out),
           "--synthetic_samples", str(args.batch_size * (args.last + 3)), "--profile", steps]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return read_table(out / f"profile-steps-{steps}.txt")


def reference_profile(args, steps, out, compiled):
    cmd = [sys.executable, str(REFERENCE), "--device", args.device, "--model", args.model,
           "--precision", args.precision, "--steps", str(args.last + 1), "--batch_size",
           str(args.batch_size), "--profile", steps, "--profile_out", str(out)]
    if compiled:
        cmd.append("--compile")
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return read_table(out / f"profile-steps-{steps}.txt")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--model", default="gpt-tiny")
    parser.add_argument("--precision", default="bf16", choices=["fp32", "bf16", "fp16"])
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--first", type=int, default=11, help="first traced step (after warm-up)")
    parser.add_argument("--last", type=int, default=15)
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--out", help="markdown file (default: benchmarks/results/profile-...)")
    args = parser.parse_args()
    steps = f"{args.first}-{args.last}"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        tables = {"ampt": ampt_profile(args, steps, tmp / "ampt"),
                  "eager": reference_profile(args, steps, tmp / "eager", False)}
        if not args.no_compile:
            tables["compile"] = reference_profile(args, steps, tmp / "compile", True)
    impls = list(tables)
    date = datetime.date.today().isoformat()
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    lines = [f"# Profile: {args.model} {args.precision}, batch {args.batch_size}, {args.device} "
             f"({date})", "",
             f"ampt git {rev}; `benchmarks/op_profile.py --device {args.device} --model {args.model} "
             f"--precision {args.precision} --batch_size {args.batch_size}`; steps {steps} traced "
             "after warm-up, per optimizer step. Times are inclusive (an operator's time includes "
             "what it calls) and taken under the profiler: compare calls exactly, times roughly.",
             "", "## Phases (ms per step)", "",
             "| phase | " + " | ".join(impls) + " |", "|---|" + "---:|" * len(impls)]
    phases = ["forward", "backward", "unscale", "clip", "optimizer", "scaler_update", "monitor",
              "zero_grad", "data_wait"]
    for phase in phases:
        cells = []
        for impl in impls:
            prefix = "ampt::" if impl == "ampt" else "ref::"
            hit = tables[impl].get(("phase", prefix + phase))
            cells.append(f"{hit[1]:.2f}" if hit else "–")
        lines.append(f"| {phase} | " + " | ".join(cells) + " |")
    keys = sorted({k for t in tables.values() for k in t if k[0] != "phase"},
                  key=lambda k: (-(tables["ampt"].get(k, (0, 0))[0] - tables["eager"].get(k, (0, 0))[0]),
                                 -tables["ampt"].get(k, (0, 0))[1]))
    lines += ["", "## Operators and kernels (calls per step; ms per step in brackets)", "",
              "| kind | name | " + " | ".join(impls) + " | ampt − eager calls |",
              "|---|---|" + "---:|" * (len(impls) + 1)]
    for key in keys:
        cells = [f"{tables[i][key][0]:g} ({tables[i][key][1]:.2f})" if key in tables[i] else "–"
                 for i in impls]
        diff = tables["ampt"].get(key, (0, 0))[0] - tables["eager"].get(key, (0, 0))[0]
        lines.append(f"| {key[0]} | `{key[1]}` | " + " | ".join(cells) + f" | {diff:+g} |")
    out = pathlib.Path(args.out) if args.out else (
        ROOT / "benchmarks" / "results" /
        f"profile-{args.device}-{args.model}-{args.precision}-{date}.md")
    machine.write_record(out, "\n".join(lines) + "\n", args.device)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
