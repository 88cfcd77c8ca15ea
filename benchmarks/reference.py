#!/usr/bin/env python3
"""PyTorch's own AMP training loop for ampt's models: the reference ampt is measured against.

The models replicate src/ampt/models exactly (architecture, parameter names and counts, GPT-2
initialisation); the loop is the one PyTorch users write: torch.autocast, torch.amp.GradScaler
(fp16), fused AdamW with weight decay on matrices only, clip_grad_norm_, warmup + cosine LR,
optionally torch.compile. One configuration per process, so peak memory is this run's own.

    python benchmarks/reference.py --model gpt-tiny --precision bf16 --steps 40 [--compile]
    python benchmarks/reference.py --model gpt2-124m --count-parameters

Prints one JSON line: samples/s and tokens/s over the timed (second) half of the steps, step
time, peak memory (CUDA allocator peak, or process peak RSS on CPU) and the parameter count.
"""
import argparse
import contextlib
import json
import math
import pathlib
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# ampt's GPT presets (src/ampt/models/gpt_presets.cpp): n_layer, n_embd, n_head, block_size, vocab.
GPT_PRESETS = {
    "gpt-tiny": (2, 64, 4, 64, 256),
    "gpt2-124m": (12, 768, 12, 1024, 50304),
    "gpt2-350m": (24, 1024, 16, 1024, 50304),
    "gpt2-774m": (36, 1280, 20, 1024, 50304),
    "gpt2-1558m": (48, 1600, 25, 1024, 50304),
}
GPT_PRESETS["gpt"] = GPT_PRESETS["gpt-tiny"]
# ampt's Llama presets (src/ampt/models/llama_presets.cpp), as transformers' LlamaConfig fields:
# the reference is transformers' own LlamaForCausalLM (sdpa attention), randomly initialised.
LLAMA_PRESETS = {
    "llama-3.2-1b": dict(num_hidden_layers=16, hidden_size=2048, num_attention_heads=32,
                         num_key_value_heads=8, intermediate_size=8192, vocab_size=128256,
                         rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True,
                         max_position_embeddings=131072,
                         rope_scaling={"rope_type": "llama3", "factor": 32.0,
                                       "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                       "original_max_position_embeddings": 8192}),
}


class Mlp(nn.Module):
    """models/mlp.cpp: Linear-GELU blocks, then a linear head."""

    def __init__(self, features, hidden, layers, classes):
        super().__init__()
        widths = [features] + [hidden] * layers
        self.blocks = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths, widths[1:]))
        self.head = nn.Linear(widths[-1], classes)

    def forward(self, x):
        x = x.flatten(1)
        for block in self.blocks:
            x = F.gelu(block(x))
        return self.head(x)


def conv(cin, cout, kernel, stride):
    return nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2, bias=False)


class BasicBlock(nn.Module):
    """models/cnn.cpp: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1, self.bn1 = conv(cin, cout, 3, stride), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = conv(cout, cout, 3, 1), nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(conv(cin, cout, 1, stride), nn.BatchNorm2d(cout))

    def forward(self, x):
        h = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(h + self.shortcut(x))


class Cnn(nn.Module):
    """Stem conv-BN-ReLU, three stages of basic blocks (c, 2c, 4c), global average pool, head."""

    def __init__(self, in_channels, channels, blocks_per_stage, classes):
        super().__init__()
        self.stem_conv, self.stem_bn = conv(in_channels, channels, 3, 1), nn.BatchNorm2d(channels)
        blocks, cin = [], channels
        for stage in range(3):
            cout = channels << stage
            for i in range(blocks_per_stage):
                blocks.append(BasicBlock(cin if i == 0 else cout, cout, 2 if stage > 0 and i == 0 else 1))
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(cin, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.blocks(F.relu(self.stem_bn(self.stem_conv(x))))
        return self.head(x.mean((2, 3)))


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        heads = lambda z: z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class GptMlp(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(n_embd), CausalSelfAttention(n_embd, n_head)
        self.ln_2, self.mlp = nn.LayerNorm(n_embd), GptMlp(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    """models/gpt.cpp: nanoGPT's GPT-2 with the head tied to wte (no dropout: ampt's default 0)."""

    def __init__(self, n_layer, n_embd, n_head, block_size, vocab_size):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab_size, n_embd), nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer))
            elif name.endswith(".bias") and "ln_" not in name:
                nn.init.zeros_(p)
            elif p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.size(1), device=tokens.device))
        for block in self.h:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)


class Llama(nn.Module):
    """transformers' LlamaForCausalLM, called for its logits."""

    def __init__(self, preset, n_layer):
        super().__init__()
        from transformers import LlamaConfig, LlamaForCausalLM
        fields = dict(LLAMA_PRESETS[preset])
        if n_layer:
            fields["num_hidden_layers"] = n_layer
        self.config = LlamaConfig(**fields, attn_implementation="sdpa")
        self.model = LlamaForCausalLM(self.config)

    def forward(self, tokens):
        return self.model(tokens, use_cache=False).logits


