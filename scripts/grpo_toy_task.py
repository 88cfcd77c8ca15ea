#!/usr/bin/env python3
"""A tiny GPT learns the sum of two 2-digit numbers with `ampt train --objective grpo`, on the CPU.

    scripts/grpo_toy_task.py [--ampt build/ampt] [--out DIR] [--check] [--record FILE.md]

1. Data (DIR/data): a byte tokenizer (a tiktoken file of the 256 bytes; <|endoftext|> is 256),
   4,000 problems "a+b=" for SFT and 4,100 others as GRPO's prompts, with "answer" = a+b.
   The SFT answers come from a sloppy teacher: a+b-1, a+b or a+b+1, equally often, two
   answers per problem. The SFT'd model has the format and the neighbourhood of the sum, and
   picks among the three at about chance: the exact reward starts near 1/3.
2. SFT (DIR/sft): a 2-layer GPT of width 128 from scratch, 1,000 steps on the prompt/completion
   records (the loss on the answers and their <|endoftext|>), exported as a Hugging Face model
   (DIR/sft-hf) that GRPO starts from (--init_from).
3. GRPO (DIR/grpo): 300 steps of 16 prompts x 8 completions, the `exact` reward, lr 5e-4.
   Prints the reward curve (metrics.jsonl's `reward` per step).

--check then shows that the runs are reproducible, by comparing every figure of metrics.jsonl
but the timings (and completions.jsonl) bit for bit:
  - the same GRPO run again, from the same seed;
  - the run resumed from its step-150 checkpoint, against steps 151..300;
  - the reward computed by an external Python program (DIR/data/reward.py, the JSON Lines
    protocol of docs/rl.md) instead of the built-in `exact`: the same run, bit for bit, since
    the program computes the same reward; then that run again and resumed, likewise.

--record FILE.md writes a results file (benchmarks/machine.py's header) with the curve and the
wall times. Exits 1 when the final reward (the mean of the last 20 steps) is below 0.9 or a
check finds a difference.
"""
import argparse
import base64
import json
import os
import pathlib
import random
import shlex
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent

SFT_STEPS = 1000
GRPO_STEPS = 300
RESUME_STEP = 150
LAST = 20  # the final reward is the mean of the last LAST steps (one step's is 128 completions)

# The figures that are timings or memory, which differ from run to run; every other one must not.
TIMINGS = {"samples_per_sec", "tokens_per_sec", "mfu", "peak_memory_bytes"}

REWARD_PROGRAM = '''\
"""The exact reward as an external program (docs/rl.md's protocol): one JSON request per line,
{"prompt", "completions", "record"}, one line back, {"rewards": [...]}."""
import json
import sys

for line in sys.stdin:
    request = json.loads(line)
    answer = str(request["record"]["answer"]).strip()
    rewards = [float(c.strip() == answer) for c in request["completions"]]
    print(json.dumps({"rewards": rewards}), flush=True)
'''


def make_data(data):
    data.mkdir(parents=True, exist_ok=True)
    with open(data / "bytes.tiktoken", "w") as f:
        for b in range(256):
            f.write(f"{base64.b64encode(bytes([b])).decode()} {b}\n")
    rng = random.Random(0)
    pairs = [(a, b) for a in range(10, 100) for b in range(10, 100)]
    rng.shuffle(pairs)
    with open(data / "sft.jsonl", "w") as f:
        for _ in range(2):
            for a, b in pairs[:4000]:
                answer = a + b + rng.choice((-1, 0, 1))
                f.write(json.dumps({"prompt": f"{a}+{b}=", "completion": str(answer)}) + "\n")
    with open(data / "prompts.jsonl", "w") as f:
        for a, b in pairs[4000:]:
            f.write(json.dumps({"prompt": f"{a}+{b}=", "answer": str(a + b)}) + "\n")
    (data / "reward.py").write_text(REWARD_PROGRAM)


# One intra-op thread: the model's matmuls are too small to split. On the shared 2-core machine,
# with other builds running, two threads spent 229 s of CPU on 500 SFT steps, one 88 s on 1,000
# (OpenMP threads spin waiting for each other).
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def run(args, log):
    """Runs ampt with `args`, its output to `log`; the wall time in seconds."""
    start = time.monotonic()
    with open(log, "w") as out:
        done = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, env=ENV)
    if done.returncode != 0:
        sys.exit(f"grpo_toy_task: {shlex.join(map(str, args))} failed (exit {done.returncode}); see {log}")
    return time.monotonic() - start


def sft_args(ampt, data, out):
    return [ampt, "train", "--model", "gpt", "--n_layer", "2", "--n_embd", "128", "--n_head", "4",
            "--block_size", "64", "--vocab_size", "257", "--tokenizer", data / "bytes.tiktoken",
            "--dataset", f"jsonl:{data / 'sft.jsonl'}", "--batch_size", "32", "--max_steps", str(SFT_STEPS),
            "--lr", "2e-3", "--min_lr_ratio", "1", "--warmup_steps", "30", "--mixed_precision", "no",
            "--device", "cpu", "--seed", "1", "--log_every", "100", "--output_dir", out]


