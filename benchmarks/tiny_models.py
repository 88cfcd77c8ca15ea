"""The random checkpoints the benchmarks compare ampt and the Python libraries on, made once with
transformers (no hub) and cached."""
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
PYTHON = ROOT / ".venv" / "bin" / "python"


def llama_family(cache, args, positions, flavour="llama"):
    """The path of a random `flavour` (llama, qwen2, qwen3, mistral) of args' --layers, --hidden,
    --intermediate, --heads and --kv_heads with GPT-2's tokenizer and `positions` positions
    (tests/hf/llama_reference.py make), made under `cache` unless it is there already."""
    shape = f"{args.layers}x{args.hidden}-{args.intermediate}-{args.heads}h{args.kv_heads}"
    path = pathlib.Path(cache) / f"{flavour}-{shape}"
    if not (path / "config.json").exists():
        subprocess.run([str(PYTHON), str(ROOT / "tests" / "hf" / "llama_reference.py"), "make", str(path),
                        "--flavour", flavour, "--n_layer", str(args.layers), "--hidden", str(args.hidden),
                        "--inter", str(args.intermediate), "--heads", str(args.heads), "--kv_heads",
                        str(args.kv_heads), "--positions", str(positions), "--vocab", "50257",
                        "--tokenizer", str(ROOT / ".deps" / "gpt2.tiktoken")], check=True)
    return path
