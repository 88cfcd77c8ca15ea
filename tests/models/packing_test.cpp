// Packed examples never see each other: on tiny GPT-2, Llama, Qwen2 and windowed Mistral models (fp32, CPU), a
// batch of windows that each hold several instruction examples gives every example the loss it
// has alone in a padded window, the same gradients for every parameter, and 20 AdamW steps on
// packed windows follow the same steps on the examples one per window; so do chats rendered by
// Qwen3's own Jinja template (reasoning blocks, tool calls) on a tiny Qwen2 model.
#include "ampt/data/document_examples.h"
#include "ampt/models/kv_cache.h"
#include "ampt/models/packed_sequences.h"
#include "ampt/models/registry.h"
#include "ampt/text/chat_jinja.h"
#include "ampt/text/tokenize_chats.h"
#include "support/process.h"
#include "support/skip.h"
#include "text/text_fixtures.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

using ampt::data::Batch;
using ampt::data::Document;
using ampt::data::DocumentExamples;
using ampt::data::TokenSpan;

namespace {

constexpr int64_t kWindow = 32;

// A span over bytes the span itself keeps alive.
template <class T>
TokenSpan span_of(std::vector<T> values, const std::string& name) {
  auto owned = std::make_shared<std::vector<T>>(std::move(values));
  return {name, owned, owned->data(), static_cast<int64_t>(owned->size()), static_cast<int>(sizeof(T))};
}

struct Examples {
  std::unique_ptr<DocumentExamples> packed, unpacked;
};

// 24 prompt/answer examples of 3 to 17 tokens over `vocab` ids, answers scored (bit 0 of the
// mask), packed greedily into windows of kWindow and one per window.
Examples instruction_examples(int64_t vocab) {
  std::vector<uint16_t> tokens;
  std::vector<uint8_t> mask;
  std::vector<Document> documents;
  uint32_t state = 7;
  const auto next = [&](uint32_t below) {
    state = state * 1664525u + 1013904223u;
    return (state >> 8) % below;
  };
  for (int e = 0; e < 24; ++e) {
    const int64_t prompt = 2 + next(4), answer = 1 + next(12);
    documents.push_back({0, static_cast<int64_t>(tokens.size()), prompt + answer});
    for (int64_t t = 0; t < prompt + answer; ++t) {
      tokens.push_back(static_cast<uint16_t>(next(static_cast<uint32_t>(vocab))));
      mask.push_back(static_cast<uint8_t>((t == 0 ? 2 : 0) | (t >= prompt ? 1 : 0)));
    }
  }
  const auto make = [&](bool packed) {
    return std::make_unique<DocumentExamples>(
        std::vector<TokenSpan>{span_of(tokens, "tokens")}, documents, kWindow, std::nullopt, 0,
        vocab, std::vector<TokenSpan>{span_of(mask, "mask")}, packed);
  };
  return {make(true), make(false)};
}

// Chats rendered by Qwen3's published template over a byte tokenizer with its special tokens,
// packed greedily into windows of `window` and one per window; `vocab` is the tokenizer's.
Examples qwen3_chat_examples(int64_t window, int64_t& vocab) {
  auto v = ampt::test::toy_vocabulary({});
  for (const char* special : {"<|im_start|>", "<|im_end|>"}) {
    v.special_ids.push_back(static_cast<int32_t>(v.tokens.size()));
    v.tokens.push_back(special);
  }
  const ampt::text::Tokenizer tokenizer(std::move(v));
  vocab = tokenizer.vocab_size();
  ampt::text::ChatTemplate chat;
  chat.jinja = std::make_shared<const ampt::text::JinjaChat>(
      ampt::text::read_jinja_chat(AMPT_SOURCE_DIR "/tests/text/chat_templates/qwen3.jinja", tokenizer, ""));
  std::string records;
  for (int e = 0; e < 12; ++e) {
    const std::string n = std::to_string(e);
    records += e % 3 == 0   ? R"({"messages": [{"role": "user", "content": "add )" + n + R"("}, {"role": "assistant", "content": ")" + n + R"(+1", "reasoning_content": "r"}]})"
               : e % 3 == 1 ? R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a)" + n + R"("}, {"role": "user", "content": "b"}, {"role": "assistant", "content": "c"}]})"
                            : R"({"messages": [{"role": "user", "content": "t"}, {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": )" + n + R"(}}}]}, {"role": "tool", "content": "ok"}, {"role": "assistant", "content": "done"}]})";
    records += "\n";
  }
  const std::string path = ampt::test::make_temp_dir() + "/chats.jsonl";
  ampt::test::write_file(path, records);
  std::vector<uint16_t> tokens;
  std::vector<uint8_t> mask;
  ampt::text::tokenize_chats(tokenizer, chat, {path}, {}, [&](std::span<const int32_t> i, std::span<const uint8_t> m) {
    tokens.insert(tokens.end(), i.begin(), i.end());
    mask.insert(mask.end(), m.begin(), m.end());
  });
  std::vector<Document> documents;
  for (std::size_t t = 0; t < mask.size(); ++t) {
    if ((mask[t] & ampt::text::kExampleStart) != 0) documents.push_back({0, static_cast<int64_t>(t), 0});
    documents.back().length += 1;
  }
  const auto make = [&](bool packed) {
    return std::make_unique<DocumentExamples>(
        std::vector<TokenSpan>{span_of(tokens, "tokens")}, documents, window, std::nullopt, 0, vocab,
        std::vector<TokenSpan>{span_of(mask, "mask")}, packed);
  };
  return {make(true), make(false)};
}

