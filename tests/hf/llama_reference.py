#!/usr/bin/env python3
"""Reference Llama, Qwen2, Qwen3 and Mistral checkpoints for ampt's tests, made with
transformers (no hub).

    llama_reference.py make DIR [--flavour llama|qwen2|qwen3|mistral] [--n_layer 2] [--hidden 64]
                       [--heads 4] [--kv_heads 2] [--head_dim 0] [--inter 128] [--vocab 100]
                       [--positions 64] [--llama3] [--tied] [--shard_kb N]
                       [--dtype float32|bfloat16|float16] [--seed 0] [--tokenizer RANKS]
                       [--sliding_window N [--max_window_layers M]]
        writes DIR/config.json and the safetensors weights (sharded with --shard_kb) of a
        LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM (q/k norms) or MistralForCausalLM
        with random weights (rope_scaling llama3 with --llama3; --head_dim other than 0: heads of
        that width, whatever hidden / heads is; --sliding_window: Mistral's window over every
        layer, Qwen's use_sliding_window over the layers from --max_window_layers on), and
        DIR/reference.json: fixed tokens, their logits and next-token loss; with
        --tokenizer (GPT-2's .tiktoken ranks; --vocab must then be 50257) GPT-2's tokenizer files.
    llama_reference.py logits DIR TOKENS_JSON
        prints the float32 logits of a saved model for [[ids...], ...] as JSON.
    llama_reference.py generate DIR TOKENS_JSON N
        prints transformers' greedy continuation (N new ids) of the prompt ids as JSON.
    llama_reference.py finetune DIR TOKENS.bin BLOCK STEPS LR BETA1 BETA2 EPS
        trains the model in float32 on every window of BLOCK + 1 tokens of the uint16 file (one
        batch, as ampt cuts them) with torch.optim.AdamW, and prints each step's loss as JSON.
"""
import argparse
import importlib.util
import json
import pathlib

import numpy as np
import torch
from transformers import (AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, MistralConfig,
                          MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config,
                          Qwen3ForCausalLM)


