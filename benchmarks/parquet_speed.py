#!/usr/bin/env python3
"""Reading Parquet against reading JSON Lines into tokenized windows: `ampt tokenize` on the same
records in both forms, records/s and peak memory side by side on the CPU.

    .venv/bin/python benchmarks/parquet_speed.py                  # about 3 minutes on 2 cores
    .venv/bin/python benchmarks/parquet_speed.py --records 100000 --repeats 5

The records (seeded) are documents of 20 to 400 words, and chats ("messages", 2 to 4 exchanges)
rendered by the built-in ChatML template. Each is written as JSON Lines and as Parquet by
pyarrow (row groups of --row_group rows, snappy), the Hub's usual form. Each run is a fresh
build/ampt tokenize process (GPT-2's ranks, every core), in turns, --repeats times: the median
wall time is reported with the range beside it (the process's peak RSS, VmHWM, is sampled every
10 ms while it runs, so the timing includes that polling on both sides alike). The
two shards are checked byte for byte equal. Memory: a second, --scale times larger file of each
shows what grows with the file (JSON Lines is read whole; Parquet one row group at a time).
Writes benchmarks/results/parquet-speed-cpu-<date>.md. Not part of the tests.
"""
import argparse
import datetime
import json
import os
import pathlib
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import machine  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
AMPT = ROOT / "build" / "ampt"
RANKS = ROOT / ".deps" / "gpt2.tiktoken"
WORDS = ("the model learns what it is shown , and a chat template decides the format ; "
         "Zürich naïve café 東京 ✓ 42 3.14 tokens loss scaler fp16 bf16 gradient step").split()


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def make(kind, count, seed=0):
    rng = random.Random(seed)
    if kind == "documents":
        return [{"text": words(rng, rng.randint(20, 400)), "id": i} for i in range(count)]
    out = []
    for _ in range(count):
        messages = []
        for _ in range(rng.randint(2, 4)):
            messages.append({"role": "user", "content": words(rng, rng.randint(5, 40))})
            messages.append({"role": "assistant", "content": words(rng, rng.randint(10, 120))})
        out.append({"messages": messages})
    return out


def write(records, dir, name, row_group):
    jsonl = dir / f"{name}.jsonl"
    with open(jsonl, "w") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    parquet = dir / f"{name}.parquet"
    pq.write_table(pa.Table.from_pylist(records), parquet, row_group_size=row_group)
    return jsonl, parquet


def peak_rss(pid):
    """The process's peak resident memory so far (VmHWM, which exec starts afresh; wait4's
    ru_maxrss would count this Python's own memory, forked before the exec), MiB."""
    try:
        text = pathlib.Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    m = re.search(r"^VmHWM:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) / 1024 if m else None


def tokenize(path, out):
    start = time.perf_counter()
    proc = subprocess.Popen([str(AMPT), "tokenize", "--tokenizer", str(RANKS), "--out", str(out), str(path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, peak_rss(proc.pid) or 0)
        time.sleep(0.01)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"ampt tokenize {path} failed: {proc.stderr.read().decode()}")
    return seconds, peak


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=60000)
    ap.add_argument("--row_group", type=int, default=10000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scale", type=int, default=5)
    args = ap.parse_args()
    if not AMPT.exists() or not RANKS.exists():
        sys.exit("build ampt (scripts/dev build) and run scripts/bootstrap.sh first")
    rows = []
    memory = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        for kind in ("documents", "chats"):
            records = make(kind, args.records)
            jsonl, parquet = write(records, tmp, kind, args.row_group)
            times = {"jsonl": [], "parquet": []}
            rss = {}
            for _ in range(args.repeats):
                for form, path in (("jsonl", jsonl), ("parquet", parquet)):
                    seconds, peak = tokenize(path, tmp / f"{kind}-{form}.bin")
                    times[form].append(seconds)
                    rss[form] = max(rss.get(form, 0), peak)
            same = (tmp / f"{kind}-jsonl.bin").read_bytes() == (tmp / f"{kind}-parquet.bin").read_bytes()
            if not same:
                sys.exit(f"{kind}: the Parquet shard differs from the JSON Lines one")
            med = {f: statistics.median(t) for f, t in times.items()}
            rows.append((kind, len(records), jsonl.stat().st_size, parquet.stat().st_size, med, times, rss))
            big = make(kind, args.records * args.scale, seed=1)
            big_jsonl, big_parquet = write(big, tmp, kind + "-big", args.row_group)
            del big
            memory.append((kind, args.scale, {f: tokenize(p, tmp / f"{kind}-big-{f}.bin")[1]
                                              for f, p in (("jsonl", big_jsonl), ("parquet", big_parquet))},
                           rss, big_jsonl.stat().st_size, big_parquet.stat().st_size))
            print(kind, med, rss, memory[-1][2], flush=True)
    lines = [f"# Parquet against JSON Lines into tokenized windows ({datetime.date.today()})", "",
             f"`ampt tokenize` (GPT-2 ranks, every core) on the same records as JSON Lines and as Parquet "
             f"(pyarrow, row groups of {args.row_group} rows, snappy); median of {args.repeats} fresh "
             f"processes in turns, range beside it; the two shards byte for byte equal.", "",
             "| records | count | JSON Lines | Parquet | JSON Lines records/s | Parquet records/s | Parquet / JSON Lines |",
             "|---|---|---|---|---|---|---|"]
    for kind, count, jsize, psize, med, times, _ in rows:
        rate = {f: count / med[f] for f in med}
        lines.append(f"| {kind} | {count} | {jsize / 2**20:.1f} MiB | {psize / 2**20:.1f} MiB | "
                     f"{rate['jsonl']:.0f} ({min(times['jsonl']):.2f}-{max(times['jsonl']):.2f} s) | "
                     f"{rate['parquet']:.0f} ({min(times['parquet']):.2f}-{max(times['parquet']):.2f} s) | "
                     f"{rate['parquet'] / rate['jsonl']:.2f}x |")
    lines += ["", "Peak RSS of the process, MiB, on the file above and on one with --scale times its records:", "",
              "| records | JSON Lines | JSON Lines x scale | Parquet | Parquet x scale |", "|---|---|---|---|---|"]
    for kind, scale, big_rss, rss, jsize, psize in memory:
        lines.append(f"| {kind} | {rss['jsonl']:.0f} | {big_rss['jsonl']:.0f} ({jsize / 2**20:.0f} MiB file, x{scale}) | "
                     f"{rss['parquet']:.0f} | {big_rss['parquet']:.0f} ({psize / 2**20:.0f} MiB file, x{scale}) |")
    out = ROOT / "benchmarks" / "results" / f"parquet-speed-cpu-{datetime.date.today()}.md"
    machine.write_record(out, "\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
