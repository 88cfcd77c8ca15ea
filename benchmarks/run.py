#!/usr/bin/env python3
"""ampt against PyTorch's own AMP (eager and torch.compile), side by side in one session.

For each model and precision, trains the same model, batch, sequence length and optimizer with
`build/ampt train` and with benchmarks/reference.py (eager, then torch.compile), each in its own
process, and writes benchmarks/results/<device>-<date>.md plus a PNG chart: samples/s (tokens/s
for GPTs), step time, peak memory, MFU, and ampt's ratio to each reference.

    .venv/bin/python benchmarks/run.py                 # cuda if visible, else cpu
    .venv/bin/python benchmarks/run.py --device cpu --no-compile --models mlp

On CPU it runs the tiny presets, three times each in turns (about 15 minutes on 2 cores). On a
GPU, once each and within 8 minutes: gpt2-124m (batch 16) and gpt2-1558m (batch 8) in bf16 and
fp8, llama-3.2-1b (4 x 2048 tokens) in bf16; every bf16 row also at O2, against PyTorch eager
and torch.compile (transformers' LlamaForCausalLM for Llama); fp8 with `--fp8_layers auto` (its
table of layers is copied into the results) against ampt bf16 with the targets (>= 1.0x, >= 1.25x
on gpt2-1558m); and against torch.compile the throughput targets of issue #39 (gpt2-124m >= 1.05x
in no more memory, llama-3.2-1b >= 1.0x). `--unfused` adds each bf16 row with
--fused_kernels=false (gpt2-124m also with --gemm_epilogues=false).
Throughput is the steady state: the second half of the steps (ampt: the last metrics.jsonl
interval; the reference: timed after half the steps as warm-up). Not part of the tests.
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import machine  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
AMPT = ROOT / "build" / "ampt"
REFERENCE = ROOT / "benchmarks" / "reference.py"

# Per device: (model, batch size, steps, precisions), measured in this order. fp16 on a CPU is
# emulated (about 15x slower than bf16), so the CPU plan keeps its models tiny; a GPT runs at two
# batch sizes there, since the allocator and per-op overheads weigh differently at each.
PLANS = {
    "cpu": [
        ("mlp", 256, 400, ["fp32", "bf16", "fp16"]),
        ("gpt-tiny", 16, 100, ["fp32", "bf16", "fp16"]),
        ("gpt-tiny", 128, 30, ["fp32", "bf16"]),
        ("cnn", 32, 20, ["fp32", "bf16"]),
    ],
    # Issue #39's plan, sized to finish in 8 minutes with torch.compile's compilations.
    "cuda": [
        ("gpt2-124m", 16, 30, ["bf16", "fp8"]),
        ("llama-3.2-1b", 4, 16, ["bf16"]),
        # What `ampt recommend` fits in 80 GiB at bf16 O1 (and fp8 fits alike).
        ("gpt2-1558m", 8, 16, ["bf16", "fp8"]),
    ],
}
# Tokens per sample of the language models (ampt's --block_size for the Llama preset, whose
# context is 131072).
GPT_BLOCK = {"gpt-tiny": 64, "gpt2-124m": 1024, "gpt2-350m": 1024, "gpt2-774m": 1024,
             "gpt2-1558m": 1024, "llama-3.2-1b": 2048}
# ampt ÷ torch.compile tokens/s that issue #39 asks for, in bf16 (gpt2-124m: in no more peak
# memory than compile's).
COMPILE_TARGETS = {"gpt2-124m": 1.05, "llama-3.2-1b": 1.0}
# The case whose bf16 also runs with --gemm_epilogues=false on a GPU.
EPILOGUE_CASE = ("gpt2-124m", 16)
# ampt fp8 ÷ ampt bf16 tokens/s that issue #15 asks for; every other GPT preset: 1.0.
FP8_TARGETS = {"gpt2-1558m": 1.25}

# Dense peak FLOP/s per precision (vendor datasheets, SXM parts), for MFU.
PEAKS = {
    "H100": {"fp32": 67e12, "tf32": 495e12, "bf16": 989e12, "fp16": 989e12, "fp8": 1979e12},
    "H200": {"fp32": 67e12, "tf32": 495e12, "bf16": 989e12, "fp16": 989e12, "fp8": 1979e12},
    "A100": {"fp32": 19.5e12, "tf32": 156e12, "bf16": 312e12, "fp16": 312e12},
}


def ampt_features():
    """Which precisions this ampt build offers (tf32 and fp8 arrive with the Hopper work)."""
    help_text = subprocess.run([str(AMPT), "train", "--help"], capture_output=True, text=True,
                               check=True).stdout
    mp_line = next(l for l in help_text.splitlines() if "--mixed_precision" in l)
    return {"tf32": "--allow_tf32" in help_text, "fp8": "fp8" in mp_line}


def ampt_run(device, model, batch, steps, precision, extra=(), binary=None):
    mixed = {"fp32": "no", "tf32": "no"}.get(precision, precision)
    with tempfile.TemporaryDirectory() as out:
        cmd = [str(binary or AMPT), "train", "--device", device, "--model", model, "--mixed_precision", mixed,
               "--max_steps", str(steps), "--batch_size", str(batch), "--log_every", str(steps // 2),
               "--val_fraction", "0", "--output_dir", out]
        # Enough samples for every step, so data generation stays small for the 1024-token GPTs.
        cmd += ["--synthetic_samples", str(batch * (steps + 2)), *extra]
        if model.startswith("llama"):
            cmd += ["--block_size", str(GPT_BLOCK[model])]
        if precision == "tf32":
            cmd.append("--allow_tf32")
        if precision == "fp8":  # each layer in fp8 only where it measured faster at startup
            cmd += ["--fp8_layers", "auto"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            return {"error": (proc.stderr.strip().splitlines() or ["exit %d" % proc.returncode])[-1]}
        summary = json.loads(pathlib.Path(out, "summary.json").read_text())
        steps_lines = [json.loads(l) for l in pathlib.Path(out, "metrics.jsonl").read_text().splitlines()]
        last = [l for l in steps_lines if "samples_per_sec" in l][-1]
        parameters = next(l for l in proc.stdout.splitlines() if "[AMP] Model:" in l)
        # The fp8 layer table (--fp8_layers), as the run printed it at startup.
        perf = [l.split("[PERF] ", 1)[1] for l in proc.stdout.splitlines() if "[PERF] " in l]
        fp8_table = [l for l in perf if l.startswith("fp8 layers") or l.startswith("|")]
        return {
            "fp8_layers": fp8_table,
            "samples_per_sec": last["samples_per_sec"],
            "tokens_per_sec": last["tokens_per_sec"],
            "step_ms": 1000 * batch / last["samples_per_sec"],
            "peak_memory_bytes": summary["peak_memory_bytes"],
            "peak_memory_kind": summary["peak_memory_kind"],
            "parameters": int(parameters.rsplit(",", 1)[1].split()[0]),
            "final_loss": summary["final_loss"],
        }


def reference_run(device, model, batch, steps, precision, compiled):
    cmd = [sys.executable, str(REFERENCE), "--device", device, "--model", model, "--precision",
           precision, "--steps", str(steps), "--batch_size", str(batch)]
    if model.startswith("llama"):
        cmd += ["--seq_len", str(GPT_BLOCK[model])]
    if compiled:
        cmd.append("--compile")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["exit %d" % proc.returncode])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def model_flops_per_sample(model):
    """Training FLOPs of one sample, counted by the reference's replica of ampt's model."""
    import torch
    sys.path.insert(0, str(REFERENCE.parent))
    import reference
    defaults = reference.parser().parse_args(["--model", model, "--batch_size", "1"])
    with torch.device("meta"):  # the count needs shapes only, not gigabytes of weights
        return reference.build(defaults)[3]


def device_name(device):
    import torch
    if device == "cuda":
        return torch.cuda.get_device_name(0)
    return f"{platform.processor() or platform.machine()} CPU, {os.cpu_count()} cores"


def peak_flops(name, precision):
    for gpu, peaks in PEAKS.items():
        if gpu in name:
            return peaks.get(precision, 0.0)
    return 0.0


def median_run(runs):
    """The run with the median throughput, with the lowest and highest throughput seen."""
    ok = sorted((r for r in runs if "error" not in r), key=lambda r: r["samples_per_sec"])
    if not ok:
        return runs[0]
    median = dict(ok[len(ok) // 2])
    median["range"] = (ok[0]["samples_per_sec"], ok[-1]["samples_per_sec"])
    median["runs"] = len(ok)
    return median


def human(n, unit=""):
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
        if n >= scale:
            return f"{n / scale:.2f}{suffix}{unit}"
    return f"{n:.0f}{unit}"


def write_chart(rows, path, title):
    try:
        import matplotlib
    except ImportError:  # the suite is not part of the tests, so bootstrap does not install it
        print("installing matplotlib into this Python for the chart", flush=True)
        if subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "matplotlib"]).returncode:
            print("could not install matplotlib: no chart")
            return False
        import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cases = list(dict.fromkeys((r["model"], r["batch"]) for r in rows))
    impls = ["ampt", "PyTorch eager", "PyTorch compile"]
    fig, axes = plt.subplots(1, len(cases), figsize=(5 * len(cases), 4), squeeze=False)
    for ax, (model, batch) in zip(axes[0], cases):
        mrows = [r for r in rows if r["model"] == model and r["batch"] == batch]
        precisions = list(dict.fromkeys(r["precision"] for r in mrows))
        width = 0.8 / len(impls)
        for i, impl in enumerate(impls):
            values = []
            for p in precisions:
                hit = [r for r in mrows if r["precision"] == p and r["impl"] == impl and "error" not in r]
                values.append(hit[0]["throughput"] if hit else 0)
            ax.bar([x + i * width for x in range(len(precisions))], values, width, label=impl)
        ax.set_xticks([x + width for x in range(len(precisions))], precisions)
        ax.set_title(f"{model}, batch {batch}")
        ax.set_ylabel("tokens/s" if model.startswith("gpt") else "samples/s")
    axes[0][0].legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def fp8_summary(model, mrows):
    """ampt's fp8 against its own bf16 for a GPT, with the target, and fp8's layer table."""
    ampt_ok = {r["precision"]: r for r in mrows if r["impl"] == "ampt" and "error" not in r}
    if model not in GPT_BLOCK or "fp8" not in ampt_ok or "bf16" not in ampt_ok:
        return []
    ratio = ampt_ok["fp8"]["throughput"] / ampt_ok["bf16"]["throughput"]
    target = FP8_TARGETS.get(model, 1.0)
    lines = [f"ampt fp8 ÷ ampt bf16: **{ratio:.2f}×** (target ≥ {target:.2f}×: "
             f"{'met' if ratio >= target else 'not met'}).", ""]
    if ampt_ok["fp8"].get("fp8_layers"):
        lines += ampt_ok["fp8"]["fp8_layers"] + [""]
    return lines


def compile_summary(model, mrows):
    """ampt bf16 against torch.compile bf16, with issue #39's target."""
    def row(impl):
        return next((r for r in mrows if r["precision"] == "bf16" and r["impl"] == impl
                     and "error" not in r), None)
    ours, theirs = row("ampt"), row("PyTorch compile")
    if model not in COMPILE_TARGETS or not ours or not theirs:
        return []
    ratio = ours["throughput"] / theirs["throughput"]
    target = COMPILE_TARGETS[model]
    memory_ok = model != "gpt2-124m" or ours["peak_memory_bytes"] <= theirs["peak_memory_bytes"]
    met = ratio >= target and memory_ok
    return [f"ampt bf16 ÷ torch.compile bf16: **{ratio:.2f}×**, peak memory "
            f"{ours['peak_memory_bytes'] / 2**30:.1f} against {theirs['peak_memory_bytes'] / 2**30:.1f} "
            f"GiB (target ≥ {target:.2f}×" + (" in no more memory" if model == "gpt2-124m" else "")
            + f": {'met' if met else 'not met'}).", ""]


