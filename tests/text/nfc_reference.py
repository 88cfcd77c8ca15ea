"""Reference NFC for tests/text/nfc_test.cpp: Python's unicodedata and Hugging Face tokenizers'.

    nfc_reference.py OUT    # OUT: JSON lines [text, unicodedata's NFC, tokenizers' NFC or null]

The texts: every assigned code point up to U+2FFFF in runs of 48 (so neighbours compose),
each code point with a canonical decomposition or a combining class after "a" and before
U+0301 and U+0327 (out of order), Hangul jamo and syllables in every arrangement, and 5000
random strings of starters, decomposable letters and combining marks of many classes.
"""
import json
import random
import sys
import unicodedata

try:
    from tokenizers.normalizers import NFC
    hf = NFC().normalize_str
except ImportError:
    hf = None


def cases():
    points = [c for c in range(0xA0, 0x30000)
              if not 0xD800 <= c <= 0xDFFF and unicodedata.category(chr(c)) not in ("Cn", "Cs", "Co")]
    for i in range(0, len(points), 48):
        yield "".join(chr(c) for c in points[i:i + 48])
    special = [c for c in points if unicodedata.decomposition(chr(c)) or unicodedata.combining(chr(c))]
    for c in special:
        yield "a" + chr(c) + "\u0301\u0327" + chr(c) + "b"
    jamo = [chr(c) for c in (0x1100, 0x1112, 0x1161, 0x1175, 0x11A8, 0x11C2, 0x11A7)]
    syllables = ["\uAC00", "\uAC01", "\uD7A3", "\uB098"]
    for a in jamo + syllables:
        for b in jamo + syllables:
            for c in jamo + [""]:
                yield a + b + c
    rng = random.Random(7)
    marks = [c for c in special if unicodedata.combining(chr(c))]
    letters = [c for c in special if not unicodedata.combining(chr(c))] + list(range(0x41, 0x5B))
    pool = marks + letters + [0x20, 0x1100, 0x1161, 0x11A8, 0xAC00, 0x0F71, 0x0F72, 0x0F80]
    for _ in range(5000):
        yield "".join(chr(rng.choice(pool)) for _ in range(rng.randint(1, 8)))


with open(sys.argv[1], "w", encoding="utf-8") as out:
    for text in cases():
        out.write(json.dumps([text, unicodedata.normalize("NFC", text), hf(text) if hf else None],
                             ensure_ascii=False) + "\n")
