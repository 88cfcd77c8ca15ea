#include "ampt/kernels/fused_classifier.h"

#include "ampt/kernels/cuda/launch.h"

#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAContext.h>
#include <torch/autograd.h>
#include <torch/nn/functional/loss.h>

#include <algorithm>

namespace ampt::kernels {
namespace {

constexpr int64_t kLogitsPerChunk = int64_t{1} << 26;

cuda::Dtype cuda_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::kBFloat16: return cuda::Dtype::bfloat16;
    case c10::kHalf: return cuda::Dtype::float16;
    default: return cuda::Dtype::float32;
  }
}

c10::ScalarType compute_dtype(const torch::Tensor& weight) {
  const auto device = weight.device().type();
  if (at::autocast::is_autocast_enabled(device)) return at::autocast::get_autocast_dtype(device);
  return weight.scalar_type();
}

// Row losses of `logits` [rows, classes] into `row_loss` [rows] and, with `grad`, the logits
// replaced by the gradient of each row's loss (softmax − one-hot; padded columns and ignored
// rows 0).
void softmax_cross_entropy(torch::Tensor& logits, const torch::Tensor& targets, int64_t valid,
                           torch::Tensor& row_loss, bool grad) {
  if (logits.is_cuda()) {
    cuda::softmax_cross_entropy(logits.data_ptr(), cuda_dtype(logits.scalar_type()),
                                logits.size(0), logits.size(1), valid,
                                targets.data_ptr<int64_t>(), kIgnoreIndex,
                                row_loss.data_ptr<float>(), grad,
                                at::cuda::getCurrentCUDAStream().stream());
    return;
  }
  const auto counted = targets.ne(kIgnoreIndex);
  const auto safe_targets = targets.clamp_min(0).unsqueeze(1);
  const auto x = logits.narrow(1, 0, valid).to(torch::kFloat32);
  const auto lse = x.logsumexp(1, /*keepdim=*/true);
  row_loss.copy_((lse - x.gather(1, safe_targets)).squeeze(1).mul_(counted));
  if (!grad) return;
  auto g = (x - lse).exp_();
  g.scatter_add_(1, safe_targets, torch::full_like(safe_targets, -1.0, g.options()));
  g.mul_(counted.unsqueeze(1));
  logits.narrow(1, 0, valid).copy_(g);
  logits.narrow(1, valid, logits.size(1) - valid).zero_();
}

// out (+)= a · b in float32 from operands of a half dtype: cuBLAS accumulates into out directly;
// elsewhere the product is formed and added.
void matmul_into(torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b, bool add) {
  if (out.is_cuda() && a.scalar_type() != c10::kFloat) {
    if (add) {
      at::addmm_out(out, out, a, b, c10::kFloat);
    } else {
      at::mm_out(out, a, b, c10::kFloat);
    }
    return;
  }
  const auto product = at::mm(a, b);
  if (add) {
    out.add_(product);
  } else {
    out.copy_(product);
  }
}

class ClassifierLossFunction : public torch::autograd::Function<ClassifierLossFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& hidden,
                               const torch::Tensor& weight, const torch::Tensor& targets,
                               int64_t valid, int64_t chunk_rows, int64_t dtype, bool grad) {
    const auto compute = static_cast<c10::ScalarType>(dtype);
    const auto h = hidden.to(compute);
    const auto w = weight.to(compute);
    const int64_t rows = h.size(0), classes = w.size(0);
    const auto f32 = hidden.options().dtype(torch::kFloat32);
    auto row_loss = torch::empty({rows}, f32);
    torch::Tensor dh, dw;
    if (grad) {
      dh = torch::empty({rows, h.size(1)}, f32);
      dw = torch::zeros({classes, w.size(1)}, f32);
    }
    for (int64_t r0 = 0; r0 < rows; r0 += chunk_rows) {
      const int64_t n = std::min(chunk_rows, rows - r0);
      const auto hc = h.narrow(0, r0, n);
      auto logits = at::mm(hc, w.t());
      auto losses = row_loss.narrow(0, r0, n);
      softmax_cross_entropy(logits, targets.narrow(0, r0, n), valid, losses, grad);
      if (!grad) continue;
      auto dh_chunk = dh.narrow(0, r0, n);
      matmul_into(dh_chunk, logits, w, /*add=*/false);
      matmul_into(dw, logits.t(), hc, /*add=*/true);
    }
    const auto counted = targets.ne(kIgnoreIndex).sum().to(torch::kFloat32);
    const auto loss = row_loss.sum() / counted;
    if (grad) {
      ctx->save_for_backward({dh, dw, counted});
      ctx->saved_data["hidden_dtype"] = static_cast<int64_t>(hidden.scalar_type());
      ctx->saved_data["weight_dtype"] = static_cast<int64_t>(weight.scalar_type());
    }
    return loss;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const auto scale = grad_outputs[0].to(torch::kFloat32) / saved[2];
    const auto dtype = [&](const char* key) {
      return static_cast<c10::ScalarType>(ctx->saved_data[key].toInt());
    };
    return {(saved[0] * scale).to(dtype("hidden_dtype")),
            (saved[1] * scale).to(dtype("weight_dtype")),
            torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor classifier_loss(const torch::Tensor& hidden, const torch::Tensor& weight,
                              const torch::Tensor& targets, const ClassifierLossOptions& options) {
  const int64_t classes = weight.size(0);
  const int64_t valid = options.valid_classes > 0 ? options.valid_classes : classes;
  TORCH_CHECK(valid <= classes, "valid_classes ", valid, " exceeds the weight's ", classes, " rows");
  const int64_t chunk = options.chunk_rows > 0 ? options.chunk_rows
                                               : std::max<int64_t>(64, kLogitsPerChunk / classes);
  // Without a backward to come (evaluation), no gradient is computed or kept.
  const bool grad =
      torch::GradMode::is_enabled() && (hidden.requires_grad() || weight.requires_grad());
  return ClassifierLossFunction::apply(hidden, weight, targets.to(torch::kInt64).contiguous(),
                                       valid, chunk,
                                       static_cast<int64_t>(compute_dtype(weight)), grad);
}

torch::Tensor classifier_loss_reference(const torch::Tensor& hidden, const torch::Tensor& weight,
                                        const torch::Tensor& targets, int64_t valid_classes) {
  const int64_t valid = valid_classes > 0 ? valid_classes : weight.size(0);
  const auto logits = at::linear(hidden, weight.narrow(0, 0, valid));
  return torch::nn::functional::cross_entropy(logits, targets);
}

}  // namespace ampt::kernels
