// --fp8_layers: auto's choice from injected timings, the cache per device and shape, patterns,
// the table printed at startup, and the real measurement run on a CPU.
#include "ampt/precision/fp8_layers.h"

#include "ampt/core/errors.h"
#include "ampt/precision/fp8_gemm_timer.h"

#include <ATen/record_function.h>
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

using ampt::precision::choose_fp8_layers;
using ampt::precision::Fp8Candidate;
using ampt::precision::Fp8TimingCache;
using ampt::precision::GemmShape;
using ampt::precision::GemmTimes;

namespace {

// A GPT's candidates as its layer inventory lists them: width 64, vocabulary 512, each MLP's
// c_fc paired with its c_proj.
// Block i's layer `name` of `prefix` ("h"), its kind "h.*.name" as the inventory gives it.
Fp8Candidate in_block(const std::string& prefix, int i, const std::string& name, int64_t in,
                      int64_t out, const std::string& paired = "") {
  return {fmt::format("{}.{}.{}", prefix, i, name), in, out,
          paired.empty() ? "" : fmt::format("{}.{}.{}", prefix, i, paired), i,
          fmt::format("{}.*.{}", prefix, name)};
}

std::vector<Fp8Candidate> gpt_candidates(int blocks) {
  std::vector<Fp8Candidate> out;
  for (int i = 0; i < blocks; ++i) {
    out.push_back(in_block("h", i, "attn.c_attn", 64, 192));
    out.push_back(in_block("h", i, "attn.c_proj", 64, 64));
    out.push_back(in_block("h", i, "mlp.c_fc", 64, 256, "mlp.c_proj"));
    out.push_back(in_block("h", i, "mlp.c_proj", 256, 64));
  }
  out.push_back({"head", 64, 512});
  return out;
}

// Made-up times by output width; counts the measurements.
struct FakeTimer {
  std::map<int64_t, GemmTimes> by_out = {{192, {1.0, 1.25}},  // c_attn: fp8 slower
                                         {64, {0.5, 0.5}},    // the projections: a tie
                                         {256, {2.0, 1.0}},   // c_fc: fp8 twice as fast
                                         {512, {4.0, 2.5}}};  // head
  int calls = 0;
  GemmTimes operator()(const GemmShape& s) {
    ++calls;
    return by_out.at(s.out);
  }
};

}  // namespace

TEST_CASE("fp8 layers auto: fp8 where it measured faster, each shape measured once",
          "[precision][fp8]") {
  FakeTimer timer;
  const auto measure = [&](const GemmShape& s) { return timer(s); };
  Fp8TimingCache cache;
  const auto plan = choose_fp8_layers("auto", gpt_candidates(3), 256, "H100, delayed", measure, cache);
  // Five shapes among 13 layers: c_attn, the two projections (64 -> 64 and 256 -> 64), c_fc, head.
  CHECK(timer.calls == 5);
  CHECK(cache.size() == 5);
  REQUIRE(plan.layers.size() == 13);
  CHECK(plan.layers[0].shape == GemmShape{256, 64, 192});
  for (int i = 0; i < 3; ++i) {
    INFO("block " << i);
    CHECK_FALSE(plan.fp8(fmt::format("h.{}.attn.c_attn", i)));  // slower
    CHECK_FALSE(plan.fp8(fmt::format("h.{}.attn.c_proj", i)));  // not faster
    CHECK(plan.fp8(fmt::format("h.{}.mlp.c_fc", i)));
    // A tie alone, but the MLP's pair is faster in fp8 (1.5 ms against 2.5): c_fc's choice.
    CHECK(plan.fp8(fmt::format("h.{}.mlp.c_proj", i)));
  }
  CHECK(plan.fp8("head"));  // a candidate like any other
  CHECK_FALSE(plan.fp8("h.9.mlp.c_fc"));  // not a layer

  // The same device again: nothing measured. Another device or recipe: measured anew.
  choose_fp8_layers("auto", gpt_candidates(3), 256, "H100, delayed", measure, cache);
  CHECK(timer.calls == 5);
  choose_fp8_layers("auto", gpt_candidates(3), 256, "H100, rowwise", measure, cache);
  CHECK(timer.calls == 10);
  // Another micro-batch is another shape.
  choose_fp8_layers("auto", gpt_candidates(3), 512, "H100, delayed", measure, cache);
  CHECK(timer.calls == 15);
  CHECK(cache.size() == 15);
}

