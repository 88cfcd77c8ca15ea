#!/usr/bin/env python3
"""ampt's GPT-2 tokenizer against tiktoken, side by side in one session, on the same text.

    .venv/bin/python benchmarks/tokenizer.py              # about 3 minutes on 2 cores
    .venv/bin/python benchmarks/tokenizer.py --mb 8 --threads 4

Corpora: "python", the first --mb MB of the virtualenv's site-packages *.py and *.md files
(sorted paths: code, docstrings, English prose), and "multilingual", Vim's tutor in every
language it ships as UTF-8 (/usr/share/vim/*/tutor/tutor*.utf-8; skipped where Vim is absent).
Implementations, in turns, --repeats times each (the median is reported, the range beside it):
  tiktoken, 1 thread: encode_ordinary(whole text);
  tiktoken, N threads: encode_ordinary_batch over N*4 pieces of the text cut after a newline
    (its own parallel API; the cuts may change a few ids);
  ampt, 1 thread: Tokenizer::encode, and N threads: Tokenizer::encode_parallel (same ids as
    1 thread), each a fresh build/ampt_tokenize_bench process, so its word cache starts empty.
ampt's ids are checked against tiktoken's (count and an order-sensitive checksum). MB/s are wall
clock; "MB per CPU-s" divides by the CPU time of all threads, which a busy machine disturbs less.
Before and after, N concurrent busy loops against one measure how many cores are really free.
Writes benchmarks/results/cpu-<date>-tokenizer.md. Not part of the tests.
"""
import argparse
import datetime
import glob
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

import tiktoken
from tiktoken.load import load_tiktoken_bpe
from tiktoken_ext.openai_public import r50k_pat_str
import machine  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
BENCH = ROOT / "build" / "ampt_tokenize_bench"
RANKS = ROOT / ".deps" / "gpt2.tiktoken"
SITE_PACKAGES = pathlib.Path(tiktoken.__file__).resolve().parent.parent


def corpora(mb):
    files = sorted(p for p in SITE_PACKAGES.rglob("*") if p.suffix in (".py", ".md") and p.is_file())
    python, size = [], 0
    for p in files:
        if size >= mb * 1e6:
            break
        text = p.read_bytes()
        python.append(text)
        size += len(text)
    out = {"python": b"".join(python)[:int(mb * 1e6)]}
    tutors = sorted(glob.glob("/usr/share/vim/*/tutor/tutor*.utf-8"))
    if tutors:
        out["multilingual"] = b"\n".join(pathlib.Path(t).read_bytes() for t in tutors)
    return out


