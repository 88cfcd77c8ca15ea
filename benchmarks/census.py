#!/usr/bin/env python3
"""The step census of ampt beside PyTorch eager's, on the CPU: what one O1 training step asks of
the device, counted the same way for both.

ampt: `ampt train --profile N-N` prints its census line and writes the per-operator detail
(train/step_census.h). PyTorch eager: the loop a Python user writes (torch.autocast, fused AdamW,
clip_grad_norm_; benchmarks/reference.py's models, transformers' LlamaForCausalLM for Llama),
traced by torch.profiler and counted from the trace by the same rules:

- operators: the outermost operator calls that do work (views, metadata and allocations apart),
  what runs inside one not counted again; an autograd node's own calls are outermost;
- dtype conversions: every aten::copy_ between dtypes, at any depth (autocast's casts inside a
  matmul and a foreach copy's per-tensor copies included; a number passed to an operator, a
  0-dim int64 or float64 host tensor, not), with the bytes read and written; "of parameters or
  their gradients": those whose source or destination is a parameter's or a gradient's storage,
  counted in a second, identical step under a dispatch mode that sees each conversion's tensors
  (the trace has their shapes only); "inside ampt operations": none, eager has no ampt ops;
- host synchronisations: outermost item, _local_scalar_dense, nonzero, … and copies to the host;
- autograd nodes: the backward nodes the engine ran.

    .venv/bin/python benchmarks/census.py                  # gpt2-124m and llama-3.2-1b, bf16
    .venv/bin/python benchmarks/census.py --models gpt2-124m --seq_len 128

Writes benchmarks/results/census-cpu-<date>.md. Not part of the tests.
"""
import argparse
import datetime
import json
import pathlib
import subprocess
import sys
import tempfile
import machine  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
AMPT = ROOT / "build" / "ampt"
REFERENCE = ROOT / "benchmarks" / "reference.py"

NO_WORK = {
    "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::_reshape_alias", "aten::as_strided",
    "aten::t", "aten::transpose", "aten::permute", "aten::expand", "aten::expand_as", "aten::split",
    "aten::split_with_sizes", "aten::chunk", "aten::unbind", "aten::select", "aten::slice",
    "aten::narrow", "aten::squeeze", "aten::unsqueeze", "aten::flatten", "aten::unflatten",
    "aten::view_as", "aten::alias", "aten::detach", "aten::detach_", "aten::lift_fresh",
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::resize_", "aten::set_",
    "aten::to", "aten::contiguous", "aten::numpy_T", "aten::matrix_H", "aten::mT", "aten::values",
    "aten::indices", "aten::_has_compatible_shallow_copy_type", "aten::result_type", "aten::size",
    "aten::stride", "aten::is_same_size", "aten::type_as", "aten::clone_if_needed"}
SYNCS = {"aten::item", "aten::_local_scalar_dense", "aten::nonzero", "aten::is_nonzero",
         "aten::equal", "aten::allclose", "aten::masked_select", "aten::unique_dim",
         "aten::_unique2", "aten::unique_consecutive", "aten::argwhere"}
NODE = "autograd::engine::evaluate_function: "
ELEMENT = {"float": 4, "c10::BFloat16": 2, "c10::Half": 2, "double": 8, "long int": 8, "int": 4,
           "bool": 1, "unsigned char": 1, "signed char": 1, "short int": 2}