def build(args):
    """The model, one batch of random data shaped like ampt's synthetic data, and FLOPs/sample."""
    if args.model == "mlp":
        model = Mlp(args.features, args.mlp_hidden, args.mlp_layers, args.classes)
        x = torch.randn(args.batch_size, args.features)
        y = torch.randint(0, args.classes, (args.batch_size,))
        macs = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
        return model, x, y, 6 * macs, 1
    if args.model == "cnn":
        model = Cnn(3, args.cnn_channels, args.cnn_blocks, args.classes)
        x = torch.rand(args.batch_size, 3, 32, 32)
        y = torch.randint(0, args.classes, (args.batch_size,))
        return model, x, y, 6 * cnn_macs(model, 32, 32), 1
    if args.model in LLAMA_PRESETS:
        model = Llama(args.model, args.n_layer)
        c = model.config
        t = args.seq_len or 2048
        tokens = torch.randint(0, c.vocab_size, (args.batch_size, t + 1))
        n = sum(p.numel() for p in model.parameters())
        return (model, tokens[:, :-1], tokens[:, 1:],
                (6 * n + 6 * c.num_hidden_layers * c.hidden_size * t) * t, t)
    n_layer, n_embd, n_head, block_size, vocab = GPT_PRESETS[args.model]
    n_layer = args.n_layer or n_layer
    t = args.seq_len or block_size
    model = Gpt(n_layer, n_embd, n_head, max(block_size, t), vocab)
    tokens = torch.randint(0, vocab, (args.batch_size, t + 1))
    n = sum(p.numel() for p in model.parameters())
    # llm.c's 6·N + 6·L·C·T per token (models/flops.h), times T tokens per sample.
    return model, tokens[:, :-1], tokens[:, 1:], (6 * n + 6 * n_layer * n_embd * t) * t, t


def cnn_macs(model, height, width):
    """Multiply-accumulates of the convolutions and head per sample, as CnnImpl counts them."""
    macs, shapes = 0, {}

    def hook(module, _, output):
        nonlocal macs
        macs += module.weight.numel() * output.shape[-2] * output.shape[-1]

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, nn.Conv2d)]
    with torch.no_grad():
        model(torch.zeros(1, 3, height, width))
    for h in handles:
        h.remove()
    return macs + model.head.weight.numel()


