#!/usr/bin/env python3
"""ampt against PyTorch's own AMP loop on the same MLP, batch and optimizer, side by side.

Runs `build/ampt train` and a reference Python loop (torch.autocast + torch.amp.GradScaler +
fused AdamW + clip_grad_norm_ + warmup/cosine schedule) for each precision in one session and
writes benchmarks/results/<device>-<date>.md with samples/s and ampt's ratio to the reference.

    .venv/bin/python benchmarks/compare_mlp.py [--device cpu|cuda] [--steps N]
"""
import argparse
import datetime
import json
import math
import os
import pathlib
import platform
import subprocess
import tempfile
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parent.parent
PRECISIONS = {"no": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def reference_run(args, precision):
    """The Python training loop an ML engineer would write for the same job."""
    device = torch.device(args.device)
    torch.manual_seed(1337)
    layers, width = [], args.features
    for _ in range(args.layers):
        layers += [torch.nn.Linear(width, args.hidden), torch.nn.GELU()]
        width = args.hidden
    model = torch.nn.Sequential(*layers, torch.nn.Linear(width, args.classes)).to(device)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
        lr=3e-3, fused=True)
    warmup, total = 20, args.steps
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / warmup if s < warmup else
        0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, (s - warmup) / max(1, total - 1 - warmup)))))
    dtype = PRECISIONS[precision]
    scaler = torch.amp.GradScaler(device.type, enabled=dtype is torch.float16)
    inputs = torch.randn(args.samples, args.features, device=device)
    targets = torch.randint(0, args.classes, (args.samples,), device=device)
    batches = args.samples // args.batch_size

    def step(i):
        index = (i % batches) * args.batch_size
        x, y = inputs[index:index + args.batch_size], targets[index:index + args.batch_size]
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=False)
        schedule.step()

    # Timed like ampt's summary: every step, the first one included.
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(args.steps):
        step(i)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return args.steps * args.batch_size / (time.perf_counter() - start)


def ampt_run(args, precision):
    with tempfile.TemporaryDirectory() as out:
        cmd = [str(ROOT / "build" / "ampt"), "train", "--device", args.device,
               "--mixed_precision", precision, "--max_steps", str(args.steps),
               "--batch_size", str(args.batch_size), "--synthetic_samples", str(args.samples),
               "--synthetic_features", str(args.features), "--synthetic_classes", str(args.classes),
               "--mlp_hidden", str(args.hidden), "--mlp_layers", str(args.layers),
               "--log_every", str(args.steps), "--output_dir", out]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return json.loads(pathlib.Path(out, "summary.json").read_text())["samples_per_sec"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--samples", type=int, default=65536)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3, help="best of N runs of each")
    args = parser.parse_args()

    if args.device == "cuda":
        device_name = torch.cuda.get_device_name(0)
    else:
        device_name = f"{platform.processor() or platform.machine()} CPU, {os.cpu_count()} cores"
    rows = []
    for precision in PRECISIONS:
        ours = max(ampt_run(args, precision) for _ in range(args.repeats))
        ref = max(reference_run(args, precision) for _ in range(args.repeats))
        rows.append((precision, ours, ref))
        print(f"{precision}: ampt {ours:.0f} samples/s, PyTorch eager AMP {ref:.0f} samples/s, "
              f"ratio {ours / ref:.2f}")

    date = datetime.date.today().isoformat()
    slug = "cpu" if args.device == "cpu" else device_name.lower().replace(" ", "-")
    path = ROOT / "benchmarks" / "results" / f"{slug}-{date}-mlp.md"
    lines = [f"# MLP: ampt vs PyTorch eager AMP ({date})", "",
             f"Device: {device_name}; torch {torch.__version__}.",
             f"Model: MLP {args.features}→{args.hidden}×{args.layers}→{args.classes}, batch "
             f"{args.batch_size}, {args.steps} steps, fused AdamW, clip 1.0, best of {args.repeats}.",
             "Same process session, run back to back; throughput counts every step.", "",
             "| precision | ampt samples/s | PyTorch samples/s | ampt / PyTorch |",
             "|---|---:|---:|---:|"]
    lines += [f"| {p} | {o:.0f} | {r:.0f} | {o / r:.2f}× |" for p, o, r in rows]
    path.write_text("\n".join(lines) + "\n")
    print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
