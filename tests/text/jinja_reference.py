"""Reference renders for tests/text/jinja_test.cpp: jinja2 configured as transformers configures it
for chat templates (trim_blocks, lstrip_blocks, loop controls, {% generation %}, its tojson,
raise_exception and namespace).

    jinja_reference.py CASES OUT   # CASES: [{"template", "variables"}] → OUT: per case {"text",
                                   # "spans": [[start, end] byte offsets of generation blocks]}
                                   # or {"error": "..."}
"""
import json
import sys


def main(cases_path, out_path):
    from transformers.utils.chat_template_utils import _compile_jinja_template
    results = []
    for case in json.load(open(cases_path, encoding="utf-8")):
        try:
            template = _compile_jinja_template(case["template"])
            blocks, spans = [], []
            with template.environment.activate_tracker(blocks, spans):
                for block in template.generate(**case["variables"]):
                    blocks.append(block)
            text = "".join(blocks)
            # transformers' spans count characters; the C++ side counts UTF-8 bytes.
            to_bytes = lambda i: len(text[:i].encode("utf-8"))  # noqa: E731
            results.append({"text": text, "spans": [[to_bytes(a), to_bytes(b)] for a, b in spans]})
        except Exception as e:  # the case's expected outcome: an error
            results.append({"error": f"{type(e).__name__}: {e}"})
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(results, f, ensure_ascii=False)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