def checksum(ids):
    c = 0
    for i in ids:
        c = (c * 1000003 + i) % 4294967291
    return c


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def newline_pieces(text, count):
    pieces, start = [], 0
    for k in range(1, count):
        cut = text.find("\n", max(start, len(text) * k // count))
        if cut < 0:
            break
        pieces.append(text[start:cut + 1])
        start = cut + 1
    return pieces + [text[start:]]


def free_cores(n):
    """How many cores this session really has, from n concurrent busy loops against one: on a
    shared machine a second thread may find no core free, and then no parallel code gains."""
    loop = [sys.executable, "-c", "x = 0\nfor i in range(10_000_000): x += i"]
    start = time.perf_counter()
    subprocess.run(loop, check=True)
    one = time.perf_counter() - start
    start = time.perf_counter()
    procs = [subprocess.Popen(loop) for _ in range(n)]
    for p in procs:
        p.wait()
    return n * one / (time.perf_counter() - start)


def ampt_run(path, threads):
    proc = subprocess.run([str(BENCH), str(RANKS), str(path), str(threads)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr.strip())
    return json.loads(proc.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=24, help="size of the python corpus in MB")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="N (default: cores)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for needed, how in ((BENCH, "cmake --build build --target ampt_tokenize_bench"),
                        (RANKS, "scripts/bootstrap.sh")):
        if not needed.exists():
            raise SystemExit(f"{needed} not found: run {how}")
    ranks = load_tiktoken_bpe(str(RANKS))
    enc = tiktoken.Encoding("gpt2", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": len(ranks)})
    n = args.threads
    cores_before = free_cores(n)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in corpora(args.mb).items():
            path = pathlib.Path(tmp, name)
            path.write_bytes(data)
            text = data.decode("utf-8", "replace")
            pieces = newline_pieces(text, n * 4)
            runners = {
                "tiktoken, 1 thread": lambda: timed(lambda: enc.encode_ordinary(text)),
                f"tiktoken, {n} threads": lambda: timed(
                    lambda: enc.encode_ordinary_batch(pieces, num_threads=n)),
                "ampt, 1 thread": lambda: ampt_run(path, 1),
                f"ampt, {n} threads": lambda: ampt_run(path, n),
            }
            runs = {label: [] for label in runners}
            reference = None
            for _ in range(args.repeats):  # in turns, so a slow spell of the machine hits all alike
                for label, run in runners.items():
                    result = run()
                    if label.startswith("tiktoken"):
                        ids, wall, cpu = result
                        if label == "tiktoken, 1 thread":
                            reference = (len(ids), checksum(ids))
                        runs[label].append((wall, cpu))
                    else:
                        if (result["tokens"], result["checksum"]) != reference:
                            raise SystemExit(f"{label} on {name}: ids differ from tiktoken's")
                        runs[label].append((result["seconds"], result["cpu_seconds"]))
            mb = len(data) / 1e6
            for label, times in runs.items():
                walls = sorted(t[0] for t in times)
                cpus = sorted(t[1] for t in times)
                rows.append({"corpus": name, "mb": mb, "tokens": reference[0], "impl": label,
                             "mbs": mb / walls[len(walls) // 2],
                             "range": (mb / walls[-1], mb / walls[0]),
                             "mb_per_cpu": mb / cpus[len(cpus) // 2]})
                print(f"{name:12} {label:22} {rows[-1]['mbs']:7.2f} MB/s  "
                      f"{rows[-1]['mb_per_cpu']:7.2f} MB per CPU-s", flush=True)

    cores_after = free_cores(n)
    date = datetime.date.today().isoformat()
    out = ROOT / "benchmarks" / "results" / f"cpu-{date}-tokenizer.md"
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    lines = [f"# GPT-2 tokenizer: ampt vs tiktoken ({date})", "",
             f"{platform.processor() or platform.machine()} CPU, {os.cpu_count()} cores; tiktoken "
             f"{tiktoken.__version__}; ampt git {rev}; `benchmarks/tokenizer.py --mb {args.mb:g} "
             f"--threads {n}`. GPT-2's ranks (.deps/gpt2.tiktoken), no special tokens.",
             f"{args.repeats} runs of each, the implementations taking turns: the median, with the "
             "lowest–highest in brackets. ampt's ids equal tiktoken's (1 thread) in every run.",
             "tiktoken N threads: encode_ordinary_batch over N×4 newline-cut pieces; ampt N threads: "
             "encode_parallel. ampt runs start with an empty word cache.",
             "MB per CPU-s: bytes over the CPU time of all threads, less disturbed by other work.", ""]
    lines += ["This CPU is shared with other work (other builds run at the same time): treat the "
              "wall-clock ratios as indicative. Cores free to this benchmark, from "
              f"{n} concurrent busy loops against one: {cores_before:.1f} before the runs, "
              f"{cores_after:.1f} after (N threads can beat 1 thread by at most that much).", ""]
    for corpus in dict.fromkeys(r["corpus"] for r in rows):
        crows = [r for r in rows if r["corpus"] == corpus]
        ours = {r["impl"]: r for r in crows if r["impl"].startswith("ampt")}
        lines += [f"## {corpus} ({crows[0]['mb']:.1f} MB, {crows[0]['tokens']:,} tokens)", "",
                  "| implementation | MB/s | MB per CPU-s | ampt 1 thread ÷ this | "
                  f"ampt {n} threads ÷ this |", "|---|---:|---:|---:|---:|"]
        for r in crows:
            ratio = lambda label: f"{ours[label]['mbs'] / r['mbs']:.2f}×" if label != r["impl"] else ""
            lines.append(f"| {r['impl']} | {r['mbs']:.2f} ({r['range'][0]:.2f}–{r['range'][1]:.2f}) | "
                         f"{r['mb_per_cpu']:.2f} | {ratio('ampt, 1 thread')} | "
                         f"{ratio(f'ampt, {n} threads')} |")
        lines.append("")
    machine.write_record(out, "\n".join(lines), "cpu")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
