// The self-checks kernel_support runs on a GPU the first time a fused path is used there (and the
// tests run under the CPU emulation of the kernels, kernel_backend.h): the path and its ATen
// fallback on a small input, compared in float64. Each returns how close they
// came ("max relative error 3.1e-04") and throws when they differ by more than the path's
// arithmetic explains, or when the path fails (a launch error, no cuBLASLt algorithm). Called
// with the path switched on (KernelSupport::runs), so the public functions take the path.
#pragma once

#include <torch/types.h>

#include <string>

namespace ampt::kernels {

std::string check_softmax_cross_entropy(const c10::Device& device);
std::string check_add_layer_norm(const c10::Device& device);
std::string check_fp8_casts(const c10::Device& device);
std::string check_gemm_epilogues(const c10::Device& device);
std::string check_fp8_gemm(const c10::Device& device);
std::string check_fp8_rowwise_gemm(const c10::Device& device);
std::string check_adamw(const c10::Device& device);
std::string check_dequantize(const c10::Device& device);

// ‖got − want‖ / ‖want‖ in float64 (‖·‖ the Frobenius norm; 0 when both are 0), after `what`
// is found finite and of want's shape; a RuntimeError naming `what` when it exceeds `tolerance`.
double require_close(const std::string& what, const torch::Tensor& got, const torch::Tensor& want,
                     double tolerance);

}  // namespace ampt::kernels
