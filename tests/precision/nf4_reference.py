"""Reference nf4 bytes for tests/precision/nf4_test.cpp: bitsandbytes' own quantize_4bit
(quant_type nf4, blocksize 64, double quantization) and dequantize_4bit in its block layout
(flat_dequantize below).

    nf4_reference.py OUT.safetensors

writes, for each case NAME, NAME.weight (the input, in its dtype), NAME.codes (uint8),
NAME.absmax (uint8), NAME.absmax2 (fp32), NAME.offset (fp32, 0-dim) and NAME.dequantized.
"""
import sys
import warnings

import torch
from safetensors.torch import save_file

_flat = None  # the Library holding the CPU kernel: registered while it lives


def flat_dequantize():
    """Makes bitsandbytes' dequantize_4bit on CPU tensors read the blocks quantize_4bit wrote:
    block b is flat elements [64b, 64b + 64) whatever the shape, as its CUDA kernel
    (kDequantizeBlockwise: scale[i / blocksize] over the flat index) and its default backend
    (backends/default/ops.py, here run eagerly) read them. 0.50.2's native CPU kernel, where
    AVX-512 runs and a row's length is a multiple of 16, reads row r's column c with
    absmax[r * (cols // 64) + c // 64] instead: another block's scale wherever rows are not a
    multiple of 64 (a [64, 160] weight from flat element 192 on, up to 2 apart for randn values).
    Call once, before any dequantize_4bit."""
    global _flat
    if _flat is not None:
        return
    from bitsandbytes.backends.default import ops as default
    from bitsandbytes.backends.utils import _get_4bit_code

    compute = default._dequantize_4bit_compute.__wrapped__  # compiled, it costs minutes a shape

    def kernel(A, absmax, blocksize, quant_type, shape, dtype):
        code = _get_4bit_code(quant_type, A.device)
        return compute(A.view(torch.uint8).reshape(-1), absmax, code, blocksize, shape, dtype)

    _flat = torch.library.Library("bitsandbytes", "IMPL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Overriding a previously registered kernel": meant
        _flat.impl("dequantize_4bit", kernel, "CPU", allow_override=True)


def cases():
    g = torch.Generator().manual_seed(7)
    zero_block = torch.randn(3, 128, generator=g)
    zero_block.view(-1)[:64] = 0.0
    # Rows of very different scales: the 8-bit absmax codes spread over the dynamic map.
    spread = torch.randn(300, 64, generator=g) * torch.exp(2 * torch.randn(300, 1, generator=g))
    return {
        "bf16": torch.randn(8, 128, generator=g).to(torch.bfloat16),
        "fp16": (0.02 * torch.randn(3, 64, generator=g)).to(torch.float16),
        "short_block": torch.randn(2, 33, generator=g),  # 66 elements: a block of 2 at the end
        "odd": torch.randn(65, generator=g),  # a padded last byte
        "zero_block": zero_block.to(torch.bfloat16),
        "spread": spread,  # 300 blocks: two absmax blocks, the second short
        "ties": torch.tensor([0.5, -0.5, 1.0, -1.0, 0.0, 0.25, -0.25, 0.125] * 8).reshape(1, 64),
        # 266565 values: ampt quantizes 2^18 at a time, so a second chunk and a short block.
        "chunks": (0.02 * torch.randn(4101, 65, generator=g)).to(torch.bfloat16),
        # Rows that are not a multiple of 64, whose blocks run across them: a Llama's down_proj
        # with intermediate 160 (the rows bitsandbytes' AVX-512 CPU kernel misreads), rows of 96
        # (also a multiple of 16) and of 100 (a short last block of 16).
        "rows160": 0.02 * torch.randn(64, 160, generator=g),
        "rows96": (0.02 * torch.randn(5, 96, generator=g)).to(torch.bfloat16),
        "rows100": (0.02 * torch.randn(4, 100, generator=g)).to(torch.float16),
        # An expert group's stack [E, out, in], rows of 160: 300 blocks, two absmax blocks.
        "experts": (0.02 * torch.randn(3, 40, 160, generator=g)).to(torch.bfloat16),
    }


def main(out):
    torch.set_num_threads(1)  # the offset's fp32 mean is ATen's; one thread, one order
    import bitsandbytes.functional as F
    flat_dequantize()
    tensors = {}
    for name, weight in cases().items():
        codes, state = F.quantize_4bit(weight, blocksize=64, compress_statistics=True, quant_type="nf4")
        tensors[f"{name}.weight"] = weight
        tensors[f"{name}.codes"] = codes.reshape(-1).contiguous()
        tensors[f"{name}.absmax"] = state.absmax.contiguous()
        tensors[f"{name}.absmax2"] = state.state2.absmax.contiguous()
        tensors[f"{name}.offset"] = state.offset.reshape(()).to(torch.float32)
        tensors[f"{name}.dequantized"] = F.dequantize_4bit(codes, state).contiguous()
    save_file(tensors, out)


if __name__ == "__main__":
    main(sys.argv[1])
