#!/usr/bin/env python3
"""GRPO speed: ampt against TRL 1.16's GRPOTrainer (no vLLM: transformers' generate) on the same
tiny model, prompts and settings, side by side, and ampt's exact sampler against its fast one.

Makes (once, cached under --cache) a random Qwen3 (or Llama) with GPT-2's tokenizer
(tests/hf/llama_reference.py make ... --tokenizer), its end-of-text token the model's EOS in both
(ampt stops at the tokenizer's end-of-text; TRL at the model's eos_token_id and the tokenizer's),
and --prompts short arithmetic prompts; then runs, --repeats times, each in its own process and
in alternating order (so that the machine's load falls on both):

  ampt   build/ampt train --init_from DIR --objective grpo [--sampler MODE] [--ampt_args ...]
  TRL    GRPOTrainer(use_vllm=False): transformers' generate, then the loss and AdamW

on the same G completions per prompt (--generations), --batch completions per micro-batch and
--grad_accum micro-batches per optimizer step (both sample the step's completions in one batch),
--max_completion_length, temperature 1, top-k 0, top-p 1, loss_type dapo, epsilon 0.2, beta 0 (no
reference model), scale_rewards group, mu 1, constant --lr, no weight decay, max_grad_norm 1,
--precision (fp32; bf16: ampt's --mixed_precision bf16, TRL's bf16=True), one reward: whether the
completion contains a digit (ampt's `format` reward with that regular expression; a Python
function giving the same values in TRL), each with --threads intra-op threads.

Reports completions/s and steps/s over the steps after --warmup (both log every --warmup steps;
ampt: its logged intervals after step --warmup, from metrics.jsonl; TRL: between its step-end
callbacks after step --warmup), the median and range of the repeats, the mean completion length each logged (the same
work: with random weights almost every completion runs to --max_completion_length), ampt's ratio
to TRL (the issue's target: at least 3x) and, with both --samplers measured, exact's time over
fast's (target: at most 1.3). A --sampler mode that this build of ampt refuses (`ampt config`
with the same flags fails) is said so in the results, and ampt is measured with its default
sampler then. Writes (after every run, so that a run cut short leaves what it measured)
benchmarks/results/grpo-trl-<device>-<date>.md. Not part of the tests.

    .venv/bin/python benchmarks/grpo_speed.py --device cpu
    .venv/bin/python benchmarks/grpo_speed.py --device cuda --layers 8 --hidden 1024 \\
        --intermediate 3072 --heads 16 --kv_heads 8 --batch 32 --grad_accum 2 --generations 8 \\
        --max_completion_length 256 --precision bf16 --steps 6 --warmup 2
"""
import argparse
import datetime
import json
import os
import pathlib
import random
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

import machine  # noqa: E402
import tiny_models  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
PYTHON = ROOT / ".venv" / "bin" / "python"
# Random weights write digit tokens in about half the completions of 32 tokens: groups whose
# rewards differ, so advantages and the policy gradient are not all 0 in either implementation.
# [\s\S] rather than '.': ECMAScript's '.' (ampt) and Python's (TRL) differ on line breaks.
DIGIT = r"[\s\S]*[0-9][\s\S]*"
EOT = "<|endoftext|>"
TRL_NAME = "TRL GRPOTrainer (transformers generate)"


def model_for_both(args):
    """The cached random model, its end-of-text token the EOS that both stop at."""
    path = tiny_models.llama_family(args.cache, args, args.positions, args.flavour)
    # llama_reference.py's ids 0 and 1 are GPT-2's '!' and '"', at which TRL would stop and ampt
    # not: both stop at the tokenizer's end-of-text, as a GPT-2-tokenized model's config says.
    from transformers import AutoTokenizer
    eot = AutoTokenizer.from_pretrained(path).convert_tokens_to_ids(EOT)
    for name in ("config.json", "generation_config.json"):
        file = path / name
        if file.exists():
            config = json.loads(file.read_text())
            config.update(bos_token_id=eot, eos_token_id=eot)
            file.write_text(json.dumps(config, indent=2) + "\n")
    return path


def digit_reward(completions, **kwargs):
    """TRL's reward function: ampt's `format` reward with DIGIT, whose whole completion it matches."""
    return [1.0 if re.fullmatch(DIGIT, c) else 0.0 for c in completions]


def make_prompts(path, count):
    rng = random.Random(0)
    with open(path, "w") as f:
        for _ in range(count):
            a, b = rng.randint(10, 99), rng.randint(10, 99)
            f.write(json.dumps({"prompt": f"Add the two numbers. {a} + {b} =", "answer": str(a + b)}) + "\n")


