// nf4 storage against bitsandbytes 0.50.2's quantize_4bit / dequantize_4bit byte for byte (its
// blocks of 64 run over the flat weight, across rows of any length: nf4_reference.py), and by hand
// where no Python is at hand.
#include "ampt/precision/nf4.h"

#include "ampt/checkpoint/safetensors.h"
#include "ampt/kernels/dequantize.h"
#include "support/process.h"
#include "support/skip.h"
#include "support/python_modules.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <map>
#include <string>

using ampt::precision::dequantize_nf4;
using ampt::precision::quantize_nf4;

namespace {

bool have_bitsandbytes() {
  return ampt::test::python_has("bitsandbytes");
}

bool same_bytes(const torch::Tensor& a, const torch::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

}  // namespace

TEST_CASE("nf4: codes, both absmax levels and the dequantized weight equal bitsandbytes' byte for "
          "byte, rows of any length and expert stacks included",
          "[precision][nf4][python]") {
  if (!have_bitsandbytes()) {
    AMPT_SKIP(reference, "skipping: bitsandbytes missing in " AMPT_PYTHON " (run scripts/bootstrap.sh)");
  }
  const auto path = ampt::test::make_temp_dir() + "/nf4.safetensors";
  const auto r = ampt::test::run_process(
      {AMPT_PYTHON, AMPT_SOURCE_DIR "/tests/precision/nf4_reference.py", path});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::map<std::string, torch::Tensor> ref;
  for (auto& [name, tensor] : ampt::checkpoint::read_safetensors(path)) ref[name] = tensor;
  int cases = 0;
  for (const auto& [key, weight] : ref) {
    if (!key.ends_with(".weight")) continue;
    const auto name = key.substr(0, key.size() - 7);
    INFO(name);
    ++cases;
    const auto q = quantize_nf4(weight);
    CHECK(same_bytes(q.codes, ref[name + ".codes"]));
    CHECK(same_bytes(q.absmax, ref[name + ".absmax"]));
    CHECK(same_bytes(q.absmax2, ref[name + ".absmax2"]));
    CHECK(q.offset == ref[name + ".offset"].item<float>());
    const auto back = dequantize_nf4(q, weight.scalar_type());
    CHECK(same_bytes(back, ref[name + ".dequantized"]));
  }
  CHECK(cases == 12);
}

TEST_CASE("nf4: the layout by hand: block absmax, nearest value, first element high, padding",
          "[precision][nf4]") {
  // One block of 64: absmax 2, so the values scale by 1/2.
  auto w = torch::zeros({64});
  w[0] = 2.0;    // 1.0 → code 15
  w[1] = -2.0;   // -1.0 → code 0
  w[2] = 0.1;    // 0.05, nearer 0.0796 (8) than 0.0 (7)
  w[3] = 0.07;   // 0.035, nearer 0.0 (7)
  const auto q = quantize_nf4(w);
  REQUIRE(q.codes.numel() == 32);
  CHECK(q.codes[0].item<uint8_t>() == 0xF0);
  CHECK(q.codes[1].item<uint8_t>() == 0x87);
  CHECK(q.codes[2].item<uint8_t>() == 0x77);  // zeros are code 7
  // One block: its absmax minus the mean is 0, which codes to 0 with scale 0.
  CHECK(q.offset == 2.0f);
  CHECK(q.absmax2.item<float>() == 0.0f);
  const auto back = dequantize_nf4(q, torch::kFloat);
  CHECK(back[0].item<float>() == 2.0f);
  CHECK(back[1].item<float>() == -2.0f);
  CHECK(back[2].item<float>() == ampt::kernels::nf4_values()[8] * 2.0f);
  // An odd count pads one 0.0 in the last byte's low nibble; the shape and dtype come back.
  const auto odd = quantize_nf4(torch::ones({3, 3}, torch::kBFloat16));
  CHECK(odd.codes.numel() == 5);
  CHECK(odd.codes[4].item<uint8_t>() == 0xF7);
  const auto ones = dequantize_nf4(odd, torch::kBFloat16);
  CHECK(ones.sizes() == torch::IntArrayRef{3, 3});
  CHECK(ones.scalar_type() == torch::kBFloat16);
  CHECK(torch::equal(ones, torch::ones({3, 3}, torch::kBFloat16)));
  // Storage: half a byte per weight, plus a byte per 64 and fp32 per 16384.
  const auto big = quantize_nf4(torch::randn({256, 256}));
  CHECK(big.bytes() == 256 * 256 / 2 + 1024 + 4 * 4 + 4);
  CHECK_THROWS_WITH(quantize_nf4(torch::ones({4}, torch::kInt64)),
                    "nf4 quantizes fp32, bf16 or fp16 weights, not Long");
}

TEST_CASE("nf4: a weight of several dequantization chunks equals the one-pass formula",
          "[precision][qlora]") {
  // 701 x 999 values: two whole chunks of 2^18, a partial one, and an odd count's padding.
  torch::manual_seed(3);
  const auto w = torch::randn({701, 999}).to(torch::kBFloat16);
  const auto q = quantize_nf4(w);
  const auto& values = ampt::kernels::nf4_values();
  const auto& map = ampt::kernels::dynamic_map();
  const auto table = torch::tensor(std::vector<float>(values.begin(), values.end()));
  const auto table8 = torch::tensor(std::vector<float>(map.begin(), map.end()));
  const int64_t n = w.numel();
  const auto scale = q.absmax2.repeat_interleave(256).narrow(0, 0, q.absmax.numel());
  const auto absmax = table8.index_select(0, q.absmax.to(torch::kLong)) * scale + q.offset;
  const auto packed = q.codes.to(torch::kLong);
  const auto codes =
      torch::stack({packed.bitwise_right_shift(4), packed.bitwise_and(15)}, 1).reshape(-1).narrow(0, 0, n);
  const auto expected = (table.index_select(0, codes) *
                         absmax.repeat_interleave(64).narrow(0, 0, n))
                            .to(torch::kBFloat16)
                            .reshape({701, 999});
  CHECK(torch::equal(dequantize_nf4(q, torch::kBFloat16), expected));
}