TEST_CASE("fp8 layers auto: a block's MLP Linears take one precision, the faster in sum",
          "[precision][fp8]") {
  FakeTimer timer;
  // c_proj (256 -> 64) slower in fp8 by more than c_fc gains: both stay bf16. The attention's
  // c_proj (64 -> 64) has no partner and keeps its own choice.
  timer.by_out[256] = {1.0, 0.9};
  timer.by_out[64] = {0.5, 0.7};
  Fp8TimingCache cache;
  const auto plan = choose_fp8_layers("auto", gpt_candidates(2), 256, "gpu",
                                      [&](const GemmShape& s) { return timer(s); }, cache);
  for (int i = 0; i < 2; ++i) {
    INFO("block " << i);
    CHECK_FALSE(plan.fp8(fmt::format("h.{}.mlp.c_fc", i)));  // faster alone (1.1x)
    CHECK_FALSE(plan.fp8(fmt::format("h.{}.mlp.c_proj", i)));
  }
  // Patterns are taken as written: one MLP Linear alone is the user's choice.
  const auto pattern = choose_fp8_layers("h.*.mlp.c_fc", gpt_candidates(2), 256, "gpu", {}, cache);
  CHECK(pattern.fp8("h.0.mlp.c_fc"));
  CHECK_FALSE(pattern.fp8("h.0.mlp.c_proj"));
}

TEST_CASE("fp8 layers all and patterns measure nothing", "[precision][fp8]") {
  const auto never = [](const GemmShape&) -> GemmTimes {
    FAIL("measured without auto");
    return {};
  };
  Fp8TimingCache cache;
  const auto all = choose_fp8_layers("all", gpt_candidates(2), 64, "cpu", never, cache);
  CHECK(std::ranges::all_of(all.layers, [](const auto& l) { return l.fp8 && !l.times; }));

  const auto some = choose_fp8_layers("h.*.mlp.*, head", gpt_candidates(2), 64, "cpu", never, cache);
  CHECK(some.fp8("h.0.mlp.c_fc"));
  CHECK(some.fp8("h.1.mlp.c_proj"));
  CHECK(some.fp8("head"));
  CHECK_FALSE(some.fp8("h.0.attn.c_attn"));
  CHECK_FALSE(some.fp8("h.1.attn.c_proj"));
  CHECK(cache.size() == 0);

  CHECK_THROWS_AS(choose_fp8_layers("h.*.mlp.*,lm_head", gpt_candidates(2), 64, "cpu", never, cache),
                  ampt::UsageError);
  CHECK_THROWS_WITH(
      choose_fp8_layers("h.*.mlp.*,lm_head", gpt_candidates(2), 64, "cpu", never, cache),
      "fp8_layers pattern 'lm_head' matches no layer that can run in fp8; those are "
      "h.0-1.attn.c_attn, h.0-1.attn.c_proj, h.0-1.mlp.c_fc, h.0-1.mlp.c_proj, head");
}

TEST_CASE("fp8 layers table: one row per run of blocks with the same choice",
          "[precision][fp8]") {
  FakeTimer timer;
  Fp8TimingCache cache;
  const auto measured = choose_fp8_layers(
      "auto", gpt_candidates(4), 256, "gpu", [&](const GemmShape& s) { return timer(s); }, cache);
  CHECK(measured.table() ==
        std::vector<std::string>{
            "fp8 layers (--fp8_layers auto, fp8 where its GEMMs measured faster, a block's MLP "
            "Linears together): 9 of 17 in fp8",
            "| layers | GEMM (rows x in -> out) | bf16 ms | fp8 ms | fp8 gain | runs in |",
            "|---|---|---:|---:|---:|---|",
            "| h.0-3.attn.c_attn | 256 x 64 -> 192 | 1.000 | 1.250 | 0.80x | bf16 |",
            "| h.0-3.attn.c_proj | 256 x 64 -> 64 | 0.500 | 0.500 | 1.00x | bf16 |",
            "| h.0-3.mlp.c_fc | 256 x 64 -> 256 | 2.000 | 1.000 | 2.00x | fp8 |",
            "| h.0-3.mlp.c_proj | 256 x 256 -> 64 | 0.500 | 0.500 | 1.00x | fp8 |",
            "| head | 256 x 64 -> 512 | 4.000 | 2.500 | 1.60x | fp8 |"});

  const auto patterns = choose_fp8_layers("h.1.*,h.3.*,h.2.mlp.c_fc", gpt_candidates(4), 64,
                                          "gpu", {}, cache);
  CHECK(patterns.table() ==
        std::vector<std::string>{
            "fp8 layers (--fp8_layers h.1.*,h.3.*,h.2.mlp.c_fc): 9 of 17 in fp8",
            "| layers | GEMM (rows x in -> out) | bf16 ms | fp8 ms | fp8 gain | runs in |",
            "|---|---|---:|---:|---:|---|",
            "| h.0,2.attn.c_attn | 64 x 64 -> 192 | – | – | – | bf16 |",
            "| h.0,2.attn.c_proj | 64 x 64 -> 64 | – | – | – | bf16 |",
            "| h.0.mlp.c_fc | 64 x 64 -> 256 | – | – | – | bf16 |",
            "| h.0,2.mlp.c_proj | 64 x 256 -> 64 | – | – | – | bf16 |",
            "| h.1,3.attn.c_attn | 64 x 64 -> 192 | – | – | – | fp8 |",
            "| h.1,3.attn.c_proj | 64 x 64 -> 64 | – | – | – | fp8 |",
            "| h.1-3.mlp.c_fc | 64 x 64 -> 256 | – | – | – | fp8 |",
            "| h.1,3.mlp.c_proj | 64 x 256 -> 64 | – | – | – | fp8 |",
            "| head | 64 x 64 -> 512 | – | – | – | bf16 |"});
}

