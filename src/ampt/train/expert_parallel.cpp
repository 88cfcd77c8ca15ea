#include "ampt/train/expert_parallel.h"

#include "ampt/core/errors.h"
#include "ampt/distributed/process_group.h"
#include "ampt/models/lora.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <numeric>
#include <stdexcept>

namespace ampt::train {
namespace {

// The models' exchange over the ranks of one expert group.
class GroupExchange final : public models::ExpertExchange {
 public:
  explicit GroupExchange(distributed::Subgroup& group) : group_(group) {}
  int64_t ranks() const override { return group_.size(); }
  torch::Tensor all_to_all(const torch::Tensor& input, const std::vector<int64_t>& send,
                           const std::vector<int64_t>& receive) override {
    auto in = input.contiguous();
    auto shape = in.sizes().vec();
    shape[0] = std::accumulate(receive.begin(), receive.end(), int64_t{0});
    auto out = torch::empty(shape, in.options());
    group_.all_to_all(out, in, send, receive, "the all_to_all of tokens to their experts");
    return out;
  }

 private:
  distributed::Subgroup& group_;
};

}  // namespace

c10::intrusive_ptr<models::ExpertExchange> subgroup_exchange(distributed::Subgroup& group) {
  return c10::make_intrusive<GroupExchange>(group);
}

void check_expert_parallel(const config::Config& config, const torch::nn::Module& module) {
  const int64_t n = config.expert_parallel;
  if (n == 1) return;
  if (!models::has_experts(module)) {
    throw UsageError(fmt::format("expert_parallel {} divides a sparse model's experts among ranks, "
                                 "and model {} has none; use expert_parallel 1",
                                 n, config.model));
  }
  config::check_expert_groups(n, config.launch.world_size);
  for (const auto& item : module.named_parameters()) {
    if (models::is_lora_parameter(item.key()) && item.key().find("experts.") != std::string::npos) {
      throw UsageError(fmt::format(
          "expert_parallel {} with LoRA on the experts ({}): an expert weight's adapter holds "
          "every expert's factors in one matrix, which the ranks cannot divide; adapt attention "
          "and dense layers only, or use expert_parallel 1",
          n, item.key()));
    }
  }
}

// The experts' gradients made the whole run's, and collected beside `inner`'s when it leaves
// them out (ZeRO's shards hold the dense parameters only); their norms and underflow counts made
// the whole weights'.
class ExpertParallel::Gradients final : public StepGradients {
 public:
  Gradients(const ExpertParallel& experts, StepGradients& inner) : experts_(experts), inner_(inner) {}

  Collected collect(const std::vector<torch::Tensor>& parameters) override {
    std::vector<int64_t> experts;
    {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < parameters.size(); ++i) {
        const auto& p = parameters[i];
        if (!experts_.is_expert(p)) continue;
        experts.push_back(static_cast<int64_t>(i));
        // Every sparse forward runs every expert's GEMM (an empty slice included): a gradient is
        // there on every rank, so the replicas' all-reduces pair up.
        auto parameter = p;  // the same TensorImpl, whose gradient this sets
        auto& grad = parameter.mutable_grad();
        if (!grad.defined()) grad = torch::zeros_like(p);
        if (experts_.replicas_ != nullptr) {
          experts_.replicas_->all_reduce(grad, "the all-reduce of the experts' gradients");
        }
        grad.div_(static_cast<double>(experts_.world_));
      }
    }
    auto inner = inner_.collect(parameters);
    dense_grads_.clear();
    expert_grads_.clear();
    dense_norms_.clear();
    expert_norms_.clear();
    if (experts.empty()) return inner;
    const auto is_expert = [&](int64_t p) { return std::ranges::binary_search(experts, p); };
    if (std::ranges::binary_search(inner.params, experts.front())) {
      // `inner` collected them: its gradients and norms are the parameters', one each.
      for (size_t i = 0; i < inner.params.size(); ++i) {
        (is_expert(inner.params[i]) ? expert_grads_ : dense_grads_).push_back(static_cast<int64_t>(i));
      }
      dense_norms_ = dense_grads_;
      expert_norms_ = expert_grads_;
      return inner;
    }
    // ZeRO's: its gradients are this rank's pieces of the shards' parameters. The experts' go
    // after them (this rank's rows where the replicas share the stacks: what its optimizer
    // steps), and their norms take their places among the parameters' (in the parameters'
    // order, as the monitor reads them).
    Collected out{std::move(inner.grads), {}};
    for (size_t i = 0; i < out.grads.size(); ++i) dense_grads_.push_back(static_cast<int64_t>(i));
    for (const auto e : experts) {
      expert_grads_.push_back(static_cast<int64_t>(out.grads.size()));
      const auto& p = parameters[static_cast<size_t>(e)];
      auto grad = p.grad();
      if (const auto share = experts_.shares_.find(p.unsafeGetTensorImpl()); share != experts_.shares_.end()) {
        grad = grad.narrow(0, share->second.first, share->second.count);
        auto rows = share->second.rows;
        rows.mutable_grad() = grad;
      }
      out.grads.push_back(std::move(grad));
    }
    std::ranges::merge(inner.params, experts, std::back_inserter(out.params));
    for (size_t k = 0; k < out.params.size(); ++k) {
      (is_expert(out.params[k]) ? expert_norms_ : dense_norms_).push_back(static_cast<int64_t>(k));
    }
    return out;
  }

