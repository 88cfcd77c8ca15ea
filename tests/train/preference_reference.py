#!/usr/bin/env python3
"""Reference preference training (DPO, IPO, SimPO, ORPO) for ampt's tests, run by TRL's own trainers
on a transformers checkpoint (tests/hf/llama_reference.py make ... --tokenizer makes one; no hub).

DATA.jsonl holds standard-format records, one a line: {"prompt": "...", "chosen": "...",
"rejected": "..."}.

    preference_reference.py tokenize MODEL_DIR DATA.jsonl [--loss dpo|ipo|simpo|orpo]
                            [--max_length 1024]
        prints, as a JSON list with one entry per record, {"prompt_ids", "chosen_ids",
        "rejected_ids"} read from the trainer's own tokenized train_dataset. dpo and ipo
        (DPOTrainer): no BOS, the EOS text appended to chosen and rejected, the completion starting
        where prompt and prompt+completion tokens diverge; not yet truncated (the collator cuts
        prompt+completion to max_length). simpo (CPOTrainer) and orpo (ORPOTrainer): BOS prepended
        to the prompt, EOS id appended to each completion, the completion already truncated so that
        prompt+completion <= max_length.
    preference_reference.py chat_tokenizer DIR
        writes into DIR a Llama-3-style tokenizer (a byte-level BPE trained on a few sentences,
        Llama-3's special tokens, its BOS, and Meta-Llama-3-8B-Instruct's chat template in
        tokenizer_config.json) for conversational records, and prints its vocabulary size.
    preference_reference.py train MODEL_DIR DATA.jsonl --loss dpo|ipo|simpo|orpo --beta B --steps N
                            --batch_size B --lr LR --beta1 B1 --beta2 B2 --eps E
                            [--label_smoothing E] [--simpo_gamma 0.5] [--orpo_lambda 0.1]
                            [--rpo_alpha A]
                            [--adapter DIR [--adapter_reference initial|base]]
                            [--max_length 1024] [--dtype float32|float64] [--keep_bos]
        trains with TRL's trainer on the CPU (dpo: DPOTrainer loss_type sigmoid; ipo: DPOTrainer
        loss_type ipo; simpo: CPOTrainer loss_type simpo, cpo_alpha 0; orpo: ORPOTrainer with beta =
        orpo_lambda; --label_smoothing E in (0, 0.5): dpo becomes conservative DPO, made of TRL's
        sigmoid and robust losses; --rpo_alpha A adds TRL's sft loss weighted A to dpo or ipo
        (RPO); simpo smooths as CPOTrainer does) and prints a JSON list with,
        per optimizer step, the loss and TRL's logged rewards/chosen, rewards/rejected,
        rewards/accuracies, rewards/margins, logps/chosen, logps/rejected (orpo adds nll_loss,
        log_odds_ratio, log_odds_chosen), all from the forward before that step's update. torch
        AdamW, weight decay 0, constant lr, no clipping, no accumulation, no dropout; the records in
        file order, step i on batch i mod ceil(records / batch_size) (batch_size = the number of
        records: every step on all). Full fine-tuning, or with --adapter a peft LoRA trained over
        the frozen base (tests/hf/lora_reference.py init makes one). DPO's reference is the initial
        model: with --adapter, DPOTrainer (peft >= 0.20) keeps a frozen copy of the initial adapter;
        --adapter_reference base drops that copy, so the reference is the base with adapters
        disabled. simpo and orpo run without the BOS that CPO and ORPO would prepend to every
        prompt (DPOTrainer and ampt add none where the tokenizer adds none); --keep_bos keeps it.
        --dtype float64 loads the weights in float64, but TRL still rounds some values to
        float32: DPO's per-token log-probs (its fused LM head), ORPO's sequence log-probs and the
        logged loss.
"""
import argparse
import contextlib
import json
import sys
import tempfile

import torch
from datasets import Dataset
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import DPOConfig, DPOTrainer
from trl.experimental.cpo import CPOConfig, CPOTrainer
from trl.experimental.orpo import ORPOConfig, ORPOTrainer

METRICS = ["rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins",
           "logps/chosen", "logps/rejected"]
ORPO_METRICS = ["nll_loss", "log_odds_ratio", "log_odds_chosen"]


