"""Rewrites the CUDA C++ of src/ampt/kernels/cuda into C++ that emulated_cuda.h runs on CPU threads.

- Each launch `kernel<<<config>>>(args)` becomes
  `::emu::launch(::emu::LaunchConfig(config), ::emu::file_images(), [&] { kernel(args); })`:
  the file's images decide whether the emulated device runs it.
- The namespace ampt::kernels::cuda becomes ampt::kernels::cuda_emulated, so the real kernels and
  the emulated ones link into one test binary, and includes of that folder's headers name the
  rewritten copies ("cuda_emulated/launch.h").
- Line numbers stay the original file's (a #line directive, and as many newlines as before), so
  compiler messages and the emulation's faults name the kernel file's lines.

usage: translate.py OUT_DIR FILE...   (x.cu → OUT_DIR/x.cpp; headers keep their names)
"""

import pathlib
import re
import sys

IDENTIFIER = re.compile(r"[A-Za-z0-9_:]")


class TranslateError(Exception):
    pass


def line_of(text, position):
    return text.count("\n", 0, position) + 1


def matching(text, start, opening, closing):
    """The index just past the bracket that closes text[start] (an `opening`)."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == opening:
            depth += 1
        elif text[i] == closing:
            depth -= 1
            if depth == 0:
                return i + 1
    raise TranslateError(f"line {line_of(text, start)}: no '{closing}' closes this '{opening}'")


def kernel_start(text, launch):
    """Where the kernel's name (with its template arguments, if any) begins before `<<<`."""
    i = launch
    while i > 0 and text[i - 1].isspace():
        i -= 1
    if text[i - 1] == ">":  # template arguments: back to their '<'
        depth = 0
        while i > 0:
            i -= 1
            if text[i] == ">":
                depth += 1
            elif text[i] == "<":
                depth -= 1
                if depth == 0:
                    break
        while i > 0 and text[i - 1].isspace():
            i -= 1
    end = i
    while i > 0 and IDENTIFIER.match(text[i - 1]):
        i -= 1
    if i == end:
        raise TranslateError(f"line {line_of(text, launch)}: no kernel name before '<<<'")
    return i


def rewrite_launches(text):
    out, done = [], 0
    while (launch := text.find("<<<", done)) != -1:
        start = kernel_start(text, launch)
        config_end = text.find(">>>", launch)
        if config_end == -1:
            raise TranslateError(f"line {line_of(text, launch)}: '<<<' without '>>>'")
        args = config_end + 3
        while args < len(text) and text[args].isspace():
            args += 1
        if args >= len(text) or text[args] != "(":
            raise TranslateError(f"line {line_of(text, launch)}: no arguments after '>>>'")
        args_end = matching(text, args, "(", ")")
        name = text[start:launch].rstrip()
        config = text[launch + 3:config_end]
        arguments = text[args:args_end]
        # The newlines between the name and the arguments, kept after the call.
        gap = text[len(name) + start:args].count("\n") - config.count("\n")
        out.append(text[done:start])
        out.append(f"::emu::launch(::emu::LaunchConfig({config}), ::emu::file_images(), "
                   f"[&] {{ {name}{arguments}; }})")
        out.append("\n" * gap)
        done = args_end
    out.append(text[done:])
    return "".join(out)


def translate(source, text):
    text = rewrite_launches(text)
    text = re.sub(r"\bampt::kernels::cuda\b", "ampt::kernels::cuda_emulated", text)
    text = re.sub(r'#include "ampt/kernels/cuda/([^"/]+)"', r'#include "cuda_emulated/\1"', text)
    return f'#line 1 "{source}"\n{text}'


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    out_dir = pathlib.Path(argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in argv[2:]:
        source = pathlib.Path(name)
        target = out_dir / (source.stem + ".cpp" if source.suffix == ".cu" else source.name)
        try:
            translated = translate(source.resolve(), source.read_text())
        except TranslateError as error:
            print(f"translate.py: {source}: {error}", file=sys.stderr)
            return 1
        # Unchanged output keeps its time stamp: nothing recompiles.
        if not target.exists() or target.read_text() != translated:
            target.write_text(translated)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
