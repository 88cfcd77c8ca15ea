#!/usr/bin/env python3
"""Expert parallelism against plain data parallelism on the same ranks, side by side.

Launches `torchrun --standalone --nproc_per_node N --no-python build/ampt train` on --model (a
sparse preset, qwen3-moe by default) with synthetic tokens, --steps steps of --batch windows of
--block tokens per rank, twice per round: plain data parallelism (every rank holds every
expert) and --expert_parallel N (each rank holds 1/N of them, rows sent by all_to_all). Rounds
alternate the two; the medians of rank 0's steady-state tokens/s (its summary's Throughput line)
and their ratio are reported. On a GPU pass --device cuda (one rank per GPU).

Writes benchmarks/results/expert-parallel-<device>-<date>.md and prints it. Not part of the tests.

    .venv/bin/python benchmarks/expert_parallel.py                  # 2 CPU ranks, 5 rounds
    .venv/bin/python benchmarks/expert_parallel.py --precision no --rounds 7
"""
import argparse
import datetime
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

from machine import device_line
import machine  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
AMPT = ROOT / "build" / "ampt"
TORCHRUN = pathlib.Path(sys.executable).parent / "torchrun"


def tokens_per_sec(args, expert_parallel, out):
    cmd = [str(TORCHRUN), "--standalone", "--nproc_per_node", str(args.ranks), "--no-python",
           str(AMPT), "train", "--model", args.model, "--device", args.device, "--mixed_precision",
           args.precision, "--max_steps", str(args.steps), "--batch_size", str(args.batch),
           "--block_size", str(args.block), "--log_every", str(args.steps), "--val_fraction", "0",
           "--loader_workers", "0", "--save_final=false", "--output_dir", out,
           "--expert_parallel", str(expert_parallel)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"ampt failed ({' '.join(cmd)}):\n{proc.stderr[-2000:]}")
    found = re.search(r"Throughput:\s+([0-9.]+) tokens/s", proc.stdout)
    if not found:
        sys.exit(f"no Throughput line in rank 0's output:\n{proc.stdout[-2000:]}")
    return float(found.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen3-moe")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--block", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if not AMPT.exists():
        sys.exit(f"{AMPT} not found: build it first (scripts/dev build)")
    plain, divided = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            plain.append(tokens_per_sec(args, 1, f"{tmp}/plain{r}"))
            divided.append(tokens_per_sec(args, args.ranks, f"{tmp}/divided{r}"))
            print(f"round {r + 1}: plain {plain[-1]:.0f}, expert parallel {divided[-1]:.0f} tokens/s",
                  file=sys.stderr)
    p, d = statistics.median(plain), statistics.median(divided)
    date = datetime.date.today().isoformat()
    text = (
        f"# Expert parallelism vs plain data parallelism, {date}\n\n"
        f"{device_line(args.device)}\n\n"
        f"`{args.model}`, {args.precision}, {args.ranks} ranks (Gloo on the CPU, NCCL on GPUs), "
        f"batch {args.batch} x {args.block} tokens per rank, {args.steps} steps, {args.rounds} "
        f"alternating rounds; the steady-state tokens/s of rank 0's summary (its Throughput line).\n\n"
        "| run | median tokens/s | rounds |\n|---|---:|---|\n"
        f"| plain data parallel (every rank every expert) | {p:.0f} | "
        f"{', '.join(f'{v:.0f}' for v in plain)} |\n"
        f"| --expert_parallel {args.ranks} | {d:.0f} | {', '.join(f'{v:.0f}' for v in divided)} |\n\n"
        f"Expert parallel / plain: {d / p:.2f}x.\n")
    out = ROOT / "benchmarks" / "results" / f"expert-parallel-{args.device}-{date}.md"
    machine.write_record(out, text, args.device)
    print(text)


if __name__ == "__main__":
    main()
