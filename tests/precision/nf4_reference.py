"""Reference nf4 bytes for tests/precision/nf4_test.cpp: bitsandbytes' own quantize_4bit
(quant_type nf4, blocksize 64, double quantization) and dequantize_4bit on its CPU path.

    nf4_reference.py OUT.safetensors

writes, for each case NAME, NAME.weight (the input, in its dtype), NAME.codes (uint8),
NAME.absmax (uint8), NAME.absmax2 (fp32), NAME.offset (fp32, 0-dim) and NAME.dequantized.
"""
import sys

import torch
from safetensors.torch import save_file


def cases():
    g = torch.Generator().manual_seed(7)
    zero_block = torch.randn(3, 128, generator=g)
    zero_block.view(-1)[:64] = 0.0
    # (bitsandbytes' AVX-512 dequantize_4bit misreads rows whose width is a multiple of 16 but
    # not of 64, e.g. 96: none here.)
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
    }


def main(out):
    torch.set_num_threads(1)  # the offset's fp32 mean is ATen's; one thread, one order
    import bitsandbytes.functional as F
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
