"""Reference ids for tests/text: tiktoken and Hugging Face tokenizers on GPT-2's real ranks.

    gpt2_reference.py ids RANKS DIR N      # DIR/case0..N-1 (raw bytes) → DIR/reference.json, and
                                           # DIR/gpt2/{vocab.json,merges.txt}, DIR/hf/tokenizer.json
    gpt2_reference.py classes DIR          # DIR/code_points (one hex per line) → DIR/classes
                                           # (tiktoken's, asked as scripts/gen_unicode_tables.py does)

Bytes reach both libraries as Python does it: bytes.decode("utf-8", "replace").
"""
import json
import pathlib
import sys

import tiktoken
from tiktoken_ext.openai_public import r50k_pat_str as PATTERN  # tiktoken's gpt2 pattern

EOT = "<|endoftext|>"


def gpt2_files(ranks, out):
    """vocab.json and merges.txt as GPT-2 released them, derived from the ranks: one merge per
    token, the pair its own BPE stops at (transformers' TikTokenConverter does the same)."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode
    alphabet = bytes_to_unicode()

    def written(b):
        return "".join(alphabet[x] for x in b)

    def last_pair(token, rank):
        parts = [bytes([b]) for b in token]
        while True:
            best = None
            for i in range(len(parts) - 1):
                r = ranks.get(parts[i] + parts[i + 1])
                if r is not None and r < rank and (best is None or r < best[0]):
                    best = (r, i)
            if best is None:
                return parts
            i = best[1]
            parts[i:i + 2] = [parts[i] + parts[i + 1]]

    vocab = {written(t): r for t, r in ranks.items()}
    vocab[EOT] = len(ranks)
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(token) > 1:
            parts = last_pair(token, rank)
            assert len(parts) == 2, token
            merges.append(written(parts[0]) + " " + written(parts[1]))
    out.mkdir(parents=True, exist_ok=True)
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (out / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")


def ids(ranks_path, work, count):
    from tiktoken.load import load_tiktoken_bpe
    from tokenizers import Tokenizer
    from transformers import GPT2Tokenizer
    ranks = load_tiktoken_bpe(ranks_path)
    enc = tiktoken.Encoding("gpt2", pat_str=PATTERN, mergeable_ranks=ranks,
                            special_tokens={EOT: len(ranks)})
    gpt2_files(ranks, work / "gpt2")
    GPT2Tokenizer.from_pretrained(str(work / "gpt2")).save_pretrained(str(work / "hf"))
    hf = Tokenizer.from_file(str(work / "hf" / "tokenizer.json"))
    cases = []
    for i in range(count):
        text = (work / f"case{i}").read_bytes().decode("utf-8", "replace")
        cases.append({"ordinary": enc.encode_ordinary(text),
                      "allowed": enc.encode(text, allowed_special="all"),
                      "hf": hf.encode(text, add_special_tokens=False).ids})
    (work / "reference.json").write_text(json.dumps({"cases": cases}))


def classes(work):
    """Each code point's class as scripts/gen_unicode_tables.py asks tiktoken for it."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))
    from gen_unicode_tables import tiktoken_classes
    points = [int(line, 16) for line in (work / "code_points").read_text().split()]
    sets = tiktoken_classes(points)
    names = [next((name for name, members in sets.items() if c in members), "other") for c in points]
    (work / "classes").write_text("\n".join(names) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "ids":
        ids(sys.argv[2], pathlib.Path(sys.argv[3]), int(sys.argv[4]))
    else:
        classes(pathlib.Path(sys.argv[2]))
