"""What transformers scores of one example per document, for ampt's padded fine-tuning test.

    padded_loss_reference.py MODEL_DIR DATA.jsonl MAX_LENGTH

Each record's "text" goes through MODEL_DIR's own tokenizer, gets <|endoftext|> appended and is cut
to MAX_LENGTH + 1 tokens; GPT2LMHeadModel then scores it alone, unpadded, with the labels it
shifts itself (as the Hugging Face Trainer feeds a causal LM). Prints a line per document, in
order: the sum of its token losses and the number of scored tokens.
"""
import json
import sys

import torch
from transformers import AutoTokenizer, GPT2LMHeadModel


def main(model_dir, data, max_length):
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = GPT2LMHeadModel.from_pretrained(model_dir).eval()
    for line in open(data, encoding="utf-8"):
        if not line.strip():
            continue
        ids = (tokenizer.encode(json.loads(line)["text"]) + [tokenizer.eos_token_id])[:max_length + 1]
        with torch.no_grad():
            loss = model(torch.tensor([ids]), labels=torch.tensor([ids])).loss.item()
        print(f"{loss * (len(ids) - 1):.9g} {len(ids) - 1}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
