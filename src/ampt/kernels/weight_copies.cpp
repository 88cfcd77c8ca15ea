#include "ampt/kernels/weight_copies.h"

#include "ampt/core/autocast_dtype.h"

#include <ATen/core/grad_mode.h>

#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace ampt::kernels {
namespace {

struct Entry {
  c10::ScalarType dtype;
  bool fp32_grad;
  torch::Tensor copy;  // undefined until a matmul reads it
};

struct Registry {
  std::shared_mutex mutex;
  std::unordered_map<const c10::TensorImpl*, Entry> entries;
};

Registry& registry() {
  static Registry r;
  return r;
}

// `weight`'s copy as `view` (a view of it) sees it: the same geometry over the copy's storage.
torch::Tensor view_of(const torch::Tensor& copy, const torch::Tensor& base,
                      const torch::Tensor& view) {
  if (!base.is_contiguous() || !copy.is_contiguous()) return {};
  return copy.as_strided(view.sizes(), view.strides(),
                         copy.storage_offset() + view.storage_offset() - base.storage_offset());
}

}  // namespace

void allow_weight_copy(const torch::Tensor& weight, c10::ScalarType dtype, bool fp32_grad) {
  auto& r = registry();
  const std::unique_lock lock(r.mutex);
  auto& entry = r.entries[weight.unsafeGetTensorImpl()];
  if (entry.copy.defined() && entry.dtype != dtype) entry.copy = torch::Tensor();
  entry.dtype = dtype;
  entry.fp32_grad = fp32_grad;
}

void forbid_weight_copy(const torch::Tensor& weight) {
  auto& r = registry();
  const std::unique_lock lock(r.mutex);
  r.entries.erase(weight.unsafeGetTensorImpl());
}

WeightCopy weight_copy(const torch::Tensor& weight) {
  if (!weight.defined() || weight.scalar_type() != c10::kFloat) return {};
  const auto autocast = autocast_dtype(weight.device().type());
  if (!autocast) return {};
  const auto dtype = *autocast;
  const bool view = weight.is_view();
  const torch::Tensor base = view ? torch::Tensor(weight._base()) : weight;
  auto& r = registry();
  torch::Tensor copy;
  bool fp32_grad = false;
  {
    const std::shared_lock lock(r.mutex);
    if (r.entries.empty()) return {};
    const auto found = r.entries.find(base.unsafeGetTensorImpl());
    if (found == r.entries.end() || found->second.dtype != dtype) return {};
    copy = found->second.copy;
    fp32_grad = found->second.fp32_grad;
  }
  if (!copy.defined()) {
    const std::unique_lock lock(r.mutex);
    auto& entry = r.entries.at(base.unsafeGetTensorImpl());
    if (!entry.copy.defined()) {
      const at::NoGradGuard no_grad;
      entry.copy = base.detach().to(dtype);
    }
    copy = entry.copy;
  }
  return {view ? view_of(copy, base, weight) : copy, fp32_grad};
}

torch::Tensor made_weight_copy(const torch::Tensor& weight) {
  auto& r = registry();
  const std::shared_lock lock(r.mutex);
  const auto found = r.entries.find(weight.unsafeGetTensorImpl());
  return found == r.entries.end() ? torch::Tensor() : found->second.copy;
}

}  // namespace ampt::kernels
