#include "ampt/models/moe.h"

#include "ampt/core/autocast_dtype.h"
#include "ampt/kernels/batch_invariant.h"
#include "ampt/models/linear.h"
#include "ampt/models/lora.h"

#include <ATen/autocast_mode.h>
#include <ATen/ops/_grouped_mm.h>
#include <torch/autograd.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/init.h>

namespace ampt::models {
namespace {

constexpr double kInitStd = 0.02;  // transformers' initializer_range for experts and router

// Whether the experts of x's batch run as one at::_grouped_mm: bf16 on a GPU (the CPU kernel's
// bf16 backward fails in torch 2.11), where every row of both operands starts 16 bytes apart,
// as its kernel needs.
bool grouped_on(const torch::Tensor& x, int64_t n_embd, int64_t intermediate) {
  return x.is_cuda() && n_embd % 8 == 0 && intermediate % 8 == 0 &&
         (x.scalar_type() == torch::kBFloat16 ||
          (at::autocast::is_autocast_enabled(c10::kCUDA) &&
           at::autocast::get_autocast_dtype(c10::kCUDA) == torch::kBFloat16));
}

// x [rows, in] through each expert's weight [E, out, in] (as nn.Linear's) over its slice of
// rows, the slices in expert order: one at::_grouped_mm over all of them (`offsets`, their int32
// running ends on x's device), or one at::mm per expert with rows (`counts`).
torch::Tensor grouped_linear(const torch::Tensor& x, const torch::Tensor& weight,
                             const std::vector<int64_t>& counts, const torch::Tensor& offsets) {
  if (offsets.defined()) {
    return at::_grouped_mm(x.to(torch::kBFloat16), weight.to(torch::kBFloat16).transpose(1, 2),
                           offsets);
  }
  // split and unbind, not narrow and select: their backward is one cat and one stack, where
  // each narrow's and select's would fill a zero tensor of the whole input or weight per expert.
  const auto rows = x.split_with_sizes(counts);
  const auto weights = weight.unbind(0);
  // Exact mode: each row's product alone, whichever rows share its expert.
  const bool invariant = kernels::batch_invariant();
  const auto gemm = [invariant](const torch::Tensor& in, const torch::Tensor& w) {
    return invariant ? kernels::invariant_linear(in, w, {}) : at::mm(in, w.t());
  };
  std::vector<torch::Tensor> slices;
  for (size_t e = 0; e < counts.size(); ++e) {
    if (counts[e] > 0) slices.push_back(gemm(rows[e], weights[e]));
  }
  if (slices.empty()) return gemm(x, weights[0]);  // no rows: [0, out]
  return slices.size() == 1 ? slices.front() : torch::cat(slices);
}

// grouped_linear over a stored (quantized) weight: its storage is saved, not the dequantized
// weight, and the backward dequantizes again for the input's gradient; the weight, frozen, gets
// none.
struct StoredGroupedLinear : public torch::autograd::Function<StoredGroupedLinear> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const c10::intrusive_ptr<precision::QuantizedWeight>& weight,
                               const std::vector<int64_t>& counts) {
    ctx->saved_data["weight"] = c10::IValue::make_capsule(weight);
    ctx->saved_data["counts"] = counts;
    return grouped_linear(x, weight->dequantize(x.scalar_type()), counts, {});
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto weight = c10::static_intrusive_pointer_cast<precision::QuantizedWeight>(
        ctx->saved_data["weight"].toCapsule());
    const auto counts = ctx->saved_data["counts"].toIntVector();
    const auto& grad = grads[0];
    // dy_e · W_e for each expert: the transposed group through the same per-expert GEMMs.
    return {grouped_linear(grad, weight->dequantize(grad.scalar_type()).transpose(1, 2), counts, {}),
            torch::Tensor(), torch::Tensor()};
  }
};

// The permutation that undoes `order` (a permutation of 0..n-1).
torch::Tensor inverse_permutation(const torch::Tensor& order) {
  return torch::empty_like(order).scatter_(0, order, torch::arange(order.size(0), order.options()));
}