struct Family {
  std::string name;
  ampt::config::Config config;
  int64_t vocab = 0;
};

// Tiny GPT-2, Llama and Qwen2 models (the latter two their families' tiny presets), and a
// Mistral whose sliding window of 4 is shorter than most examples.
std::vector<Family> families() {
  ampt::config::Config gpt;
  gpt.model = "gpt";
  gpt.n_layer = 2;
  gpt.n_embd = 32;
  gpt.n_head = 4;
  gpt.block_size = kWindow;
  gpt.vocab_size = 64;
  ampt::config::Config llama, qwen2, mistral;
  llama.model = "llama";
  qwen2.model = "qwen2";
  mistral.model = "mistral";
  mistral.sliding_window = 4;
  return {{"gpt", gpt, 64}, {"llama", llama, 256}, {"qwen2", qwen2, 256}, {"mistral window 4", mistral, 256}};
}

ampt::models::Model build_family_model(const Family& family) {
  torch::manual_seed(4);
  return ampt::models::make_model(family.config,
                                  {ampt::data::Task::language_model, {kWindow}, family.vocab});
}

// The unpacked examples that the packed windows `windows` hold, in the same order.
std::vector<int64_t> examples_in(const DocumentExamples& packed, const std::vector<int64_t>& windows) {
  std::vector<int64_t> examples;
  for (const int64_t w : windows) {
    const auto [first, count] = packed.window_examples(w);
    for (int64_t e = first; e < first + count; ++e) examples.push_back(e);
  }
  return examples;
}

