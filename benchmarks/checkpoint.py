#!/usr/bin/env python3
"""Checkpoint saves and loads against the disk they use, side by side in one session.

For one model's training state (gpt2-124m by default: fp32 weights and both AdamW moments,
1.49 GB), each round, in turns:

  save    `ampt train --max_steps 1`: the final save's write (CRC, records, fsync, rename,
          `latest`; from metrics.jsonl) against a plain os.write + fsync of the same bytes from
          memory (what `dd conv=fsync` does), and against the same plain write with writeback
          started as it goes (sync_file_range, as ampt's writer paces the disk), so that a
          difference in pacing is told apart from ampt's own costs. Also the peak RSS.
  pause   a run saving every --save_every steps while it trains: the pause of each periodic save
          (from metrics.jsonl) against one copy of the state in memory (torch, same bytes, same
          thread count), and the run's steady-state throughput against the same run without
          periodic saves.
  load    `ampt train --resume auto` of that checkpoint with nothing left to train, the file's
          pages first dropped from the page cache: the resume's read-and-check time (its log
          line) against a cold plain read of the file, and the process's peak RSS (anonymous and
          file-backed, sampled from /proc every 10 ms).

With --before PATH (an ampt binary from before the background writer), its save (the time the
step-1 run spends after the step) and its resume (process wall time, peak RSS) are measured in
the same rounds. Writes benchmarks/results/<device>-<date>-checkpoint.md. Not part of the tests.

    .venv/bin/python benchmarks/checkpoint.py                       # gpt2-124m, 3 rounds
    .venv/bin/python benchmarks/checkpoint.py --before /tmp/ampt-old --rounds 2
"""
import argparse
import ctypes
import datetime
import json
import os
import pathlib
import platform
import re
import statistics
import subprocess
import tempfile
import threading
import time

import torch
import machine  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
AMPT = ROOT / "build" / "ampt"
CHUNK = 64 << 20


def drop_cache(path):
    """Evicts the file's (clean) pages, so the next read comes from the disk."""
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


class Sampler:
    """Peak RssAnon and RssFile of a process, read from /proc every 10 ms."""

    def __init__(self, pid):
        self.pid, self.anon, self.file, self.done = pid, 0, 0, False
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        while not self.done:
            try:
                text = pathlib.Path(f"/proc/{self.pid}/status").read_text()
            except OSError:
                return
            fields = dict(re.findall(r"^(RssAnon|RssFile):\s+(\d+) kB", text, re.M))
            self.anon = max(self.anon, int(fields.get("RssAnon", 0)) << 10)
            self.file = max(self.file, int(fields.get("RssFile", 0)) << 10)
            time.sleep(0.01)

    def stop(self):
        self.done = True
        self.thread.join()


def run(binary, args, threads, work):
    """Runs ampt: (stdout, wall seconds, peak RSS, peak anonymous RSS, peak file-backed RSS)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    with open(work / "stdout", "w+") as out, open(work / "stderr", "w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen([str(binary), "train", *args], stdout=out, stderr=err, env=env)
        sampler = Sampler(proc.pid)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        sampler.stop()
        out.seek(0)
        err.seek(0)
        text, error = out.read(), err.read()
    if proc.returncode != 0:
        raise SystemExit(f"{binary} {' '.join(args)} failed: {error.strip().splitlines()[-1:]}")
    return text, wall, usage.ru_maxrss << 10, sampler.anon, sampler.file


def model_args(opts, out_dir):
    return ["--model", opts.model, "--device", "cpu", "--mixed_precision", "no",
            "--batch_size", "1", "--block_size", str(opts.block_size),
            "--synthetic_samples", "256", "--val_fraction", "0", "--log_every", "1",
            "--output_dir", str(out_dir)]


def events(out_dir, kind):
    lines = [json.loads(l) for l in (out_dir / "metrics.jsonl").read_text().splitlines()]
    if kind == "checkpoint":
        return [l for l in lines if l.get("event") == "checkpoint"]
    return [l for l in lines if "samples_per_sec" in l]


LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
SYNC_WRITE, SYNC_WAIT = 2, 1 | 2 | 4  # SYNC_FILE_RANGE_WRITE; WAIT_BEFORE | WRITE | WAIT_AFTER


def plain_write(data, path, streamed):
    """os.write in 64 MiB pieces, then fsync; `streamed`: writeback started after each piece and
    the one before it waited for, as ampt's AtomicFile does."""
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    view = memoryview(data)
    for offset in range(0, len(view), CHUNK):
        n = os.write(fd, view[offset:offset + CHUNK])
        if streamed:
            LIBC.sync_file_range(fd, offset, n, SYNC_WRITE)
            if offset >= CHUNK:
                LIBC.sync_file_range(fd, offset - CHUNK, CHUNK, SYNC_WAIT)
                os.posix_fadvise(fd, offset - CHUNK, CHUNK, os.POSIX_FADV_DONTNEED)
    os.fsync(fd)
    os.close(fd)
    seconds = time.perf_counter() - start
    drop_cache(path)
    os.unlink(path)
    return seconds