def make(args):
    torch.manual_seed(args.seed)
    common = dict(hidden_size=args.hidden, intermediate_size=args.inter,
                  num_hidden_layers=args.n_layer, num_attention_heads=args.heads,
                  num_key_value_heads=args.kv_heads, vocab_size=args.vocab,
                  max_position_embeddings=args.positions, tie_word_embeddings=args.tied,
                  bos_token_id=0, eos_token_id=1, rms_norm_eps=1e-5)
    if args.llama3:
        common["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0,
                                  "original_max_position_embeddings": args.positions // 4}
        common["rope_theta"] = 500000.0
    if args.head_dim:
        common["head_dim"] = args.head_dim
    window = args.sliding_window or None
    qwen_window = dict(use_sliding_window=window is not None, sliding_window=window,
                       max_window_layers=args.max_window_layers)
    if args.flavour == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**common, **qwen_window))
    elif args.flavour == "qwen3":
        model = Qwen3ForCausalLM(Qwen3Config(**common, **qwen_window))
    elif args.flavour == "mistral":
        model = MistralForCausalLM(MistralConfig(**common, sliding_window=window))
    else:
        model = LlamaForCausalLM(LlamaConfig(**common))
    model.eval()
    # Random weights at the init's scale give near-uniform logits; larger ones test more, and
    # norms away from 1 test that their weights are read.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    model = model.to(getattr(torch, args.dtype))
    kwargs = {"max_shard_size": f"{args.shard_kb}KB"} if args.shard_kb else {}
    model.save_pretrained(args.dir, **kwargs)
    if args.tokenizer:
        # Under another name: tests/text has a gpt2_reference module of its own, which this one
        # imports.
        spec = importlib.util.spec_from_file_location(
            "hf_gpt2_reference", pathlib.Path(__file__).resolve().parent / "gpt2_reference.py")
        gpt2 = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(gpt2)
        gpt2.write_tokenizer(args.tokenizer, args.dir)
    # The model as from_pretrained reads the files back: in half precision the one in memory
    # differs from it by up to 1.2e-4 in the logits (a bf16 Qwen2 with a sliding layer).
    model = load(args.dir)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, args.vocab, (2, min(12, args.positions) + 1), generator=g)
    with torch.no_grad():
        logits = model(tokens[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
    json.dump({"tokens": tokens.tolist(), "logits": logits.flatten().tolist(),
               "shape": list(logits.shape), "next_token_loss": loss.item()},
              open(f"{args.dir}/reference.json", "w"))


def load(path):
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def logits(args):
    model = load(args.dir)
    with torch.no_grad():
        print(json.dumps(model(torch.tensor(json.loads(args.tokens))).logits.flatten().tolist()))


def generate(args):
    model = load(args.dir)
    prompt = torch.tensor([json.loads(args.tokens)])
    with torch.no_grad():
        out = model.generate(prompt, max_new_tokens=args.n, min_new_tokens=args.n, do_sample=False,
                             attention_mask=torch.ones_like(prompt), pad_token_id=0)
    print(json.dumps(out[0, prompt.size(1):].tolist()))


def train_losses(model, args, first_grads=None):
    """Trains `model`'s parameters that require grad (all of them, or a LoRA model's adapters) on
    the windows of args.tokens with AdamW, and returns each step's loss; fills `first_grads`, when
    given, with the first step's gradients by parameter name."""
    tokens = torch.from_numpy(np.fromfile(args.tokens, dtype=np.uint16).astype(np.int64))
    starts = range(0, tokens.numel() - args.block, args.block)
    windows = torch.stack([tokens[s:s + args.block + 1] for s in starts])
    inputs, targets = windows[:, :-1], windows[:, 1:]
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=args.lr, betas=(args.beta1, args.beta2),
                                  eps=args.eps, weight_decay=0.0)
    losses = []
    for _ in range(args.steps):
        logits = model(input_ids=inputs).logits
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
        optimizer.zero_grad()
        loss.backward()
        if first_grads is not None and not losses:
            first_grads.update({n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad})
        optimizer.step()
        losses.append(loss.item())
    return losses


def finetune(args):
    torch.manual_seed(0)
    print(json.dumps(train_losses(load(args.dir).train(), args)))


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("dir")
    m.add_argument("--flavour", choices=["llama", "qwen2", "qwen3", "mistral"], default="llama")
    for name, default in [("n_layer", 2), ("hidden", 64), ("heads", 4), ("kv_heads", 2),
                          ("head_dim", 0),
                          ("inter", 128), ("vocab", 100), ("positions", 64), ("shard_kb", 0),
                          ("seed", 0), ("sliding_window", 0), ("max_window_layers", 0)]:
        m.add_argument(f"--{name}", type=int, default=default)
    m.add_argument("--llama3", action="store_true")
    m.add_argument("--tied", action="store_true")
    m.add_argument("--dtype", default="float32")
    m.add_argument("--tokenizer", help="GPT-2's .tiktoken ranks: write its tokenizer files too")
    lg = sub.add_parser("logits")
    lg.add_argument("dir")
    lg.add_argument("tokens")
    gen = sub.add_parser("generate")
    gen.add_argument("dir")
    gen.add_argument("tokens")
    gen.add_argument("n", type=int)
    ft = sub.add_parser("finetune")
    ft.add_argument("dir")
    ft.add_argument("tokens")
    for name in ["block", "steps"]:
        ft.add_argument(name, type=int)
    for name in ["lr", "beta1", "beta2", "eps"]:
        ft.add_argument(name, type=float)
    args = parser.parse_args()
    {"make": make, "logits": logits, "generate": generate, "finetune": finetune}[args.command](args)


if __name__ == "__main__":
    main()