// 20 AdamW steps of two models built alike, one on the packed windows (`per_step` a step, in
// turn), the other on the same examples one per window: the losses stay equal.
void check_same_steps(const std::function<ampt::models::Model()>& build, const Examples& data, int64_t per_step) {
  auto packed_model = build();
  auto unpacked_model = build();
  torch::optim::AdamW packed_optimizer(packed_model.module->parameters(), torch::optim::AdamWOptions(1e-2));
  torch::optim::AdamW unpacked_optimizer(unpacked_model.module->parameters(), torch::optim::AdamWOptions(1e-2));
  const int64_t windows = data.packed->size();
  for (int64_t step = 0; step < 20; ++step) {
    std::vector<int64_t> chosen;
    for (int64_t k = 0; k < per_step; ++k) chosen.push_back((per_step * step + k) % windows);
    packed_optimizer.zero_grad();
    unpacked_optimizer.zero_grad();
    const auto packed_loss = packed_model.loss(data.packed->gather(chosen));
    const auto unpacked_loss = unpacked_model.loss(data.unpacked->gather(examples_in(*data.packed, chosen)));
    packed_loss.backward();
    unpacked_loss.backward();
    packed_optimizer.step();
    unpacked_optimizer.step();
    INFO("step " << step + 1);
    CHECK(packed_loss.item<double>() == Approx(unpacked_loss.item<double>()).epsilon(1e-4));
  }
}

std::vector<torch::Tensor> gradients(ampt::models::Model& model, const Batch& batch) {
  model.module->zero_grad();
  model.loss(batch).backward();
  std::vector<torch::Tensor> out;
  for (const auto& p : model.module->parameters()) out.push_back(p.grad().clone());
  return out;
}

// `batch` with only example `k` of the examples it holds scored: in a packed batch the k-th run
// of positions counted from 0 over its rows (a tail of padding scores nothing anyway).
Batch only_example(const Batch& batch, int64_t k) {
  Batch one = batch;
  const auto starts = batch.positions.defined()
                          ? batch.positions.eq(0).flatten().cumsum(0) - 1
                          : torch::arange(batch.targets.size(0)).repeat_interleave(batch.targets.size(1));
  one.targets = batch.targets.flatten().masked_fill(starts.ne(k), -100).view_as(batch.targets);
  return one;
}

}  // namespace

TEST_CASE("packing: each example's loss and every gradient equal one example per window",
          "[models][packing]") {
  for (const auto& family : families()) {
    INFO(family.name);
    const auto data = instruction_examples(family.vocab);
    REQUIRE(data.packed->size() <= data.unpacked->size() / 2);  // windows hold several examples
    auto model = build_family_model(family);
    const std::vector<int64_t> windows{0, 1, 2};
    const auto packed = data.packed->gather(windows);
    const auto unpacked = data.unpacked->gather(examples_in(*data.packed, windows));
    REQUIRE(packed.positions.defined());
    CHECK_FALSE(unpacked.positions.defined());
    // The packed windows' runs: every example, then each window's tail of padding.
    const auto runs = packed.positions.eq(0).sum().item<int64_t>();
    const auto examples = unpacked.inputs.size(0);
    REQUIRE(runs >= examples);
    for (int64_t k = 0, run = 0; k < examples; ++k, ++run) {
      // A window's tail is a run of its own: skip runs that score nothing.
      while (only_example(packed, run).targets.ne(-100).sum().item<int64_t>() == 0) ++run;
      INFO("example " << k);
      CHECK(model.loss(only_example(packed, run)).item<double>() ==
            Approx(model.loss(only_example(unpacked, k)).item<double>()).epsilon(1e-5));
    }
    const auto a = gradients(model, packed);
    const auto b = gradients(model, unpacked);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      const double scale = b[i].abs().max().item<double>();
      INFO("parameter " << i << ": largest " << scale << ", apart "
                        << (a[i] - b[i]).abs().max().item<double>());
      CHECK((a[i] - b[i]).abs().max().item<double>() <= 1e-5 * scale + 1e-9);
    }
  }
}

TEST_CASE("packing: 20 AdamW steps on packed windows follow the same examples one per window",
          "[models][packing]") {
  for (const auto& family : families()) {
    INFO(family.name);
    check_same_steps([&] { return build_family_model(family); }, instruction_examples(family.vocab), 2);
  }
}