def plain_read(path, size):
    drop_cache(path)
    buffer = bytearray(CHUNK)
    start = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buffer):
            pass
    return time.perf_counter() - start


def memory_copy(nbytes, threads):
    """The faster of torch's (parallel) copy and libc's memcpy of `nbytes`, pages faulted in."""
    torch.set_num_threads(threads)
    source = torch.ones(nbytes // 4)
    target = torch.empty_like(source)
    target.copy_(source)
    start = time.perf_counter()
    target.copy_(source)
    parallel = time.perf_counter() - start
    start = time.perf_counter()
    ctypes.memmove(target.data_ptr(), source.data_ptr(), nbytes // 4 * 4)
    return min(parallel, time.perf_counter() - start)


def round_trip(opts, work, rounds_done):
    r = {}
    # save: one step, then the final save (training is over: the write runs alone).
    d = work / f"save{rounds_done}"
    out, wall, peak, anon, file_rss = run(AMPT, model_args(opts, d) + ["--max_steps", "1"], opts.threads, work)
    save = events(d, "checkpoint")[-1]
    ckpt = pathlib.Path(save["path"])
    r["bytes"] = save["bytes"]
    r["save_write_s"] = save["write_seconds"]
    r["save_pause_s"] = save["pause_seconds"]
    r["save_peak_rss"] = peak
    data = ckpt.read_bytes()
    # Each pair in the opposite order every other round: the disk's speed drifts.
    for streamed in (False, True) if rounds_done % 2 == 0 else (True, False):
        key = "streamed_write_s" if streamed else "plain_write_s"
        r[key] = plain_write(data, work / "plain.bin", streamed)
    del data

    # load: nothing left to train; the resume reads and checks the whole file.
    def ampt_load():
        drop_cache(ckpt)
        out, wall, peak, anon, file_rss = run(AMPT, model_args(opts, d) + ["--max_steps", "1", "--resume", "auto"], opts.threads, work)
        r["load_s"] = float(re.search(r"\) in ([0-9.]+) s:", out).group(1))
        r["load_wall_s"] = wall
        r["load_peak_rss"], r["load_peak_anon"], r["load_peak_file"] = peak, anon, file_rss

    def plain():
        r["plain_read_s"] = plain_read(ckpt, r["bytes"])

    for measure in (plain, ampt_load) if rounds_done % 2 == 0 else (ampt_load, plain):
        measure()
    if opts.before:
        b = work / f"before{rounds_done}"
        out, wall, peak, _, _ = run(opts.before, model_args(opts, b) + ["--max_steps", "1"], opts.threads, work)
        summary = json.loads((b / "summary.json").read_text())
        step_s = 1.0 / events(b, "steps")[-1]["samples_per_sec"]
        r["before_save_s"] = summary["seconds"] - step_s
        r["before_save_peak_rss"] = peak
        ckpt_b = next(b.glob("ckpt-*.pt"))
        drop_cache(ckpt_b)
        out, wall, peak, anon, file_rss = run(opts.before, model_args(opts, b) + ["--max_steps", "1", "--resume", "auto"], opts.threads, work)
        r["before_load_wall_s"] = wall
        r["before_load_peak_rss"] = peak
    # pause: periodic saves while training, and the same run without them.
    steps = 3 * opts.save_every
    p = work / f"pause{rounds_done}"
    run(AMPT, model_args(opts, p) + ["--max_steps", str(steps), "--save_every", str(opts.save_every)], opts.threads, work)
    periodic = events(p, "checkpoint")[:-1]
    r["pauses_s"] = [e["pause_seconds"] for e in periodic]
    r["waits_s"] = [e["wait_seconds"] for e in periodic]
    r["periodic_write_s"] = [e["write_seconds"] for e in periodic]
    r["with_saves_tps"] = json.loads((p / "summary.json").read_text())["tokens_per_sec"]
    q = work / f"nosave{rounds_done}"
    run(AMPT, model_args(opts, q) + ["--max_steps", str(steps)], opts.threads, work)
    r["without_saves_tps"] = json.loads((q / "summary.json").read_text())["tokens_per_sec"]
    r["copy_s"] = memory_copy(r["bytes"], opts.threads)
    for path in [*work.glob("*/ckpt-*.pt")]:
        path.unlink()
    return r


def gb(x):
    return f"{x / 1e9:.2f} GB"


def gib(x):
    return f"{x / 2**30:.2f} GiB"


def median(rows, key):
    return statistics.median(r[key] for r in rows)


def report(opts, rows, machine):
    size = rows[0]["bytes"]
    lines = [f"# Checkpoint save and load, {opts.model} on CPU ({datetime.date.today()})", "",
             f"Machine: {machine}.", "",
             f"State: {opts.model} (block_size {opts.block_size}, batch 1), fp32 weights and both "
             f"AdamW moments: a {gb(size)} checkpoint. {len(rows)} rounds in turns; medians, "
             "with every round's figures below. Ratios are within one round, side by side.", ""]
    rows_md = ["| round | ampt write | plain write+fsync | ratio | plain write, streamed | ratio | "
               "ampt load (read+check) | plain cold read | ratio | pause per save | "
               "one memcpy of the state |",
               "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    rate = lambda seconds: f"{size / seconds / 1e6:.0f} MB/s ({seconds:.2f} s)"
    for i, r in enumerate(rows):
        pauses = ", ".join(f"{p:.2f}" for p in r["pauses_s"])
        rows_md.append(f"| {i + 1} | {rate(r['save_write_s'])} | {rate(r['plain_write_s'])} | "
                       f"{r['plain_write_s'] / r['save_write_s']:.2f} | "
                       f"{rate(r['streamed_write_s'])} | "
                       f"{r['streamed_write_s'] / r['save_write_s']:.2f} | {rate(r['load_s'])} | "
                       f"{rate(r['plain_read_s'])} | {r['plain_read_s'] / r['load_s']:.2f} | "
                       f"{pauses} s | {r['copy_s']:.2f} s |")
    write_ratio = statistics.median(r["plain_write_s"] / r["save_write_s"] for r in rows)
    streamed_ratio = statistics.median(r["streamed_write_s"] / r["save_write_s"] for r in rows)
    read_ratio = statistics.median(r["plain_read_s"] / r["load_s"] for r in rows)
    pause = statistics.median(p for r in rows for p in r["pauses_s"])
    lines += [f"- **Save bandwidth: {write_ratio:.2f}x** a plain write + fsync of the same bytes, "
              f"**{streamed_ratio:.2f}x** the same plain write paced as ampt paces it (medians of "
              "the rounds' ratios).",
              f"- **Training pause per periodic save: {pause:.2f} s** (median), against "
              f"{median(rows, 'copy_s'):.2f} s for one in-memory copy of the state "
              f"({sum(w > 0 for r in rows for w in r['waits_s'])} of "
              f"{sum(len(r['waits_s']) for r in rows)} pauses waited for an earlier write, "
              f"{max(w for r in rows for w in r['waits_s']):.2f} s at most); the write went on in "
              "the background for "
              f"{statistics.median(w for r in rows for w in r['periodic_write_s']):.2f} s.",
              f"- **Load (read and CRC check): {read_ratio:.2f}x** a cold plain read of the file.",
              f"- Steady-state throughput with a save every {opts.save_every} steps: "
              f"{statistics.median(r['with_saves_tps'] / r['without_saves_tps'] for r in rows):.2f}x "
              "the same run without them (the background write shares the CPU with training).",
              f"- Peak RSS: saving {gib(median(rows, 'save_peak_rss'))}; resuming "
              f"{gib(median(rows, 'load_peak_rss'))}, of which "
              f"{gib(median(rows, 'load_peak_anon'))} anonymous and "
              f"{gib(median(rows, 'load_peak_file'))} file-backed (the mapped checkpoint: page "
              "cache the kernel can reclaim).", ""]
    if opts.before:
        lines += [f"Before (`{opts.before}`, torch::pickle_save and pickle_load, synchronous): save "
                  f"{median(rows, 'before_save_s'):.2f} s (peak RSS "
                  f"{gib(median(rows, 'before_save_peak_rss'))}), resume process "
                  f"{median(rows, 'before_load_wall_s'):.2f} s (peak RSS "
                  f"{gib(median(rows, 'before_load_peak_rss'))}); after: save "
                  f"{median(rows, 'save_pause_s') + median(rows, 'save_write_s'):.2f} s "
                  f"(snapshot + write), resume process {median(rows, 'load_wall_s'):.2f} s.", ""]
    lines += rows_md + ["", "Raw figures:", "", "```json", json.dumps(rows, indent=1), "```", ""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="gpt2-124m")
    parser.add_argument("--block_size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--save_every", type=int, default=4)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--before", help="an older ampt binary to measure in the same rounds")
    parser.add_argument("--dir", help="where to write (default: a temporary directory on /tmp)")
    opts = parser.parse_args()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    mem = int(re.search(r"MemTotal:\s+(\d+)", open("/proc/meminfo").read()).group(1)) >> 20
    with tempfile.TemporaryDirectory(dir=opts.dir) as tmp:
        work = pathlib.Path(tmp)
        disk = subprocess.run(["df", "-h", "--output=source,fstype,size", str(work)], capture_output=True, text=True).stdout.split("\n")[1]
        load = os.getloadavg()[0]
        machine = (f"{os.cpu_count()} cores ({cpu}), {mem} GiB RAM, disk {' '.join(disk.split())}, "
                   f"load average {load:.1f} at the start")
        rows = []
        for i in range(opts.rounds):
            rows.append(round_trip(opts, work, i))
            print(json.dumps(rows[-1]), flush=True)
    text = report(opts, rows, machine)
    out = ROOT / "benchmarks" / "results" / f"cpu-{datetime.date.today()}-checkpoint.md"
    machine.write_record(out, text, "cpu")
    print(text)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
