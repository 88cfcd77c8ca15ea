#!/usr/bin/env python3
"""ZeRO stages 0, 1, 2 and 3 side by side on CPU Gloo ranks of this machine.

For each number of ranks N (2 and 4 by default) and each stage, launches
`torchrun --standalone --nproc_per_node N --no-python build/ampt train --zero_stage S ...`
(fp32, --device cpu, synthetic tokens, batch 1 per rank, block 64, 6 steps by default) and
measures, per rank:

  peak RSS    VmRSS of every rank process (the children of torchrun, told apart by their RANK),
              read from /proc every 0.1 s while steps 2..last run (from the moment rank 0 writes
              step 1's line to metrics.jsonl until it writes the last step's), with
              TCMALLOC_AGGRESSIVE_DECOMMIT=true so that freed memory leaves the RSS (ampt links
              tcmalloc, which otherwise keeps freed pages; --no-tcmalloc_decommit measures that),
              and MALLOC_MMAP_THRESHOLD_=65536 as docs/distributed.md's ZeRO table was once measured (glibc's
              tunable: a no-op under tcmalloc). Rank 0 and the largest of the others.
  step time   from rank 0's metrics.jsonl: global samples per step (N x batch_size) / each step
              line's samples_per_sec (time spent evaluating or checkpointing is left out by ampt);
              the median over steps 2..last, and its ratio to stage 0 at the same N.
  [ZeRO]      the bytes per parameter per rank that the startup line states (rank 0 logs).
  recommend   `ampt recommend` with the same model and batch, --world_size N --zero_stage S: its
              fp32/O0 total per rank (n/a where it refuses the stage).
  bytes moved per step per rank, COMPUTED (not measured) from the parameter count P of the
              startup log, fp32 weights and gradients (S = 4P bytes) and ring collectives: an
              all-reduce moves 2(N-1)/N x S, a reduce-scatter or all-gather (N-1)/N x S.
              Stage 0: all-reduce of the gradients. Stage 1: that + all-gather of the stepped
              weights. Stage 2: reduce-scatter of the gradients + all-gather of the weights; Gloo
              answers _reduce_scatter_base with an all-reduce (PyTorch 2.11), so on Gloo the
              gradients move as in stage 0. Stage 3, per micro-batch: every block all-gathered
              twice (forward and backward), the root (embeddings, final norm) once, gradients
              reduce-scattered (Gloo: all-reduced); nothing is gathered after the step. Both the
              NCCL-equivalent and the Gloo figures are given. The scalar collectives (loss,
              found_inf, per-parameter norms) are left out.

Writes benchmarks/results/zero-stages-cpu-<date>.md and prints it. Not part of the tests.

    .venv/bin/python benchmarks/zero_stages.py                      # gpt2-124m, N = 2 and 4
    .venv/bin/python benchmarks/zero_stages.py --ranks 2 --stages 0 3 --extra --n_layer 4
"""
import argparse
import datetime
import json
import os
import pathlib
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from machine import vm_rss
import machine  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
AMPT = ROOT / "build" / "ampt"
TORCHRUN = pathlib.Path(sys.executable).parent / "torchrun"
MIB = 1 << 20


def rank_processes(parent):
    """{rank: pid} of the ampt processes whose parent is `parent` (torchrun)."""
    found = {}
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid != parent or not os.readlink(entry / "exe").startswith(str(AMPT.resolve())):
                continue
            env = dict(kv.split("=", 1) for kv in (entry / "environ").read_text().split("\0") if "=" in kv)
            found[int(env["RANK"])] = int(entry.name)
        except (OSError, ValueError, KeyError, IndexError):
            continue
    return found


def logged_step(metrics):
    """The last optimizer step rank 0 has written to metrics.jsonl (0: none yet)."""
    try:
        lines = metrics.read_text().splitlines()
    except OSError:
        return 0
    steps = [0]
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line being written
        if "samples_per_sec" in record:
            steps.append(record["step"])
    return max(steps)


def busy_ticks():
    """Clock ticks all CPUs have spent busy (not idle or waiting on I/O) since boot."""
    fields = [int(x) for x in pathlib.Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields) - fields[3] - fields[4]


def cpu_ticks(pids):
    """utime + stime of these processes, in clock ticks."""
    total = 0
    for pid in pids:
        try:
            total += sum(int(x) for x in
                         pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[11:13])
        except OSError:
            pass
    return total


