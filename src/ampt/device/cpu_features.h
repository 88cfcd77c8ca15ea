// What this CPU computes natively: bf16 and fp16 arithmetic run at speed only where the CPU has
// instructions for them (AVX-512 BF16/FP16, AMX); elsewhere ATen converts every value to fp32
// and back, and bf16 or fp16 training runs several times slower than fp32 does.
#pragma once

#include <istream>
#include <string>
#include <vector>

namespace ampt::device {

struct CpuFeatures {
  std::string model;  // "AMD EPYC 7B13", or empty when /proc/cpuinfo does not say
  bool avx2 = false;
  bool avx512f = false;
  bool avx512_bf16 = false;
  bool amx_bf16 = false;
  bool avx512_fp16 = false;
  bool amx_fp16 = false;
  bool f16c = false;  // conversions only: fp16 is stored, not computed

  bool native_bf16() const { return avx512_bf16 || amx_bf16; }
  bool native_fp16() const { return avx512_fp16 || amx_fp16; }
  // "avx2, avx512f, avx512_bf16, f16c": the flags above that it has.
  std::vector<std::string> flags() const;
};

// The features /proc/cpuinfo's text lists (the first processor's: every core lists the same).
CpuFeatures parse_cpuinfo(std::istream& cpuinfo);

// This machine's, read once.
const CpuFeatures& cpu_features();

}  // namespace ampt::device
