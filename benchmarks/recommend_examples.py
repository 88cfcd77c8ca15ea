#!/usr/bin/env python3
"""The `ampt recommend` plans the documentation quotes, run and recorded.

`ampt recommend` computes its estimates from a model's dimensions (no model is built, nothing is
timed), so its figures are the same on every machine at a commit; the docs quote some of them, and
this file is where they come from. Each example's whole output is kept. The tests check the
estimate itself (tests/plan/, tests/commands/recommend_test.cpp); this is a record, not a test.

Usage: .venv/bin/python benchmarks/recommend_examples.py [--ampt build/ampt]
Writes benchmarks/results/recommend-examples-<date>.md.
"""
import argparse
import datetime
import pathlib
import shlex
import subprocess

import machine

ROOT = pathlib.Path(__file__).resolve().parent.parent

EXAMPLES = [
    ("gpt2-124m on one 80 GiB GPU", "--model gpt2-124m --batch_size 16 --global_batch 512 --gpu_memory_gb 80"),
    ("gpt2-124m, 4 ranks, ZeRO-2", "--model gpt2-124m --batch_size 16 --global_batch 512 --world_size 4 --zero_stage 2"),
    ("llama-3.1-8b, full fine-tune", "--model llama-3.1-8b --batch_size 1"),
    ("llama-3.1-8b, 8 ranks, ZeRO-3, fewest ranks", "--model llama-3.1-8b --world_size 8 --zero_stage 3 --batch_size 1 --grad_ckpt"),
    ("llama-3.1-8b, LoRA rank 16", "--model llama-3.1-8b --lora_rank 16 --batch_size 8"),
    ("llama-3.1-8b, full fine-tune at micro-batch 8", "--model llama-3.1-8b --batch_size 8"),
    ("gpt2-1558m, full fine-tune at micro-batch 8", "--model gpt2-1558m --batch_size 8"),
    ("gpt2-1558m, LoRA rank 16 at micro-batch 8", "--model gpt2-1558m --lora_rank 16 --batch_size 8"),
    ("llama-3.1-8b, QLoRA, one sequence of 2048", "--model llama-3.1-8b --lora_rank 16 --base_dtype nf4 --grad_ckpt --batch_size 1 --block_size 2048"),
    ("llama-3.1-8b, QLoRA, 4 ranks, ZeRO-3", "--model llama-3.1-8b --lora_rank 16 --base_dtype nf4 --zero_stage 3 --world_size 4 --batch_size 1 --block_size 2048"),
    ("llama-3.1-8b, bf16 LoRA base, 4 ranks, ZeRO-3", "--model llama-3.1-8b --lora_rank 16 --zero_stage 3 --world_size 4 --batch_size 1 --block_size 2048"),
    ("qwen3-30b-a3b, 8 ranks, expert parallel 8", "--model qwen3-30b-a3b --world_size 8 --expert_parallel 8 --batch_size 1 --block_size 2048"),
    ("qwen3-30b-a3b, 8 ranks, expert parallel 8, ZeRO-3", "--model qwen3-30b-a3b --world_size 8 --expert_parallel 8 --zero_stage 3 --batch_size 1 --block_size 2048"),
    ("qwen3-30b-a3b, 16 ranks, expert parallel 16, ZeRO-3", "--model qwen3-30b-a3b --world_size 16 --expert_parallel 16 --zero_stage 3 --grad_ckpt --batch_size 1 --block_size 2048"),
    ("qwen3-30b-a3b, QLoRA on a 24 GiB card", "--gpu_memory_gb 24 --model qwen3-30b-a3b --lora_rank 16 --base_dtype nf4 --grad_ckpt --batch_size 1 --block_size 2048"),
    ("qwen3-30b-a3b, LoRA over a bf16 base on a 24 GiB card", "--gpu_memory_gb 24 --model qwen3-30b-a3b --lora_rank 16 --grad_ckpt --batch_size 1 --block_size 2048"),
    ("qwen3-30b-a3b, adapters on the experts", "--model qwen3-30b-a3b --lora_rank 16 --lora_target_parameters mlp.experts.gate_up_proj,mlp.experts.down_proj --grad_ckpt --batch_size 1 --block_size 2048"),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ampt", default=str(ROOT / "build" / "ampt"))
    args = parser.parse_args()
    sections = []
    for title, flags in EXAMPLES:
        command = [args.ampt, "recommend", *shlex.split(flags)]
        run = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
        if run.returncode != 0:
            raise SystemExit(f"{' '.join(command)}: exit {run.returncode}: {run.stderr.strip()}")
        sections.append(f"## {title}\n\n```text\n$ ampt recommend {flags}\n{run.stdout.rstrip()}\n```\n")
    today = datetime.date.today()
    text = (f"# `ampt recommend` plans quoted by the docs ({today})\n\n"
            "Estimates from the models' dimensions: the same on every machine at this commit.\n\n"
            + "\n".join(sections))
    out = ROOT / "benchmarks" / "results" / f"recommend-examples-{today}.md"
    machine.write_record(out, text, "cpu")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
