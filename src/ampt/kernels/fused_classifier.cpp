#include "ampt/kernels/fused_classifier.h"

#include "ampt/core/autocast_dtype.h"
#include "ampt/kernels/cuda_dtype.h"
#include "ampt/kernels/fp32_gemm.h"
#include "ampt/kernels/fp8_gemm.h"
#include "ampt/kernels/fp8_quantize.h"
#include "ampt/kernels/fused_linear.h"
#include "ampt/kernels/kernel_support.h"
#include "ampt/kernels/weight_copies.h"

#include <c10/core/DeviceGuard.h>
#include <torch/autograd.h>
#include <torch/nn/functional/loss.h>

#include <algorithm>
#include <limits>

namespace ampt::kernels {
namespace {

c10::ScalarType compute_dtype(const torch::Tensor& weight) {
  return autocast_dtype(weight.device().type()).value_or(weight.scalar_type());
}

// Row losses of `logits` [rows, classes] into `row_loss` [rows] and, with `grad`, the logits
// replaced by the gradient of each row's loss (softmax − one-hot; padded columns and ignored
// rows 0).
void softmax_cross_entropy(torch::Tensor& logits, const torch::Tensor& targets, int64_t valid,
                           torch::Tensor& row_loss, bool grad) {
  if (const auto* kernels = kernels_for(FusedPath::softmax_cross_entropy, logits.device())) {
    TORCH_CHECK(targets.device() == logits.device() && targets.is_contiguous(),
                "fused classifier: targets must be contiguous on the logits' device ",
                logits.device(), ", got ", targets.device());
    const c10::DeviceGuard guard(logits.device());
    kernels->softmax_cross_entropy(logits.data_ptr(), cuda_dtype(logits.scalar_type()),
                                   logits.size(0), logits.size(1), valid,
                                   targets.data_ptr<int64_t>(), kIgnoreIndex,
                                   row_loss.data_ptr<float>(), grad,
                                   kernels->stream(logits.device()));
    return;
  }
  const auto counted = targets.ne(kIgnoreIndex);
  // As the kernel: a target outside the row is never read, and its row's loss is NaN.
  const auto bad = counted.logical_and(targets.lt(0).logical_or_(targets.ge(valid)));
  const auto safe_targets = targets.masked_fill(bad, 0).clamp_min_(0).unsqueeze(1);
  // One vectorised softmax pass (in float32) instead of logsumexp's generic reduction and a
  // subtraction.
  auto log_probs = at::log_softmax(logits.narrow(1, 0, valid), 1, torch::kFloat32);
  row_loss.copy_(log_probs.gather(1, safe_targets).squeeze(1).neg_().mul_(counted).masked_fill_(
      bad, std::numeric_limits<float>::quiet_NaN()));
  if (!grad) return;
  auto g = log_probs.exp_();
  g.scatter_add_(1, safe_targets, torch::full_like(safe_targets, -1.0, g.options()));
  g.mul_(counted.unsqueeze(1));
  logits.narrow(1, 0, valid).copy_(g);
  logits.narrow(1, valid, logits.size(1) - valid).zero_();
}

// The head's matmuls chunk by chunk, in the compute dtype or in fp8 (current scaling).
class HeadMatmuls {
 public:
  // `weight_copy`: the weight's half copy in the compute dtype, read instead of a cast of it.
  HeadMatmuls(const torch::Tensor& hidden, const torch::Tensor& weight,
              const torch::Tensor& weight_copy, c10::ScalarType compute, bool fp8, bool grad)
      : fp8_(fp8),
        grad_(grad),
        // fp8 quantises from the tensors' own dtypes, in one pass each.
        h_(fp8 ? hidden.contiguous() : hidden.to(compute)),
        w_(fp8                     ? weight.contiguous()
           : weight_copy.defined() ? weight_copy
                                   : weight.to(compute)) {
    if (!fp8_) return;
    scratch_ = torch::zeros({2}, weight.options().dtype(torch::kInt32));
    w8_ = quantize(w_, c10::kFloat8_e4m3fn, grad_);
  }

  int64_t rows() const { return h_.size(0); }
  int64_t width() const { return h_.size(1); }

  // The logits of hidden rows r0..r0+n (bfloat16 in fp8).
  torch::Tensor logits(int64_t r0, int64_t n) {
    chunk_ = h_.narrow(0, r0, n);
    if (!fp8_) return at::mm(chunk_, w_.t());
    h8_ = quantize(chunk_, c10::kFloat8_e4m3fn, grad_);
    return fp8_gemm(h8_.data, w8_.data.t(), h8_.inverse, w8_.inverse, {}, torch::kBFloat16,
                    /*fast_accum=*/true);
  }

  // dh_chunk = g · W and, where dw is defined (a weight that trains), dw += gᵀ · h for the last
  // chunk's logit gradient g.
  void gradients(const torch::Tensor& g, torch::Tensor& dh_chunk, torch::Tensor& dw) {
    if (!fp8_) {
      matmul_fp32(dh_chunk, g, w_, /*accumulate=*/false);
      if (dw.defined()) matmul_fp32(dw, g.t(), chunk_, /*accumulate=*/true);
      return;
    }
    const auto g8 = quantize(g, c10::kFloat8_e5m2, true);
    dh_chunk.copy_(fp8_gemm(g8.data, w8_.transposed.t(), g8.inverse, w8_.inverse, {},
                            torch::kFloat32, false));
    if (!dw.defined()) return;
    dw.add_(fp8_gemm(g8.transposed, h8_.transposed.t(), g8.inverse, h8_.inverse, {},
                     torch::kFloat32, false));
  }