def grpo_args(ampt, data, init, out, extra=()):
    return [ampt, "train", "--init_from", init, "--dataset", f"jsonl:{data / 'prompts.jsonl'}",
            "--objective", "grpo", "--reward", "exact", "--num_generations", "8",
            "--max_completion_length", "4", "--batch_size", "128", "--max_steps", str(GRPO_STEPS),
            "--lr", "5e-4", "--min_lr_ratio", "1", "--warmup_steps", "0", "--mixed_precision", "no",
            "--device", "cpu", "--seed", "1", "--log_every", "1", "--loader_workers", "0",
            "--save_every", str(RESUME_STEP), "--output_dir", out, *extra]


def steps(out):
    rows = [json.loads(line) for line in open(out / "metrics.jsonl")]
    return [r for r in rows if "reward" in r]


def same(name, a, b, first_step=1):
    """Whether runs a and b logged the same figures bit for bit from `first_step` on; prints it."""
    a = [r for r in a if r["step"] >= first_step]
    problems = []
    if [r["step"] for r in a] != [r["step"] for r in b]:
        problems.append(f"{len(a)} steps ({a[0]['step'] if a else '-'}..) against {len(b)} "
                        f"({b[0]['step'] if b else '-'}..)")
    for ra, rb in zip(a, b):
        for key in sorted((set(ra) | set(rb)) - TIMINGS):
            if ra.get(key) != rb.get(key):
                problems.append(f"step {ra['step']} {key}: {ra.get(key)!r} against {rb.get(key)!r}")
    keys = len(set(a[0]) - TIMINGS) if a else 0
    print(f"  {name}: " + ("bit for bit the same" if not problems else "DIFFERENT: " + "; ".join(problems[:5]))
          + f" ({len(a)} steps x {keys} figures)")
    return not problems


def renamed(rows, old, new):
    """The rows with figure `old` renamed `new` (rewards/exact/mean is rewards/program/mean there)."""
    return [{(new if k == old else k): v for k, v in r.items()} for r in rows]


