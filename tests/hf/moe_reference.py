#!/usr/bin/env python3
"""Reference Mixture-of-Experts checkpoints (Qwen3-MoE, Mixtral) for ampt's tests, made with
transformers (no hub), and everything the tests compare in the one process that makes them.

    moe_reference.py make DIR [--flavour qwen3_moe|mixtral] [--coef 0.02]
        writes DIR/config.json and model.safetensors (the published per-expert layout) of a tiny
        random Qwen3MoeForCausalLM (3 layers, the middle one dense through mlp_only_layers, top-2
        of 8 experts not renormalised) or MixtralForCausalLM (2 layers, every one sparse), with
        router_aux_loss_coef --coef; DIR/train.bin (65 uint16 tokens); and DIR/reference.json:
        fixed tokens with their logits, training loss (next-token cross-entropy plus --coef times
        the load-balancing loss) and load-balancing loss (output_router_logits), the greedy continuation of [5, 17, 42, 9], and the losses of 20
        AdamW steps (fp32) on train.bin's 4 windows of 16 + 1 tokens with the aux loss on, and the
        same steps in float64 (how far rounding alone moves the reference).
    moe_reference.py logits DIR TOKENS_JSON
        prints the float32 logits of a saved model for [[ids...], ...] as JSON.
"""
import argparse
import json

import numpy as np
import torch
from transformers import (AutoModelForCausalLM, MixtralConfig, MixtralForCausalLM,
                          Qwen3MoeConfig, Qwen3MoeForCausalLM)

VOCAB = 100
STEPS, BLOCK, LR, BETAS, EPS = 20, 16, 3e-3, (0.9, 0.95), 1e-8


def build(args):
    common = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                  max_position_embeddings=64, tie_word_embeddings=False, bos_token_id=0,
                  eos_token_id=1, rms_norm_eps=1e-5, num_experts_per_tok=2,
                  router_aux_loss_coef=args.coef)
    if args.flavour == "qwen3_moe":
        config = Qwen3MoeConfig(**common, num_hidden_layers=3, num_experts=8,
                                moe_intermediate_size=32, intermediate_size=96,
                                norm_topk_prob=False, mlp_only_layers=[1])
        return Qwen3MoeForCausalLM(config)
    config = MixtralConfig(**common, num_hidden_layers=2, num_local_experts=8,
                           intermediate_size=32, sliding_window=None)
    return MixtralForCausalLM(config)


def load(path, dtype=torch.float32):
    return AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation="eager",
                                                experts_implementation="eager")


def train_losses(model, windows, coef):
    inputs, targets = windows[:, :-1], windows[:, 1:]
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS,
                                  weight_decay=0.0)
    losses = []
    for _ in range(STEPS):
        out = model(input_ids=inputs, output_router_logits=True)
        loss = torch.nn.functional.cross_entropy(out.logits.flatten(0, 1), targets.flatten())
        loss = loss + coef * out.aux_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def make(args):
    torch.manual_seed(args.seed)
    model = build(args).eval()
    # Random weights at the init's scale give near-uniform logits and routing; larger ones test
    # more, and norms away from 1 test that their weights are read.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
        for name, p in model.named_parameters():
            if name.endswith("mlp.gate.weight"):
                p.mul_(20.0)  # decided routing: the top 2 stand apart
    model.save_pretrained(args.dir)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, VOCAB, (2, 13), generator=g)
    data = ((np.arange(65) * 37 + np.arange(65) ** 2) % VOCAB).astype(np.uint16)
    data.tofile(f"{args.dir}/train.bin")
    model = load(args.dir).eval()
    with torch.no_grad():
        out = model(tokens[:, :-1], output_router_logits=True)
        # What transformers' loss with labels is: the cross-entropy plus coef times the aux loss.
        loss = torch.nn.functional.cross_entropy(out.logits.flatten(0, 1), tokens[:, 1:].flatten())
        loss = loss + args.coef * out.aux_loss
        prompt = torch.tensor([[5, 17, 42, 9]])
        generated = model.generate(prompt, max_new_tokens=12, min_new_tokens=12, do_sample=False,
                                   attention_mask=torch.ones_like(prompt), pad_token_id=0)
    windows = torch.from_numpy(data.astype(np.int64))
    windows = torch.stack([windows[s:s + BLOCK + 1] for s in range(0, 64, BLOCK)])
    torch.manual_seed(0)
    fp32 = train_losses(load(args.dir).train(), windows, args.coef)
    fp64 = train_losses(load(args.dir, torch.float64).train(), windows, args.coef)
    json.dump({"tokens": tokens.tolist(), "logits": out.logits.flatten().tolist(),
               "shape": list(out.logits.shape), "next_token_loss": loss.item(),
               "aux_loss": out.aux_loss.item(),
               "generated": generated[0, prompt.size(1):].tolist(),
               "train_losses": fp32, "train_losses_fp64": fp64},
              open(f"{args.dir}/reference.json", "w"))


def logits(args):
    model = load(args.dir).eval()
    with torch.no_grad():
        print(json.dumps(model(torch.tensor(json.loads(args.tokens))).logits.flatten().tolist()))


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("dir")
    m.add_argument("--flavour", choices=["qwen3_moe", "mixtral"], default="qwen3_moe")
    m.add_argument("--coef", type=float, default=0.02)
    m.add_argument("--seed", type=int, default=0)
    lg = sub.add_parser("logits")
    lg.add_argument("dir")
    lg.add_argument("tokens")
    args = parser.parse_args()
    {"make": make, "logits": logits}[args.command](args)


if __name__ == "__main__":
    main()