def lr_at(step, total, warmup=20, peak=3e-3, min_ratio=0.1):
    """train/schedule.cpp: linear warmup, then cosine to peak·min_ratio."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - 1 - warmup))
    return peak * min_ratio + 0.5 * (1 + math.cos(math.pi * progress)) * (peak - peak * min_ratio)


def train(args):
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = args.precision == "tf32"
        torch.backends.cudnn.allow_tf32 = args.precision == "tf32"
    model, x, y, flops_per_sample, tokens_per_sample = build(args)
    model.to(device).train()
    x, y = x.to(device), y.to(device)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
        lr=3e-3, betas=(0.9, 0.999), eps=1e-8, fused=True)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    scaler = torch.amp.GradScaler(device.type, enabled=dtype is torch.float16)

    def loss_fn(inputs, targets):
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            logits = model(inputs)
            return F.cross_entropy(logits.flatten(0, -2), targets.flatten())

    forward = torch.compile(loss_fn) if args.compile else loss_fn

    # Named phases only for --profile's trace: a record_function scope is an operator of its own
    # (two for its exit), which an unprofiled loop does not pay.
    phase = torch.profiler.record_function if args.profile else (lambda name: contextlib.nullcontext())

    def step(i):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(i, args.steps)
        with phase("ref::forward"):
            loss = forward(x, y)
        with phase("ref::backward"):
            scaler.scale(loss).backward()
        with phase("ref::unscale"):
            scaler.unscale_(optimizer)
        with phase("ref::clip"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        with phase("ref::optimizer"):
            scaler.step(optimizer)
        with phase("ref::scaler_update"):
            scaler.update()
        with phase("ref::zero_grad"):
            optimizer.zero_grad()  # set_to_none, PyTorch's default (and ampt's)
        return loss

    if args.profile:
        return profile(args, step, device)

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    # The first half warms up (compilation, autotuning, allocator); the second half is timed, as
    # the benchmark reads ampt's steady-state interval from metrics.jsonl.
    warm = args.steps // 2
    for i in range(warm):
        step(i)
    sync()
    start = time.perf_counter()
    for i in range(warm, args.steps):
        loss = step(i)
    sync()
    seconds = time.perf_counter() - start
    timed = args.steps - warm
    if device.type == "cuda":
        peak, kind = torch.cuda.max_memory_allocated(device), "CUDA allocator peak"
    else:
        peak, kind = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "process peak RSS"
    samples_per_sec = timed * args.batch_size / seconds
    return {
        "samples_per_sec": samples_per_sec,
        "tokens_per_sec": samples_per_sec * tokens_per_sample,
        "step_ms": 1000 * seconds / timed,
        "peak_memory_bytes": peak,
        "peak_memory_kind": kind,
        "flops_per_sample": flops_per_sample,
        "parameters": sum(p.numel() for p in model.parameters()),
        "final_loss": float(loss.detach()),
    }


def profile(args, step, device):
    """Runs the steps, tracing steps A..B (1-based) as ampt's --profile does: a Chrome trace and an
    operator table (per name and kind: calls and inclusive ms per optimizer step) in the same
    format as ampt's profile-steps-A-B.txt, so benchmarks/op_profile.py can compare them."""
    first, last = (int(v) for v in (args.profile.split("-") + [args.profile])[:2])
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    out = pathlib.Path(args.profile_out)
    out.mkdir(parents=True, exist_ok=True)
    for i in range(first - 1):
        step(i)
    with torch.profiler.profile(activities=activities) as prof:
        for i in range(first - 1, last):
            step(i)
        if device.type == "cuda":
            torch.cuda.synchronize()
    base = out / f"profile-steps-{first}-{last}"
    prof.export_chrome_trace(str(base.with_suffix(".json")))
    steps = last - first + 1
    totals = {}
    for event in prof.events():
        kind = ("phase" if event.name.startswith("ref::") else
                "cuda" if event.device_type == torch.autograd.DeviceType.CUDA else "cpu")
        calls, us = totals.get((kind, event.name), (0, 0.0))
        totals[(kind, event.name)] = (calls + 1, us + event.time_range.elapsed_us())
    rows = sorted(totals.items(), key=lambda kv: (kv[0][0] != "phase", -kv[1][1]))
    width = max([4] + [len(name) for (_, name), _ in rows])
    lines = [f"# reference profile of steps {first}-{last}: per optimizer step, inclusive time",
             f"{'name':<{width}}  {'kind':<5}  {'calls/step':>10}  {'ms/step':>12}"]
    for (kind, name), (calls, us) in rows:
        lines.append(f"{name:<{width}}  {kind:<5}  {calls / steps:>10.1f}  {us / 1000 / steps:>12.3f}")
    base.with_suffix(".txt").write_text("\n".join(lines) + "\n")
    return {"profile_table": str(base.with_suffix(".txt")), "profile_trace": str(base.with_suffix(".json"))}


def parser():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mlp",
                        choices=["mlp", "cnn", *GPT_PRESETS, *LLAMA_PRESETS])
    parser.add_argument("--precision", default="bf16", choices=["fp32", "tf32", "bf16", "fp16"])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--compile", action="store_true", help="torch.compile the forward and loss")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--seq_len", type=int, default=0,
                        help="tokens per sample (0: a GPT's block_size, 2048 for Llama)")
    parser.add_argument("--n_layer", type=int, default=0, help="transformer blocks (0: the preset's)")
    parser.add_argument("--seed", type=int, default=1337)
    # ampt's defaults (config.h) for the synthetic data and the MLP/CNN dimensions.
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--mlp_hidden", type=int, default=256)
    parser.add_argument("--mlp_layers", type=int, default=3)
    parser.add_argument("--cnn_channels", type=int, default=32)
    parser.add_argument("--cnn_blocks", type=int, default=1)
    parser.add_argument("--profile", default="", metavar="A-B",
                        help="trace optimizer steps A..B (1-based) instead of timing the run")
    parser.add_argument("--profile_out", default="ref_profile", help="directory for --profile's files")
    parser.add_argument("--count-parameters", action="store_true",
                        help="print the model's parameter count and exit")
    return parser


def main():
    args = parser().parse_args()
    if args.count_parameters:
        with torch.device("meta"):  # shapes only: no memory, no initialisation time
            model = build(args)[0]
        print(sum(p.numel() for p in model.parameters()))
        return
    print(json.dumps(train(args)))


if __name__ == "__main__":
    main()