class Sampler:
    """Per rank: the peak VmRSS during steps 2..last, and over the whole run; and how much CPU
    other processes took during steps 2..last (the ranks' timings share the machine with them)."""

    def __init__(self, parent, ranks, metrics, last_step, interval):
        self.parent, self.ranks, self.metrics, self.last = parent, ranks, metrics, last_step
        self.interval = interval
        self.pids, self.window, self.whole = {}, {}, {}
        self.samples, self.done = 0, False
        self.begin = self.end = None  # (time, busy ticks, the ranks' ticks)
        self.closed = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def other_cpu(self):
        """Cores' worth of CPU that processes other than the ranks used during steps 2..last."""
        if not self.begin or not self.end or self.end[0] <= self.begin[0]:
            return None
        ticks = (self.end[1] - self.begin[1]) - (self.end[2] - self.begin[2])
        return max(0.0, ticks / os.sysconf("SC_CLK_TCK") / (self.end[0] - self.begin[0]))

    def run(self):
        while not self.done:
            if len(self.pids) < self.ranks:
                self.pids.update(rank_processes(self.parent))
            step = logged_step(self.metrics)
            in_window = 1 <= step < self.last
            if step >= 1 and not self.closed:  # the window's first sample, and its last
                mark = (time.perf_counter(), busy_ticks(), cpu_ticks(self.pids.values()))
                if self.begin is None:
                    self.begin = mark
                else:
                    self.end = mark
                self.closed = not in_window
            for rank, pid in self.pids.items():
                rss = vm_rss(pid)
                if rss is None:
                    continue
                self.whole[rank] = max(self.whole.get(rank, 0), rss)
                if in_window:
                    self.window[rank] = max(self.window.get(rank, 0), rss)
            self.samples += in_window
            time.sleep(self.interval)

    def stop(self):
        self.done = True
        self.thread.join()


def train_args(opts, stage, out_dir):
    return ["--model", opts.model, "--device", "cpu", "--mixed_precision", "no",
            "--batch_size", str(opts.batch_size), "--block_size", str(opts.block_size),
            "--max_steps", str(opts.steps), "--synthetic_samples", str(opts.samples),
            "--val_fraction", "0", "--loader_workers", "0", "--log_every", "1",
            "--report_to", "jsonl", "--zero_stage", str(stage), "--output_dir", str(out_dir),
            *opts.extra]


def threads_for(opts, ranks):
    return opts.threads or max(1, (os.cpu_count() or 1) // ranks)


def train(opts, ranks, stage, work):
    """One torchrun launch: a dict of what it measured, or of how it failed."""
    out_dir = work / f"n{ranks}-stage{stage}"
    out_dir.mkdir(parents=True)
    cmd = [str(TORCHRUN), "--standalone", "--nproc_per_node", str(ranks), "--no-python",
           str(AMPT), "train", *train_args(opts, stage, out_dir)]
    threads = threads_for(opts, ranks)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MALLOC_MMAP_THRESHOLD_="65536")
    shown = f"OMP_NUM_THREADS={threads} MALLOC_MMAP_THRESHOLD_=65536 "
    if opts.tcmalloc_decommit:
        env["TCMALLOC_AGGRESSIVE_DECOMMIT"] = "true"
        shown += "TCMALLOC_AGGRESSIVE_DECOMMIT=true "
    shown += shlex.join(cmd)
    row = {"ranks": ranks, "stage": stage, "threads": threads, "command": shown}
    load = os.getloadavg()[0]
    with open(out_dir / "stdout", "w+") as out, open(out_dir / "stderr", "w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=ROOT,
                                start_new_session=True)
        sampler = Sampler(proc.pid, ranks, out_dir / "metrics.jsonl", opts.steps, 0.1)
        try:
            proc.wait(timeout=opts.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)  # torchrun and its ranks: our own session
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            row["timed_out"] = True
        row["wall_s"] = time.perf_counter() - start
        sampler.stop()
        out.seek(0)
        err.seek(0)
        text, error = out.read(), err.read()
    row["returncode"] = proc.returncode
    log = text + error
    if m := re.search(r"\[AMP\] Model: .*?([\d,]+) parameters", log):
        row["parameters"] = int(m.group(1).replace(",", ""))
    if m := re.search(r"^.*\[ZeRO\].*$", log, re.M):
        row["zero_line"] = m.group(0).strip()
        if b := re.search(r"=\s*([\d.]+)\s*\(without ZeRO", m.group(0)):
            row["zero_bytes_per_param"] = float(b.group(1))
    row["peak_rss"] = {str(r): v for r, v in sorted(sampler.window.items())}
    row["peak_rss_whole_run"] = {str(r): v for r, v in sorted(sampler.whole.items())}
    row["window_samples"] = sampler.samples
    row["other_cpu_cores"] = sampler.other_cpu()
    row["load_average_before"] = load
    metrics = out_dir / "metrics.jsonl"
    steps = []
    if metrics.exists():
        steps = [json.loads(l) for l in metrics.read_text().splitlines() if l.strip()]
        steps = [s for s in steps if "samples_per_sec" in s and s["step"] >= 2]
    per_step = ranks * opts.batch_size
    row["step_times_s"] = [per_step / s["samples_per_sec"] for s in steps if s["samples_per_sec"]]
    if row["step_times_s"]:
        row["step_time_s"] = statistics.median(row["step_times_s"])
    if proc.returncode != 0:
        row["stderr_tail"] = "\n".join(log.strip().splitlines()[-40:])
        (work / f"failed-n{ranks}-stage{stage}.log").write_text(log)
    for path in out_dir.glob("ckpt-*"):  # the end-of-run checkpoint: 1.5 GB a run for gpt2-124m
        subprocess.run(["rm", "-rf", str(path)], check=False)
    return row