def curve_table(rows, every=10):
    lines = ["| step | reward | reward_std | frac_reward_zero_std | completions/mean_length |",
             "|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r["step"] == 1 or r["step"] % every == 0:
            lines.append(f"| {r['step']} | {r['reward']:.3f} | {r['reward_std']:.3f} | "
                         f"{r['frac_reward_zero_std']:.3f} | {r['completions/mean_length']:.2f} |")
    return "\n".join(lines)


def mean(values):
    return sum(values) / len(values)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ampt", default=str(ROOT / "build" / "ampt"))
    parser.add_argument("--out", default="/tmp/ampt-grpo-toy")
    parser.add_argument("--check", action="store_true", help="rerun, resume and the reward program, bit for bit")
    parser.add_argument("--record", help="write a results file (markdown) here")
    args = parser.parse_args()
    ampt, out = pathlib.Path(args.ampt).resolve(), pathlib.Path(args.out).resolve()
    if out.exists() and any(out.iterdir()):
        sys.exit(f"grpo_toy_task: --out {out} is not empty: name a new directory")
    data = out / "data"
    make_data(data)

    sft_seconds = run(sft_args(ampt, data, out / "sft"), out / "sft.log")
    subprocess.run([ampt, "export", "--format", "hf", "--checkpoint", out / "sft" / f"ckpt-{SFT_STEPS:08d}.pt",
                    "--out", out / "sft-hf"], check=True, stdout=subprocess.DEVNULL)
    sft = [r for r in map(json.loads, open(out / "sft" / "metrics.jsonl")) if "grad_norm" in r]  # steps, not evals
    print(f"SFT: {SFT_STEPS} steps in {sft_seconds:.0f} s, loss {sft[0]['loss']:.3f} -> {sft[-1]['loss']:.3f}")

    grpo_seconds = run(grpo_args(ampt, data, out / "sft-hf", out / "grpo"), out / "grpo.log")
    grpo = steps(out / "grpo")
    start, final = grpo[0]["reward"], mean([r["reward"] for r in grpo[-LAST:]])
    first = mean([r["reward"] for r in grpo[:LAST]])
    reached = next((r["step"] for i, r in enumerate(grpo)
                    if i + 1 >= LAST and mean([q["reward"] for q in grpo[i + 1 - LAST:i + 1]]) >= 0.9), None)
    print(f"GRPO: {GRPO_STEPS} steps in {grpo_seconds:.0f} s; reward {start:.3f} at step 1, "
          f"{first:.3f} over steps 1-{LAST}, {final:.3f} over the last {LAST}; "
          f"the mean of {LAST} steps first >= 0.9 at step {reached}")
    print("reward per step:")
    for i in range(0, len(grpo), 10):
        print("  " + " ".join(f"{r['reward']:.3f}" for r in grpo[i:i + 10]) + f"   (steps {i + 1}-{i + 10})")

    ok = final >= 0.9
    checks, seconds = [], {}
    if args.check:
        print("checks:")
        seconds["rerun"] = run(grpo_args(ampt, data, out / "sft-hf", out / "grpo-rerun"), out / "grpo-rerun.log")
        checks.append(same("the same seed again", grpo, steps(out / "grpo-rerun")))
        checks.append((out / "grpo" / "completions.jsonl").read_bytes() ==
                      (out / "grpo-rerun" / "completions.jsonl").read_bytes())
        print(f"  completions.jsonl of the rerun: {'the same' if checks[-1] else 'DIFFERENT'}")
        ckpt = out / "grpo" / f"ckpt-{RESUME_STEP:08d}.pt"
        seconds["resumed"] = run(grpo_args(ampt, data, out / "sft-hf", out / "grpo-resumed", ["--resume", ckpt]),
                                 out / "grpo-resumed.log")
        checks.append(same(f"resumed from step {RESUME_STEP}", grpo, steps(out / "grpo-resumed"), RESUME_STEP + 1))

        program = ["--reward", "program", "--reward_command",
                   f"{shlex.quote(sys.executable)} {shlex.quote(str(data / 'reward.py'))}"]
        seconds["program"] = run(grpo_args(ampt, data, out / "sft-hf", out / "grpo-program", program),
                                 out / "grpo-program.log")
        by_program = renamed(steps(out / "grpo-program"), "rewards/program/mean", "rewards/exact/mean")
        checks.append(same("reward.py against the built-in exact", grpo, by_program))
        seconds["program rerun"] = run(grpo_args(ampt, data, out / "sft-hf", out / "grpo-program-rerun", program),
                                       out / "grpo-program-rerun.log")
        checks.append(same("reward.py, the same seed again", steps(out / "grpo-program"),
                           steps(out / "grpo-program-rerun")))
        ckpt = out / "grpo-program" / f"ckpt-{RESUME_STEP:08d}.pt"
        seconds["program resumed"] = run(
            grpo_args(ampt, data, out / "sft-hf", out / "grpo-program-resumed", program + ["--resume", ckpt]),
            out / "grpo-program-resumed.log")
        checks.append(same(f"reward.py, resumed from step {RESUME_STEP}", steps(out / "grpo-program"),
                           steps(out / "grpo-program-resumed"), RESUME_STEP + 1))
        print("  wall times: " + ", ".join(f"{k} {v:.0f} s" for k, v in seconds.items()))
        ok = ok and all(checks)

    if args.record:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        import machine
        command = " ".join(["scripts/grpo_toy_task.py", *map(shlex.quote, sys.argv[1:])])
        mismatch = max(r["mismatch/max_abs_logp"] for r in grpo)
        text = [f"# GRPO learns a toy task on the CPU ({time.strftime('%Y-%m-%d')})", "",
                f"A 2-layer GPT of width 128 (byte tokenizer, 257 tokens, fp32, one intra-op thread) learns the "
                f"sum of two 2-digit numbers: SFT on a sloppy teacher's answers (a+b-1, a+b, a+b+1), "
                f"{SFT_STEPS} steps in {sft_seconds:.0f} s, then `--objective grpo --reward exact` on 4,100 other "
                f"problems, 16 prompts x 8 completions a step, {GRPO_STEPS} steps in {grpo_seconds:.0f} s: "
                f"{sft_seconds + grpo_seconds:.0f} s in all (wall times of the whole `ampt train` processes, "
                f"export aside; the machine was shared with other builds and runs).", "",
                f"- reward at step 1: {start:.3f}; mean of steps 1-{LAST}: {first:.3f}",
                f"- mean of the last {LAST} steps: **{final:.3f}**; the mean of {LAST} steps first reaches 0.9 at "
                f"step {reached}",
                f"- SFT loss {sft[0]['loss']:.3f} -> {sft[-1]['loss']:.3f} (per scored token)",
                f"- sampler-trainer mismatch (today's sampler): `mismatch/max_abs_logp` at most {mismatch:.2g}", ""]
        if args.check:
            text += ["Reproducibility (every figure of metrics.jsonl but the timings, compared bit for bit): "
                     + ("all the same" if all(checks) else "**differences found**")
                     + ": the same seed again (and its completions.jsonl), the run resumed from its step-150 "
                       "checkpoint (steps 151-300), the reward computed by an external Python program "
                       "(data/reward.py) against the built-in `exact`, and that program's run again and resumed. "
                       "Wall times: " + ", ".join(f"{k} {v:.0f} s" for k, v in seconds.items()) + ".", ""]
        text += ["Reward per step (`reward` in metrics.jsonl), step 1 and every 10th:", "", curve_table(grpo), "",
                 "Every step's reward, ten a line:", ""]
        text += ["    " + " ".join(f"{r['reward']:.3f}" for r in grpo[i:i + 10]) + f"   steps {i + 1}-{i + 10}"
                 for i in range(0, len(grpo), 10)]
        text += [""]
        machine.write_record(args.record, "\n".join(text), command=command)
        print(f"wrote {args.record}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
