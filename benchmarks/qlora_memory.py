#!/usr/bin/env python3
"""QLoRA's host memory on the CPU: a ~1B Llama base held in nf4 (and int8) against the same base
in bf16, each measured beside `ampt recommend`'s estimate.

Makes (once, cached under --cache) a random Llama of TinyLlama-1.1B's shape with transformers,
saved in bf16 as safetensors shards of --shard_mb, and a tiny Llama of the same vocabulary for the
baseline (LibTorch, the data, the loader). Then, one after another, runs

    build/ampt train --init_from DIR --lora_rank 16 --mixed_precision bf16 --base_dtype B
                     --block_size 64 --batch_size 1 --max_steps 2 --device cpu ...

for B = nf4, int8 and auto (the bf16 base), and measures:

  peak RSS     summary.json's peak_memory_bytes (the process's VmHWM: loading included), with
               TCMALLOC_AGGRESSIVE_DECOMMIT=true and MALLOC_MMAP_THRESHOLD_=65536 so that freed
               memory leaves the RSS whichever allocator serves it;
  load, steps  VmRSS read from /proc every 0.05 s: its largest value before the first step's line
               reaches metrics.jsonl (loading and quantizing), and after;
  estimate     `ampt recommend` with the same flags: its bf16/O1 total (GiB, two decimals), plus the
               adapters' host snapshot (as tests/plan/memory_estimate_test.cpp counts a CPU run);
  above base   peak RSS less the tiny model's peak RSS with the same flags, and the estimate less
               the tiny model's, as the memory tests compare them.

Writes benchmarks/results/qlora-memory-cpu-<date>.md and prints it. Not part of the tests.

    .venv/bin/python benchmarks/qlora_memory.py
    .venv/bin/python benchmarks/qlora_memory.py --layers 4     # a quick look at a smaller base
"""
import argparse
import datetime
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import threading
import time

from machine import cpu_isa, cpu_model, vm_rss
import machine  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
AMPT = ROOT / "build" / "ampt"
MIB = 1 << 20
GIB = 1 << 30


def make_llama(path, layers, hidden, intermediate, heads, kv_heads, vocab, shard_mb):
    """A random bf16 Llama saved in safetensors shards, unless `path` already holds it."""
    if (path / "config.json").exists():
        return
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate,
                         num_hidden_layers=layers, num_attention_heads=heads,
                         num_key_value_heads=kv_heads, max_position_embeddings=2048,
                         tie_word_embeddings=False, torch_dtype="bfloat16")
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    model = LlamaForCausalLM(config)
    torch.set_default_dtype(torch.float32)
    model.save_pretrained(path, max_shard_size=f"{shard_mb}MB", safe_serialization=True)


def train(base, base_dtype, args):
    out = pathlib.Path(tempfile.mkdtemp(prefix="qlora-memory-"))
    command = [str(AMPT), "train", "--init_from", str(base), "--lora_rank", "16",
               "--mixed_precision", "bf16", "--base_dtype", base_dtype, "--block_size",
               str(args.block), "--batch_size", "1", "--max_steps", str(args.steps),
               "--synthetic_samples", "64", "--val_fraction", "0", "--loader_workers", "0",
               "--log_every", "1", "--save_every", "0", "--device", "cpu", "--output_dir",
               str(out)]
    env = dict(os.environ, TCMALLOC_AGGRESSIVE_DECOMMIT="true", MALLOC_MMAP_THRESHOLD_="65536")
    start = time.time()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=env)
    peaks = {"load": 0, "steps": 0}
    metrics = out / "metrics.jsonl"

    def sample():
        while process.poll() is None:
            phase = "steps" if metrics.exists() and metrics.stat().st_size > 0 else "load"
            peaks[phase] = max(peaks[phase], vm_rss(process.pid) or 0)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    log = process.stdout.read()
    process.wait()
    sampler.join()
    if process.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({process.returncode}):\n{log}")
    summary = json.loads((out / "summary.json").read_text())
    lora = next((line for line in log.splitlines() if "[LoRA]" in line), "")
    return {"peak": summary["peak_memory_bytes"], "load": peaks["load"], "steps": peaks["steps"],
            "seconds": time.time() - start, "lora": lora.strip()}