  torch::Tensor norms(const std::vector<torch::Tensor>& grads) override {
    if (expert_grads_.empty()) return inner_.norms(grads);
    auto squares = StepGradients::norms(pick(grads, expert_grads_)).square();
    experts_.over_sharing_replicas(squares, "the all-reduce of the experts' gradient norms");
    experts_.exchange_.all_reduce(squares, "the all-reduce of the experts' gradient norms");
    const auto dense = inner_.norms(pick(grads, dense_grads_));
    auto out = torch::empty({static_cast<int64_t>(dense_norms_.size() + expert_norms_.size())},
                            dense.options());
    out.index_copy_(0, expert_at_.of(expert_norms_, out.device()), squares.sqrt());
    return out.index_copy_(0, dense_at_.of(dense_norms_, out.device()), dense);
  }

  torch::Tensor underflow(const std::vector<torch::Tensor>& grads, c10::ScalarType half) override {
    if (expert_grads_.empty()) return inner_.underflow(grads, half);
    auto counts = StepGradients::underflow(pick(grads, expert_grads_), half);
    experts_.over_sharing_replicas(counts, "the all-reduce of the experts' underflow counts");
    experts_.exchange_.all_reduce(counts, "the all-reduce of the experts' underflow counts");
    return counts + inner_.underflow(pick(grads, dense_grads_), half);
  }

  void weights_stepped() override {
    // The replicas' stepped rows into every replica's stacks, before O1's half copies follow.
    torch::NoGradGuard no_grad;
    for (const auto& [impl, share] : experts_.shares_) {
      auto whole = share.whole.detach();
      auto mine = share.rows.detach().clone();
      experts_.replicas_->all_gather(whole, mine, "the all-gather of the experts' stepped rows");
      // Its gradient is a view of the stack's, which the step releases: let that go with it.
      auto rows = share.rows;
      rows.mutable_grad() = torch::Tensor();
    }
    inner_.weights_stepped();
  }

 private:
  static std::vector<torch::Tensor> pick(const std::vector<torch::Tensor>& grads,
                                         const std::vector<int64_t>& positions) {
    std::vector<torch::Tensor> out;
    for (const auto i : positions) out.push_back(grads[static_cast<size_t>(i)]);
    return out;
  }

  // Positions as an index tensor on the device, made again only when they change: every step
  // collects the same ones, and a tensor made from them each step is a copy to a GPU each step.
  class DeviceIndex {
   public:
    const torch::Tensor& of(const std::vector<int64_t>& positions, const c10::Device& device) {
      if (!index_.defined() || positions_ != positions || index_.device() != device) {
        positions_ = positions;
        index_ = torch::tensor(positions, torch::dtype(torch::kInt64)).to(device);
      }
      return index_;
    }

   private:
    std::vector<int64_t> positions_;
    torch::Tensor index_;
  };

  const ExpertParallel& experts_;
  StepGradients& inner_;
  // Where the collected gradients and their norms (one per parameter) are the experts' and
  // `inner`'s.
  std::vector<int64_t> dense_grads_, expert_grads_;
  std::vector<int64_t> dense_norms_, expert_norms_;
  DeviceIndex dense_at_, expert_at_;
};

std::unique_ptr<ExpertParallel> ExpertParallel::make(distributed::DataParallel& dist,
                                                     torch::nn::Module& module) {
  auto* exchange = dist.expert_exchange();
  if (exchange == nullptr) return nullptr;
  models::set_expert_exchange(module, subgroup_exchange(*exchange));
  auto slices = models::expert_slices(module);
  if (slices.empty()) throw std::logic_error("expert parallelism over a model without sharded experts");
  std::set<const void*> experts;
  for (const auto& item : module.named_parameters()) {
    if (slices.count(item.key()) > 0) experts.insert(item.value().unsafeGetTensorImpl());
  }
  return std::unique_ptr<ExpertParallel>(new ExpertParallel(
      *exchange, dist.expert_replicas(), std::move(slices), std::move(experts), dist.world_size()));
}

ExpertParallel::ExpertParallel(distributed::Subgroup& exchange, distributed::Subgroup* replicas,
                               std::map<std::string, models::ExpertSlice> slices,
                               std::set<const void*> expert_parameters, int64_t world)
    : exchange_(exchange),
      replicas_(replicas),
      slices_(std::move(slices)),
      expert_parameters_(std::move(expert_parameters)),
      world_(world) {}

ExpertParallel::~ExpertParallel() = default;

const models::ExpertSlice* ExpertParallel::slice(const std::string& name) const {
  const auto it = slices_.find(name);
  return it == slices_.end() ? nullptr : &it->second;
}

bool ExpertParallel::is_expert(const torch::Tensor& parameter) const {
  return expert_parameters_.count(parameter.unsafeGetTensorImpl()) > 0;
}

