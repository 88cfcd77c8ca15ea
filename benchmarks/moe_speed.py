#!/usr/bin/env python3
"""Mixture-of-Experts training speed: ampt against a PyTorch + transformers loop on the same
Qwen3-MoE and the same token windows, side by side.

Makes (once, cached under --cache) a random Qwen3MoeForCausalLM of --layers blocks, --hidden
width, --experts experts of --expert_width, --top_k per token, and a token file, then, one after
another on --device, full fine-tuning in --precision with AdamW for --steps steps of --batch
windows of --block tokens, the load-balancing loss on (router_aux_loss_coef 0.001):

  ampt          build/ampt train --init_from DIR --dataset tokens:FILE (experts sorted by expert,
                one GEMM per expert's slice, or _grouped_mm on a GPU in bf16; the router in fp32)
  transformers  the model's forward with output_router_logits and labels, under torch.autocast
                for bf16, torch.optim.AdamW: experts_implementation "eager" (a loop over the
                experts that tokens picked) and, where it runs, "grouped_mm"

Reports tokens per second (ampt's steady state from its summary; the loop's from the steps after
--warmup) and ampt's ratio to each. Writes benchmarks/results/moe-speed-<device>-<date>.md. Not
part of the tests.

    .venv/bin/python benchmarks/moe_speed.py --device cpu
    .venv/bin/python benchmarks/moe_speed.py --device cuda --precision bf16 --layers 8 \\
        --hidden 1024 --experts 64 --expert_width 512 --top_k 8 --batch 8 --block 1024
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

ROOT = pathlib.Path(__file__).resolve().parent.parent
AMPT = ROOT / "build" / "ampt"
VOCAB = 4096


def make_model(path, args):
    import numpy as np
    import torch
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
    if (path / "config.json").exists():
        return
    torch.manual_seed(0)
    config = Qwen3MoeConfig(hidden_size=args.hidden, num_hidden_layers=args.layers,
                            num_attention_heads=args.hidden // 64, num_key_value_heads=max(1, args.hidden // 256),
                            head_dim=64, intermediate_size=4 * args.hidden, vocab_size=VOCAB,
                            max_position_embeddings=max(args.block, 64), num_experts=args.experts,
                            num_experts_per_tok=args.top_k, moe_intermediate_size=args.expert_width,
                            norm_topk_prob=True, tie_word_embeddings=False,
                            router_aux_loss_coef=0.001)
    Qwen3MoeForCausalLM(config).save_pretrained(path)
    rng = np.random.default_rng(0)
    rng.integers(0, VOCAB, size=(args.batch * (args.steps + 1) * (args.block + 1),),
                 dtype=np.uint16).tofile(path / "train.bin")


def ampt_run(model, args):
    with tempfile.TemporaryDirectory(prefix="moe-speed-") as out:
        command = [str(AMPT), "train", "--init_from", str(model), "--dataset",
                   f"tokens:{model}/train.bin", "--block_size", str(args.block), "--batch_size",
                   str(args.batch), "--max_steps", str(args.steps), "--log_every", str(args.warmup),
                   "--mixed_precision", "no" if args.precision == "fp32" else "bf16",
                   "--val_fraction", "0", "--lr", "1e-4", "--warmup_steps", "0",
                   "--save_final=false", "--device", args.device, "--output_dir", out]
        proc = subprocess.run(command, capture_output=True, text=True)
        if proc.returncode != 0:
            return {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
        summary = json.loads(pathlib.Path(out, "summary.json").read_text())
        return {"tokens_per_sec": summary["tokens_per_sec"]}


def transformers_run(model, args, experts):
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM
    device = torch.device(args.device)
    try:
        net = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32, attn_implementation="sdpa",
                                                   experts_implementation=experts).to(device).train()
    except Exception as error:  # an implementation this torch or device does not have
        return {"error": f"{experts}: {str(error).splitlines()[0]}"}
    tokens = torch.from_numpy(np.fromfile(model / "train.bin", dtype=np.uint16).astype(np.int64))
    windows = tokens[:args.batch * args.steps * (args.block + 1)].view(args.steps, args.batch,
                                                                       args.block + 1).to(device)
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    start = None
    try:
        for step in range(args.steps):
            if step == args.warmup:
                sync()
                start = time.perf_counter()
            batch = windows[step]
            with torch.autocast(device.type, torch.bfloat16, enabled=args.precision == "bf16"):
                out = net(input_ids=batch[:, :-1], output_router_logits=True)
                loss = torch.nn.functional.cross_entropy(out.logits.flatten(0, 1).float(),
                                                         batch[:, 1:].flatten())
                loss = loss + 0.001 * out.aux_loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        sync()
    except Exception as error:
        return {"error": f"{experts}: {str(error).splitlines()[0]}"}
    seconds = time.perf_counter() - start
    return {"tokens_per_sec": (args.steps - args.warmup) * args.batch * args.block / seconds}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cuda", "cpu"])
    parser.add_argument("--cache", default="/tmp/ampt-moe-speed")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--experts", type=int, default=16)
    parser.add_argument("--expert_width", type=int, default=256)
    parser.add_argument("--top_k", type=int, default=2)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--block", type=int, default=128)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    args = parser.parse_args()

    shape = f"{args.layers}x{args.hidden}-e{args.experts}x{args.expert_width}-top{args.top_k}"
    model = pathlib.Path(args.cache) / f"qwen3moe-{shape}-b{args.batch}x{args.block}-s{args.steps}"
    make_model(model, args)
    rows = [("ampt", ampt_run(model, args))]
    print(rows[-1], flush=True)
    for experts in ("eager", "grouped_mm"):
        rows.append((f"transformers, experts_implementation {experts}",
                     transformers_run(model, args, experts)))
        print(rows[-1], flush=True)

    ours = rows[0][1].get("tokens_per_sec")
    date = datetime.date.today().isoformat()
    lines = [f"# MoE training speed, ampt and PyTorch + transformers ({date})", "",
             f"`.venv/bin/python benchmarks/moe_speed.py {' '.join(sys.argv[1:])}`", "",
             f"Device: {device_line(args.device)}. Model: a random Qwen3-MoE {shape} (layers x "
             f"hidden - experts x expert width - top k), vocabulary {VOCAB}; full fine-tuning, "
             f"{args.precision}, AdamW, batch {args.batch} x {args.block} tokens, the aux loss "
             f"on, {args.steps} steps, timed after {args.warmup}.", "",
             "| implementation | tokens/s | ampt / it |", "|---|---:|---:|"]
    for impl, r in rows:
        if "error" in r:
            lines.append(f"| {impl} | {r['error']} | |")
            continue
        ratio = f"{ours / r['tokens_per_sec']:.2f}" if ours and impl != "ampt" else ""
        lines.append(f"| {impl} | {r['tokens_per_sec']:.0f} | {ratio} |")
    text = "\n".join(lines) + "\n"
    out = ROOT / "benchmarks" / "results" / f"moe-speed-{args.device}-{args.precision}-{date}.md"
    machine.write_record(out, text, args.device)
    print(text)


if __name__ == "__main__":
    main()
