#!/usr/bin/env python3
"""Lists the figures in README.md and docs/ that name no source, and the results files that do not
say how they were made.

A figure is a number with a unit of time, memory, throughput, a ratio (1.96x, 10x), a percentage,
or a count the benchmarks make (operators, autograd nodes, instructions, tests passed/skipped).
Each paragraph, list item or table that holds one must name where it comes from:
- a file under benchmarks/results/ (a measurement: it records the commit, the date, the machine and
  the command that made it), or
- a test under tests/ (a bound that test holds, such as "within 2%"), or
- a source file under src/ or scripts/, the top-level CMakeLists.txt, or a benchmarks/*.py script
  (a constant the code sets, such as 25 MiB buckets, or a target a benchmark reports against).
Every named path must exist (a glob or {a,b} must match a file). Figures inside code blocks and
inline `code` (example output, a setting's value) are not figures. docs/options.md is generated
from the option table and not checked.

Each benchmarks/results/*.md must carry, in its first 40 lines, the lines `Commit:`, `Date:`,
`Machine:` and `Command:` (as `- Commit: ...` list items or plain lines), as benchmarks/machine.py's
record_header() writes them.

Usage: check_figures.py [REPO_ROOT]   (exit 1 and one line per problem when there are any)
"""
import glob
import pathlib
import re
import sys

UNIT = (r"(?:ns|µs|us|ms|s|sec|seconds?|min|minutes?|hours?|h"
        r"|KB|KiB|MB|MiB|GB|GiB|TB|TiB|bytes?"
        r"|[KMG]?(?:tokens?|tok|samples?|steps?|records?|pairs?|images?|windows?)/s|[KMGT]?FLOP/s|MB/s|GB/s"
        r"|operators?|autograd nodes|instructions|passed|skipped|failed)")
NUMBER = r"(?<![\w.^/-])\d[\d,]*(?:\.\d+)?(?:\s?[KMB])?"
FIGURE = re.compile(
    rf"{NUMBER}\s?(?:{UNIT}(?![\w/])|[×x](?![\w])(?!\s?\d)|%)|{NUMBER}\s(?:million|billion) instructions")
# A path named as a source; one followed by '<' is a pattern the text explains (results/h100-<date>.md).
SOURCE = re.compile(r"(?<![\w/])(?:\.\./)*((?:benchmarks/results|tests|src|scripts)/[\w./*{},+<>-]*[\w*}>]"
                    r"|benchmarks/\w+\.py|CMakeLists\.txt)")
CODE_SPAN = re.compile(r"`[^`]*`")
LINK_TARGET = re.compile(r"\]\([^)]*\)")
UNIT_START = re.compile(r"^\s*(?:[-*+]|\d+\.)\s|^#")
RECORD_KEYS = ("Commit", "Date", "Machine", "Command")


def expand(pattern):
    """The paths a source names: a brace list and a glob expanded."""
    brace = re.search(r"\{([^}]*)\}", pattern)
    if brace:
        return [p for choice in brace.group(1).split(",")
                for p in expand(pattern[:brace.start()] + choice + pattern[brace.end():])]
    return [pattern]


def source_exists(root, path):
    return any(glob.glob(str(root / p)) for p in expand(path.rstrip(".,")))


def units(text):
    """The paragraphs, list items and tables of a Markdown text outside code blocks, each as
    (first line number, text)."""
    found, current, start, fenced = [], [], 0, False
    lines = text.split("\n")

    def close():
        if current:
            found.append((start, "\n".join(current)))
        current.clear()

    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            close()
            fenced = not fenced
            continue
        if fenced:
            continue
        is_table = line.lstrip().startswith("|")
        previous_table = bool(current) and current[-1].lstrip().startswith("|")
        if not line.strip() or UNIT_START.match(line) or is_table != previous_table:
            close()
        if line.strip():
            if not current:
                start = number
            current.append(line)
    close()
    return found


def check_document(root, path):
    problems = []
    for line, unit in units(path.read_text()):
        sources = [s for s in SOURCE.findall(unit) if "<" not in s]
        for source in sources:
            if not source_exists(root, source):
                problems.append(f"{path.relative_to(root)}:{line}: names {source}, which does not exist")
        prose = LINK_TARGET.sub("]", CODE_SPAN.sub("", unit))
        figures = FIGURE.findall(prose)
        if figures and not sources:
            shown = ", ".join(dict.fromkeys(' '.join(f.split()) for f in figures))
            problems.append(f"{path.relative_to(root)}:{line}: {shown} with no source "
                            "(a benchmarks/results/ file, a test, or the code that sets it)")
    return problems


def check_record(root, path):
    head = "\n".join(path.read_text().split("\n")[:40])
    missing = [k for k in RECORD_KEYS if not re.search(rf"^(?:[-*]\s+)?\**{k}\**:", head, re.M)]
    if not missing:
        return []
    return [f"{path.relative_to(root)}: does not record its {', '.join(missing)} "
            f"(lines '{k}: ...' near the top, as benchmarks/machine.py's record_header() writes)"
            for k in missing[:1]]


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent).resolve()
    documents = [root / "README.md"] + sorted(p for p in (root / "docs").rglob("*.md")
                                              if p.name != "options.md")
    problems = []
    for document in documents:
        if document.is_file():
            problems += check_document(root, document)
    for record in sorted((root / "benchmarks" / "results").glob("*.md")):
        problems += check_record(root, record)
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_figures: {len(problems)} problems")
        return 1
    print(f"check_figures: {len(documents)} documents, every figure sourced; every results file recorded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
