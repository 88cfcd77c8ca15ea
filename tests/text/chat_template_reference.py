"""Reference ids and scored-token masks for tests/text/chat_template_reference_test.cpp:
transformers' apply_chat_template with published chat templates (tests/text/chat_templates/).

    chat_template_reference.py DIR   # DIR/cases.json: [{"name", "template" (a file name or a
                                     # template's text), "kwargs", "chats": [records]}] → per case
                                     # DIR/NAME/ tokenizer.json + tokenizer_config.json (a BPE
                                     # trained as split_reference.py trains them, with the
                                     # template's special tokens; the template as chat_template)
                                     # and DIR/reference.json: per case and chat {"ids", "scored"}
                                     # or {"error"}

The ids are apply_chat_template(messages, tools=tools, **kwargs) encoded whole. The scored tokens
are transformers' assistant_masks where the template has {% generation %} blocks; otherwise,
per assistant turn, what rendering the chat through the turn adds to rendering it up to the turn
with the generation prompt (from where the two part, past the turn's tokens that the rest of the
prompt ends with), found in the whole chat: where the chat renders the turn otherwise, the turn's
text found whole after the previous turn, else, from where the chat and the generation prompt
part, the longer of the turn's leading and trailing tokens the chat holds there; every token
overlapping it, less the whitespace tokens after the span's last special token.
"""
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from split_reference import LLAMA3, QWEN2, sentencepiece_spec, sentencepiece_tokenizer, train  # noqa: E402

TEMPLATES = pathlib.Path(__file__).parent / "chat_templates"

LLAMA = (LLAMA3, ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                  "<|eot_id|>", "<|eom_id|>", "<|python_tag|>"], "<|begin_of_text|>", "<|eot_id|>")
QWEN = (QWEN2, ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
                "<tool_response>", "</tool_response>", "<think>", "</think>"], None, "<|im_end|>")
# Per template: pre-tokenizer pattern, special tokens, BOS, EOS.
STYLES = {
    "llama-3.1-8b-instruct": LLAMA,
    "llama-3.2-1b-instruct": LLAMA,
    "qwen2.5-instruct": QWEN,
    "qwen3": QWEN,
    "chatml-generation": QWEN,
    "deepseek-r1-distill-qwen": (QWEN2, ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>",
                                         "<｜Assistant｜>", "<think>", "</think>", "<｜tool▁calls▁begin｜>",
                                         "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
                                         "<｜tool▁sep｜>", "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>",
                                         "<｜tool▁output▁begin｜>", "<｜tool▁output▁end｜>"],
                                 "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    # SentencePiece, as Mistral v0.3's own: Metaspace, byte fallback.
    "mistral-7b-instruct-v0.3": ("sentencepiece", ["[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]",
                                                   "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"],
                                 "<s>", "</s>"),
    "gemma-2-it": (LLAMA3, ["<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>"], "<bos>", "<eos>"),
    "phi-3.5-mini-instruct": (LLAMA3, ["<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>",
                                       "<|end|>"], None, "<|endoftext|>"),
}


def template_text(case):
    path = TEMPLATES / case["template"]
    return path.read_text(encoding="utf-8") if path.suffix == ".jinja" and path.exists() else case["template"]


def record_messages(record):
    return record["messages"], record.get("tools")


def scored_mask(hf, template, messages, tools, kwargs, specials):
    def render(msgs, generation):
        return hf.apply_chat_template(msgs, tools=tools, tokenize=False, add_generation_prompt=generation,
                                      chat_template=template, **kwargs)

    text = render(messages, False)
    enc = hf(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    if "generation" in template and "{% generation %}" in template.replace("{%-", "{%").replace("-%}", "%}"):
        out = hf.apply_chat_template(messages, tools=tools, tokenize=True, return_dict=True,
                                     return_assistant_tokens_mask=True, chat_template=template, **kwargs)
        assert out["input_ids"] == ids
        return ids, list(out["assistant_masks"])
    def common(a, b):
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n

    def boundaries(piece):
        return [end for _, end in hf(piece, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]]

    spans, previous_end = [], 0
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = render(messages[:i], True)
        through = render(messages[:i + 1], False)
        start = common(before, through)
        if start < len(before):
            head = through[start:len(before)]
            overlap = 0
            for end in boundaries(head):
                if before.endswith(head[:end]):
                    overlap = end
            start += overlap
        turn = through[start:]
        span = (start, len(through))
        if not text.startswith(through):
            at = text.find(turn, previous_end)
            if at >= 0:
                span = (at, at + len(turn))
            else:
                begin = common(before, text)
                rest = text[begin:]
                starts = ends = token_start = 0
                for end in boundaries(turn):
                    if starts == token_start and rest[:end] == turn[:end]:
                        starts = end
                    k = len(turn) - token_start
                    if ends == 0 and k <= len(rest) and rest[:k] == turn[token_start:]:
                        ends = k
                    token_start = end
                assert max(starts, ends) > 0
                span = (begin, begin + max(starts, ends))
        previous_end = span[1]
        spans.append(span)
    scored = [0] * len(ids)
    for begin, end in spans:
        marked = [t for t, (a, b) in enumerate(offsets) if a < end and b > begin]
        for t in marked:
            scored[t] = 1
        # Whitespace tokens after the span's last special token are not scored.
        k = len(marked)
        while k > 0 and ids[marked[k - 1]] not in specials and hf.decode([ids[marked[k - 1]]]).strip(" \t\r\n") == "":
            k -= 1
        if 0 < k < len(marked) and ids[marked[k - 1]] in specials:
            for t in marked[k:]:
                scored[t] = 0
    return ids, scored


def main(work):
    from transformers import PreTrainedTokenizerFast
    cases = json.loads((work / "cases.json").read_text(encoding="utf-8"))
    corpus = []
    for case in cases:
        for record in case["chats"]:
            corpus += [json.dumps(record, ensure_ascii=False)] * 2
    reference = []
    for case in cases:
        pattern, specials, bos, eos = STYLES[case["style"]]
        if pattern == "sentencepiece":
            tok = sentencepiece_tokenizer(sentencepiece_spec(corpus, specials), "mistral")
        else:
            tok = train(corpus + ["system user assistant tool\n\n"] * 4, pattern, specials, True, bos,
                        pattern == QWEN2)
        out = work / case["name"]
        out.mkdir()
        tok.save(str(out / "tokenizer.json"))
        template = template_text(case)
        config = {"bos_token": bos, "eos_token": eos, "add_bos_token": False, "chat_template": template}
        (out / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
        hf = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos, eos_token=eos)
        special_ids = {tok.token_to_id(s) for s in specials + [bos, eos] if s}
        results = []
        for record in case["chats"]:
            messages, tools = record_messages(record)
            try:
                ids, scored = scored_mask(hf, template, messages, tools, case.get("kwargs", {}), special_ids)
                results.append({"ids": ids, "scored": scored})
            except Exception as e:  # the record's expected outcome: the template refuses it
                results.append({"error": f"{type(e).__name__}: {e}"})
        reference.append(results)
    (work / "reference.json").write_text(json.dumps(reference), encoding="utf-8")


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