def load_records(path):
    # In memory, not load_dataset("json"): map then writes no cache files. (datasets' fingerprinting
    # once failed to pickle a pyarrow MonthDayNano on an ad-hoc install; not seen with datasets 5.2,
    # dill 0.4.1, pyarrow 26 either way.)
    with open(path) as f:
        return Dataset.from_list([json.loads(line) for line in f if line.strip()])


def make_trainer(args, steps=1, batch_size=1, lr=0.0, betas=(0.9, 0.999), eps=1e-8, callbacks=()):
    dtype = getattr(torch, args.dtype)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype)
    if args.adapter:
        model = PeftModel.from_pretrained(model, args.adapter, is_trainable=True)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    # GPT-2's tokenizer has no pad token. DPO and CPO pad with EOS then; ORPO does not, so set it
    # here for all (padding is masked out of every loss).
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if args.loss in ("simpo", "orpo") and args.command == "train" and not args.keep_bos:
        # CPO's and ORPO's older tokenizing prepends the BOS id to every prompt even where the
        # tokenizer's own call adds none (GPT-2's), where DPOTrainer's does not; ampt tokenizes
        # every objective's records as DPOTrainer does. Without a BOS token both trainers see
        # ampt's sequences.
        tokenizer.bos_token = None
    common = dict(
        output_dir=args.out, per_device_train_batch_size=batch_size, max_steps=steps,
        learning_rate=lr, adam_beta1=betas[0], adam_beta2=betas[1], adam_epsilon=eps,
        weight_decay=0.0, optim="adamw_torch", lr_scheduler_type="constant", warmup_steps=0,
        max_grad_norm=0.0,  # Trainer clips only when > 0
        gradient_accumulation_steps=1, train_sampling_strategy="sequential",
        logging_steps=1, save_strategy="no", eval_strategy="no", report_to="none",
        seed=0, use_cpu=True, bf16=False, fp16=False,  # TRL's configs default bf16 on
        gradient_checkpointing=False, disable_dropout=True, max_length=args.max_length,
        beta=args.beta)
    if args.loss in ("dpo", "ipo"):
        loss = dict(loss_type=["sigmoid" if args.loss == "dpo" else "ipo"])
        if args.label_smoothing:
            # TRL 1.16's sigmoid loss ignores label_smoothing. Conservative DPO,
            # -(1-e) logsig(b d) - e logsig(-b d), is 2(1-e) sigmoid - (1-2e) robust in TRL's own
            # losses (robust: (-(1-e) logsig(b d) + e logsig(-b d)) / (1-2e)).
            e = args.label_smoothing
            loss = dict(loss_type=["sigmoid", "robust"], loss_weights=[2 * (1 - e), -(1 - 2 * e)],
                        label_smoothing=e)
        if args.rpo_alpha:
            loss["loss_type"] = loss["loss_type"] + ["sft"]
            loss["loss_weights"] = loss.get("loss_weights", [1.0]) + [args.rpo_alpha]
        config = DPOConfig(**common, **loss)
        cls = DPOTrainer
    elif args.loss == "simpo":
        config = CPOConfig(**common, loss_type="simpo", cpo_alpha=0.0,
                           simpo_gamma=args.simpo_gamma, label_smoothing=args.label_smoothing)
        cls = CPOTrainer
    else:
        config = ORPOConfig(**{**common, "beta": args.orpo_lambda})
        cls = ORPOTrainer
    trainer = cls(model=model, args=config, train_dataset=load_records(args.data),
                  processing_class=tokenizer, callbacks=list(callbacks))
    if args.adapter and args.loss in ("dpo", "ipo") and args.adapter_reference == "base":
        # Without its "ref" copy of the adapter, DPOTrainer disables the adapters for the reference.
        trainer.model.delete_adapter("ref")
    return trainer