def recommend(opts, ranks, stage):
    """`ampt recommend`'s fp32/O0 total per rank in GiB, its model line, or its error."""
    cmd = [str(AMPT), "recommend", "--model", opts.model, "--batch_size", str(opts.batch_size),
           "--block_size", str(opts.block_size), "--mixed_precision", "no", "--device", "cpu",
           "--world_size", str(ranks), "--zero_stage", str(stage), *opts.extra]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    result = {"command": shlex.join(cmd)}
    if done.returncode != 0:
        result["error"] = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:]
        return result
    lines = done.stdout.splitlines()
    result["model_line"] = next((l for l in lines if l.startswith("Model ")), "")
    header = next((l for l in lines if l.startswith("| precision/opt level")), None)
    row = next((l for l in lines if l.startswith("| fp32/O0 ")), None)
    if header and row:
        names = [c.strip() for c in header.strip("|").split("|")]
        cells = [c.strip() for c in row.strip("|").split("|")]
        result["total_gib"] = float(cells[names.index("total")])
    return result


def dims(model_line):
    """(n_layer, n_embd) from recommend's `Model ...: P parameters (n_layer L, n_embd C, ...)`."""
    layer = re.search(r"n_layer (\d+)", model_line)
    embd = re.search(r"n_embd (\d+)", model_line)
    return (int(layer.group(1)), int(embd.group(1))) if layer and embd else (None, None)


def moved(stage, ranks, params, block_params):
    """Bytes one rank sends per optimizer step (one micro-batch), fp32: (NCCL-equivalent, Gloo)."""
    n, size = ranks, 4 * params
    allreduce = lambda s: 2 * (n - 1) / n * s
    gather = lambda s: (n - 1) / n * s  # all-gather or reduce-scatter
    if stage == 0:
        return allreduce(size), allreduce(size)
    if stage == 1:
        return allreduce(size) + gather(size), allreduce(size) + gather(size)
    if stage == 2:
        return gather(size) + gather(size), allreduce(size) + gather(size)
    if block_params is None:
        return None, None
    weights = 2 * gather(4 * block_params) + gather(4 * (params - block_params))
    return weights + gather(size), weights + allreduce(size)


def machine():
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    name = next((l.split(":", 1)[1].strip() for l in lscpu.splitlines() if l.startswith("Model name")), "?")
    flags = next((l.split(":", 1)[1].split() for l in lscpu.splitlines() if l.startswith("Flags")), [])
    avx512 = sorted(f for f in flags if f.startswith("avx512"))
    isa = ("AVX2" if "avx2" in flags else "no AVX2") + ", " + \
          (f"AVX-512 ({' '.join(avx512)})" if avx512 else "no AVX-512")
    mem = int(re.search(r"MemTotal:\s+(\d+)", open("/proc/meminfo").read()).group(1)) >> 20
    return f"{os.cpu_count()} cores ({name}; {isa}), {mem} GiB RAM"


def torch_version():
    done = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                          capture_output=True, text=True)
    return done.stdout.strip() or "?"


