"""Reference ids for tests/text/chat_reference_test.cpp: transformers' apply_chat_template with
Llama-3-Instruct's and Qwen2-Instruct's published chat templates.

    chat_reference.py DIR   # DIR/chats.jsonl ({"messages": [...]} records) → DIR/{llama3,qwen2}/
                            # tokenizer.json + tokenizer_config.json (BPEs trained as
                            # split_reference.py trains them) and DIR/reference.json: per style and
                            # record the ids of the rendered chat, and per assistant turn the ids'
                            # length with the generation prompt before it and with the turn
"""
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from split_reference import LLAMA3, QWEN2, train  # noqa: E402

# Meta-Llama-3-8B-Instruct's tokenizer_config.json chat_template.
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
# Qwen2-7B-Instruct's.
QWEN2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

STYLES = {
    "llama3": (LLAMA3, ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                        "<|end_header_id|>", "<|eot_id|>"], True, "<|begin_of_text|>",
               {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}, LLAMA3_TEMPLATE),
    "qwen2": (QWEN2, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], False, None,
              {"add_bos_token": False, "bos_token": None, "eos_token": "<|im_end|>"}, QWEN2_TEMPLATE),
}


def main(work):
    from transformers import PreTrainedTokenizerFast
    chats = [json.loads(line)["messages"] for line in (work / "chats.jsonl").read_text().splitlines()]
    corpus = [m["content"] for chat in chats for m in chat] + ["system user assistant\n\n"] * 4
    reference = {}
    for name, (pattern, specials, ignore_merges, bos, config, template) in STYLES.items():
        tok = train(corpus, pattern, specials, ignore_merges, bos, name == "qwen2")
        out = work / name
        out.mkdir()
        tok.save(str(out / "tokenizer.json"))
        (out / "tokenizer_config.json").write_text(json.dumps(config))
        hf = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos or None,
                                     eos_token=config["eos_token"])
        hf.chat_template = template

        def ids(messages, generation=False):
            text = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation)
            return hf(text, add_special_tokens=False)["input_ids"]

        reference[name] = [{"ids": ids(chat),
                            "turns": [[len(ids(chat[:i], True)), len(ids(chat[:i + 1]))]
                                      for i, m in enumerate(chat) if m["role"] == "assistant"]}
                           for chat in chats]
    (work / "reference.json").write_text(json.dumps(reference))


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