def tokenize(args):
    rows = make_trainer(args).train_dataset
    out = []
    for row in rows:
        if args.loss in ("dpo", "ipo"):
            out.append({k: row[k] for k in ("prompt_ids", "chosen_ids", "rejected_ids")})
            continue
        # CPO/ORPO rows hold whole sequences; their labels mask each sequence's own prompt.
        entry = {"prompt_ids": row["prompt_input_ids"]}
        for side in ("chosen", "rejected"):
            ids, n_prompt = row[f"{side}_input_ids"], row[f"{side}_labels"].count(-100)
            if ids[:n_prompt] != row["prompt_input_ids"]:
                raise SystemExit(f"{side}'s prompt tokens differ from the prompt's (a merge at the "
                                 "boundary): no prompt/completion split to report")
            entry[f"{side}_ids"] = ids[n_prompt:]
        out.append(entry)
    return out


class StepLogs(TrainerCallback):
    """Keeps what the trainer logs at each optimizer step (logging_steps 1, so nothing is averaged
    over steps; the final summary log has train_loss, not loss)."""

    def __init__(self, keys):
        self.keys, self.steps = keys, []

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.steps.append({k: logs[k] for k in self.keys})


def train(args):
    logs = StepLogs(["loss"] + METRICS + (ORPO_METRICS if args.loss == "orpo" else []))
    trainer = make_trainer(args, args.steps, args.batch_size, args.lr, (args.beta1, args.beta2),
                           args.eps, callbacks=[logs])
    trainer.train()
    assert len(logs.steps) == args.steps, logs.steps
    return logs.steps


def chat_tokenizer(args):
    import pathlib
    text = pathlib.Path(__file__).resolve().parent.parent / "text"
    sys.path.insert(0, str(text))
    from chat_reference import LLAMA3_TEMPLATE, STYLES  # noqa: E402
    from split_reference import train as train_bpe  # noqa: E402
    pattern, specials, ignore_merges, bos, config, _ = STYLES["llama3"]
    words = "the sky is blue green water boils at one hundred degrees paris rome hi hello yes no"
    corpus = [words, "system user assistant\n\n", "What colour is the sky? It is blue."] * 4
    tok = train_bpe(corpus, pattern, specials, ignore_merges, bos, False)
    out = pathlib.Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(
        {**config, "chat_template": LLAMA3_TEMPLATE, "tokenizer_class": "PreTrainedTokenizerFast"}))
    return tok.get_vocab_size()


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("tokenize", "train"):
        p = sub.add_parser(name)
        p.add_argument("model")
        p.add_argument("data")
        p.add_argument("--loss", choices=["dpo", "ipo", "simpo", "orpo"], default="dpo",
                       required=name == "train")
        p.add_argument("--max_length", type=int, default=1024)  # TRL's default
        p.add_argument("--adapter")
        p.add_argument("--adapter_reference", choices=["initial", "base"], default="initial")
        p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
        p.add_argument("--keep_bos", action="store_true",
                       help="simpo, orpo: let CPO/ORPO prepend the BOS as they do")
        p.add_argument("--beta", type=float, default=0.1)
        p.add_argument("--label_smoothing", type=float, default=0.0)
        p.add_argument("--simpo_gamma", type=float, default=0.5)
        p.add_argument("--orpo_lambda", type=float, default=0.1)
        p.add_argument("--rpo_alpha", type=float, default=0.0)
    sub.add_parser("chat_tokenizer").add_argument("dir")
    tr = sub.choices["train"]
    for name in ("steps", "batch_size"):
        tr.add_argument(f"--{name}", type=int, required=True)
    for name in ("lr", "beta1", "beta2", "eps"):
        tr.add_argument(f"--{name}", type=float, required=True)
    args = parser.parse_args()
    if args.command == "chat_tokenizer":
        print(json.dumps(chat_tokenizer(args)))
        return
    smoothing = args.label_smoothing
    if getattr(args, "rpo_alpha", 0.0) and args.loss not in ("dpo", "ipo"):
        parser.error("--rpo_alpha: with dpo or ipo only")
    if smoothing and not (args.loss in ("dpo", "simpo") and 0 < smoothing < 0.5):
        parser.error("--label_smoothing: in (0, 0.5), with dpo (conservative DPO) or simpo only; "
                     "TRL has none for ipo or orpo")
    # The trainers want an output_dir (nothing is saved) and print their logs to stdout, which is
    # the JSON's alone.
    with tempfile.TemporaryDirectory() as out, contextlib.redirect_stdout(sys.stderr):
        args.out = out
        result = {"tokenize": tokenize, "train": train}[args.command](args)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
