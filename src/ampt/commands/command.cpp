#include "ampt/commands/command.h"

#include "ampt/commands/compare.h"
#include "ampt/commands/config.h"
#include "ampt/commands/doctor.h"
#include "ampt/commands/export.h"
#include "ampt/commands/generate.h"
#include "ampt/commands/plot.h"
#include "ampt/commands/recommend.h"
#include "ampt/commands/tokenize.h"
#include "ampt/commands/train.h"

namespace ampt::commands {

const std::vector<Command>& all() {
  static const std::vector<Command> table = {
      {"train", "train a model with automatic mixed precision", train_help, run_train, nullptr,
       true},
      {"config", "print the resolved configuration and where each value came from", config_help,
       run_config, config_flag_references, true},
      {"export", "write a checkpoint's weights as safetensors, a Hugging Face model or a peft adapter",
       export_help, run_export, export_flag_references, false},
      {"compare", "train the same configuration in fp32, bf16, fp16 and compare them in one table",
       compare_help, run_compare, compare_flag_references, true},
      {"recommend", "estimate memory per precision and opt level; recommend a setup for a GPU",
       recommend_help, run_recommend, recommend_flag_references, true},
      {"plot", "draw a run's curves (loss, lr, loss scale, throughput) as an SVG", plot_help,
       run_plot, plot_flag_references, false},
      {"generate", "continue a prompt with a trained or pretrained language model (KV cache, greedy or sampled)",
       generate_help, run_generate, generate_flag_references, true},
      {"tokenize", "tokenize text files into an llm.c token shard", tokenize_help, run_tokenize,
       tokenize_flag_references, false},
      {"doctor", "what this machine can train with and why: CPU, GPUs, fused kernels, fp8",
       doctor_help, run_doctor, nullptr, false},
  };
  return table;
}

}  // namespace ampt::commands
