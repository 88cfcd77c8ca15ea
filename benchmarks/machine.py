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