def estimate(base, base_dtype, args):
    """recommend's bf16/O1 total in bytes, and the adapters' fp32 weights and AdamW moments."""
    command = [str(AMPT), "recommend", "--init_from", str(base), "--lora_rank", "16",
               "--base_dtype", base_dtype, "--batch_size", "1", "--seq_len", str(args.block),
               "--device", "cpu"]
    text = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    row = next(line for line in text.splitlines() if line.startswith("| bf16/O1 |"))
    total = float(row.split("|")[8]) * GIB
    trainable = int(re.search(r"([\d,]+) trainable parameters", text).group(1).replace(",", ""))
    return total + 12 * trainable  # the host snapshot: fp32 adapters and two moments


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", default="/tmp/ampt-qlora-memory")
    parser.add_argument("--layers", type=int, default=22)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--intermediate", type=int, default=5632)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--shard_mb", type=int, default=400)
    parser.add_argument("--block", type=int, default=64)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--dtypes", nargs="+", default=["nf4", "int8", "auto"])
    args = parser.parse_args()

    cache = pathlib.Path(args.cache)
    big = cache / f"llama-{args.layers}x{args.hidden}-{args.intermediate}-{args.vocab}"
    tiny = cache / f"llama-tiny-{args.vocab}"
    make_llama(big, args.layers, args.hidden, args.intermediate, 32, 4, args.vocab, args.shard_mb)
    make_llama(tiny, 1, 64, 128, 4, 2, args.vocab, args.shard_mb)
    params = json.loads((big / "config.json").read_text())
    shards = sorted(p.name for p in big.glob("*.safetensors"))
    shard_bytes = max((big / s).stat().st_size for s in shards)

    rows = []
    for base_dtype in args.dtypes:
        big_run, tiny_run = train(big, base_dtype, args), train(tiny, base_dtype, args)
        rows.append((base_dtype, big_run, tiny_run, estimate(big, base_dtype, args),
                     estimate(tiny, base_dtype, args)))
        print(base_dtype, big_run, tiny_run, file=sys.stderr)

    cpu, isa = cpu_model(), cpu_isa()
    today = datetime.date.today().isoformat()
    lines = [f"# QLoRA host memory on the CPU, a ~1B Llama base ({today})", "",
             f"`.venv/bin/python benchmarks/qlora_memory.py {' '.join(sys.argv[1:])}`".rstrip(), "",
             f"Machine: {os.cpu_count()} cores ({cpu}; {isa}). Base: a random Llama, "
             f"{params['num_hidden_layers']} layers, hidden {params['hidden_size']}, intermediate "
             f"{params['intermediate_size']}, 32 heads over 4 key/value heads, vocabulary "
             f"{params['vocab_size']} (untied head), saved by transformers in bf16 as "
             f"{len(shards)} shards of at most {shard_bytes / MIB:.0f} MiB. Each run: LoRA rank 16 "
             f"on the default targets, bf16 O1, block {args.block}, batch 1, {args.steps} steps, "
             "synthetic tokens, `--device cpu`; the baseline is a one-layer width-64 Llama of the "
             "same vocabulary with the same flags.", "",
             "| --base_dtype | peak RSS, MiB | while loading, MiB | while stepping, MiB | "
             "above the baseline, MiB | estimate above the baseline, MiB | measured / estimate | "
             "run, s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    above = {}
    for base_dtype, big_run, tiny_run, big_est, tiny_est in rows:
        measured = big_run["peak"] - tiny_run["peak"]
        estimated = big_est - tiny_est
        above[base_dtype] = (big_run["peak"], measured)
        lines.append(f"| {base_dtype} | {big_run['peak'] / MIB:.0f} | {big_run['load'] / MIB:.0f} | "
                     f"{big_run['steps'] / MIB:.0f} | {measured / MIB:.0f} | {estimated / MIB:.0f} | "
                     f"{measured / estimated:.3f} | {big_run['seconds']:.0f} |")
    lines.append("")
    if "auto" in above:
        for base_dtype, (peak, measured) in above.items():
            if base_dtype == "auto":
                continue
            lines.append(f"- The bf16 base's peak RSS over the {base_dtype} base's: "
                         f"{above['auto'][0] / peak:.2f}x whole, {above['auto'][1] / measured:.2f}x "
                         "above the baseline.")
    for base_dtype, big_run, *_ in rows:
        lines.append(f"- {base_dtype}: `{big_run['lora']}`")
    text = "\n".join(lines) + "\n"
    result = ROOT / "benchmarks" / "results" / f"qlora-memory-cpu-{today}.md"
    machine.write_record(result, text, "cpu")
    print(text)


if __name__ == "__main__":
    main()
