#include "ampt/models/activation_checkpoint.h"

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/ivalue.h>
#include <torch/autograd.h>
#include <vector>

#include <array>
#include <optional>

namespace ampt::models {
namespace {

thread_local bool recomputing_now = false;

constexpr std::array<c10::DeviceType, 2> kAutocastDevices = {c10::kCPU, c10::kCUDA};

// The thread-local autocast settings a forward ran under. Backward runs on the autograd
// engine's threads (one per CUDA device), where none of this is set, so it is carried over.
struct AutocastState {
  std::array<bool, 2> enabled{};
  std::array<c10::ScalarType, 2> dtype{};
  bool cache = true;

  static AutocastState current() {
    AutocastState s;
    for (size_t i = 0; i < kAutocastDevices.size(); ++i) {
      s.enabled[i] = at::autocast::is_autocast_enabled(kAutocastDevices[i]);
      s.dtype[i] = at::autocast::get_autocast_dtype(kAutocastDevices[i]);
    }
    s.cache = at::autocast::is_autocast_cache_enabled();
    return s;
  }

  void apply() const {
    for (size_t i = 0; i < kAutocastDevices.size(); ++i) {
      at::autocast::set_autocast_enabled(kAutocastDevices[i], enabled[i]);
      at::autocast::set_autocast_dtype(kAutocastDevices[i], dtype[i]);
    }
    at::autocast::set_autocast_cache_enabled(cache);
  }
};

// Installs a saved autocast state for one recomputation and restores the thread's own after;
// the cache of cast weights it fills belongs to this recomputation only.
class AutocastScope {
 public:
  explicit AutocastScope(const AutocastState& state) : previous_(AutocastState::current()) {
    state.apply();
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    previous_.apply();
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  AutocastState previous_;
};

// Generator states: the CPU's always, the CUDA device's when the block runs there.
struct RngState {
  torch::Tensor cpu;
  torch::Tensor cuda;
  c10::Device cuda_device{c10::kCPU};

  static RngState capture(const c10::Device& device) {
    RngState s;
    s.cpu = at::globalContext().defaultGenerator(c10::Device(c10::kCPU)).get_state();
    if (device.is_cuda()) {
      s.cuda_device = device;
      s.cuda = at::globalContext().defaultGenerator(device).get_state();
    }
    return s;
  }

  void restore() const {
    // A Generator is a handle: set_state changes the process-wide default generator.
    auto cpu_generator = at::globalContext().defaultGenerator(c10::Device(c10::kCPU));
    cpu_generator.set_state(cpu);
    if (cuda.defined()) {
      auto cuda_generator = at::globalContext().defaultGenerator(cuda_device);
      cuda_generator.set_state(cuda);
    }
  }
};

struct SavedCall : torch::CustomClassHolder {
  BlockFn fn;
  std::vector<torch::Tensor> params;
  AutocastState autocast;
  std::optional<RngState> rng;
};

class RecomputingFlag {
 public:
  RecomputingFlag() : previous_(recomputing_now) { recomputing_now = true; }
  ~RecomputingFlag() { recomputing_now = previous_; }
  RecomputingFlag(const RecomputingFlag&) = delete;
  RecomputingFlag& operator=(const RecomputingFlag&) = delete;

 private:
  bool previous_;
};

class RecomputeFunction : public torch::autograd::Function<RecomputeFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const BlockFn& fn,
                               const torch::Tensor& x, torch::TensorList params,
                               bool preserve_rng) {
    auto call = c10::make_intrusive<SavedCall>();
    call->fn = fn;
    call->params = params.vec();
    call->autocast = AutocastState::current();
    if (preserve_rng) call->rng = RngState::capture(x.device());
    ctx->saved_data["call"] = c10::IValue::make_capsule(call);
    ctx->save_for_backward({x});
    return fn(x);  // autograd Functions run forward with grad mode off: nothing inside is kept
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto call =
        c10::static_intrusive_pointer_cast<SavedCall>(ctx->saved_data["call"].toCapsule());
    const auto x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    BlockOutputs y;
    {
      std::optional<RngState> own_rng;
      if (call->rng) {
        own_rng = RngState::capture(call->rng->cuda_device);
        call->rng->restore();
      }
      AutocastScope autocast(call->autocast);
      RecomputingFlag flag;
      torch::AutoGradMode grad_mode(true);
      y = call->fn(x);
      if (own_rng) own_rng->restore();
    }
    // Frozen parameters (a LoRA base) get no gradient: autograd refuses to differentiate them.
    torch::autograd::variable_list inputs{x};
    for (const auto& p : call->params) {
      if (p.requires_grad()) inputs.push_back(p);
    }
    // The outputs a gradient reached (a block's reports may go unused).
    torch::autograd::variable_list outputs, grads_in;
    for (size_t i = 0; i < y.size(); ++i) {
      if (grad_outputs[i].defined() && y[i].requires_grad()) {
        outputs.push_back(y[i]);
        grads_in.push_back(grad_outputs[i]);
      }
    }
    auto grads = torch::autograd::grad(outputs, inputs, grads_in, /*retain_graph=*/false,
                                       /*create_graph=*/false, /*allow_unused=*/true);
    // One gradient per forward argument: none for fn and preserve_rng.
    torch::autograd::variable_list out{torch::Tensor(), grads[0]};
    size_t next = 1;
    for (const auto& p : call->params) {
      out.push_back(p.requires_grad() ? grads[next++] : torch::Tensor());
    }
    out.emplace_back();
    return out;
  }
};

}  // namespace

BlockOutputs checkpoint(const BlockFn& fn, const torch::Tensor& x, torch::TensorList params,
                        bool preserve_rng) {
  if (!torch::GradMode::is_enabled()) return fn(x);
  return RecomputeFunction::apply(fn, x, params, preserve_rng);
}

bool recomputing() { return recomputing_now; }

}  // namespace ampt::models
