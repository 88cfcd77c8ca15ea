"""What the benchmarks say of the machine they ran on, read from /proc."""
import pathlib
import platform
import re


def cpu_model():
    """The CPU's model name."""
    return next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if "model name" in l),
                platform.processor())


def cpu_tag():
    """A short name for the CPU in a results file's name ("epyc", "xeon"): results of one day from
    different machines do not overwrite each other."""
    words = re.findall(r"[a-z]+", cpu_model().lower())
    known = [w for w in words if w in ("epyc", "xeon", "ryzen", "core", "graviton", "neoverse")]
    return (known or words or ["cpu"])[0]


def cpu_isa():
    """The widest of the instruction sets that decide ATen's bf16 speed."""
    flags = open("/proc/cpuinfo").read()
    return "AVX-512 BF16" if "avx512_bf16" in flags else "AVX-512" if "avx512f" in flags else "AVX2"


def vm_rss(pid):
    """The resident memory of process `pid` in bytes, None once it has gone."""
    try:
        text = pathlib.Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    m = re.search(r"^VmRSS:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) << 10 if m else None


def device_line(device):
    """The device a benchmark ran on, for its results file: the GPU's name, or the CPU's."""
    if device == "cuda":
        import torch
        return torch.cuda.get_device_name(0)
    return f"{cpu_model()} ({cpu_isa()}), CPU"


def _git(*args):
    import subprocess
    root = pathlib.Path(__file__).resolve().parent.parent
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def machine_line(device="cpu"):
    """The machine, as a results file records it: the GPU (with its driver) or the CPU's model,
    cores and the instructions that decide bf16/fp16 speed."""
    if device == "cuda":
        import torch
        props = torch.cuda.get_device_properties(0)
        return (f"{props.name} (compute capability {props.major}.{props.minor}, "
                f"{props.total_memory / 2**30:.0f} GiB), torch {torch.__version__}")
    import os
    flags = open("/proc/cpuinfo").read()
    isa = [f for f in ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16")
           if re.search(rf"\b{f}\b", flags)]
    return f"{cpu_model()}, {os.cpu_count()} cores, {' '.join(isa) or 'no AVX2'}"


def record_header(device="cpu", command=None):
    """The lines every results file opens with, after its title: the commit measured (with
    '+ uncommitted changes' when the tree differed from it), the date, the machine and the
    command, which scripts/check_figures.py requires of each file."""
    import datetime
    import shlex
    import sys
    commit = _git("rev-parse", "--short=7", "HEAD") or "unknown (not a git checkout)"
    if _git("status", "--porcelain", "--untracked-files=no"):
        commit += " + uncommitted changes"
    if command is None:
        command = " ".join(shlex.quote(a) for a in [".venv/bin/python", *sys.argv])
    return (f"- Commit: {commit}\n"
            f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC\n"
            f"- Machine: {machine_line(device)}\n"
            f"- Command: `{command}`\n")


def write_record(path, text, device="cpu", command=None):
    """Writes results file `path`: `text`'s title line, the record header, then the rest."""
    title, _, rest = text.partition("\n")
    pathlib.Path(path).write_text(
        f"{title}\n\n{record_header(device, command)}\n{rest.lstrip(chr(10))}")