// Rows to the ranks that share an exchange and back: the forward's all_to_all, whose gradient
// is the reverse all_to_all (each row's gradient returns to the rank it came from).
struct AllToAll : public torch::autograd::Function<AllToAll> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& rows,
                               const c10::intrusive_ptr<ExpertExchange>& exchange,
                               const std::vector<int64_t>& send, const std::vector<int64_t>& receive) {
    ctx->saved_data["exchange"] = c10::IValue::make_capsule(exchange);
    ctx->saved_data["send"] = send;
    ctx->saved_data["receive"] = receive;
    return exchange->all_to_all(rows, send, receive);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto exchange = c10::static_intrusive_pointer_cast<ExpertExchange>(
        ctx->saved_data["exchange"].toCapsule());
    return {exchange->all_to_all(grads[0], ctx->saved_data["receive"].toIntVector(),
                                 ctx->saved_data["send"].toIntVector()),
            torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

Routing route(const torch::Tensor& logits, int64_t top_k, bool normalize_top_k) {
  const auto probabilities = torch::softmax(logits.to(torch::kFloat32), -1);
  auto [weights, experts] = probabilities.topk(top_k, -1);
  if (normalize_top_k) weights = weights / weights.sum(-1, /*keepdim=*/true);
  return {experts, weights};
}

ExpertsImpl::ExpertsImpl(int64_t experts, int64_t n_embd, int64_t intermediate,
                         ExpertShard shard)
    : total_(experts) {
  // Every rank draws the whole weights, as one process would, and keeps its share: the runs then
  // start from the same model whatever the sharding, and so does everything drawn after.
  auto gate_up = torch::empty({experts, 2 * intermediate, n_embd});
  auto down = torch::empty({experts, n_embd, intermediate});
  {
    torch::NoGradGuard no_grad;
    gate_up.normal_(0.0, kInitStd);
    down.normal_(0.0, kInitStd);
  }
  if (shard.count > 1) {
    const int64_t count = experts / shard.count;
    first_ = shard.index * count;
    gate_up = gate_up.narrow(0, first_, count).clone();
    down = down.narrow(0, first_, count).clone();
  }
  gate_up_proj = register_parameter(expert_group_parameters()[0], gate_up);
  down_proj = register_parameter(expert_group_parameters()[1], down);
  defer_if_asked(gate_up_proj);
  defer_if_asked(down_proj);
}

const std::vector<std::string>& expert_group_parameters() {
  static const std::vector<std::string> names{"gate_up_proj", "down_proj"};
  return names;
}

const std::vector<std::string>& ExpertsImpl::quantizable_names() const {
  return expert_group_parameters();
}

torch::Tensor ExpertsImpl::forward(const torch::Tensor& x, const Routing& routing) {
  const int64_t tokens = x.size(0), top_k = routing.experts.size(1);
  const auto picked = routing.experts.flatten();
  // The (token, slot) pairs sorted by expert, stably: each expert's tokens keep their order.
  const auto order = picked.argsort(/*stable=*/true);
  const auto rows = x.index_select(0, order.div(top_k, "floor"));
  const auto per_expert = picked.bincount({}, total_);
  const auto out = exchange_ ? exchange_and_run(rows, per_expert) : run(rows, per_expert);
  // Back to (token, slot) order by the inverse permutation, not an atomic index_add: the sum
  // over a token's experts is then the same in every run; and a gather, which keeps only its
  // index for backward (index_copy would keep a copy of `out`).
  const auto unsorted = out.index_select(0, inverse_permutation(order));
  const auto weighted =
      unsorted.view({tokens, top_k, -1}) * routing.weights.unsqueeze(-1).to(unsorted.scalar_type());
  if (!kernels::batch_invariant()) return weighted.sum(1);
  // Exact mode: the slots added one by one, 0 to k - 1, not in the order a reduction picks.
  auto sum = weighted.select(1, 0);
  for (int64_t slot = 1; slot < top_k; ++slot) sum = sum + weighted.select(1, slot);
  return sum;
}

torch::Tensor ExpertsImpl::run(const torch::Tensor& rows, const torch::Tensor& per_expert) {
  const int64_t experts = gate_up_proj.size(0);
  std::vector<int64_t> counts;
  torch::Tensor offsets;
  const bool stored = quantized(0) || quantized(1);
  if (!stored && grouped_on(rows, down_proj.size(1), down_proj.size(2))) {
    offsets = per_expert.cumsum(0).to(torch::kInt32);
  } else {
    // The slice lengths drive the GEMMs from the host: one sync per block on a GPU.
    const auto on_host = per_expert.to(torch::kCPU);
    counts.assign(on_host.data_ptr<int64_t>(), on_host.data_ptr<int64_t>() + experts);
  }
  const auto project = [&](const torch::Tensor& in, size_t i) {
    const auto& weight = quantized(i);
    if (const auto adapter = expert_lora_adapter(*this, quantizable_names()[i])) {
      // peft's ParamWrapper: the adapter's update added to the (dequantized) weights, which the
      // GEMMs then read; its factors get their gradients through that sum.
      const auto base = weight ? weight->dequantize(matmul_dtype(in)) : quantizable_parameter(i);
      return grouped_linear(in, base + expert_lora_delta(adapter, experts), counts, offsets);
    }
    if (!weight) return grouped_linear(in, quantizable_parameter(i), counts, offsets);
    // In the dtype autocast would compute a matmul in, as a stored Linear is.
    return StoredGroupedLinear::apply(in.to(matmul_dtype(in)), weight, counts);
  };
  const auto halves = project(rows, 0).chunk(2, -1);
  const auto gate = kernels::batch_invariant() ? kernels::invariant_silu(halves[0]) : torch::silu(halves[0]);
  return project(gate * halves[1], 1);
}

torch::Tensor ExpertsImpl::exchange_and_run(const torch::Tensor& rows, const torch::Tensor& per_expert) {
  const int64_t ranks = exchange_->ranks(), local = gate_up_proj.size(0);
  // received[i][e]: the rows rank i sends this rank's expert e; one all_to_all of the counts.
  const std::vector<int64_t> per_rank(static_cast<size_t>(ranks), local);
  const auto received = exchange_->all_to_all(per_expert, per_rank, per_rank).view({ranks, local});
  const auto host = [](const torch::Tensor& t) {
    const auto h = t.to(torch::kCPU).contiguous();
    return std::vector<int64_t>(h.data_ptr<int64_t>(), h.data_ptr<int64_t>() + h.numel());
  };
  const auto send = host(per_expert.view({ranks, local}).sum(1));
  const auto receive = host(received.sum(1));
  const auto arrived = AllToAll::apply(rows, exchange_, send, receive);
  // The rows arrive by sender, each sender's by expert; the GEMMs want them by expert.
  const auto expert_of_row =
      torch::arange(local, received.options()).repeat({ranks}).repeat_interleave(received.flatten());
  const auto by_expert = expert_of_row.argsort(/*stable=*/true);
  const auto out = run(arrived.index_select(0, by_expert), received.sum(0));
  return AllToAll::apply(out.index_select(0, inverse_permutation(by_expert)), exchange_, receive, send);
}

bool has_experts(const torch::nn::Module& root) {
  for (const auto& module : root.modules()) {
    if (dynamic_cast<const ExpertsImpl*>(module.get()) != nullptr) return true;
  }
  return false;
}

std::map<std::string, ExpertSlice> expert_slices(const torch::nn::Module& root) {
  std::map<std::string, ExpertSlice> out;
  for (const auto& item : root.named_modules()) {
    const auto* experts = dynamic_cast<const ExpertsImpl*>(item.value().get());
    if (experts == nullptr || !experts->sharded()) continue;
    const auto prefix = item.key().empty() ? "" : item.key() + ".";
    const ExpertSlice slice{experts->first_expert(), experts->gate_up_proj.size(0),
                            experts->total_experts()};
    for (const auto& name : experts->quantizable_names()) out.emplace(prefix + name, slice);
  }
  return out;
}

const ExpertSlice* expert_slice_of(const std::map<std::string, ExpertSlice>& slices,
                                   const std::string& name, const torch::Tensor& tensor,
                                   int64_t ExpertSlice::*rows) {
  auto it = slices.find(name);
  if (it == slices.end()) it = slices.find(name.substr(0, name.rfind('.')));
  if (it == slices.end() || tensor.dim() != 3 || tensor.size(0) != it->second.*rows) return nullptr;
  return &it->second;
}

void set_expert_exchange(torch::nn::Module& root, const c10::intrusive_ptr<ExpertExchange>& exchange) {
  for (const auto& module : root.modules()) {
    if (auto* experts = dynamic_cast<ExpertsImpl*>(module.get()); experts && experts->sharded()) {
      experts->set_exchange(exchange);
    }
  }
}

RouterImpl::RouterImpl(int64_t experts, int64_t n_embd) {
  weight = register_parameter("weight", torch::empty({experts, n_embd}));
  torch::NoGradGuard no_grad;
  weight.normal_(0.0, kInitStd);
}

torch::Tensor RouterImpl::forward(const torch::Tensor& x) {
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  if (kernels::batch_invariant()) return kernels::invariant_linear(x.to(torch::kFloat32), weight.to(torch::kFloat32), {});
  return at::mm(x.to(torch::kFloat32), weight.to(torch::kFloat32).t());
}

SparseMoeImpl::SparseMoeImpl(const LlamaDims& dims, const SparseLayers& layers)
    : top_k_(dims.moe.top_k), normalize_top_k_(dims.moe.normalize_top_k) {
  gate = register_module(module_path(layers.router).back(), Router(dims.moe.experts, dims.n_embd));
  // The stacks' parent module: "mlp.experts.gate_up_proj" → "experts".
  const auto stack = module_path(layers.expert_groups.front());
  experts = register_module(
      stack[stack.size() - 2],
      Experts(dims.moe.experts, dims.n_embd, dims.moe.intermediate, dims.expert_shard));
}

SparseMoeImpl::Output SparseMoeImpl::forward(const torch::Tensor& x) {
  const auto tokens = x.reshape({-1, x.size(-1)});
  auto logits = gate->forward(tokens);
  const auto y = experts->forward(tokens, route(logits, top_k_, normalize_top_k_));
  return {y.view(x.sizes()), std::move(logits)};
}

LoadBalance load_balance(const std::vector<torch::Tensor>& router_logits, int64_t top_k) {
  const auto logits = torch::cat(router_logits);
  const int64_t experts = logits.size(1);
  const auto probabilities = torch::softmax(logits.to(torch::kFloat32), -1);
  const auto picked = std::get<1>(probabilities.topk(top_k, -1));
  // [k, E]: per slot, the share of tokens that picked each expert (no gradient, as in
  // transformers: a one-hot count).
  const auto share = torch::one_hot(picked, experts).to(torch::kFloat32).mean(0);
  const auto mean_probability = probabilities.mean(0);
  const auto loss = (share * mean_probability.unsqueeze(0)).sum() * static_cast<double>(experts);
  std::vector<int64_t> rows;
  for (const auto& block : router_logits) rows.push_back(block.size(0));
  std::vector<torch::Tensor> shares;
  for (const auto& block : picked.split_with_sizes(rows)) {
    shares.push_back(block.flatten().bincount({}, experts).to(torch::kFloat32) *
                     (static_cast<double>(experts) / static_cast<double>(block.numel())));
  }
  const auto all = torch::stack(shares);
  return {loss, torch::stack({all.max(), all.min()})};
}

torch::Tensor router_z_loss(const std::vector<torch::Tensor>& router_logits) {
  return torch::cat(router_logits).to(torch::kFloat32).logsumexp(-1).square().mean();
}

}  // namespace ampt::models
