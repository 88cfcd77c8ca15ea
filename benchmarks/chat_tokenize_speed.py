#!/usr/bin/env python3
"""`ampt tokenize` on multi-turn chats rendered by a model's own Jinja template, against
transformers' apply_chat_template + its tokenizer in Python, records/s side by side on the CPU.

    .venv/bin/python benchmarks/chat_tokenize_speed.py              # 10,000 chats, about a minute
    .venv/bin/python benchmarks/chat_tokenize_speed.py --chats 2000 --template qwen3.jinja

The chats (seeded): a system turn, 2 to 4 user/assistant exchanges of a few sentences with
Unicode, and in every third chat a tool call, its result and the record's "tools" list. The
template is one of tests/text/chat_templates/ (default Qwen2.5-Instruct's, which has tools);
the tokenizer a byte-level BPE of 8,000 tokens trained on the chats with the template's special
tokens, written with the template into tokenizer_config.json, so both sides read the same files.
  transformers: apply_chat_template(messages, tools=tools, tokenize=True) per record, one
    process, one thread (what TRL's and axolotl's dataset map runs per worker);
  ampt: build/ampt tokenize --tokenizer DIR --out FILE chats.jsonl with --threads 1 and with
    every core: the ids and the loss mask (which renders each assistant turn twice more, to
    tell its tokens). Read from its own report, best of --repeats runs.
The ids are checked equal: ampt's shard against transformers' ids, record by record.
Writes benchmarks/results/chat-tokenize-cpu-<date>.md. Not part of the tests.
"""
import argparse
import datetime
import json
import os
import pathlib
import random
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from machine import device_line  # noqa: E402
import machine  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
AMPT = ROOT / "build" / "ampt"
TEMPLATES = ROOT / "tests" / "text" / "chat_templates"
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
                 "<tool_response>", "</tool_response>", "<think>", "</think>"]
WORDS = ("the model learns what it is shown , and a chat template decides the format ; "
         "Zürich naïve café 東京 ✓ 42 3.14 tokens loss scaler fp16 bf16 gradient step").split()
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather",
                                           "parameters": {"type": "object", "properties": {
                                               "city": {"type": "string"}}, "required": ["city"]}}}]


def sentence(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def make_chats(count, seed=0):
    rng = random.Random(seed)
    chats = []
    for c in range(count):
        messages = [{"role": "system", "content": sentence(rng, 8)}]
        for _ in range(rng.randint(2, 4)):
            messages.append({"role": "user", "content": " ".join(sentence(rng, rng.randint(5, 20)) for _ in range(2))})
            messages.append({"role": "assistant", "content": " ".join(sentence(rng, rng.randint(5, 30)) for _ in range(3))})
        record = {"messages": messages}
        if c % 3 == 0:
            city = rng.choice(["Zürich", "Paris", "東京"])
            messages += [{"role": "user", "content": f"Weather in {city}?"},
                         {"role": "assistant", "content": "", "tool_calls": [
                             {"type": "function", "function": {"name": "get_weather", "arguments": {"city": city}}}]},
                         {"role": "tool", "content": json.dumps({"temp": rng.randint(-5, 30)})},
                         {"role": "assistant", "content": sentence(rng, 10)}]
            record["tools"] = TOOLS
        chats.append(record)
    return chats


def train_tokenizer(chats, template, out):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    pattern = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    corpus = [m["content"] for chat in chats[:2000] for m in chat["messages"]]
    tok.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=8000, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.add_special_tokens(QWEN_SPECIALS)
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": None, "eos_token": "<|im_end|>", "add_bos_token": False, "chat_template": template}))


def transformers_run(tokenizer_dir, chats):
    from transformers import AutoTokenizer
    hf = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    start = time.perf_counter()
    ids = [hf.apply_chat_template(c["messages"], tools=c.get("tools"), tokenize=True, return_dict=False)
           for c in chats]
    return time.perf_counter() - start, ids


def ampt_run(tokenizer_dir, data, out, threads):
    result = subprocess.run([str(AMPT), "tokenize", "--tokenizer", str(tokenizer_dir), "--out", str(out),
                             "--threads", str(threads), str(data)], capture_output=True, text=True, check=True)
    return float(re.search(r" in ([0-9.]+) s ", result.stdout).group(1))


def shard_ids(path, count):
    import numpy as np
    header = np.fromfile(path, dtype=np.int32, count=256)
    tokens = np.fromfile(path, dtype=np.uint16, offset=1024)[: header[2]]
    mask = np.fromfile(str(path).replace(".bin", ".mask"), dtype=np.uint8, offset=1024)[: header[2]]
    starts = list(np.flatnonzero(mask & 2)) + [len(tokens)]
    assert len(starts) == count + 1
    return [tokens[a:b].tolist() for a, b in zip(starts, starts[1:])]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=10000)
    parser.add_argument("--template", default="qwen2.5-instruct.jinja")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    chats = make_chats(args.chats)
    template = (TEMPLATES / args.template).read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        train_tokenizer(chats, template, work / "tok")
        data = work / "chats.jsonl"
        data.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in chats), encoding="utf-8")
        python_s, python_ids = transformers_run(work / "tok", chats)
        cores = os.cpu_count()
        ampt_s = {t: min(ampt_run(work / "tok", data, work / f"out{t}.bin", t) for _ in range(args.repeats))
                  for t in (1, cores)}
        same = shard_ids(work / f"out{cores}.bin", len(chats)) == [list(i) for i in python_ids]
        tokens = sum(len(i) for i in python_ids)
    rate = lambda s: len(chats) / s  # noqa: E731
    rows = [("transformers apply_chat_template + tokenizer, 1 process", python_s),
            ("ampt tokenize, 1 thread (ids and loss mask)", ampt_s[1]),
            (f"ampt tokenize, {cores} threads (ids and loss mask)", ampt_s[cores])]
    lines = [f"# Chat tokenization: ampt vs transformers ({datetime.date.today()})", "",
             f"Device: {device_line('cpu')}. {len(chats):,} chats ({tokens:,} tokens), template "
             f"`{args.template}`, a byte-level BPE of 8,000 tokens; ampt best of {args.repeats}. "
             f"Ids equal record for record: {'yes' if same else 'NO'}.", "",
             "| | seconds | records/s | vs transformers |", "|---|---:|---:|---:|"]
    lines += [f"| {name} | {s:.2f} | {rate(s):,.0f} | {python_s / s:.2f}x |" for name, s in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    out = ROOT / "benchmarks" / "results" / f"chat-tokenize-cpu-{datetime.date.today()}.md"
    machine.write_record(out, text, "cpu")
    if not same:
        sys.exit("ampt's ids differ from transformers'")


if __name__ == "__main__":
    main()
