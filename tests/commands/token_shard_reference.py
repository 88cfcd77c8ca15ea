"""Checks a shard written by `ampt tokenize` the way llm.c's and nanoGPT's loaders read it, against
tiktoken's GPT-2 ids.

    token_shard_reference.py RANKS SHARD TEXT_FIELD INPUT...

The shard must be llm.c's layout (a 256-int32 header: magic 20240520, version 1, token count; then
uint16 tokens) holding, for each document of the inputs in order, <|endoftext|> and then
tiktoken's encode_ordinary of the document (a .jsonl file: one document per non-empty line, its
TEXT_FIELD; any other file: its whole text). Prints "ok DOCUMENTS TOKENS" or exits 1 saying where
they differ.
"""
import json
import sys

import numpy as np
import tiktoken
from tiktoken.load import load_tiktoken_bpe
from tiktoken_ext.openai_public import r50k_pat_str as PATTERN

EOT = "<|endoftext|>"


def documents(paths, field):
    for path in paths:
        text = open(path, "rb").read().decode("utf-8", "replace")
        if not path.endswith(".jsonl"):
            yield text
            continue
        for line in text.splitlines():
            if line.strip(" \t"):
                yield json.loads(line)[field]


def main(ranks_path, shard, field, inputs):
    ranks = load_tiktoken_bpe(ranks_path)
    enc = tiktoken.Encoding("gpt2", pat_str=PATTERN, mergeable_ranks=ranks,
                            special_tokens={EOT: len(ranks)})
    header = np.fromfile(shard, dtype=np.int32, count=256)
    if header[0] != 20240520 or header[1] != 1:
        sys.exit(f"header {header[:3]}: not an llm.c GPT-2 shard")
    with open(shard, "rb") as f:
        f.seek(256 * 4)
        tokens = np.frombuffer(f.read(), dtype=np.uint16)
    if len(tokens) != header[2]:
        sys.exit(f"the header says {header[2]} tokens, the file holds {len(tokens)}")
    expected = []
    count = 0
    for document in documents(inputs, field):
        expected.append(enc.eot_token)
        expected.extend(enc.encode_ordinary(document))
        count += 1
    got = tokens.astype(np.int64).tolist()
    if got != expected:
        at = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
        sys.exit(f"ids differ at {at}: ampt {got[at:at + 8]}, tiktoken {expected[at:at + 8]} "
                 f"({len(got)} vs {len(expected)} tokens)")
    print(f"ok {count} {len(got)}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