namespace {

// Counts the operator calls on every thread (backward's too) while it exists, by name and the
// dtype of the first tensor they take ("aten::mm BFloat16"); one at a time.
class OperatorCalls {
 public:
  OperatorCalls() {
    counting_ = this;
    handle_ = at::addGlobalCallback(
        at::RecordFunctionCallback(
            [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
              std::string key = fn.name();
              for (const auto& input : fn.inputs()) {
                if (!input.isTensor()) continue;
                key += std::string(" ") + c10::toString(input.toTensor().scalar_type());
                break;
              }
              std::lock_guard lock(counting_->mutex_);
              ++counting_->calls_[key];
              return nullptr;
            })
            .needsInputs(true)
            .scopes({at::RecordScope::FUNCTION}));
  }
  ~OperatorCalls() { at::removeCallback(handle_); }
  OperatorCalls(const OperatorCalls&) = delete;
  OperatorCalls& operator=(const OperatorCalls&) = delete;

  // The calls of these operators so far.
  double of(const std::set<std::string>& names) const {
    std::lock_guard lock(mutex_);
    int64_t sum = 0;
    for (const auto& name : names) sum += calls_.contains(name) ? calls_.at(name) : 0;
    return static_cast<double>(sum);
  }

 private:
  static inline OperatorCalls* counting_ = nullptr;
  mutable std::mutex mutex_;
  std::map<std::string, int64_t> calls_;
  at::CallbackHandle handle_ = 0;
};

}  // namespace

TEST_CASE("fp8 layers: the measurement times both precisions of a layer", "[precision][fp8]") {
  // On a CPU (its _scaled_mm): the same code a GPU run times, small enough to be quick.
  const auto measure = ampt::precision::gemm_timer(torch::kCPU, ampt::precision::Fp8Recipe{});
  const auto t = measure({32, 64, 48});
  CHECK(std::isfinite(t.bf16_ms));
  CHECK(std::isfinite(t.fp8_ms));
  CHECK(t.bf16_ms > 0.0);
  CHECK(t.fp8_ms > 0.0);
}

TEST_CASE("fp8 layers: each precision's time is one forward and backward of its own GEMMs",
          "[precision][fp8]") {
  // A clock that counts GEMM calls in place of milliseconds: a time is then the GEMMs one timed
  // call ran. A layer's forward and backward are three (y, dx, dW): bf16's in bfloat16 through
  // ATen's addmm and mm, fp8's on a CPU in float32 through mm, from the dequantised fp8 operands
  // (kernels/fp8_gemm.h). Timing forward only, the warm-up too, a whole round rather than one
  // call, or either precision in the other's place, each gives other counts.
  const ampt::precision::GemmShape shape{32, 64, 48};
  const ampt::precision::Fp8Recipe recipe;
  const OperatorCalls calls;
  const auto counting = [&](std::set<std::string> gemms) {
    return ampt::precision::gemm_timer(torch::kCPU, recipe,
                                       [&calls, gemms] { return calls.of(gemms); })(shape);
  };
  const auto by_half = counting({"aten::addmm BFloat16", "aten::mm BFloat16"});
  CHECK(by_half.bf16_ms == 3.0);
  CHECK(by_half.fp8_ms == 0.0);
  const auto by_float = counting({"aten::addmm Float", "aten::mm Float"});
  CHECK(by_float.bf16_ms == 0.0);
  CHECK(by_float.fp8_ms == 3.0);
}

TEST_CASE("fp8 layers table: Llama's blocks (layers.N) group as GPT's do", "[precision][fp8]") {
  std::vector<Fp8Candidate> llama;
  for (int i = 0; i < 2; ++i) {
    for (const char* name : {"self_attn.q_proj", "self_attn.o_proj"}) {
      llama.push_back(in_block("layers", i, name, 64, 64));
    }
    for (const char* name : {"mlp.gate_proj", "mlp.up_proj"}) {
      llama.push_back(in_block("layers", i, name, 64, 128));
    }
    llama.push_back(in_block("layers", i, "mlp.down_proj", 128, 64));
  }
  llama.push_back({"head", 64, 512});
  Fp8TimingCache cache;
  const auto plan = choose_fp8_layers("layers.*.mlp.*", llama, 64, "gpu", {}, cache);
  const auto table = plan.table();
  REQUIRE(table.size() == 3 + 6);  // title, header, rule, five kinds and the head
  CHECK(table[3] == "| layers.0-1.self_attn.q_proj | 64 x 64 -> 64 | – | – | – | bf16 |");
  CHECK(table[5] == "| layers.0-1.mlp.gate_proj | 64 x 64 -> 128 | – | – | – | fp8 |");
  CHECK(table[7] == "| layers.0-1.mlp.down_proj | 64 x 128 -> 64 | – | – | – | fp8 |");
  CHECK(table[8] == "| head | 64 x 64 -> 512 | – | – | – | bf16 |");
}