def census_of_trace(trace, step_name):
    """The counts of one step's events in a Chrome trace from torch.profiler (all but the
    parameter conversions, which parameter_conversions counts)."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") in
              ("cpu_op", "user_annotation")]
    # The step: the user annotation torch.profiler.record_function named.
    steps = [e for e in events if e["name"] == step_name]
    begin, end = steps[-1]["ts"], steps[-1]["ts"] + steps[-1]["dur"]
    ops = sorted((e for e in events if e.get("cat") == "cpu_op" and begin <= e["ts"] < end),
                 key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    counts = dict(operators=0, conversions=0, conversion_bytes=0, host_syncs=0, autograd_nodes=0)
    by_thread = {}
    for e in ops:
        by_thread.setdefault(e["tid"], []).append(e)
    for thread_ops in by_thread.values():
        stack = []  # open events: [event, does work]

        def close_until(ts):
            while stack and stack[-1][0]["ts"] + stack[-1][0]["dur"] <= ts:
                event, work = stack.pop()
                if stack and not stack[-1][0]["name"].startswith(NODE):
                    stack[-1][1] = stack[-1][1] or work
                elif work:
                    counts["operators"] += 1

        for e in thread_ops:
            close_until(e["ts"])
            name = e["name"]
            if name.startswith(NODE):
                counts["autograd_nodes"] += 1
                stack.append([e, False])
                continue
            outermost = not stack or stack[-1][0]["name"].startswith(NODE)
            if name == "aten::copy_":
                types = e.get("args", {}).get("Input type", [])
                dims = e.get("args", {}).get("Input Dims", [])
                # A Python or C++ number an operator was given arrives as a 0-dim int64 or
                # float64 host tensor (a wrapped number): an argument, not data (ampt's census
                # tells them apart exactly).
                wrapped = len(dims) >= 2 and dims[1] == [] and types[1] in ("long int", "double")
                if (len(types) >= 2 and types[0] != types[1] and types[0] and types[1]
                        and not wrapped):
                    counts["conversions"] += 1
                    numel = 1
                    for d in dims[0]:
                        numel *= d
                    counts["conversion_bytes"] += numel * (ELEMENT.get(types[0], 4) +
                                                           ELEMENT.get(types[1], 4))
            if outermost and name in SYNCS:
                counts["host_syncs"] += 1
            stack.append([e, name not in NO_WORK])
        close_until(float("inf"))
    return counts


def parameter_conversions(step, parameters):
    """How many of one step's dtype conversions have a parameter's or a gradient's storage as
    their source or destination: `step(note_gradients)` runs under a dispatch mode that sees the
    tensors of every copy_, _to_copy and _foreach_copy_ (autocast's casts included), and calls
    note_gradients(grads) once backward has made them."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten
    pairs = []  # (destination storage, source storage); held, so no address is reused meanwhile

    def storage(t):
        return t.untyped_storage()

    class Conversions(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if func is aten.copy_.default:
                dst, src = args[0], args[1]
                if dst.dtype != src.dtype:
                    pairs.append((storage(dst), storage(src)))
            elif func is aten._to_copy.default:
                if out.dtype != args[0].dtype:
                    pairs.append((storage(out), storage(args[0])))
            elif func is aten._foreach_copy_.default:
                for dst, src in zip(args[0], args[1]):
                    if dst.dtype != src.dtype:
                        pairs.append((storage(dst), storage(src)))
            return out

    known = {storage(p).data_ptr() for p in parameters}
    held = []

    def note_gradients(grads):
        held.extend(storage(g) for g in grads if g is not None)
        known.update(s.data_ptr() for s in held)

    with Conversions():
        step(note_gradients)
    return sum(1 for dst, src in pairs if dst.data_ptr() in known or src.data_ptr() in known)


def ampt_census(model, precision, seq_len, n_layer, batch=1):
    with tempfile.TemporaryDirectory() as out:
        cmd = [str(AMPT), "train", "--device", "cpu", "--model", model, "--mixed_precision",
               {"fp32": "no"}.get(precision, precision), "--batch_size", str(batch),
               "--block_size", str(seq_len), "--max_steps", "3",
               "--log_every", "100", "--profile", "2-2", "--val_fraction", "0",
               "--synthetic_samples", "16", "--output_dir", out, "--loader_workers", "0"]
        if n_layer:
            cmd += ["--n_layer", str(n_layer)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"ampt failed: {proc.stderr.strip()}")
        line = next(l for l in proc.stdout.splitlines() if "Step census (step 2)" in l)
        detail = json.loads(
            pathlib.Path(out, "profile-steps-2-2.census.jsonl").read_text().splitlines()[0])
        return {"operators": detail["operators"], "conversions": detail["dtype_conversions"],
                "conversion_bytes": detail["conversion_bytes"],
                "parameter_conversions": detail["parameter_conversions"],
                "ampt_conversions": detail["ampt_conversions"],
                "ampt_conversion_bytes": detail["ampt_conversion_bytes"],
                "host_syncs": detail["host_syncs"], "autograd_nodes": detail["autograd_nodes"],
                "line": line.split("[PERF] ", 1)[1]}


def eager_census(model, precision, seq_len, n_layer, batch=1):
    """PyTorch eager's step 2, in this process: benchmarks/reference.py's model of ampt's."""
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, str(REFERENCE.parent))
    import reference
    torch.manual_seed(0)
    args = reference.parser().parse_args(["--model", model, "--batch_size", str(batch),
                                          "--seq_len", str(seq_len), "--n_layer", str(n_layer)])
    net, x, y, _, _ = reference.build(args)
    forward = net
    net.train()
    decay = [p for p in net.parameters() if p.dim() >= 2]
    other = [p for p in net.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                   {"params": other, "weight_decay": 0.0}], lr=1e-4, fused=True)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler("cpu", enabled=dtype is torch.float16)

    def step(note_gradients=None):
        with torch.autocast("cpu", dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = F.cross_entropy(forward(x).flatten(0, -2), y.flatten())
        scaler.scale(loss).backward()
        if note_gradients:
            note_gradients([p.grad for p in net.parameters()])
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0, foreach=True)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)

    step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                record_shapes=True) as prof:
        with torch.profiler.record_function("census::step"):
            step()
    with tempfile.TemporaryDirectory() as out:
        path = pathlib.Path(out, "trace.json")
        prof.export_chrome_trace(str(path))
        trace = json.loads(path.read_text())
    counts = census_of_trace(trace, "census::step")
    counts["parameter_conversions"] = parameter_conversions(step, list(net.parameters()))
    counts["ampt_conversions"] = counts["ampt_conversion_bytes"] = 0
    return counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=["gpt2-124m", "llama-3.2-1b"])
    parser.add_argument("--precision", default="bf16", choices=["bf16", "fp16", "fp32"])
    parser.add_argument("--seq_len", type=int, default=128)
    parser.add_argument("--llama_layers", type=int, default=4,
                        help="of llama-3.2-1b's 16 layers (AdamW's state for all of them is more "
                             "than a 24 GiB machine holds beside the run)")
    args = parser.parse_args()
    if not AMPT.exists():
        sys.exit(f"{AMPT} not found: build it first (scripts/dev build)")
    rows = []
    for model in args.models:
        layers = args.llama_layers if model.startswith("llama") else 0
        ours = ampt_census(model, args.precision, args.seq_len, layers)
        theirs = eager_census(model, args.precision, args.seq_len, layers)
        rows.append((model, layers, ours, theirs))
        print(model, "ampt", ours, "eager", theirs, flush=True)
    date = datetime.date.today().isoformat()
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if
                l.startswith("model name")), "CPU")
    lines = [f"# Step census on the CPU ({date})", "",
             f"ampt git {rev}; {cpu}; `benchmarks/census.py --precision {args.precision} "
             f"--seq_len {args.seq_len}`. One O1 {args.precision} training step at batch 1 × "
             f"{args.seq_len} tokens (step 2, which does not log), counted as "
             "`benchmarks/census.py` and `src/ampt/train/step_census.h` describe; the counts do "
             "not depend on the CPU.", "",
             "| model | run | operators | dtype conversions | MiB converted | of parameters or "
             "gradients | inside ampt operations (MiB) | host syncs | autograd nodes |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for model, layers, ours, theirs in rows:
        name = model + (f" ({layers} of 16 layers)" if layers else "")
        for label, c in (("ampt", ours), ("PyTorch eager", theirs)):
            lines.append(f"| {name} | {label} | {c['operators']} | {c['conversions']} | "
                         f"{c['conversion_bytes'] / 2**20:.1f} | {c['parameter_conversions']} | "
                         f"{c['ampt_conversions']} ({c['ampt_conversion_bytes'] / 2**20:.1f}) | "
                         f"{c['host_syncs']} | {c['autograd_nodes']} |")
    out = ROOT / "benchmarks" / "results" / f"census-cpu-{date}.md"
    machine.write_record(out, "\n".join(lines) + "\n", "cpu")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
