#!/usr/bin/env python3
"""Host cost per training step: ampt against PyTorch eager where the compute is negligible.

gpt-tiny in fp32 at batch 1 x 16 tokens does so little arithmetic that a step's time is what the
host spends launching it: the operators, the bookkeeping between them, the optimizer's loop. On a
GPU that is what keeps the device waiting (the H100 trace of 2026-11-26 had the fused default
CPU-bound, the GPU busy 61%). ampt and benchmarks/reference.py's eager loop run in turns, each
round one process of each, and the medians of their steady-state steps/s are compared; beside
them the step census's operator count of each (benchmarks/census.py's rules).

    .venv/bin/python benchmarks/host_cost.py              # 5 rounds of 400 steps
    .venv/bin/python benchmarks/host_cost.py --rounds 7 --steps 600
    .venv/bin/python benchmarks/host_cost.py --before /tmp/ampt-before   # a change's own effect

--before runs a second ampt binary (an earlier build) in the same rounds: this VM's speed drifts
by tens of percent between runs, so a change is measured against its parent side by side.

Writes benchmarks/results/host-cost-cpu-<date>-b<batch>x<seq_len>-<cpu>.md. Not part of the tests.
"""
import argparse
import datetime
import pathlib
import statistics
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import census  # noqa: E402
import machine  # noqa: E402
import run  # noqa: E402

ROOT = run.ROOT


def ampt_steps_per_sec(model, batch, seq_len, steps, binary=None):
    result = run.ampt_run("cpu", model, batch, steps, "fp32",
                          extra=("--block_size", str(seq_len), "--loader_workers", "0"), binary=binary)
    if "error" in result:
        sys.exit(f"ampt failed: {result['error']}")
    return result["samples_per_sec"] / batch


def eager_steps_per_sec(model, batch, seq_len, steps):
    cmd = [sys.executable, str(run.REFERENCE), "--device", "cpu", "--model", model, "--precision",
           "fp32", "--steps", str(steps), "--batch_size", str(batch), "--seq_len", str(seq_len)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"reference failed: {proc.stderr.strip().splitlines()[-1]}")
    result = run.json.loads(proc.stdout.strip().splitlines()[-1])
    return result["samples_per_sec"] / batch


def rate(x):
    """Steps/s to three figures at least (a large batch runs a dozen a second)."""
    return f"{x:.0f}" if x >= 100 else f"{x:.3g}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt-tiny")
    parser.add_argument("--batch_size", type=int, default=1)
    parser.add_argument("--seq_len", type=int, default=16)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", type=pathlib.Path,
                        help="another ampt binary (an earlier build) to run in the same rounds")
    args = parser.parse_args()
    if not run.AMPT.exists():
        sys.exit(f"{run.AMPT} not found: build it first (scripts/dev build)")
    ours, theirs, before = [], [], []
    for r in range(args.rounds):
        ours.append(ampt_steps_per_sec(args.model, args.batch_size, args.seq_len, args.steps))
        theirs.append(eager_steps_per_sec(args.model, args.batch_size, args.seq_len, args.steps))
        if args.before:
            before.append(ampt_steps_per_sec(args.model, args.batch_size, args.seq_len, args.steps,
                                             binary=args.before))
        print(f"round {r + 1}: ampt {rate(ours[-1])} steps/s, eager {rate(theirs[-1])} steps/s"
              + (f", {args.before} {rate(before[-1])} steps/s" if before else ""), flush=True)
    ampt_census = census.ampt_census(args.model, "fp32", args.seq_len, 0, args.batch_size)
    eager_census = census.eager_census(args.model, "fp32", args.seq_len, 0, args.batch_size)
    a, e = statistics.median(ours), statistics.median(theirs)
    date = datetime.date.today().isoformat()
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    lines = [
        f"# Host cost per step on the CPU ({date})", "",
        f"ampt git {rev}; {machine.cpu_model()}, {machine.cpu_isa()}; `benchmarks/host_cost.py "
        f"--batch_size {args.batch_size} --seq_len {args.seq_len} --rounds {args.rounds} "
        f"--steps {args.steps}"
        f"{f' --before {args.before}' if args.before else ''}`. {args.model} in fp32 at batch "
        f"{args.batch_size} x {args.seq_len} tokens, AdamW, clipping at 1.0; each round one ampt "
        "process and one PyTorch eager process (benchmarks/reference.py), in turns; steady-state "
        "steps/s (the second half of the steps), the median of the rounds.", "",
        "| run | steps/s (median) | best round | each round | ms/step | operators per step | "
        "autograd nodes |",
        "|---|---:|---:|---|---:|---:|---:|",
        f"| ampt | {rate(a)} | {rate(max(ours))} | {', '.join(rate(x) for x in ours)} | {1000 / a:.2f} | "
        f"{ampt_census['operators']} | {ampt_census['autograd_nodes']} |",
        f"| PyTorch eager | {rate(e)} | {rate(max(theirs))} | {', '.join(rate(x) for x in theirs)} | {1000 / e:.2f} | "
        f"{eager_census['operators']} | {eager_census['autograd_nodes']} |",
        "", f"ampt ÷ eager: **{a / e:.2f}x** steps/s (best rounds: {max(ours) / max(theirs):.2f}x; a "
        "slow spell of this VM can take a round of either, and the best rounds are the least "
        "disturbed).",
    ]
    if before:
        b = statistics.median(before)
        lines[-2:-2] = [f"| `{args.before}` (--before) | {rate(b)} | {rate(max(before))} | "
                        f"{', '.join(rate(x) for x in before)} | {1000 / b:.2f} | | |"]
        lines += ["", f"ampt ÷ `{args.before}`: **{a / b:.2f}x** steps/s (best rounds: "
                  f"{max(ours) / max(before):.2f}x)."]
    shape = f"b{args.batch_size}x{args.seq_len}"
    out = ROOT / "benchmarks" / "results" / f"host-cost-cpu-{date}-{shape}-{machine.cpu_tag()}.md"
    machine.write_record(out, "\n".join(lines) + "\n", "cpu")
    print("\n".join(lines))
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