def prompt_tokens(model, prompts):
    """The range of the prompts' lengths in tokens, as 'lo-hi'."""
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(model)
    lengths = [len(tokenizer(json.loads(line)["prompt"])["input_ids"]) for line in open(prompts)]
    return f"{min(lengths)}-{max(lengths)}" if min(lengths) != max(lengths) else str(lengths[0])


def thread_env(args):
    return {**os.environ, "OMP_NUM_THREADS": str(args.threads)}


def last_line(text, code):
    return (text.strip().splitlines() or [f"exit {code}"])[-1]


def ampt_flags(model, prompts, args, sampler, out):
    """`ampt train`'s flags for the run TRL's configuration matches."""
    flags = ["--init_from", str(model), "--dataset", f"jsonl:{prompts}",
             "--objective", "grpo", "--reward", "format", "--reward_format", DIGIT,
             "--num_generations", str(args.generations),
             "--max_completion_length", str(args.max_completion_length),
             "--batch_size", str(args.batch), "--grad_accum_steps", str(args.grad_accum),
             "--temperature", "1", "--top_k", "0", "--top_p", "1", "--loss_type", "dapo",
             "--epsilon", "0.2", "--beta", "0", "--scale_rewards", "group", "--num_iterations", "1",
             "--lr", str(args.lr), "--warmup_steps", "0", "--min_lr_ratio", "1",
             "--weight_decay", "0", "--max_grad_norm", "1",
             "--mixed_precision", "no" if args.precision == "fp32" else "bf16",
             "--max_steps", str(args.steps), "--log_every", str(args.warmup),
             "--val_fraction", "0", "--save_final=false", "--loader_workers", "0",
             "--seed", str(args.seed), "--device", args.device, "--output_dir", out]
    return flags + (["--sampler", sampler] if sampler else []) + shlex.split(args.ampt_args)


def ampt_refuses(model, prompts, args, sampler):
    """The error line of `ampt config` (the flags resolved, nothing run) with --sampler `sampler`,
    or None when it takes them."""
    proc = subprocess.run([args.ampt, "config", *ampt_flags(model, prompts, args, sampler, "/tmp/unused")],
                          capture_output=True, text=True)
    return last_line(proc.stderr, proc.returncode) if proc.returncode != 0 else None


def ampt_run(model, prompts, args, sampler):
    with tempfile.TemporaryDirectory(prefix="grpo-speed-") as out:
        command = [args.ampt, "train", *ampt_flags(model, prompts, args, sampler, out)]
        proc = subprocess.run(command, capture_output=True, text=True, env=thread_env(args))
        if proc.returncode != 0:
            return {"error": last_line(proc.stderr, proc.returncode)}
        # Each logged step's samples_per_sec (completions, here) is over the steps since the one
        # logged before it, with evaluation and checkpoint pauses left out (there are none here).
        # ampt logs step 1 and then every --warmup: the intervals after step --warmup are the
        # steps TRL is timed over.
        logged = [json.loads(line) for line in pathlib.Path(out, "metrics.jsonl").read_text().splitlines()
                  if '"completions/mean_length"' in line]
        per_step = args.batch * args.grad_accum
        steps = seconds = 0
        for before, at in zip(logged, logged[1:]):
            if before["step"] >= args.warmup:
                steps += at["step"] - before["step"]
                seconds += (at["step"] - before["step"]) * per_step / at["samples_per_sec"]
        # The completions ampt shows, with its rewards: TRL's reward function must score them alike.
        # ampt writes a completion's bytes as they decode, and random tokens cut UTF-8 sequences:
        # read as transformers decodes them, each bad byte U+FFFD.
        shown = [json.loads(line) for line in
                 pathlib.Path(out, "completions.jsonl").read_text(errors="replace").splitlines()]
        python_rewards = digit_reward([c["completion"] for c in shown])
        return {"completions_per_sec": steps * per_step / seconds, "steps_per_sec": steps / seconds,
                "timed_steps": steps,
                "mean_length": statistics.fmean(r["completions/mean_length"] for r in logged),
                "rewards_checked": len(shown),
                "rewards_differing": sum(c["reward"] != r for c, r in zip(shown, python_rewards))}


