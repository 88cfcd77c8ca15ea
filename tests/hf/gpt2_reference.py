#!/usr/bin/env python3
"""Reference GPT-2 checkpoints for ampt's Hugging Face tests, made with transformers (no hub).

    gpt2_reference.py make DIR --n_layer 2 --n_embd 32 --n_head 4 --n_positions 64 --vocab 100
                       [--shard_kb N] [--activation gelu_new] [--seed 0] [--tokenizer RANKS]
        writes DIR/config.json and model.safetensors (or shards) of a GPT2LMHeadModel with
        random weights, and DIR/reference.json: fixed tokens, their logits and the loss; with
        --tokenizer (GPT-2's .tiktoken ranks; --vocab must then be 50257) also GPT-2's tokenizer
        files (vocab.json, merges.txt, tokenizer.json), as a model from the hub has them.
    gpt2_reference.py logits DIR TOKENS_JSON
        prints the logits of a saved model (any GPT-2 directory) for [[ids...], ...] as JSON.
    gpt2_reference.py generate DIR PROMPT N
        prints PROMPT and transformers' greedy continuation of at most N tokens, decoded with the
        directory's tokenizer (what `ampt generate --temperature 0` must print).
    gpt2_reference.py tokenize DIR TEXT
        prints what AutoTokenizer.from_pretrained(DIR) makes of TEXT: its class, ids, eos token
        and model_max_length, as JSON.
"""
import argparse
import json
import pathlib
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def write_tokenizer(ranks_path, out):
    """GPT-2's vocab.json and merges.txt (derived from the ranks as tests/text does), and the
    tokenizer.json and tokenizer_config.json that transformers writes beside them."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "text"))
    from gpt2_reference import gpt2_files
    from tiktoken.load import load_tiktoken_bpe
    from transformers import GPT2Tokenizer
    gpt2_files(load_tiktoken_bpe(ranks_path), pathlib.Path(out))
    GPT2Tokenizer.from_pretrained(out).save_pretrained(out)


def make(args):
    torch.manual_seed(args.seed)
    config = GPT2Config(n_layer=args.n_layer, n_embd=args.n_embd, n_head=args.n_head,
                        n_positions=args.n_positions, vocab_size=args.vocab,
                        activation_function=args.activation, resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0, bos_token_id=args.vocab - 1, eos_token_id=args.vocab - 1)
    model = GPT2LMHeadModel(config).eval()
    # Random weights at the init's scale give near-uniform logits; larger ones test more.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    kwargs = {"max_shard_size": f"{args.shard_kb}KB"} if args.shard_kb else {}
    model.save_pretrained(args.dir, safe_serialization=True, **kwargs)
    if args.tokenizer:
        write_tokenizer(args.tokenizer, args.dir)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, args.vocab, (2, min(12, args.n_positions) + 1), generator=g)
    with torch.no_grad():
        out = model(tokens[:, :-1], labels=tokens[:, :-1])
        logits = out.logits
        # HF shifts labels inside; ampt's targets are the next tokens: compute that loss too.
        next_loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
    json.dump({"tokens": tokens.tolist(), "logits": logits.flatten().tolist(),
               "shape": list(logits.shape), "next_token_loss": next_loss.item()},
              open(f"{args.dir}/reference.json", "w"))


def logits(args):
    model = GPT2LMHeadModel.from_pretrained(args.dir).eval()
    tokens = torch.tensor(json.loads(args.tokens))
    with torch.no_grad():
        print(json.dumps(model(tokens).logits.flatten().tolist()))


def generate(args):
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(args.dir)
    model = GPT2LMHeadModel.from_pretrained(args.dir).eval()
    prompt = torch.tensor([tokenizer.encode(args.prompt)])
    with torch.no_grad():
        out = model.generate(prompt, max_new_tokens=args.n, do_sample=False,
                             attention_mask=torch.ones_like(prompt),
                             pad_token_id=model.config.eos_token_id)
    new = [t for t in out[0, prompt.size(1):].tolist() if t != model.config.eos_token_id]
    sys.stdout.buffer.write(args.prompt.encode() + tokenizer.decode(new).encode() + b"\n")


def tokenize(args):
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(args.dir)
    print(json.dumps({"class": type(tokenizer).__name__, "ids": tokenizer.encode(args.text),
                      "eos": tokenizer.eos_token, "max_length": tokenizer.model_max_length}))


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("dir")
    for name, default in (("n_layer", 2), ("n_embd", 32), ("n_head", 4), ("n_positions", 64),
                          ("vocab", 100), ("shard_kb", 0), ("seed", 0)):
        m.add_argument(f"--{name}", type=int, default=default)
    m.add_argument("--activation", default="gelu_new")
    m.add_argument("--tokenizer", help="GPT-2's .tiktoken ranks: write its tokenizer files too")
    lg = sub.add_parser("logits")
    lg.add_argument("dir")
    lg.add_argument("tokens")
    gen = sub.add_parser("generate")
    gen.add_argument("dir")
    gen.add_argument("prompt")
    gen.add_argument("n", type=int)
    tk = sub.add_parser("tokenize")
    tk.add_argument("dir")
    tk.add_argument("text")
    args = parser.parse_args()
    {"make": make, "logits": logits, "generate": generate, "tokenize": tokenize}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
