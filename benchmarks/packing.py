#!/usr/bin/env python3
"""Packed against unpacked instruction data: scored tokens per second on this machine's CPU.

Writes a `tokens:` shard and its loss mask (the layout `ampt tokenize` writes) of chat-like
examples: lengths drawn from a log-normal with mean 150 tokens and a long tail cut at 2,000, the
first 30% of each example its prompt (not scored), the rest its answer. Then trains the tiny
random Llama preset at --block_size 2048, fp32, batch 4, twice: with --packing (examples packed
whole into windows, each attending only to itself) and with --packing=false (one example per
window, padded).

Both runs score the same tokens, so what matters is how many windows a second passes through
the model and how many scored tokens a window holds:

  scored tokens/s = median(samples_per_sec over steps 2..last) x scored tokens per window

where samples_per_sec comes from each run's metrics.jsonl (a sample is a window) and scored
tokens per window is the shard's scored-token count over the windows the data line reports
("packed N examples into W windows"; unpacked, one window per example). The ratio is the
speed-up packing gives. Writes benchmarks/results/packing-cpu-<date>.md and prints it. Not part
of the tests.

    .venv/bin/python benchmarks/packing.py                  # 600 examples, 8 steps each
    .venv/bin/python benchmarks/packing.py --examples 300 --steps 5
"""
import argparse
import datetime
import json
import pathlib
import re
import statistics
import struct
import subprocess
import tempfile

import numpy as np

from machine import cpu_isa, cpu_model
import machine  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
AMPT = ROOT / "build" / "ampt"
BLOCK = 2048
VOCAB = 256


def write_shard(directory, examples, seed):
    """The shard and its mask; returns (scored tokens, the examples' lengths)."""
    rng = np.random.default_rng(seed)
    # Log-normal with sigma 1 (a median 0.6 of the mean), cut at 2,000 tokens, then scaled so
    # that the lengths drawn average 150.
    drawn = np.clip(np.exp(rng.normal(np.log(150) - 0.5, 1.0, examples)), 4, 2000)
    lengths = np.clip(np.rint(drawn * 150 / drawn.mean()), 4, 2000).astype(np.int64)
    tokens, mask = [], []
    for length in lengths:
        prompt = max(1, int(0.3 * length))
        tokens.extend(rng.integers(0, VOCAB, length).tolist())
        mask.extend([2] + [0] * (prompt - 1) + [1] * (length - prompt))
    header = lambda magic: struct.pack("<256i", magic, 1, len(tokens), *([0] * 253))
    (directory / "chat_train.bin").write_bytes(
        header(20240520) + np.asarray(tokens, dtype=np.uint16).tobytes())
    (directory / "chat_train.mask").write_bytes(header(20261124) + bytes(mask))
    # The targets a window scores: each example's answer (its tokens after the prompt), within
    # the first BLOCK + 1 tokens.
    scored = sum(min(int(l), BLOCK + 1) - max(1, int(0.3 * l)) for l in lengths)
    return scored, lengths


def run(directory, packing, steps):
    out = directory / ("packed" if packing else "unpacked")
    command = [str(AMPT), "train", "--dataset", f"tokens:{directory / 'chat_train.bin'}",
               "--model", "llama", "--block_size", str(BLOCK), "--vocab_size", str(VOCAB),
               "--mixed_precision", "no", "--device", "cpu", "--batch_size", "4",
               "--max_steps", str(steps), "--log_every", "1", "--val_fraction", "0",
               "--warmup_steps", "0", f"--packing={'true' if packing else 'false'}",
               "--output_dir", str(out)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}")
    data_line = next(l for l in done.stdout.splitlines() if "[AMP] Data:" in l)
    lines = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    rates = [l["samples_per_sec"] for l in lines if "loss" in l and "val_loss" not in l][1:]
    return data_line, statistics.median(rates)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=600)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        directory = pathlib.Path(temp)
        scored, lengths = write_shard(directory, args.examples, args.seed)
        packed_line, packed_rate = run(directory, True, args.steps)
        unpacked_line, unpacked_rate = run(directory, False, args.steps)
    windows = int(re.search(r"packed \d+ examples into (\d+) windows", packed_line).group(1))
    packed_tokens = packed_rate * scored / windows
    unpacked_tokens = unpacked_rate * scored / len(lengths)
    cpu, isa = cpu_model(), cpu_isa()
    today = datetime.date.today().isoformat()
    report = f"""# Packed vs unpacked instruction data, CPU ({today})

{cpu} ({isa}), tiny random Llama preset (2 layers, width 64) at --block_size {BLOCK}, fp32,
batch 4, {args.steps} steps each (median of steps 2..{args.steps}). {len(lengths)} chat-like
examples: log-normal lengths, mean {lengths.mean():.0f} tokens (median {np.median(lengths):.0f},
longest {lengths.max()}), the first 30% of each its prompt; {scored} scored tokens.

| | windows/s | scored tokens per window | scored tokens/s |
|---|---:|---:|---:|
| `--packing` | {packed_rate:.2f} | {scored / windows:.0f} | {packed_tokens:,.0f} |
| `--packing=false` | {unpacked_rate:.2f} | {scored / len(lengths):.0f} | {unpacked_tokens:,.0f} |

Packed: **{packed_tokens / unpacked_tokens:.1f}x** the scored tokens per second.

The data lines:
- `{packed_line.split('[AMP] Data: ', 1)[1].split('; ', 2)[-1]}`
- `{unpacked_line.split('[AMP] Data: ', 1)[1].split('; ', 2)[-1]}`

`benchmarks/packing.py --examples {args.examples} --steps {args.steps} --seed {args.seed}`
"""
    path = ROOT / "benchmarks" / "results" / f"packing-cpu-{today}.md"
    machine.write_record(path, report, "cpu")
    print(report)


if __name__ == "__main__":
    main()
