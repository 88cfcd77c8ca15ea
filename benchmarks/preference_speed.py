#!/usr/bin/env python3
"""DPO training speed: ampt against TRL's DPOTrainer on the same Llama and the same pairs, side by
side.

Makes (once, cached under --cache) a random Llama with GPT-2's tokenizer
(tests/hf/llama_reference.py make ... --tokenizer) and --pairs synthetic standard preference
records, then, one after another on --device:

  ampt   build/ampt train --init_from DIR --dataset jsonl:pairs.jsonl --objective dpo, each
         sequence padded to its own row (--packing=false), then pairs packed into windows
  TRL    DPOTrainer(loss_type sigmoid) on the same records, torch.optim.AdamW

both full fine-tuning (each holds a frozen reference copy), or with --lora_rank adapters on q_proj
and v_proj (the reference: the base with the adapters off), in --precision, for --steps steps of
--batch pairs (packed: --batch windows), each sequence cut to --max_length tokens. Reports pairs
per second: ampt's steady state from its summary (steps after the first logged one; packed, times
the pairs per window), TRL's from the steps after --warmup,
timed between its step callbacks; and ampt's ratio to TRL. Writes
benchmarks/results/preference-speed-<device>-<date>.md. Not part of the tests.

    .venv/bin/python benchmarks/preference_speed.py --device cpu
    .venv/bin/python benchmarks/preference_speed.py --device cuda --layers 8 --hidden 1024 \\
        --intermediate 2816 --heads 16 --kv_heads 4 --batch 8 --max_length 512
"""
import argparse
import datetime
import json
import pathlib
import random
import re
import subprocess
import sys
import tempfile
import time

from machine import device_line
import machine  # noqa: E402
import tiny_models  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
AMPT = ROOT / "build" / "ampt"
WORDS = ("the of and to in is was for on that with as by at from it an be this which or are "
         "model data train loss step answer question good bad right wrong yes no").split()


def make_pairs(path, count):
    """Prompts of 20 to 60 words, answers of 10 to 80: the lengths of short chat turns."""
    rng = random.Random(0)
    sentence = lambda lo, hi: " " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))
    with open(path, "w") as f:
        for _ in range(count):
            f.write(json.dumps({"prompt": sentence(20, 60).strip(), "chosen": sentence(10, 80),
                                "rejected": sentence(10, 80)}) + "\n")


