#include "ampt/kernels/gemm_epilogues.h"

#include "ampt/kernels/kernel_support.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cublasLt.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <type_traits>

namespace ampt::kernels {
namespace {

// One cuBLASLt call in its own column-major terms, D[m, n] = op(A)[m, k] · op(B)[k, n] then the
// epilogue. A row-major [r, c] tensor is a column-major [c, r] matrix with leading dimension c,
// so each function below states its product transposed.
struct LtGemm {
  cublasOperation_t trans_a, trans_b;
  int64_t m, n, k;
  const void* a;
  int64_t lda;
  const void* b;
  int64_t ldb;
  void* d;
  int64_t ldd;
  cublasLtEpilogue_t epilogue;
  void* bias = nullptr;  // the bias read (BIAS) or the bias gradient written (BGRADB)
  void* aux = nullptr;   // the GELU's input: written (GELU_AUX), read (DGELU); leading dim m
};

void check(cublasStatus_t status, const char* what) {
  TORCH_CHECK(status == CUBLAS_STATUS_SUCCESS, "cuBLASLt ", what, ": ",
              cublasLtGetStatusString(status));
}

template <class T>
void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  check(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)),
        "setting a matmul attribute");
}

// The largest power of two, up to the 256 bytes cuBLASLt's heuristics assume by default, that
// divides the address: an algorithm chosen for more alignment than a pointer has reads out of
// bounds.
uint32_t alignment(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t bytes = 1;
  while (bytes < 256 && address % (2 * bytes) == 0) bytes *= 2;
  return bytes;
}

// What cuBLASLt's heuristic chooses an algorithm from: the problem, the epilogue, the operands'
// alignment (the workspace is the process's one size). Asking it costs tens to hundreds of
// microseconds of host time, which at a hundred epilogue GEMMs a step kept the GPU waiting for the
// host (../shared/gpu/h100-2026-11-26.md): each problem is asked once per device.
using AlgoKey = std::tuple<int, int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                           int, int, uint32_t, uint32_t, uint32_t, bool, bool>;

std::optional<cublasLtMatmulAlgo_t> cached_algo(
    const AlgoKey& key, const std::function<std::optional<cublasLtMatmulAlgo_t>()>& ask) {
  static std::mutex mutex;
  static std::map<AlgoKey, std::optional<cublasLtMatmulAlgo_t>> algos;
  const std::lock_guard lock(mutex);
  const auto found = algos.find(key);
  if (found != algos.end()) return found->second;
  return algos[key] = ask();
}

// false where cuBLASLt offers no algorithm for this call; an algorithm that then fails is an
// error.
bool run(const LtGemm& g, cudaDataType_t type) {
  using Desc = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulDesc_t>,
                               decltype(&cublasLtMatmulDescDestroy)>;
  using Layout = std::unique_ptr<std::remove_pointer_t<cublasLtMatrixLayout_t>,
                                 decltype(&cublasLtMatrixLayoutDestroy)>;
  using Preference = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>,
                                     decltype(&cublasLtMatmulPreferenceDestroy)>;

  cublasLtMatmulDesc_t raw_desc = nullptr;
  check(cublasLtMatmulDescCreate(&raw_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul descriptor");
  const Desc desc(raw_desc, cublasLtMatmulDescDestroy);
  set(desc.get(), CUBLASLT_MATMUL_DESC_TRANSA, g.trans_a);
  set(desc.get(), CUBLASLT_MATMUL_DESC_TRANSB, g.trans_b);
  set(desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE, g.epilogue);
  if (g.bias != nullptr) set(desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
  if (g.aux != nullptr) {
    set(desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.aux);
    // The aux matrix takes D's type where its own type is left unset.
    set(desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, g.m);
  }

  const auto layout = [&](int64_t rows, int64_t cols, int64_t ld) {
    cublasLtMatrixLayout_t raw = nullptr;
    check(cublasLtMatrixLayoutCreate(&raw, type, rows, cols, ld), "matrix layout");
    return Layout(raw, cublasLtMatrixLayoutDestroy);
  };
  const bool a_n = g.trans_a == CUBLAS_OP_N, b_n = g.trans_b == CUBLAS_OP_N;
  const auto a = layout(a_n ? g.m : g.k, a_n ? g.k : g.m, g.lda);
  const auto b = layout(b_n ? g.k : g.n, b_n ? g.n : g.k, g.ldb);
  const auto d = layout(g.m, g.n, g.ldd);

  cublasLtMatmulPreference_t raw_preference = nullptr;
  check(cublasLtMatmulPreferenceCreate(&raw_preference), "matmul preference");
  const Preference preference(raw_preference, cublasLtMatmulPreferenceDestroy);
  const auto prefer = [&](cublasLtMatmulPreferenceAttributes_t attribute, auto value) {
    check(cublasLtMatmulPreferenceSetAttribute(preference.get(), attribute, &value, sizeof(value)),
          "setting a matmul preference");
  };
  const size_t workspace_bytes = at::cuda::getCUDABlasLtWorkspaceSize();
  prefer(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace_bytes);
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment(g.a));
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment(g.b));
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment(g.d));
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment(g.d));

  const auto handle = at::cuda::getCurrentCUDABlasLtHandle();
  int device = 0;
  cudaGetDevice(&device);
  const AlgoKey key{device, g.trans_a, g.trans_b, g.m, g.n, g.k, g.lda, g.ldb, g.ldd,
                    g.epilogue, type, alignment(g.a), alignment(g.b), alignment(g.d),
                    g.bias != nullptr, g.aux != nullptr};
  const auto algo = cached_algo(key, [&]() -> std::optional<cublasLtMatmulAlgo_t> {
    cublasLtMatmulHeuristicResult_t heuristic{};
    int found = 0;
    const auto status = cublasLtMatmulAlgoGetHeuristic(handle, desc.get(), a.get(), b.get(),
                                                        d.get(), d.get(), preference.get(), 1,
                                                        &heuristic, &found);
    if (status != CUBLAS_STATUS_SUCCESS || found == 0) return std::nullopt;
    return heuristic.algo;
  });
  if (!algo) return false;
  const float one = 1.0f, zero = 0.0f;
  check(cublasLtMatmul(handle, desc.get(), &one, g.a, a.get(), g.b, b.get(), &zero, g.d, d.get(),
                       g.d, d.get(), &*algo, at::cuda::getCUDABlasLtWorkspace(), workspace_bytes,
                       at::cuda::getCurrentCUDAStream().stream()),
        "matmul");
  return true;
}

