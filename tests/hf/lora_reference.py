#!/usr/bin/env python3
"""Reference LoRA adapters for ampt's tests, made and trained with peft on a transformers base
(tests/hf/gpt2_reference.py or llama_reference.py make it; no hub).

    lora_reference.py init BASE OUT --rank R --alpha A --targets t1,t2 [--parameters p1,p2] [--seed 0]
        writes a peft LoRA adapter of BASE (A from peft's init under the seed; B random too, so
        that the adapter changes the logits from the first step) with save_pretrained; with
        --parameters, adapters on those 3-D expert weights too (peft's target_parameters).
    lora_reference.py finetune BASE ADAPTER TOKENS.bin BLOCK STEPS LR BETA1 BETA2 EPS [--base_dtype nf4]
                      [--grads OUT.safetensors]
        trains the adapter in float32 (PeftModel.from_pretrained(..., is_trainable=True)) on every
        window of BLOCK + 1 tokens of the uint16 file (one batch, as ampt cuts them) with
        torch.optim.AdamW over the trainable parameters, and prints each step's loss as JSON;
        with --base_dtype nf4 on a bitsandbytes 4-bit base (QLoRA); with --grads, writes the first
        step's adapter gradients under ampt's names (a Llama's: "model." and peft's prefix and
        adapter name taken off, as ampt reads an adapter).
    lora_reference.py check BASE ADAPTER MERGED TOKENS_JSON N [--base_dtype nf4]
        prints, as JSON, the float32 logits of [[ids...], ...] from BASE with ADAPTER in peft
        ("peft"), from BASE alone ("base") and from the merged model MERGED ("merged"), and
        peft's greedy continuation of N ids after the first row's first three ("generated");
        with --base_dtype nf4 BASE is the bitsandbytes 4-bit base, for peft and alone.
"""
import argparse
import json
import pathlib
import sys

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "precision"))
import llama_reference  # noqa: E402  (its training loop is the reference for both)
import nf4_reference  # noqa: E402  (bitsandbytes' dequantize_4bit in its own block layout)


def base_model(path):
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)


def init(args):
    torch.manual_seed(args.seed)
    base = base_model(args.base)
    config = LoraConfig(r=args.rank, lora_alpha=args.alpha, lora_dropout=0.0,
                        target_modules=args.targets.split(","), task_type="CAUSAL_LM",
                        target_parameters=args.parameters.split(",") if args.parameters else None,
                        fan_in_fan_out=base.config.model_type == "gpt2")
    model = get_peft_model(base, config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn_like(p) * 0.05)
    model.save_pretrained(args.out)


def with_adapter(base, adapter, trainable=False, base_dtype="auto"):
    model = base_model(base)
    if base_dtype == "nf4":
        quantize_nf4(model)
    return PeftModel.from_pretrained(model, adapter, is_trainable=trainable)


def quantize_nf4(model):
    """QLoRA's base: every Linear but the head a bitsandbytes Linear4bit (nf4, blocks of 64,
    double quantization) of its fp32 weight, computing in fp32, as transformers' BitsAndBytesConfig
    (load_in_4bit, bnb_4bit_quant_type nf4, bnb_4bit_use_double_quant) makes it. Each GEMM is its
    weight dequantized in the blocks quantize_4bit wrote (nf4_reference.flat_dequantize) and an
    fp32 F.linear, as bitsandbytes computes it on a GPU, in training and in eval alike: not its
    CPU kernels, whose AVX-512 dequantize_4bit reads the wrong blocks where rows are not a
    multiple of 64 and whose AVX-512 BF16 eval path repacks the weight per row (rows a multiple of
    64 only) and multiplies in bf16."""
    import bitsandbytes as bnb
    nf4_reference.flat_dequantize()
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if not isinstance(child, torch.nn.Linear) or child is model.get_output_embeddings():
                continue
            layer = bnb.nn.Linear4bit(child.in_features, child.out_features, bias=child.bias is not None,
                                      compute_dtype=torch.float32, compress_statistics=True,
                                      quant_type="nf4")
            layer.support_avx512bf16_for_cpu = False
            layer.weight = bnb.nn.Params4bit(child.weight.data.clone(), requires_grad=False,
                                             compress_statistics=True, quant_type="nf4",
                                             blocksize=64)._quantize("cpu")
            if child.bias is not None:
                layer.bias = torch.nn.Parameter(child.bias.data.clone(), requires_grad=False)
            setattr(parent, name, layer)


def finetune(args):
    torch.manual_seed(0)
    if args.base_dtype == "nf4":
        torch.set_num_threads(1)  # the nf4 offset's fp32 mean, in one order
    model = with_adapter(args.base, args.adapter, trainable=True, base_dtype=args.base_dtype).train()
    grads = {} if args.grads else None
    print(json.dumps(llama_reference.train_losses(model, args, grads)))
    if args.grads:
        from safetensors.torch import save_file
        save_file({n.removeprefix("base_model.model.model.").replace(".default", ""): g
                   for n, g in grads.items()}, args.grads)


def check(args):
    """What ampt's exports must give, in one process: the logits of TOKENS_JSON from the base
    with ADAPTER in peft, from the base alone and from MERGED in transformers alone, and peft's
    greedy continuation (N new ids) of the first row's first three ids."""
    tokens = torch.tensor(json.loads(args.tokens))
    model = with_adapter(args.base, args.adapter, base_dtype=args.base_dtype).eval()
    with torch.no_grad():
        adapted = model(input_ids=tokens).logits
        prompt = tokens[:1, :3]
        generated = model.generate(input_ids=prompt, max_new_tokens=args.n, min_new_tokens=args.n,
                                   do_sample=False, attention_mask=torch.ones_like(prompt),
                                   pad_token_id=0)
        base = base_model(args.base)
        if args.base_dtype == "nf4":
            quantize_nf4(base)
        base = base.eval()(input_ids=tokens).logits
        merged = base_model(args.merged).eval()(input_ids=tokens).logits
    print(json.dumps({"peft": adapted.flatten().tolist(), "base": base.flatten().tolist(),
                      "merged": merged.flatten().tolist(),
                      "generated": generated[0, prompt.size(1):].tolist()}))


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    i = sub.add_parser("init")
    i.add_argument("base")
    i.add_argument("out")
    i.add_argument("--rank", type=int, required=True)
    i.add_argument("--alpha", type=float, required=True)
    i.add_argument("--targets", required=True)
    i.add_argument("--parameters", default="")
    i.add_argument("--seed", type=int, default=0)
    ft = sub.add_parser("finetune")
    ft.add_argument("base")
    ft.add_argument("adapter")
    ft.add_argument("tokens")
    for name in ["block", "steps"]:
        ft.add_argument(name, type=int)
    for name in ["lr", "beta1", "beta2", "eps"]:
        ft.add_argument(name, type=float)
    ft.add_argument("--base_dtype", choices=["auto", "nf4"], default="auto")
    ft.add_argument("--grads", default="")
    ch = sub.add_parser("check")
    for name in ["base", "adapter", "merged", "tokens"]:
        ch.add_argument(name)
    ch.add_argument("n", type=int)
    ch.add_argument("--base_dtype", choices=["auto", "nf4"], default="auto")
    args = parser.parse_args()
    {"init": init, "finetune": finetune, "check": check}[args.command](args)


if __name__ == "__main__":
    main()
