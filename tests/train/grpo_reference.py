#!/usr/bin/env python3
"""Reference GRPO losses for tests/train/grpo_loss_test.cpp, computed by TRL 1.16's own
GRPOTrainer code on prepared completions.

    grpo_reference.py OUT.safetensors

The trainer is a GRPOTrainer made without its __init__ (no model loading, no datasets), given the
attributes its methods read. Its generation (_generate: the prompt and completion ids, the
sampler's log-probabilities), its reward functions (_calculate_rewards) and its model forward
(_get_per_token_logps_and_entropies) are replaced; everything between them runs as TRL wrote it:
_generate_and_score_completions (the truncation mask, num_items_in_batch, old and reference
log-probabilities, the vLLM importance-sampling ratio, the advantages), _prepare_inputs (the
split into accumulation steps and their reuse over num_iterations; its shuffle replaced by the
identity, so that ampt knows the rows of each micro-batch) and _compute_loss (the loss, its
normalisers and the figures it logs).

The model is a bigram table theta [V, V]: a completion token's logits are theta's row of the
token before it (the prompt's last token before the first), so that ampt computes the same
log-probabilities and entropies from the same theta.

Prints a JSON object {"cases": [...], "runs": [...]} with each case's and run's settings; OUT
holds their tensors under "<name>.<tensor>":
- a case is one generation batch (PROMPTS x G completions, GA micro-batches), scored with theta
  and its loss taken with theta_new (theta moved, as at a second iteration, when mu = 2): the
  inputs prompt_last, completion_ids, completion_lengths, rewards, theta, theta_new, theta_ref
  (beta != 0) and sampler_logps (is_mode set); TRL's advantages, completion_mask,
  frac_reward_zero_std, is_ratio and sampling figures (is_mode set), and per micro-batch m
  loss.m, logp_grad.m (the loss's gradient with respect to the log-probabilities) and figures.m
  (kl, entropy, clip_ratio/low_mean, high_mean, region_mean, low_min, high_max; NaN where TRL
  logs nothing), and theta_grad, summed over the micro-batches.
- a run is STEPS AdamW steps from theta (lr LR, betas 0.9 and 0.999, eps 1e-8, no decay), on
  the generation batches gen.k.* (one every mu steps): TRL's step_losses (the micro-batches'
  losses summed) and theta_final, and theta_final64 from the same run in float64.
"""
import contextlib
import itertools
import json
import sys
import types
from collections import defaultdict, deque

import torch
from accelerate import Accelerator
from safetensors.torch import save_file

import trl.trainer.grpo_trainer as grpo_module
from trl.trainer.grpo_trainer import GRPOTrainer

V = 12
EOS, PAD = V - 1, V - 2
PROMPTS, G, GA = 3, 4, 4  # 12 completions a generation batch, micro-batches of 3 across groups
T = 6  # the longest completion
MAX_COMPLETION_LENGTH = 8  # dr_grpo's constant, not the padded width
STEPS, LR = 5, 0.05
FIGURES = ["kl", "entropy", "clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean",
           "clip_ratio/low_min", "clip_ratio/high_max"]
SAMPLING = ["sampling/sampling_logp_difference/mean", "sampling/sampling_logp_difference/max",
            "sampling/importance_sampling_ratio/min", "sampling/importance_sampling_ratio/mean",
            "sampling/importance_sampling_ratio/max"]

ACCELERATOR = None


class Bigram(torch.nn.Module):
    is_gradient_checkpointing = False

    def __init__(self, theta):
        super().__init__()
        self.theta = torch.nn.Parameter(theta.clone())


def bigram_logps(theta, input_ids, logits_to_keep):
    prev = input_ids[:, -logits_to_keep - 1:-1]
    tokens = input_ids[:, -logits_to_keep:]
    logp = torch.log_softmax(theta[prev], dim=-1)
    return logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1), -(logp.exp() * logp).sum(-1)


