// The registry: names to models, the same weights from the same seed, errors for the rest.
#include "ampt/core/errors.h"
#include "ampt/models/registry.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <tuple>

using ampt::data::DataSpec;
using ampt::data::Task;

TEST_CASE("models: the same seed gives the same initial weights", "[models]") {
  for (const char* name : {"mlp", "cnn", "gpt"}) {
    ampt::config::Config config;
    config.model = name;
    const DataSpec spec = config.model == "gpt"   ? DataSpec{Task::language_model, {8}, 16}
                          : config.model == "cnn" ? DataSpec{Task::classification, {1, 4, 4}, 3}
                                                  : DataSpec{Task::classification, {4}, 3};
    INFO(name);
    torch::manual_seed(11);
    auto a = ampt::models::make_model(config, spec);
    torch::manual_seed(11);
    auto b = ampt::models::make_model(config, spec);
    const auto pa = a.module->parameters();
    const auto pb = b.module->parameters();
    REQUIRE(pa.size() == pb.size());
    for (size_t i = 0; i < pa.size(); ++i) CHECK(torch::equal(pa[i], pb[i]));
  }
}

TEST_CASE("models: an unknown name is a usage error listing the models", "[models]") {
  ampt::config::Config config;
  config.model = "resnet";
  CHECK_THROWS_AS(ampt::models::make_model(config, DataSpec{Task::classification, {4}, 3}),
                  ampt::UsageError);
  CHECK_THROWS_WITH(ampt::models::make_model(config, DataSpec{Task::classification, {4}, 3}),
                    "unknown model 'resnet': expected one of mlp, cnn, gpt, gpt-tiny, gpt2-124m, "
                    "gpt2-350m, gpt2-774m, gpt2-1558m, llama, qwen2, qwen3, mistral, qwen3-moe, mixtral, llama-3.2-1b, llama-3.1-8b, qwen2.5-0.5b, qwen2.5-7b, qwen3-0.6b, qwen3-1.7b, qwen3-8b, mistral-7b-v0.3, qwen3-30b-a3b, mixtral-8x7b");
}

TEST_CASE("models: what each model asks of the data", "[models]") {
  using Form = ampt::data::SampleRequest::Form;
  ampt::config::Config config;
  CHECK(ampt::models::sample_request(config).form == Form::features);  // mlp, the default
  config.model = "cnn";
  CHECK(ampt::models::sample_request(config).form == Form::images);
  // A GPT asks for windows of its resolved dimensions: the preset's, or the options' overrides.
  for (const auto& [model, block, vocab] : {std::tuple{"gpt", 64, 256}, {"gpt-tiny", 64, 256},
                                            {"gpt2-124m", 1024, 50304}}) {
    INFO(model);
    config.model = model;
    const auto request = ampt::models::sample_request(config);
    CHECK(request.form == Form::tokens);
    CHECK(request.block_size == block);
    CHECK(request.vocab_size == vocab);
  }
  config.block_size = 8;
  CHECK(ampt::models::sample_request(config).block_size == 8);

  config.model = "resnet";
  CHECK_THROWS_WITH(ampt::models::sample_request(config),
                    Catch::StartsWith("unknown model 'resnet': expected one of mlp, cnn, gpt"));
  config.model = "mlp";
  config.init_from = "gpt2";
  CHECK_THROWS_WITH(ampt::models::sample_request(config),
                    "init_from loads a pretrained Hugging Face model, and model mlp cannot take "
                    "one: leave --model out, or use gpt, llama");
  config.init_from.clear();
  config.dataset = "text:README.md";
  CHECK_THROWS_WITH(ampt::models::sample_request(config),
                    "dataset 'text:README.md' is language-model data but model mlp is not a "
                    "language model: use --model gpt, gpt-tiny, gpt2-124m, gpt2-350m, gpt2-774m, "
                    "gpt2-1558m, llama, qwen2, qwen3, mistral, qwen3-moe, mixtral, llama-3.2-1b, llama-3.1-8b, qwen2.5-0.5b, qwen2.5-7b, qwen3-0.6b, qwen3-1.7b, qwen3-8b, mistral-7b-v0.3, qwen3-30b-a3b, mixtral-8x7b");
}
