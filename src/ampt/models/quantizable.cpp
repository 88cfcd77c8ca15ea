#include "ampt/models/quantizable.h"

#include "ampt/precision/placeholder.h"

namespace ampt::models {

const c10::intrusive_ptr<precision::QuantizedWeight>& QuantizableWeights::quantized(size_t i) const {
  static const c10::intrusive_ptr<precision::QuantizedWeight> none;
  return i < stored_.size() ? stored_[i] : none;
}

bool QuantizableWeights::awaiting(size_t i) {
  return !quantized(i) && precision::is_placeholder(quantizable_parameter(i));
}

void QuantizableWeights::quantize(size_t i, const torch::Tensor& value, config::BaseDtype format) {
  torch::NoGradGuard no_grad;
  auto& parameter = quantizable_parameter(i);
  const auto device = parameter.device();
  if (stored_.size() <= i) stored_.resize(quantizable_names().size());
  stored_[i] = c10::make_intrusive<precision::QuantizedWeight>(value, format, device);
  parameter.set_data(precision::placeholder(parameter.sizes(), value.options().device(device)));
}

std::vector<QuantizableWeight> quantizable_weights(const torch::nn::Module& root) {
  std::vector<QuantizableWeight> out;
  for (const auto& item : root.named_modules("", /*include_self=*/false)) {
    auto* owner = dynamic_cast<QuantizableWeights*>(item.value().get());
    if (owner == nullptr) continue;
    const auto& names = owner->quantizable_names();
    for (size_t i = 0; i < names.size(); ++i) out.push_back({item.key() + "." + names[i], owner, i});
  }
  return out;
}

std::map<std::string, QuantizableWeight> awaiting_weights(const torch::nn::Module& root) {
  std::map<std::string, QuantizableWeight> out;
  for (auto& weight : quantizable_weights(root)) {
    if (weight.owner->awaiting(weight.index)) out.emplace(weight.name, weight);
  }
  return out;
}

int64_t quantize_base(const torch::nn::Module& root, config::BaseDtype format) {
  int64_t bytes = 0;
  for (const auto& weight : quantizable_weights(root)) {
    if (weight.parameter().requires_grad()) continue;
    if (!weight.quantized()) weight.owner->quantize(weight.index, weight.parameter(), format);
    bytes += weight.quantized()->bytes();
  }
  return bytes;
}

}  // namespace ampt::models