def make_generation(g, theta, with_sampler):
    """One generation batch: prompts of 1 to 3 tokens, each repeated G times, and completions of
    1 to T tokens ending in EOS, except those of T tokens that are cut off (one at least)."""
    prompts = [torch.randint(0, V - 2, (int(torch.randint(1, 4, (1,), generator=g)),), generator=g)
               for _ in range(PROMPTS)]
    prompt_ids, completion_ids, lengths = [], [], []
    for i in range(PROMPTS * G):
        n = T if i in (1, 2) else int(torch.randint(1, T + 1, (1,), generator=g))
        ids = torch.randint(0, V - 2, (n,), generator=g)
        truncated = i == 1 or (i != 2 and n == T and bool(torch.rand(1, generator=g) < 0.5))
        if not truncated:
            ids[-1] = EOS
        prompt_ids.append(prompts[i // G].tolist())
        completion_ids.append(ids.tolist())
        lengths.append(n)
    rewards = torch.stack([torch.randn(G, generator=g),  # a spread
                           torch.ones(G),  # all equal: std 0
                           torch.randint(0, 2, (G,), generator=g).float()])  # right or wrong
    padded = torch.full((PROMPTS * G, T), PAD, dtype=torch.long)
    for i, ids in enumerate(completion_ids):
        padded[i, :len(ids)] = torch.tensor(ids)
    gen = {"prompt_ids": prompt_ids, "completion_ids": completion_ids,
           "tensors": {"prompt_last": torch.tensor([p[-1] for p in prompt_ids]),
                       "completion_ids": padded, "completion_lengths": torch.tensor(lengths),
                       "rewards": rewards}}
    if with_sampler:
        prev = torch.cat([gen["tensors"]["prompt_last"].unsqueeze(1), padded], 1)
        logps, _ = bigram_logps(theta, prev, T)
        noisy = logps + 0.3 * torch.randn(logps.shape, generator=g)
        sampler = torch.zeros_like(noisy)
        for i, n in enumerate(lengths):
            sampler[i, :n] = noisy[i, :n]
        gen["tensors"]["sampler_logps"] = sampler
    return gen


def make_trainer(s, model, ref_model, generations, dtype):
    t = GRPOTrainer.__new__(GRPOTrainer)
    t.accelerator = ACCELERATOR
    t.model, t.ref_model = model, ref_model
    t.args = types.SimpleNamespace(
        steps_per_generation=GA, gradient_accumulation_steps=GA,
        per_device_train_batch_size=PROMPTS * G // GA, report_to=[],
        use_bias_correction_kl=s["kl_bias_correction"], delta=None,
        gradient_checkpointing_kwargs=None)
    t.state = types.SimpleNamespace(global_step=0)
    t.current_gradient_accumulation_steps = GA
    t.num_iterations, t._step, t._buffered_inputs = s["mu"], 0, None
    t.loss_type, t.beta = s["loss_type"], s["beta"]
    t.epsilon_low = s["epsilon"]
    t.epsilon_high = s["epsilon_high"] if s["epsilon_high"] is not None else s["epsilon"]
    t.importance_sampling_level, t.scale_rewards = s["level"], s["scale_rewards"]
    t.max_completion_length = MAX_COMPLETION_LENGTH
    t.mask_truncated_completions = s["mask_truncated"]
    t.use_vllm = t.vllm_importance_sampling_correction = s["is_mode"] is not None
    t.vllm_importance_sampling_mode = s["is_mode"] or "sequence_mask"
    t.vllm_importance_sampling_clip_min = s["clip_min"]
    t.vllm_importance_sampling_clip_max = s["clip_max"]
    t.top_entropy_quantile, t.off_policy_mask_threshold = 1.0, None
    t._entropy_bonus_enabled = t.aux_loss_enabled = False
    t.environment_factories, t.environments, t.tools = None, None, None
    t._tokenizer = types.SimpleNamespace(pad_token_id=PAD)
    t.pad_to_multiple_of, t.eos_token_ids = None, [EOS]
    t.num_generations, t.multi_objective_aggregation = G, "sum_then_normalize"
    t.reward_weights, t.reward_func_names = torch.ones(1), ["reward"]
    t._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    t._logs = {"prompt": deque(), "completion": deque(), "rewards": defaultdict(deque),
               "advantages": deque(), "extra": defaultdict(deque), "images": deque()}
    t._pending_extra_logs, t._pending_metrics = defaultdict(list), defaultdict(list)
    t.log_multimodal = False
    t.captured = []  # the log-probabilities each loss call differentiates

    def generate(prompts):
        gen = generations.pop(0)
        t.current_rewards = gen["tensors"]["rewards"].to(dtype).reshape(-1, 1)
        sampler = None
        if "sampler_logps" in gen["tensors"]:
            sampler = [row[:len(ids)].tolist()
                       for row, ids in zip(gen["tensors"]["sampler_logps"], gen["completion_ids"])]
        return (gen["prompt_ids"], gen["completion_ids"], None, ["text"] * len(prompts), sampler,
                {}, None, [None] * len(prompts))

    def forward(model, input_ids, attention_mask, logits_to_keep, batch_size=None,
                compute_entropy=False, compute_aux_loss=False, **kwargs):
        logps, entropies = bigram_logps(model.theta, input_ids, logits_to_keep)
        if torch.is_grad_enabled():
            logps.retain_grad()
            t.captured.append(logps)
        return logps, entropies if compute_entropy else None, None

    t._generate = generate
    t._calculate_rewards = lambda inputs, prompts, completions, ids: t.current_rewards
    t._get_per_token_logps_and_entropies = forward
    return t


def figures_of(t):
    m = t._metrics["train"]
    return torch.tensor([m[k][-1] if m[k] else float("nan") for k in FIGURES], dtype=torch.float64)


def case_settings():
    grid = itertools.product(["grpo", "dr_grpo", "dapo", "bnpo"], [0.0, 0.04], ["token", "sequence"],
                             [1, 2], [None, 0.28], [False, True])
    modes = [None, "token_truncate", "token_mask", "sequence_truncate", "sequence_mask"]
    for i, (loss, beta, level, mu, high, masked) in enumerate(grid):
        yield {"name": f"case{i}", "seed": i, "loss_type": loss, "beta": beta, "level": level, "mu": mu,
               "epsilon": 0.2, "epsilon_high": high, "mask_truncated": masked,
               "scale_rewards": ["group", "batch", "none"][i % 3], "is_mode": modes[i % 5],
               "clip_min": [None, 0.5][(i // 5) % 2], "clip_max": 1.5,
               "kl_bias_correction": i % 7 != 3}


def run_case(s, out):
    g = torch.Generator().manual_seed(s["seed"])
    theta = 0.7 * torch.randn(V, V, generator=g)
    theta_new = theta + (0.3 * torch.randn(V, V, generator=g) if s["mu"] == 2 else 0.0)
    theta_ref = theta + 0.5 * torch.randn(V, V, generator=g)
    gen = make_generation(g, theta, s["is_mode"] is not None)
    model = Bigram(theta)
    t = make_trainer(s, model, Bigram(theta_ref) if s["beta"] else None, [gen], torch.float32)
    t._prepare_inputs([{"prompt": "p"}] * (PROMPTS * G))
    batches = t._buffered_inputs
    with torch.no_grad():
        model.theta.copy_(theta_new)  # the weights moved since the batch was scored
    p = s["name"] + "."
    for k, v in gen["tensors"].items():
        out[p + k] = v
    out[p + "theta"], out[p + "theta_new"] = theta, theta_new
    if s["beta"]:
        out[p + "theta_ref"] = theta_ref
    out[p + "advantages"] = torch.cat([b["advantages"] for b in batches])
    out[p + "completion_mask"] = torch.cat([b["completion_mask"] for b in batches])
    out[p + "frac_reward_zero_std"] = torch.tensor(t._metrics["train"]["frac_reward_zero_std"][-1])
    if s["is_mode"] is not None:
        out[p + "is_ratio"] = torch.cat([b["importance_sampling_ratio"] for b in batches])
        out[p + "sampling"] = torch.tensor([t._metrics["train"][k][-1] for k in SAMPLING],
                                           dtype=torch.float64)
    for m, inputs in enumerate(batches):
        loss = t._compute_loss(model, inputs)
        loss.backward()
        out[p + f"loss.{m}"] = loss.detach().reshape(1)
        out[p + f"logp_grad.{m}"] = t.captured[-1].grad
        out[p + f"figures.{m}"] = figures_of(t)
    out[p + "theta_grad"] = model.theta.grad


def run_settings():
    base = {"epsilon": 0.2, "clip_min": None, "clip_max": 1.5}
    yield {**base, "name": "run0", "seed": 1000, "loss_type": "grpo", "beta": 0.04, "level": "token", "mu": 2,
           "epsilon_high": 0.28, "mask_truncated": False, "scale_rewards": "group",
           "is_mode": None, "kl_bias_correction": True}
    yield {**base, "name": "run1", "seed": 1001, "loss_type": "dapo", "beta": 0.04, "level": "token", "mu": 2,
           "epsilon_high": 0.28, "mask_truncated": True, "scale_rewards": "group",
           "is_mode": "token_truncate", "kl_bias_correction": True}
    yield {**base, "name": "run2", "seed": 1002, "loss_type": "dr_grpo", "beta": 0.0, "level": "sequence",
           "mu": 1, "epsilon_high": None, "mask_truncated": False, "scale_rewards": "none",
           "is_mode": "sequence_mask", "kl_bias_correction": True}
    yield {**base, "name": "run3", "seed": 1003, "loss_type": "bnpo", "beta": 0.04, "level": "sequence", "mu": 2,
           "epsilon_high": None, "mask_truncated": True, "scale_rewards": "batch",
           "is_mode": None, "kl_bias_correction": False}


def train(s, theta, theta_ref, gens, dtype):
    model = Bigram(theta.to(dtype))
    t = make_trainer(s, model, Bigram(theta_ref.to(dtype)) if s["beta"] else None, list(gens), dtype)
    optimizer = torch.optim.AdamW([model.theta], lr=LR, betas=(0.9, 0.999), eps=1e-8,
                                  weight_decay=0.0)
    losses = []
    for _ in range(STEPS):
        total = 0.0
        for _ in range(GA):
            inputs = t._prepare_inputs([{"prompt": "p"}] * (PROMPTS * G))
            loss = t._compute_loss(model, inputs)
            loss.backward()
            total += loss.item()
            t._step += 1
        optimizer.step()
        optimizer.zero_grad()
        losses.append(total)
    return torch.tensor(losses, dtype=torch.float64), model.theta.detach().clone()


def run_training(s, out):
    g = torch.Generator().manual_seed(s["seed"])
    theta = 0.7 * torch.randn(V, V, generator=g)
    theta_ref = theta + 0.5 * torch.randn(V, V, generator=g)
    gens = [make_generation(g, theta, s["is_mode"] is not None) for _ in range(-(-STEPS // s["mu"]))]
    p = s["name"] + "."
    out[p + "theta"], out[p + "theta_ref"] = theta, theta_ref
    for k, gen in enumerate(gens):
        for key, v in gen["tensors"].items():
            out[p + f"gen.{k}.{key}"] = v
    out[p + "step_losses"], out[p + "theta_final"] = train(s, theta, theta_ref, gens, torch.float32)
    _, out[p + "theta_final64"] = train(s, theta, theta_ref, gens, torch.float64)
    s["generations"] = len(gens)


def main():
    global ACCELERATOR
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    # No shuffling of a generation batch's rows before its split into micro-batches.
    grpo_module.shuffle_sequence_dict = lambda d: d
    out, cases, runs = {}, list(case_settings()), list(run_settings())
    with contextlib.redirect_stdout(sys.stderr):
        ACCELERATOR = Accelerator(cpu=True)
        for s in cases:
            run_case(s, out)
        for s in runs:
            run_training(s, out)
    save_file({k: v.contiguous() for k, v in out.items()}, sys.argv[1])
    print(json.dumps({"cases": cases, "runs": runs, "prompts": PROMPTS, "num_generations": G,
                      "micro_batches": GA, "max_completion_length": MAX_COMPLETION_LENGTH,
                      "steps": STEPS, "lr": LR}))


if __name__ == "__main__":
    main()