def main():
    import torch
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                        choices=["cpu", "cuda"])
    parser.add_argument("--models", nargs="*", help="subset of the device's plan")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile reference")
    parser.add_argument("--unfused", action="store_true",
                        help="on a GPU, each bf16 language model also with --fused_kernels=false")
    parser.add_argument("--repeats", type=int, default=None,
                        help="runs per implementation, taking turns; the median is reported "
                             "(default: 3 on a CPU, whose timings wander, 1 on a GPU)")
    args = parser.parse_args()
    repeats = args.repeats or (3 if args.device == "cpu" else 1)
    if not AMPT.exists():
        sys.exit(f"{AMPT} not found: build it first (cmake --build build --target ampt)")

    plan = [case for case in PLANS[args.device] if not args.models or case[0] in args.models]
    features = ampt_features()
    name = device_name(args.device)
    impls = [("PyTorch eager", False)] + ([] if args.no_compile else [("PyTorch compile", True)])
    rows, skipped = [], []
    for model, batch, steps, precisions in plan:
        flops = model_flops_per_sample(model)
        for precision in precisions:
            if precision in features and not features[precision]:
                skipped.append(f"{model} {precision}: this ampt build has no {precision}")
                continue
            if precision in ("tf32", "fp8") and args.device == "cpu":
                continue
            runners = [("ampt", lambda: ampt_run(args.device, model, batch, steps, precision))]
            if args.device == "cuda" and model in GPT_BLOCK and precision == "bf16":
                runners.append(("ampt O2", lambda: ampt_run(
                    args.device, model, batch, steps, precision, ["--amp_opt_level", "O2"])))
            if args.device == "cuda" and model in GPT_BLOCK and precision == "bf16" and args.unfused:
                # What the fused kernels (head + loss, add + LayerNorm, MLP) are worth on the GPU.
                runners.append(("ampt, unfused", lambda: ampt_run(
                    args.device, model, batch, steps, precision, ["--fused_kernels=false"])))
                if (model, batch) == EPILOGUE_CASE:
                    # What the cuBLASLt epilogues alone are worth, on the headline case.
                    runners.append(("ampt, no epilogues", lambda: ampt_run(
                        args.device, model, batch, steps, precision, ["--gemm_epilogues=false"])))
            if precision != "fp8":  # PyTorch has no fp8 training loop of its own to compare with
                runners += [(label, lambda c=c: reference_run(args.device, model, batch, steps,
                                                              precision, c))
                            for label, c in impls]
            runs = {label: [] for label, _ in runners}
            for _ in range(repeats):  # in turns, so a slow spell of the machine hits all alike
                for label, run in runners:
                    runs[label].append(run())
            results = [(label, median_run(runs[label])) for label, _ in runners]
            tokens = GPT_BLOCK.get(model, 1)
            for impl, r in results:
                row = {"model": model, "precision": precision, "impl": impl, "batch": batch,
                       "steps": steps, **r}
                if "error" not in r:
                    row["throughput"] = r["samples_per_sec"] * tokens
                    row["range"] = tuple(x * tokens for x in r["range"])
                    peak = peak_flops(name, precision)
                    row["mfu"] = r["samples_per_sec"] * flops / peak if peak else None
                rows.append(row)
                print(f"{model:10} {precision:5} {impl:16} " +
                      (r["error"] if "error" in r else
                       f"{human(row['throughput'])}{'tok' if tokens > 1 else 'samples'}/s "
                       f"{r['step_ms']:.1f} ms/step peak {r['peak_memory_bytes'] / 2**20:.0f} MiB"),
                      flush=True)
            write_report(args, plan, rows, skipped, name, repeats, final=False)

    write_report(args, plan, rows, skipped, name, repeats, final=True)