 private:
  Fp8Cast quantize(const torch::Tensor& x, c10::ScalarType dtype, bool want_transposed) {
    const Fp8Format format{dtype, 0};
    const auto scale = torch::ones({}, x.options().dtype(torch::kFloat32));
    scale_from_amax(x, scale, format, {}, scratch_);
    return cast_fp8(x, scale, format, {.data = true, .transposed = want_transposed}, nullptr);
  }

  bool fp8_, grad_;
  torch::Tensor h_, w_, chunk_, scratch_;
  Fp8Cast w8_, h8_;
};

class ClassifierLossFunction : public torch::autograd::Function<ClassifierLossFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& hidden,
                               const torch::Tensor& weight,
                               const std::optional<torch::Tensor>& weight_copy,
                               const torch::Tensor& targets, int64_t valid, int64_t chunk_rows,
                               int64_t dtype, bool fp8, bool grad) {
    // Rows reshaped here rather than by the caller: no view node before this one in backward.
    HeadMatmuls head(hidden.reshape({-1, hidden.size(-1)}), weight,
                     weight_copy.value_or(torch::Tensor()), static_cast<c10::ScalarType>(dtype),
                     fp8, grad);
    const int64_t rows = head.rows(), classes = weight.size(0);
    const auto f32 = hidden.options().dtype(torch::kFloat32);
    auto row_loss = torch::empty({rows}, f32);
    torch::Tensor dh, dw;
    if (grad) {
      dh = torch::empty({rows, head.width()}, f32);
      // A frozen head (a LoRA base) gets no gradient: none is computed or held.
      if (weight.requires_grad()) dw = torch::zeros({classes, head.width()}, f32);
    }
    for (int64_t r0 = 0; r0 < rows; r0 += chunk_rows) {
      const int64_t n = std::min(chunk_rows, rows - r0);
      auto logits = head.logits(r0, n);
      auto losses = row_loss.narrow(0, r0, n);
      softmax_cross_entropy(logits, targets.narrow(0, r0, n), valid, losses, grad);
      if (!grad) continue;
      auto dh_chunk = dh.narrow(0, r0, n);
      head.gradients(logits, dh_chunk, dw);
    }
    const auto counted = targets.ne(kIgnoreIndex).sum().to(torch::kFloat32);
    const auto loss = row_loss.sum() / counted;
    if (grad) {
      ctx->save_for_backward({dh, dw, counted});
      ctx->saved_data["hidden_dtype"] = static_cast<int64_t>(hidden.scalar_type());
      ctx->saved_data["hidden_sizes"] = hidden.sizes().vec();
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
    // Scaled straight into the inputs' dtypes: one pass, no second float32 copy of either.
    const auto scaled = [&](const torch::Tensor& grad, c10::ScalarType type) {
      auto out = torch::empty(grad.sizes(), grad.options().dtype(type));
      at::mul_out(out, grad, scale);
      return out;
    };
    return gradients({scaled(saved[0], dtype("hidden_dtype"))
                          .view(ctx->saved_data["hidden_sizes"].toIntVector()),
                      saved[1].defined() ? scaled(saved[1], dtype("weight_dtype"))
                                         : torch::Tensor()},
                     9);
  }
};

}  // namespace

int64_t default_chunk_rows(int64_t classes) {
  constexpr int64_t kLogitsPerChunk = int64_t{1} << 26;
  return std::max<int64_t>(64, kLogitsPerChunk / classes);
}

torch::Tensor classifier_loss(const torch::Tensor& hidden, const torch::Tensor& weight,
                              const torch::Tensor& targets, const ClassifierLossOptions& options) {
  const int64_t classes = weight.size(0);
  const int64_t valid = options.valid_classes > 0 ? options.valid_classes : classes;
  TORCH_CHECK(valid <= classes, "valid_classes ", valid, " exceeds the weight's ", classes, " rows");
  int64_t chunk = options.chunk_rows > 0 ? options.chunk_rows : default_chunk_rows(classes);
  if (options.fp8) chunk = std::max<int64_t>(16, chunk / 16 * 16);  // fp8 GEMM tiles
  check_targets(targets, valid);
  // Without a backward to come (evaluation), no gradient is computed or kept.
  const bool grad =
      torch::GradMode::is_enabled() && (hidden.requires_grad() || weight.requires_grad());
  // The head reads the weight's half copy where it has one (weight_copies.h), not a cast of it.
  const auto copy = options.fp8 ? torch::Tensor() : weight_copy(weight).copy;
  TORCH_CHECK(hidden.dim() >= 1 && targets.numel() * hidden.size(-1) == hidden.numel(),
              "classifier_loss: ", targets.numel(), " targets for hidden states of shape ",
              hidden.sizes());
  return ClassifierLossFunction::apply(hidden, weight, optional_tensor(copy),
                                       targets.flatten().to(torch::kInt64).contiguous(), valid,
                                       chunk, static_cast<int64_t>(compute_dtype(weight)),
                                       options.fp8, grad);
}

torch::Tensor classifier_loss_reference(const torch::Tensor& hidden, const torch::Tensor& weight,
                                        const torch::Tensor& targets, int64_t valid_classes) {
  const int64_t valid = valid_classes > 0 ? valid_classes : weight.size(0);
  return checked_cross_entropy(at::linear(hidden, weight.narrow(0, 0, valid)), targets);
}

}  // namespace ampt::kernels