TEST_CASE("packing: Qwen3-template chats packed follow the same 20 AdamW steps as one per window",
          "[models][packing][chat][jinja]") {
  constexpr int64_t kChatWindow = 256;
  int64_t vocab = 0;
  const auto data = qwen3_chat_examples(kChatWindow, vocab);
  REQUIRE(data.packed->size() < data.unpacked->size());
  ampt::config::Config qwen2;
  qwen2.model = "qwen2";
  qwen2.vocab_size = 320;  // the byte tokenizer's 259 ids, rounded up
  qwen2.block_size = kChatWindow;
  const auto build = [&] {
    torch::manual_seed(4);
    return ampt::models::make_model(qwen2, {ampt::data::Task::language_model, {kChatWindow}, vocab});
  };
  check_same_steps(build, data, 1);
}

TEST_CASE("packing: FlashAttention's variable-length path equals SDPA with the block-diagonal mask, "
          "and through a sliding window with the band too",
          "[models][packing][cuda]") {
  if (!torch::cuda::is_available()) {
    AMPT_SKIP(gpu, "no CUDA device: FlashAttention's variable-length path needs one");
  }
  torch::manual_seed(5);
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  // Two windows of 64: examples of 20, 30 and a tail of 14; 64 in one; GQA, 8 heads over 2.
  const auto host = torch::cat({torch::arange(20), torch::arange(30), torch::arange(14),
                                torch::arange(64)}).view({2, 64});
  const auto starts = ampt::data::sequence_starts(host);
  CHECK(starts.to(torch::kInt64).equal(torch::tensor({0, 20, 50, 64, 128}, torch::kInt64)));
  const auto positions = host.to(cuda.dtype(torch::kInt64));
  for (const auto dtype : {torch::kBFloat16, torch::kHalf}) {
    for (const int64_t window : {0, 16}) {
      INFO(dtype << ", window " << window);
      const ampt::models::AttentionSpec spec{window};
      const auto q = torch::randn({2, 8, 64, 64}, cuda.dtype(dtype)).requires_grad_();
      const auto k = torch::randn({2, 2, 64, 64}, cuda.dtype(dtype)).requires_grad_();
      const auto v = torch::randn({2, 2, 64, 64}, cuda.dtype(dtype)).requires_grad_();
      const auto varlen = ampt::models::packed_layout(positions, starts.to(torch::kCUDA), dtype);
      REQUIRE(varlen.cumulative_lengths.defined());
      const auto masked = ampt::models::packed_layout(positions, starts, torch::kFloat);
      REQUIRE(masked.mask.defined());
      const auto grad = torch::randn({2, 8, 64, 64}, cuda.dtype(dtype));
      // Packed, or (no layout) one causal sequence a row.
      const auto run = [&](const ampt::models::PackedLayout& layout, bool float32) {
        const auto cast = [&](const torch::Tensor& t) { return float32 ? t.to(torch::kFloat) : t; };
        const auto out = layout.packed()
                             ? ampt::models::packed_attention(cast(q), cast(k), cast(v), layout, 0.0, spec)
                             : ampt::models::causal_attention(cast(q), cast(k), cast(v), 0.0, spec);
        const auto grads = torch::autograd::grad({out}, {q, k, v}, {cast(grad)});
        return std::vector<torch::Tensor>{out.to(torch::kFloat), grads[0].to(torch::kFloat),
                                          grads[1].to(torch::kFloat), grads[2].to(torch::kFloat)};
      };
      // fp32 SDPA with the masks: the reference the half kernel rounds.
      for (const auto& [half, float32] : {std::pair{varlen, masked}, std::pair{ampt::models::PackedLayout{},
                                                                               ampt::models::PackedLayout{}}}) {
        INFO((half.packed() ? "packed" : "one sequence a row"));
        const auto a = run(half, false);
        const auto b = run(float32, true);
        for (size_t i = 0; i < a.size(); ++i) {
          INFO("tensor " << i << ": apart " << (a[i] - b[i]).abs().max().item<double>());
          CHECK(torch::allclose(a[i], b[i], 2e-2, 2e-2));
        }
      }
    }
  }
}