NamedTensors ExpertParallel::without_experts(const NamedTensors& tensors) const {
  NamedTensors out;
  for (const auto& [name, tensor] : tensors) {
    if (slices_.count(name) == 0) out.emplace_back(name, tensor);
  }
  return out;
}

std::vector<torch::Tensor> ExpertParallel::without_experts(
    const std::vector<torch::Tensor>& parameters) const {
  std::vector<torch::Tensor> out;
  for (const auto& p : parameters) {
    if (!is_expert(p)) out.push_back(p);
  }
  return out;
}

void ExpertParallel::share_experts(const NamedTensors& tensors) {
  if (replicas_ == nullptr) return;
  std::vector<torch::Tensor> experts;
  for (const auto& [name, tensor] : tensors) {
    if (slices_.count(name) > 0) experts.push_back(tensor);
  }
  replicas_->broadcast(experts, 0, "the broadcast of the first replica's experts");
}

NamedTensors ExpertParallel::replica_shares(const NamedTensors& weights) {
  shares_.clear();
  const int64_t replicas = replicas_ != nullptr ? replicas_->size() : 1;
  const bool divide = replicas > 1 && std::ranges::all_of(weights, [&](const auto& named) {
    return named.second.size(0) % replicas == 0;
  });
  if (!divide) return weights;
  NamedTensors out;
  for (const auto& [name, weight] : weights) {
    const int64_t count = weight.size(0) / replicas, first = replicas_->rank() * count;
    auto rows = weight.detach().narrow(0, first, count);
    shares_[weight.unsafeGetTensorImpl()] = {name, weight, rows, first, count};
    out.emplace_back(name, rows);
  }
  return out;
}

std::pair<int64_t, int64_t> ExpertParallel::share_rows(const std::string& name) const {
  for (const auto& [impl, share] : shares_) {
    if (share.name == name) return {share.first, share.count};
  }
  const auto* whole = slice(name);
  return {0, whole != nullptr ? whole->count : 0};
}

int64_t ExpertParallel::sharing_replicas() const {
  return shares_.empty() ? 1 : replicas_->size();
}

void ExpertParallel::over_sharing_replicas(torch::Tensor& value, const char* what) const {
  if (!shares_.empty()) replicas_->all_reduce(value, what);
}

StepGradients& ExpertParallel::gradients(StepGradients& inner) {
  gradients_ = std::make_unique<Gradients>(*this, inner);
  return *gradients_;
}

NamedTensors ExpertParallel::whole(NamedTensors tensors) const {
  torch::NoGradGuard no_grad;
  // Optimizer state of the rows the replicas share: the first replica (rank 0's group) gets each
  // whole stack's from the others, one tensor at a time.
  if (!shares_.empty()) {
    for (auto& [name, tensor] : tensors) {
      const auto rows = share_rows(name.substr(0, name.rfind('.')));
      if (tensor.dim() != 3 || rows.second != tensor.size(0) || slices_.count(name) > 0) continue;
      auto shape = tensor.sizes().vec();
      shape[0] *= replicas_->size();
      auto stack = replicas_->rank() == 0 ? torch::empty(shape, tensor.options()) : torch::Tensor();
      auto mine = tensor.contiguous();
      replicas_->gather(stack, mine, 0, "the gather of the experts' optimizer state for a checkpoint");
      if (replicas_->rank() == 0) tensor = std::move(stack);
    }
  }
  // Rank 0 writes the checkpoint: the ranks of its group send it their experts one tensor at a
  // time, and it keeps each whole in host memory, so that no device ever holds every expert of
  // the model and its optimizer state. The others return theirs as they are: they write nothing.
  if (exchange_.members().front() != 0) return tensors;
  const bool writer = exchange_.rank() == 0;
  for (auto& [name, tensor] : tensors) {
    const auto* slice = models::expert_slice_of(slices_, name, tensor, &models::ExpertSlice::count);
    if (slice == nullptr) continue;
    auto mine = tensor.contiguous();
    torch::Tensor gathered;
    if (writer) {
      auto shape = tensor.sizes().vec();
      shape[0] = slice->total;
      gathered = torch::empty(shape, tensor.options());
    }
    exchange_.gather(gathered, mine, 0, "the gather of the experts for a checkpoint");
    if (writer) tensor = gathered.to(torch::kCPU);
  }
  return tensors;
}

NamedTensors ExpertParallel::local(NamedTensors tensors) const {
  for (auto& [name, tensor] : tensors) {
    if (const auto* slice = models::expert_slice_of(slices_, name, tensor, &models::ExpertSlice::total)) {
      tensor = tensor.narrow(0, slice->first, slice->count);
    }
  }
  return tensors;
}

std::string ExpertParallel::describe() const {
  const auto& slice = slices_.begin()->second;
  const int64_t replicas = replicas_ != nullptr ? replicas_->size() : 1;
  return fmt::format("expert parallel {}: each group of {} ranks divides every sparse layer's {} "
                     "experts ({} per rank), tokens reach them by all_to_all{}",
                     exchange_.size(), exchange_.size(), slice.total, slice.count,
                     replicas > 1 ? fmt::format("; {} groups replicate them", replicas) : "");
}

}  // namespace ampt::train