def mib(x):
    return f"{x / MIB:.0f}"


def report(opts, rows, header):
    lines = [f"# ZeRO stages 0-3 on CPU Gloo ranks, {opts.model} ({datetime.date.today()})", "",
             *header, "",
             "| stage | ranks | step time, median s | vs stage 0 | peak RSS per rank, MiB (rank 0 / others) "
             "| `recommend` fp32/O0 per rank, GiB | `[ZeRO]` bytes/param per rank "
             "| bytes moved per step per rank, MiB, computed (NCCL-equivalent / Gloo) "
             "| other processes' CPU, cores |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    base = {r["ranks"]: r.get("step_time_s") for r in rows if r["stage"] == 0}
    for r in rows:
        failed = r["returncode"] != 0
        t = r.get("step_time_s")
        time_s = f"{t:.2f}" if t else "—"
        ratio = f"{t / base[r['ranks']]:.2f}x" if t and base.get(r["ranks"]) else "—"
        rss = r["peak_rss"]
        others = [v for k, v in rss.items() if k != "0"]
        rss_s = (f"{mib(rss['0'])} / {mib(max(others))}" if "0" in rss and others else "—")
        if others and max(others) - min(others) > 64 * MIB:
            rss_s += f" ({mib(min(others))}-{mib(max(others))})"
        rec = r["recommend"]
        rec_s = f"{rec['total_gib']:.2f}" if "total_gib" in rec else "n/a"
        zero = r.get("zero_bytes_per_param")
        zero_s = f"{zero:.2f}" if zero is not None else ("— (no [ZeRO] line)" if not failed else "—")
        nccl, gloo = r.get("moved", (None, None))
        moved_s = f"{nccl / MIB:.0f} / {gloo / MIB:.0f}" if nccl is not None else "—"
        other = r.get("other_cpu_cores")
        other_s = f"{other:.2f}" if other is not None else "—"
        stage = f"{r['stage']}" + (" **failed**" if failed else "")
        lines.append(f"| {stage} | {r['ranks']} | {time_s} | {ratio} | {rss_s} | {rec_s} | {zero_s} "
                     f"| {moved_s} | {other_s} |")
    lines.append("")
    for r in rows:
        if "zero_line" in r:
            lines.append(f"- N={r['ranks']} stage {r['stage']}: `{r['zero_line']}`")
    for r in rows:
        if r["returncode"] != 0:
            lines += ["", f"**N={r['ranks']} stage {r['stage']} failed** (exit {r['returncode']}"
                      f"{', timed out' if r.get('timed_out') else ''}):", "", "```",
                      r["command"], "", r.get("stderr_tail", ""), "```"]
        if "error" in r["recommend"]:
            lines.append(f"- `recommend` for N={r['ranks']} stage {r['stage']}: "
                         f"{' '.join(r['recommend']['error'])}")
    raw = [{k: v for k, v in r.items() if k != "stderr_tail"} for r in rows]
    lines += ["", "Raw figures:", "", "```json", json.dumps(raw, indent=1), "```", ""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="gpt2-124m")
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--stages", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--block_size", type=int, default=64)
    parser.add_argument("--batch_size", type=int, default=1, help="per rank")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--samples", type=int, default=256, help="synthetic token windows")
    parser.add_argument("--threads", type=int, default=0,
                        help="OMP_NUM_THREADS per rank (default: cores // ranks, at least 1)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per launch")
    parser.add_argument("--tcmalloc_decommit", action=argparse.BooleanOptionalAction, default=True,
                        help="TCMALLOC_AGGRESSIVE_DECOMMIT=true: tcmalloc (which ampt links) returns "
                             "freed pages at once, so that the RSS is what the rank holds")
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[],
                        help="further flags for ampt train and recommend (e.g. --n_layer 4); last")
    parser.add_argument("--dir", help="where the runs go (default: a temporary directory on /tmp)")
    parser.add_argument("--out", help="the report (default: benchmarks/results/zero-stages-cpu-<date>.md)")
    opts = parser.parse_args()
    if opts.steps < 3:
        parser.error("--steps must be at least 3 (steps 2..last are measured)")
    started = time.perf_counter()
    rows = []
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(dir=opts.dir) as tmp:
        work = pathlib.Path(tmp)
        for ranks in opts.ranks:
            for stage in opts.stages:
                row = train(opts, ranks, stage, work)
                row["recommend"] = recommend(opts, ranks, stage)
                params = row.get("parameters")
                n_layer, n_embd = dims(row["recommend"].get("model_line", ""))
                if params is None and "model_line" in row["recommend"]:
                    m = re.search(r": ([\d,]+) parameters", row["recommend"]["model_line"])
                    params = int(m.group(1).replace(",", "")) if m else None
                if params:
                    # A GPT-2 block: c_attn 3C^2+3C, attn c_proj C^2+C, c_fc 4C^2+4C, mlp c_proj
                    # 4C^2+C, ln_1 and ln_2 2C each; the root is the rest (wte, wpe, ln_f).
                    blocks = n_layer * (12 * n_embd * n_embd + 13 * n_embd) if n_layer else None
                    row["block_parameters"] = blocks
                    row["moved"] = moved(stage, ranks, params, blocks)
                print(json.dumps({k: v for k, v in row.items() if k != "stderr_tail"}), flush=True)
                if row["returncode"] != 0:
                    print(row.get("stderr_tail", ""), file=sys.stderr, flush=True)
                rows.append(row)
    minutes = (time.perf_counter() - started) / 60
    p = next((r["parameters"] for r in rows if r.get("parameters")), None)
    header = [
        f"Machine: {machine()}; load average {load:.1f} at the start. torch {torch_version()} "
        f"(the LibTorch ampt links), Gloo on loopback.", "",
        f"Settings: `{opts.model}`" + (f" {' '.join(opts.extra)}" if opts.extra else "") +
        (f" ({p:,} parameters)" if p else "") + f", fp32 (`--mixed_precision no`) AdamW, block "
        f"{opts.block_size}, batch {opts.batch_size} per rank, {opts.steps} steps, synthetic "
        f"tokens, `--loader_workers 0`, OMP_NUM_THREADS = cores // ranks (at least 1; 4 ranks "
        f"share 2 cores), one `torchrun --standalone --no-python` launch per row, run one after "
        f"another; {minutes:.0f} minutes in all.", "",
        "How it was measured: step time is rank 0's metrics.jsonl, (ranks x batch) / "
        "samples_per_sec of each of steps 2..last, the median; peak RSS is VmRSS of each rank "
        "process read from /proc every 0.1 s from step 1's metrics line to the last step's "
        "(steps 2..last). " + ("With `TCMALLOC_AGGRESSIVE_DECOMMIT=true` so that freed memory leaves "
        "it: ampt links tcmalloc, which otherwise keeps freed pages in its heap; " if opts.tcmalloc_decommit else
        "Without `TCMALLOC_AGGRESSIVE_DECOMMIT`: the RSS includes pages tcmalloc keeps after "
        "they are freed; ") + "`MALLOC_MMAP_THRESHOLD_=65536` is set as for docs/distributed.md's earlier table, "
        "but it is glibc's and does nothing under the tcmalloc ampt links. `[ZeRO]` "
        "is rank 0's startup line; `recommend` is `ampt recommend` with the same model, batch, "
        "--world_size and --zero_stage, its fp32/O0 total per rank. The bytes moved are "
        "**computed, not measured**: fp32 weights and gradients (4P bytes), ring collectives "
        "(all-reduce 2(N-1)/N of the bytes, reduce-scatter and all-gather (N-1)/N). Stage 0 "
        "all-reduces the gradients; stage 1 also all-gathers the stepped weights; stage 2 "
        "reduce-scatters the gradients (Gloo: an all-reduce, PyTorch 2.11's Gloo answers "
        "_reduce_scatter_base with one) and all-gathers the weights; stage 3 all-gathers each "
        "block twice (forward, backward) and the root (embeddings, ln_f) once, and "
        "reduce-scatters the gradients (Gloo: all-reduce). Scalar collectives are left out, and "
        "so is a stage-3 block that stays gathered from the forward into the backward (counted "
        "as gathered twice). The last column is the CPU that processes other than the ranks "
        "(builds, tests, torchrun itself) used during steps 2..last, from /proc/stat, in cores of "
        f"the {os.cpu_count()}: where it is above about 0.1 the step times are slowed by it.",
    ]
    text = report(opts, rows, header)
    out = pathlib.Path(opts.out) if opts.out else \
        ROOT / "benchmarks" / "results" / f"zero-stages-cpu-{datetime.date.today()}.md"
    machine.write_record(out, text, "cpu")
    print(text)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
