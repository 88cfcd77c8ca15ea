#include "ampt/device/cpu_features.h"

#include <fstream>
#include <sstream>
#include <utility>

namespace ampt::device {

std::vector<std::string> CpuFeatures::flags() const {
  const std::pair<const char*, bool> all[] = {
      {"avx2", avx2},         {"avx512f", avx512f},         {"avx512_bf16", avx512_bf16},
      {"amx_bf16", amx_bf16}, {"avx512_fp16", avx512_fp16}, {"amx_fp16", amx_fp16},
      {"f16c", f16c}};
  std::vector<std::string> out;
  for (const auto& [name, has] : all) {
    if (has) out.emplace_back(name);
  }
  return out;
}

CpuFeatures parse_cpuinfo(std::istream& cpuinfo) {
  CpuFeatures features;
  bool flags_read = false;
  const auto value = [](const std::string& line) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) return std::string();
    const auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : line.substr(start);
  };
  for (std::string line; std::getline(cpuinfo, line);) {
    if (features.model.empty() && line.starts_with("model name")) features.model = value(line);
    if (flags_read || !line.starts_with("flags")) continue;
    flags_read = true;
    std::istringstream flags(value(line));
    for (std::string flag; flags >> flag;) {
      features.avx2 |= flag == "avx2";
      features.avx512f |= flag == "avx512f";
      features.avx512_bf16 |= flag == "avx512_bf16";
      features.amx_bf16 |= flag == "amx_bf16";
      features.avx512_fp16 |= flag == "avx512_fp16";
      features.amx_fp16 |= flag == "amx_fp16";
      features.f16c |= flag == "f16c";
    }
  }
  return features;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    std::ifstream cpuinfo("/proc/cpuinfo");
    return parse_cpuinfo(cpuinfo);
  }();
  return features;
}

}  // namespace ampt::device
