#include "ampt/models/linear.h"

#include "ampt/core/autocast_dtype.h"
#include "ampt/kernels/batch_invariant.h"
#include "ampt/kernels/fused_linear.h"
#include "ampt/models/activation_checkpoint.h"
#include "ampt/models/lora.h"
#include "ampt/precision/placeholder.h"
#include "ampt/precision/precision_islands.h"

namespace ampt::models {
namespace {

thread_local bool defer_weights = false;

bool is_island(const torch::nn::Module& module) {
  const auto* islands = precision::active_islands();
  return islands != nullptr && islands->find(&module) != nullptr;
}

// x in autocast's dtype where autocast would cast it for an ordinary Linear: the base's GEMM and
// the adapter's then share one cast copy (each would otherwise keep its own for the backward).
torch::Tensor cast_once(const torch::Tensor& x, bool island) {
  return island ? x : x.to(matmul_dtype(x));
}

}  // namespace

LinearImpl::LinearImpl(int64_t in, int64_t out, bool bias)
    : torch::nn::LinearImpl(torch::nn::LinearOptions(in, out).bias(bias)) {
  // After the initialization, so that the random stream, and with it every later layer's and
  // adapter's initial values, is the same as without deferring.
  defer_if_asked(weight);
}

const std::vector<std::string>& LinearImpl::quantizable_names() const {
  static const std::vector<std::string> names{"weight"};
  return names;
}

DeferredWeights::DeferredWeights(bool active) : previous_(defer_weights) {
  defer_weights = active;
}

DeferredWeights::~DeferredWeights() { defer_weights = previous_; }

void defer_if_asked(torch::Tensor& weight) {
  if (defer_weights) weight.set_data(precision::placeholder(weight.sizes(), weight.options()));
}

void init_normal(const torch::Tensor& weight, double std) {
  torch::NoGradGuard no_grad;
  if (precision::is_placeholder(weight)) {
    torch::empty(weight.sizes(), weight.options()).normal_(0.0, std);
  } else {
    weight.normal_(0.0, std);
  }
}

bool LinearImpl::plain() const {
  return !fp8_ && !quantized() && !lora_adapter(*this) && !is_island(*this);
}

torch::Tensor LinearImpl::base(const torch::Tensor& x, bool epilogues, bool island) {
  if (const auto& stored = quantized()) {
    return precision::through_island(*this, x, [&](const torch::Tensor& in) {
      return precision::quantized_linear(in, stored, bias);
    });
  }
  if (fp8_) return fp8_->forward(x, weight, bias, /*record=*/!recomputing());
  if (island || !epilogues || kernels::batch_invariant()) {
    return precision::through_island(*this, x, [&](const torch::Tensor& in) {
      return kernels::linear(in, weight, bias);
    });
  }
  return kernels::fused_linear(x, weight, bias);
}

torch::Tensor LinearImpl::forward(const torch::Tensor& x, bool epilogues) {
  const bool island = is_island(*this);
  const auto adapter = lora_adapter(*this);
  if (!adapter) return base(x, epilogues, island);
  const auto in = fp8_ ? x : cast_once(x, island);
  // The adapter's GEMMs run beside the base's, in the same precision: in fp32 where the Linear
  // is an fp32 island, under autocast otherwise.
  return base(in, epilogues, island) +
         precision::through_island(*this, in, [&](const torch::Tensor& input) {
           return lora_update(adapter, input, is_training());
         });
}

void attach_fp8(torch::nn::Module& root, const precision::Fp8Recipe& recipe,
                const precision::Fp8Selected& selected) {
  for (const auto& item : root.named_modules("", /*include_self=*/false)) {
    auto* linear = dynamic_cast<LinearImpl*>(item.value().get());
    if (linear == nullptr) continue;
    linear->set_fp8(selected(item.key()) ? c10::make_intrusive<precision::Fp8Linear>(recipe)
                                         : c10::intrusive_ptr<precision::Fp8Linear>());
  }
}

Linear register_declared(torch::nn::Module& owner, const std::vector<LinearLayer>& block,
                         LinearRole role) {
  const auto& layer = layer_of(block, role);
  return owner.register_module(module_path(layer).back(), Linear(layer.in, layer.out, layer.bias));
}

}  // namespace ampt::models