// The cuBLASLt type shared by all of `tensors` where each is one that these GEMMs take.
std::optional<cudaDataType_t> lt_type(std::initializer_list<const torch::Tensor*> tensors) {
  const auto& first = **tensors.begin();
  if (!first.is_cuda()) return std::nullopt;
  const auto dtype = first.scalar_type();
  if (dtype != c10::kBFloat16 && dtype != c10::kHalf) return std::nullopt;
  for (const auto* t : tensors) {
    const bool usable = t->scalar_type() == dtype && t->device() == first.device() &&
                        t->dim() <= 2 && t->numel() > 0 && t->is_contiguous() &&
                        t->size(-1) % 8 == 0 && alignment(t->data_ptr()) >= 16;
    if (!usable) return std::nullopt;
  }
  if (!fused_path_runs(FusedPath::gemm_epilogues, first.device())) return std::nullopt;
  return dtype == c10::kBFloat16 ? CUDA_R_16BF : CUDA_R_16F;
}

}  // namespace

std::optional<GemmPair> linear_gelu(const torch::Tensor& x, const torch::Tensor& weight,
                                    const torch::Tensor& bias) {
  const auto type = lt_type({&x, &weight, &bias});
  if (!type || x.dim() != 2 || weight.dim() != 2 || bias.dim() != 1) return std::nullopt;
  const int64_t rows = x.size(0), in = x.size(1), out = weight.size(0);
  TORCH_CHECK(weight.size(1) == in && bias.size(0) == out, "linear_gelu: x ", x.sizes(),
              ", weight ", weight.sizes(), " and bias ", bias.sizes(), " do not fit");
  const c10::cuda::CUDAGuard guard(x.device());
  auto pre = torch::empty({rows, out}, x.options());
  auto y = torch::empty({rows, out}, x.options());
  // yᵀ [out, rows] = weight [out, in] · xᵀ [in, rows].
  const LtGemm g{CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, weight.data_ptr(), in, x.data_ptr(), in,
                 y.data_ptr(), out, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, bias.data_ptr(),
                 pre.data_ptr()};
  if (!run(g, *type)) return std::nullopt;
  return GemmPair{pre, y};
}

std::optional<torch::Tensor> linear_input_grad_dgelu(const torch::Tensor& dy,
                                                     const torch::Tensor& weight,
                                                     const torch::Tensor& pre) {
  const auto type = lt_type({&dy, &weight, &pre});
  if (!type || dy.dim() != 2 || weight.dim() != 2 || pre.dim() != 2) return std::nullopt;
  const int64_t rows = dy.size(0), out = dy.size(1), in = weight.size(1);
  TORCH_CHECK(weight.size(0) == out && pre.size(0) == rows && pre.size(1) == in,
              "linear_input_grad_dgelu: dy ", dy.sizes(), ", weight ", weight.sizes(), " and pre ",
              pre.sizes(), " do not fit");
  const c10::cuda::CUDAGuard guard(dy.device());
  auto d_pre = torch::empty({rows, in}, dy.options());
  // d_preᵀ [in, rows] = weightᵀ [in, out] · dyᵀ [out, rows], then ⊙ gelu'(preᵀ).
  const LtGemm g{CUBLAS_OP_N, CUBLAS_OP_N, in, rows, out, weight.data_ptr(), in, dy.data_ptr(),
                 out, d_pre.data_ptr(), in, CUBLASLT_EPILOGUE_DGELU, nullptr, pre.data_ptr()};
  if (!run(g, *type)) return std::nullopt;
  return d_pre;
}

std::optional<GemmPair> linear_weight_bias_grad(const torch::Tensor& dy, const torch::Tensor& x) {
  const auto type = lt_type({&dy, &x});
  if (!type || dy.dim() != 2 || x.dim() != 2) return std::nullopt;
  const int64_t rows = dy.size(0), out = dy.size(1), in = x.size(1);
  TORCH_CHECK(x.size(0) == rows, "linear_weight_bias_grad: dy ", dy.sizes(), " and x ", x.sizes(),
              " have different rows");
  const c10::cuda::CUDAGuard guard(dy.device());
  auto d_weight = torch::empty({out, in}, dy.options());
  auto d_bias = torch::empty({out}, dy.options());
  // d_weightᵀ [in, out] = xᵀ [in, rows] · dy [rows, out]; the bias gradient sums op(B) = dy over
  // the k = rows dimension.
  const LtGemm g{CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, x.data_ptr(), in, dy.data_ptr(), out,
                 d_weight.data_ptr(), in, CUBLASLT_EPILOGUE_BGRADB, d_bias.data_ptr()};
  if (!run(g, *type)) return std::nullopt;
  return GemmPair{d_weight, d_bias};
}

}  // namespace ampt::kernels