def write_report(args, plan, rows, skipped, name, repeats, final):
    """benchmarks/results/<device>-<date>.md from the rows so far; the chart once all are in.

    Written after every case, so a run stopped by a time limit still leaves what it measured."""
    import torch
    date = datetime.date.today().isoformat()
    slug = ("cpu" if args.device == "cpu" else
            next((gpu.lower() for gpu in ("H100", "H200") if gpu in name),
                 name.lower().replace(" ", "-")))
    out = ROOT / "benchmarks" / "results" / f"{slug}-{date}.md"
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    lines = [f"# ampt vs PyTorch AMP on {name} ({date})", "",
             f"torch {torch.__version__}; ampt git {rev}; `benchmarks/run.py --device {args.device}`.",
             "Same models (parameter counts checked), batch, sequence length, fused AdamW, clipping "
             "and LR schedule; random/synthetic data; each run its own process, back to back"
             + (f"; {repeats} runs of each, the implementations taking turns: the median, with "
                "the lowest–highest in brackets." if repeats > 1 else "."),
             "Throughput and step time: the second half of the steps. Peak memory: "
             + ("the CUDA caching allocator's peak." if args.device == "cuda" else
                "the process's peak RSS (includes each runtime's own baseline: LibTorch for ampt, "
                "Python + torch for the references)."),
             "MFU: model FLOPs (6 per MAC; llm.c's 6N + 6LCT per token for GPTs) over the "
             "datasheet dense peak of the precision" + ("" if args.device == "cuda" else
                                                         "; none on a CPU."), ""]
    if args.device == "cpu":
        lines += ["This CPU is shared with other work: treat ratios as indicative.", ""]
    for model, batch, _, _ in plan:
        mrows = [r for r in rows if r["model"] == model and r["batch"] == batch]
        if not mrows:
            continue
        unit = "tokens/s" if model in GPT_BLOCK else "samples/s"
        lines += [f"## {model} (batch {mrows[0]['batch']}"
                  + (f", {GPT_BLOCK[model]} tokens per sample" if model in GPT_BLOCK else "")
                  + f", {mrows[0]['steps']} steps)", "",
                  f"| precision | implementation | {unit} | step time | peak memory | MFU | ampt ÷ this |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for r in mrows:
            if "error" in r:
                lines.append(f"| {r['precision']} | {r['impl']} | failed: {r['error']} | | | | |")
                continue
            ours = next((a for a in mrows if a["precision"] == r["precision"] and a["impl"] == "ampt"
                         and "error" not in a), None)
            ratio = f"{ours['throughput'] / r['throughput']:.2f}×" if ours and r["impl"] != "ampt" else ""
            mfu = f"{100 * r['mfu']:.1f}%" if r.get("mfu") else "–"
            spread = (f" ({human(r['range'][0])}–{human(r['range'][1])})"
                      if r["runs"] > 1 else "")
            lines.append(f"| {r['precision']} | {r['impl']} | {human(r['throughput'])}{spread} | "
                         f"{r['step_ms']:.1f} ms | {r['peak_memory_bytes'] / 2**20:.0f} MiB | {mfu} | {ratio} |")
        lines.append("")
        lines += fp8_summary(model, mrows)
        lines += compile_summary(model, mrows)
    if skipped:
        lines += ["Not measured: " + "; ".join(skipped) + ".", ""]
    if not final:
        lines += ["*Partial: written while the run went on; it stopped before the plan's end.*", ""]
    chart = out.with_suffix(".png")
    if final and write_chart(rows, chart, f"ampt vs PyTorch AMP, {name}"):
        lines += [f"![throughput]({chart.name})", ""]
    machine.write_record(out, "\n".join(lines), args.device)
    if final:
        print(f"wrote {out.relative_to(ROOT)}" + (f" and {chart.name}" if chart.exists() else ""))


if __name__ == "__main__":
    main()
