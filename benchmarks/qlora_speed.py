#!/usr/bin/env python3
"""LoRA and QLoRA training speed: ampt against PyTorch + peft on the same Llama, side by side.

Makes (once, cached under --cache) a random Llama with transformers, saved in bf16 (TinyLlama-1.1B's
shape by default), then, one after another on --device:

  ampt, bf16 base    build/ampt train --init_from DIR --lora_rank R --mixed_precision bf16
  ampt, nf4 base     ... --base_dtype nf4 (the dequantize kernels on a GPU)
  ampt, fp8 base     ... --base_dtype fp8 (on Ada and Hopper its forward takes _scaled_mm)
  peft, bf16 base    LlamaForCausalLM in bf16 with peft's LoraConfig on the same targets, fp32
                     adapters, bf16 autocast, torch.optim.AdamW (fused on a GPU)
  peft, nf4 base     the same over bitsandbytes' 4-bit base (BitsAndBytesConfig nf4, double
                     quantization, bf16 compute), when bitsandbytes imports

each for --steps steps of --batch sequences of --seq tokens, LoRA rank --rank on q_proj and v_proj,
and reports tokens per second (ampt's last logged step; peft's steps after --warmup) with each
ampt run's ratio to peft over the same base. Writes benchmarks/results/qlora-speed-<device>-<date>.md.
Not part of the tests.

    .venv/bin/python benchmarks/qlora_speed.py --device cuda
    .venv/bin/python benchmarks/qlora_speed.py --device cpu --layers 2 --hidden 256 \
        --intermediate 688 --heads 4 --kv_heads 2 --vocab 1024 --seq 128 --batch 2 --steps 6
"""
import argparse
import datetime
import json
import pathlib
import subprocess
import sys
import tempfile
import time

from machine import device_line
import machine  # noqa: E402
from qlora_memory import make_llama

ROOT = pathlib.Path(__file__).resolve().parent.parent
AMPT = ROOT / "build" / "ampt"
TARGETS = ["q_proj", "v_proj"]


def ampt_run(base, base_dtype, args):
    with tempfile.TemporaryDirectory(prefix="qlora-speed-") as out:
        command = [str(AMPT), "train", "--init_from", str(base), "--lora_rank", str(args.rank),
                   "--lora_alpha", str(args.rank), "--lora_targets", ",".join(TARGETS),
                   "--mixed_precision", "bf16", "--base_dtype", base_dtype, "--block_size",
                   str(args.seq), "--batch_size", str(args.batch), "--max_steps", str(args.steps),
                   "--log_every", str(max(1, args.steps // 2)), "--synthetic_samples",
                   str(args.batch * (args.steps + 2)), "--val_fraction", "0", "--save_every", "0",
                   "--device", args.device, "--output_dir", out]
        proc = subprocess.run(command, capture_output=True, text=True)
        if proc.returncode != 0:
            return {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
        lines = [json.loads(l) for l in pathlib.Path(out, "metrics.jsonl").read_text().splitlines()]
        last = [l for l in lines if "tokens_per_sec" in l][-1]
        fused = next((l.split("Fused paths: ", 1)[1] for l in proc.stdout.splitlines()
                      if "Fused paths: " in l), "")
        return {"tokens_per_sec": last["tokens_per_sec"], "fused": fused}


def peft_run(base, quantized, args):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM

    device = torch.device(args.device)
    kwargs = {"torch_dtype": torch.bfloat16}
    if quantized:
        try:
            import bitsandbytes  # noqa: F401
            from transformers import BitsAndBytesConfig
        except ImportError as error:
            return {"error": f"bitsandbytes does not import here ({error})"}
        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.bfloat16)
        kwargs["device_map"] = {"": device.index or 0} if device.type == "cuda" else {"": "cpu"}
    model = LlamaForCausalLM.from_pretrained(base, **kwargs)
    if not quantized:
        model = model.to(device)
    model = get_peft_model(model, LoraConfig(r=args.rank, lora_alpha=args.rank, lora_dropout=0.0,
                                             target_modules=TARGETS))
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=1e-4, fused=device.type == "cuda")
    generator = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    batches = [torch.randint(0, vocab, (args.batch, args.seq), generator=generator).to(device)
               for _ in range(4)]

    def step(tokens):
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    for i in range(args.warmup):
        step(batches[i % len(batches)])
    sync()
    start = time.perf_counter()
    timed = max(1, args.steps - args.warmup)
    for i in range(timed):
        step(batches[i % len(batches)])
    sync()
    seconds = time.perf_counter() - start
    del model, optimizer
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return {"tokens_per_sec": timed * args.batch * args.seq / seconds}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--cache", default="/tmp/ampt-qlora-speed")
    parser.add_argument("--layers", type=int, default=22)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--intermediate", type=int, default=5632)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv_heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rank", type=int, default=16)
    args = parser.parse_args()

    shape = f"{args.layers}x{args.hidden}-{args.intermediate}-{args.heads}h{args.kv_heads}-{args.vocab}"
    base = pathlib.Path(args.cache) / f"llama-{shape}"
    make_llama(base, args.layers, args.hidden, args.intermediate, args.heads, args.kv_heads,
               args.vocab, 2000)
    rows = []
    for name, run in [("bf16", lambda: ampt_run(base, "auto", args)),
                      ("nf4", lambda: ampt_run(base, "nf4", args)),
                      ("fp8", lambda: ampt_run(base, "fp8", args))]:
        rows.append(("ampt", name, run()))
        print(rows[-1], flush=True)
    for name, quantized in [("bf16", False), ("nf4", True)]:
        rows.append(("peft", name, peft_run(base, quantized, args)))
        print(rows[-1], flush=True)

    peft = {name: r.get("tokens_per_sec") for impl, name, r in rows if impl == "peft"}
    date = datetime.date.today().isoformat()
    lines = [f"# LoRA and QLoRA training speed, ampt and PyTorch + peft ({date})", "",
             f"`.venv/bin/python benchmarks/qlora_speed.py {' '.join(sys.argv[1:])}`", "",
             f"Device: {device_line(args.device)}. Base: a random Llama {shape} (layers x hidden - "
             f"intermediate - heads over key/value heads - vocabulary), bf16 safetensors. Each run: "
             f"LoRA rank {args.rank} on {', '.join(TARGETS)}, bf16 autocast, AdamW, batch "
             f"{args.batch} x {args.seq} tokens, {args.steps} steps.", "",
             "| implementation | base | tokens/s | ampt / peft (bf16 base) | ampt / peft (same base) |",
             "|---|---|---:|---:|---:|"]
    for impl, name, r in rows:
        if "error" in r:
            lines.append(f"| {impl} | {name} | {r['error']} | | |")
            continue
        tps = r["tokens_per_sec"]
        vs_bf16 = f"{tps / peft['bf16']:.2f}" if impl == "ampt" and peft.get("bf16") else ""
        vs_same = (f"{tps / peft[name]:.2f}" if impl == "ampt" and peft.get(name) else "")
        lines.append(f"| {impl} | {name} | {tps:,.0f} | {vs_bf16} | {vs_same} |")
    lines.append("")
    for impl, name, r in rows:
        if r.get("fused"):
            lines.append(f"- ampt, {name} base: `Fused paths: {r['fused']}`")
    text = "\n".join(lines) + "\n"
    out = ROOT / "benchmarks" / "results" / f"qlora-speed-{args.device}-{date}.md"
    machine.write_record(out, text, args.device)
    print(text)


if __name__ == "__main__":
    main()