def ampt_run(model, pairs, args, packed):
    with tempfile.TemporaryDirectory(prefix="preference-speed-") as out:
        command = [str(AMPT), "train", "--init_from", str(model), "--dataset", f"jsonl:{pairs}",
                   "--objective", "dpo", "--beta", "0.1", "--batch_size", str(args.batch),
                   f"--packing={'true' if packed else 'false'}",
                   "--max_length", str(args.max_length), "--max_steps", str(args.steps),
                   "--log_every", str(args.warmup), "--mixed_precision",
                   "no" if args.precision == "fp32" else "bf16", "--val_fraction", "0",
                   "--lr", "1e-5", "--warmup_steps", "0", "--save_final=false",
                   "--device", args.device, "--output_dir", out]
        if args.lora_rank:
            command += ["--lora_rank", str(args.lora_rank), "--lora_targets", "q_proj,v_proj"]
        proc = subprocess.run(command, capture_output=True, text=True)
        if proc.returncode != 0:
            return {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
        summary = json.loads(pathlib.Path(out, "summary.json").read_text())
        if not packed:
            return {"pairs_per_sec": summary["samples_per_sec"]}
        # Packed, a sample is a window: the data line says how many pairs the windows hold.
        found = re.search(r"packed (\d+) pairs into (\d+) windows", proc.stdout)
        return {"pairs_per_sec": summary["samples_per_sec"] * int(found[1]) / int(found[2])}


def trl_run(model, pairs, args):
    try:
        import torch
        from datasets import Dataset
        from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
        from trl import DPOConfig, DPOTrainer
    except ImportError as error:
        return {"error": f"TRL does not import here ({error})"}

    class Timer(TrainerCallback):
        def __init__(self):
            self.start = None
            self.steps = 0

        def on_step_begin(self, a, state, control, **kwargs):
            if state.global_step == args.warmup:
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
                self.start = time.perf_counter()

        def on_step_end(self, a, state, control, **kwargs):
            if self.start is not None:
                self.steps += 1
            if state.global_step == args.steps and torch.cuda.is_available():
                torch.cuda.synchronize()
            self.end = time.perf_counter()

    policy = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    peft_config = None
    if args.lora_rank:
        from peft import LoraConfig
        peft_config = LoraConfig(r=args.lora_rank, lora_alpha=16, lora_dropout=0.0,
                                 target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.pad_token = tokenizer.eos_token
    records = [json.loads(line) for line in open(pairs)]
    timer = Timer()
    with tempfile.TemporaryDirectory(prefix="preference-speed-trl-") as out:
        config = DPOConfig(output_dir=out, per_device_train_batch_size=args.batch,
                           max_steps=args.steps, learning_rate=1e-5, max_length=args.max_length,
                           beta=0.1, loss_type=["sigmoid"], logging_steps=args.steps,
                           save_strategy="no", eval_strategy="no", report_to="none",
                           use_cpu=args.device == "cpu", bf16=args.precision == "bf16",
                           fp16=False, dataloader_num_workers=0, disable_dropout=True)
        trainer = DPOTrainer(model=policy, args=config, train_dataset=Dataset.from_list(records),
                             processing_class=tokenizer, callbacks=[timer], peft_config=peft_config)
        trainer.train()
    return {"pairs_per_sec": timer.steps * args.batch / (timer.end - timer.start)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cuda", "cpu"])
    parser.add_argument("--cache", default="/tmp/ampt-preference-speed")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--intermediate", type=int, default=688)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kv_heads", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=256)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--max_length", type=int, default=160)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    parser.add_argument("--lora_rank", type=int, default=0)
    args = parser.parse_args()

    shape = f"{args.layers}x{args.hidden}-{args.intermediate}-{args.heads}h{args.kv_heads}"
    model = tiny_models.llama_family(args.cache, args, max(args.max_length, 64))
    pairs = pathlib.Path(args.cache) / f"pairs-{args.pairs}.jsonl"
    if not pairs.exists():
        make_pairs(pairs, args.pairs)
    rows = [(f"ampt, each sequence its own row (--packing=false, {args.batch} pairs a batch)",
             ampt_run(model, pairs, args, packed=False))]
    print(rows[-1], flush=True)
    rows.append((f"ampt, pairs packed into windows (default, {args.batch} windows a batch)",
                 ampt_run(model, pairs, args, packed=True)))
    print(rows[-1], flush=True)
    rows.append(("TRL DPOTrainer (padded to the batch's longest)", trl_run(model, pairs, args)))
    print(rows[-1], flush=True)

    trl = rows[-1][1].get("pairs_per_sec")
    date = datetime.date.today().isoformat()
    mode = f"LoRA rank {args.lora_rank} on q_proj, v_proj" if args.lora_rank else "full fine-tuning"
    lines = [f"# DPO training speed, ampt and TRL's DPOTrainer ({date})", "",
             f"`.venv/bin/python benchmarks/preference_speed.py {' '.join(sys.argv[1:])}`", "",
             f"Device: {device_line(args.device)}. Model: a random Llama {shape} (layers x hidden - "
             f"intermediate - heads over key/value heads) with GPT-2's 50257-token vocabulary. "
             f"{args.pairs} synthetic pairs (prompts of 20-60 words, answers of 10-80), sequences "
             f"cut to {args.max_length} tokens; dpo, beta 0.1, {mode}, {args.precision}, AdamW, "
             f"batch {args.batch} pairs, {args.steps} steps, timed after {args.warmup}.", "",
             "| implementation | pairs/s | ampt / TRL |", "|---|---:|---:|"]
    for impl, r in rows:
        if "error" in r:
            lines.append(f"| {impl} | {r['error']} | |")
            continue
        ratio = f"{r['pairs_per_sec'] / trl:.2f}" if impl.startswith("ampt") and trl else ""
        lines.append(f"| {impl} | {r['pairs_per_sec']:.2f} | {ratio} |")
    text = "\n".join(lines) + "\n"
    suffix = f"-lora{args.lora_rank}" if args.lora_rank else ""
    out = ROOT / "benchmarks" / "results" / f"preference-speed-{args.device}-{date}{suffix}.md"
    machine.write_record(out, text, args.device)
    print(text)


if __name__ == "__main__":
    main()