def trl_run(model, prompts, args):
    """TRL in a process of its own (this script with --trl_worker), as ampt runs in its own."""
    proc = subprocess.run([str(PYTHON), __file__, "--trl_worker", str(model), str(prompts),
                           *sys.argv[1:]], capture_output=True, text=True, env=thread_env(args))
    if proc.returncode != 0:
        return {"error": last_line(proc.stderr, proc.returncode)}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def trl_worker(model, prompts, args):
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(args.threads)

    class Timer(TrainerCallback):
        def __init__(self):
            self.start = self.end = None
            self.lengths = []

        def on_step_end(self, a, state, control, **kwargs):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            if state.global_step == args.warmup:
                self.start = time.perf_counter()
            self.end = time.perf_counter()

        def on_log(self, a, state, control, logs=None, **kwargs):
            if logs and "completions/mean_length" in logs:
                self.lengths.append(logs["completions/mean_length"])

    policy = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.pad_token = tokenizer.eos_token
    records = [json.loads(line) for line in open(prompts)]
    timer = Timer()
    with tempfile.TemporaryDirectory(prefix="grpo-speed-trl-") as out:
        config = GRPOConfig(output_dir=out, per_device_train_batch_size=args.batch,
                            gradient_accumulation_steps=args.grad_accum, num_generations=args.generations,
                            max_completion_length=args.max_completion_length, temperature=1.0, top_k=0,
                            top_p=1.0, loss_type="dapo", epsilon=0.2, beta=0.0, scale_rewards="group",
                            num_iterations=1, use_vllm=False, learning_rate=args.lr,
                            lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0,
                            max_grad_norm=1.0, max_steps=args.steps, logging_steps=args.warmup,
                            save_strategy="no", eval_strategy="no", report_to="none",
                            use_cpu=args.device == "cpu", bf16=args.precision == "bf16", fp16=False,
                            dataloader_num_workers=0, seed=args.seed, log_completions=False)
        trainer = GRPOTrainer(model=policy, reward_funcs=digit_reward, args=config,
                              train_dataset=Dataset.from_list(records), processing_class=tokenizer,
                              callbacks=[timer])
        trainer.train()
    steps = args.steps - args.warmup
    seconds = timer.end - timer.start
    per_step = args.batch * args.grad_accum
    print(json.dumps({"completions_per_sec": steps * per_step / seconds, "steps_per_sec": steps / seconds,
                      "timed_steps": steps,
                      "mean_length": statistics.fmean(timer.lengths) if timer.lengths else float("nan")}))


