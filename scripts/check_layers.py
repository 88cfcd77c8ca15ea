#!/usr/bin/env python3
"""Checks that src/ampt's folders include only what their README.md allows.

Every folder under src/ampt opens with a README.md whose `Uses:` line names the folders it may
include ("nothing" for none). This script fails, naming the file and the include, when a source
file includes a folder its README does not list, when a README lacks the line or names an unknown
folder, or when the allowed uses form a cycle (imports must go one way, down the layers).
Usage: check_layers.py [SRC_AMPT_DIR]
"""
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"ampt/([a-z_]+)/', re.M)


def allowed_uses(folder: pathlib.Path) -> set:
    readme = folder / "README.md"
    if not readme.is_file():
        raise SystemExit(f"{folder}: no README.md saying what the folder is for and what it uses")
    match = re.search(r"^Uses:\s*(.+)$", readme.read_text(), re.M)
    if not match:
        raise SystemExit(f"{readme}: no 'Uses:' line (e.g. 'Uses: core, config' or 'Uses: nothing')")
    text = match.group(1).strip()
    return set() if text == "nothing" else {u.strip() for u in text.split(",")}


def find_cycle(graph: dict) -> list:
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return path + [node, nxt]
            if nxt not in state:
                cycle = visit(nxt, path + [node])
                if cycle:
                    return cycle
        state[node] = "done"
        return []

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node, [])
            if cycle:
                return cycle
    return []


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "src/ampt")
    folders = sorted(p for p in root.iterdir() if p.is_dir())
    names = {f.name for f in folders}
    graph = {f.name: allowed_uses(f) for f in folders}
    problems = []
    for name, uses in graph.items():
        for unknown in sorted(uses - names):
            problems.append(f"{root / name / 'README.md'}: uses '{unknown}', which is not a folder of {root}")
    for folder in folders:
        for source in sorted(folder.rglob("*")):
            if source.suffix not in (".h", ".cpp", ".cu", ".cuh", ".in"):
                continue
            for used in INCLUDE.findall(source.read_text()):
                if used != folder.name and used not in graph[folder.name]:
                    problems.append(f"{source}: includes ampt/{used}/, but {folder.name}/README.md "
                                    f"allows only: {', '.join(sorted(graph[folder.name])) or 'nothing'}")
    cycle = find_cycle(graph)
    if cycle:
        problems.append("the allowed uses form a cycle: " + " -> ".join(cycle))
    for problem in problems:
        print(problem)
    if not problems:
        print(f"{len(folders)} folders, every include allowed, no cycle")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