def median_range(values, digits=2):
    if not values:
        return ""
    text = f"{statistics.median(values):.{digits}f}"
    return text if len(values) == 1 else f"{text} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cuda", "cpu"])
    parser.add_argument("--cache", default="/tmp/ampt-grpo-speed")
    parser.add_argument("--flavour", default="qwen3", choices=["llama", "qwen3"])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--intermediate", type=int, default=688)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kv_heads", type=int, default=2)
    parser.add_argument("--positions", type=int, default=512)
    parser.add_argument("--prompts", type=int, default=256)
    parser.add_argument("--generations", type=int, default=4, help="G, completions per prompt")
    parser.add_argument("--batch", type=int, default=8, help="completions per micro-batch")
    parser.add_argument("--grad_accum", type=int, default=2, help="micro-batches per optimizer step")
    parser.add_argument("--max_completion_length", type=int, default=32)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=2,
                        help="steps left out of the timing (also the logging interval of both)")
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="intra-op threads of both (OMP_NUM_THREADS; TRL: also torch.set_num_threads)")
    parser.add_argument("--samplers", default="exact,fast",
                        help="ampt's --sampler modes to measure, comma-separated; '' for its default only")
    parser.add_argument("--ampt", default=str(ROOT / "build" / "ampt"), help="the ampt binary")
    parser.add_argument("--ampt_args", default="", help="further ampt train flags, one shell-quoted string")
    parser.add_argument("--trl_worker", nargs=2, metavar=("MODEL", "PROMPTS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.steps <= args.warmup or args.steps % args.warmup:
        parser.error(f"--steps {args.steps} must be a multiple of --warmup {args.warmup} above it: "
                     "both log every --warmup steps and time the logged intervals after the first")
    if args.trl_worker:
        trl_worker(*args.trl_worker, args)
        return

    shape = f"{args.layers}x{args.hidden}-{args.intermediate}-{args.heads}h{args.kv_heads}"
    model = model_for_both(args)
    prompts = pathlib.Path(args.cache) / f"prompts-{args.prompts}.jsonl"
    if not prompts.exists():
        make_prompts(prompts, args.prompts)

    # A sampler mode this ampt refuses (before the flag exists) is said so; ampt's default
    # sampler is measured then.
    samplers, refused = [s for s in args.samplers.split(",") if s], []
    for sampler in list(samplers):
        error = ampt_refuses(model, prompts, args, sampler)
        if error:
            refused.append(f"`--sampler {sampler}` refused by this ampt: {error}")
            samplers.remove(sampler)
            print(refused[-1], flush=True)
    runs = {f"ampt --sampler {s}": (lambda s=s: ampt_run(model, prompts, args, s)) for s in samplers}
    if not samplers:
        runs["ampt (its default sampler)"] = lambda: ampt_run(model, prompts, args, None)
    runs[TRL_NAME] = lambda: trl_run(model, prompts, args)
    results, errors, loads = {name: [] for name in runs}, {}, []
    # The results file is rewritten after every run: a run cut short (the GPU session's time
    # limit) still leaves what it measured.
    for repeat in range(args.repeats):
        for name in list(runs) if repeat % 2 == 0 else list(reversed(runs)):
            loads.append(os.getloadavg()[0])
            r = runs[name]()
            print(f"repeat {repeat + 1} {name}: {r}", flush=True)
            if "error" in r:
                errors[name] = r["error"]
            else:
                results[name].append(r)
            text = report(args, shape, prompt_tokens(model, prompts), refused, results, errors, loads)
            machine.write_record(ROOT / "benchmarks" / "results" /
                                 f"grpo-trl-{args.device}-{datetime.date.today().isoformat()}.md",
                                 text, args.device)
    print(text)


def report(args, shape, prompt_lengths, refused, results, errors, loads):
    """The results file's text: the settings, the machine's load as each run began (other work on
    it slows both), any refused sampler mode, and the table."""
    median_steps = lambda name: (statistics.median([r["steps_per_sec"] for r in results[name]])
                                 if results.get(name) else None)
    trl, fast = median_steps(TRL_NAME), median_steps("ampt --sampler fast")
    lines = [f"# GRPO speed, ampt and TRL's GRPOTrainer ({datetime.date.today().isoformat()})", "",
             f"Device: {machine.device_line(args.device)}, {args.threads} threads each. Model: a random "
             f"{args.flavour} {shape} (layers x hidden - intermediate - heads over key/value heads) with "
             f"GPT-2's 50257-token vocabulary. {args.prompts} prompts (`Add the two numbers. 17 + 25 =`, "
             f"{prompt_lengths} tokens); {args.generations} completions per prompt of at most "
             f"{args.max_completion_length} tokens, {args.batch} completions per micro-batch, "
             f"{args.grad_accum} micro-batches per step ({args.batch * args.grad_accum} completions, "
             f"sampled together); temperature 1, top-k 0, top-p 1, loss_type dapo, beta 0, mu 1, AdamW "
             f"at a constant lr {args.lr:g}, {args.precision}; one reward (the completion contains a "
             f"digit). {args.steps} steps, timed after {args.warmup}; median (range) of the repeats "
             f"({args.repeats} asked), each run in its own process, alternately; the machine's load "
             f"average as the runs began {min(loads):.1f} to {max(loads):.1f}.", ""]
    checked = [r for name, rs in results.items() if name != TRL_NAME for r in rs]
    if checked:
        total = sum(r["rewards_checked"] for r in checked)
        lines += [f"TRL's reward function, given the {total} completions ampt wrote to completions.jsonl, "
                  f"scores {total - sum(r['rewards_differing'] for r in checked)} of them as ampt did.", ""]
    if refused:
        lines += [f"- {line}" for line in refused] + [""]
    lines += ["| implementation | completions/s | steps/s | mean completion length | ampt / TRL "
              "| time / fast's |", "|---|---:|---:|---:|---:|---:|"]
    for name, rs in results.items():
        if not rs:
            lines.append(f"| {name} | {errors.get(name, 'not run yet')} | | | | |")
            continue
        steps = median_steps(name)
        ratio = f"{steps / trl:.2f}" if name != TRL_NAME and trl else ""
        versus_fast = f"{fast / steps:.2f}" if fast and name.startswith("ampt --sampler") else ""
        lines.append(f"| {name} | {median_range([r['completions_per_sec'] for r in rs])} | "
                     f"{median_range([r['steps_per_sec'] for r in rs], 3)} | "
                     f"{statistics.fmean(r['mean_length'] for r in rs):.1f} | {ratio} | {versus_fast} |")
    return "\n".join(lines) + "\n"

if __name__ == "__main__":
    main()
