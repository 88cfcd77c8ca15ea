#include "ampt/train/step_census.h"

#include <ATen/record_function.h>
#include <c10/core/StorageImpl.h>
#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string_view>

namespace ampt::train {

using StorageRef = c10::weak_intrusive_ptr<c10::StorageImpl>;

struct StepCensusRecorder::State {
  std::vector<torch::Tensor> parameters;
  std::mutex mutex;  // backward may run on other threads
  StepCensus census;
  std::set<const c10::StorageImpl*> parameter_storage;
  std::set<const c10::StorageImpl*> gradient_storage;
  // Each conversion's destination and source, and whether it ran inside an ampt:: operation:
  // weak references keep their addresses from being reused by another storage before the step's
  // gradients are known.
  struct Converted {
    StorageRef dst, src;
    bool in_ampt;
  };
  std::vector<Converted> converted;
  std::vector<at::CallbackHandle> handles;  // while a step is counted
};

namespace {

std::atomic<StepCensusRecorder::State*> g_active{nullptr};

// Operators that only make views, read metadata or allocate: no device work of their own.
bool no_work(std::string_view name) {
  static const std::set<std::string_view> names = {
      "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::_reshape_alias",
      "aten::as_strided", "aten::t", "aten::transpose", "aten::permute", "aten::expand",
      "aten::expand_as", "aten::split", "aten::split_with_sizes", "aten::chunk", "aten::unbind",
      "aten::select", "aten::slice", "aten::narrow", "aten::squeeze", "aten::unsqueeze",
      "aten::flatten", "aten::unflatten", "aten::view_as", "aten::alias", "aten::detach",
      "aten::detach_", "aten::lift_fresh", "aten::empty", "aten::empty_like",
      "aten::empty_strided", "aten::resize_", "aten::set_", "aten::to", "aten::contiguous",
      "aten::numpy_T", "aten::matrix_H", "aten::mT", "aten::values", "aten::indices",
      "aten::_has_compatible_shallow_copy_type", "aten::result_type", "aten::size",
      "aten::stride", "aten::is_same_size", "aten::type_as", "aten::clone_if_needed"};
  return names.contains(name);
}

// Calls that make a GPU wait until its queue has run.
bool syncs(std::string_view name) {
  static const std::set<std::string_view> names = {
      "aten::item", "aten::_local_scalar_dense", "aten::nonzero", "aten::is_nonzero",
      "aten::equal", "aten::allclose", "aten::masked_select", "aten::unique_dim",
      "aten::_unique2", "aten::unique_consecutive", "aten::argwhere", "ampt::copy_to_host"};
  return names.contains(name);
}

bool is_ampt(std::string_view name) { return name.starts_with("ampt::"); }

// The autograd engine's wrapper around each node it runs: the node's own calls are outermost.
bool is_node_wrapper(std::string_view name) {
  return name.starts_with("autograd::engine::evaluate_function");
}

struct Frame {
  std::string_view name;
  bool work = false;       // it, or something inside it, does device work
  bool host_copy = false;  // something inside it copies from a GPU to the host
  bool in_ampt = false;    // it runs inside an ampt:: operation (one kernel on a GPU)
  bool quiet = false;      // it runs inside a foreach copy, which counted its copies itself
};

struct ThreadState {
  std::vector<Frame> frames;  // the FUNCTION events open on this thread, outermost first
};
thread_local ThreadState t_state;

bool is_tensor(const c10::IValue& v) { return v.isTensor() && v.toTensor().defined(); }

// `op`: the outermost operation it happened in; `in_ampt`: inside an ampt:: operation.
void add_conversion(StepCensusRecorder::State& s, std::string_view op, bool in_ampt,
                    const torch::Tensor& dst, const torch::Tensor& src) {
  // A number an operator was given, wrapped as a 0-dim host tensor, is an argument, not data:
  // its conversion is the CPU kernel's way of reading it (a GPU kernel takes it as it is).
  if (dst.scalar_type() == src.scalar_type() || src.unsafeGetTensorImpl()->is_wrapped_number()) {
    return;
  }
  const int64_t bytes = dst.numel() * static_cast<int64_t>(dst.element_size() + src.element_size());
  auto& counts = s.census.counts;
  ++counts.conversions;
  counts.conversion_bytes += bytes;
  if (in_ampt) {
    ++counts.ampt_conversions;
    counts.ampt_conversion_bytes += bytes;
    ++counts.ampt_conversion_ops[std::string(op)];
  }
  ++s.census.conversion_calls[std::string(op)];
  s.converted.push_back(
      {dst.storage().getWeakStorageImpl(), src.storage().getWeakStorageImpl(), in_ampt});
}

// A device-to-host copy: a CPU destination filled from a GPU tensor.
bool copies_to_host(std::string_view name, c10::ArrayRef<const c10::IValue> inputs) {
  if (name == "aten::copy_" && inputs.size() >= 2 && is_tensor(inputs[0]) && is_tensor(inputs[1])) {
    return inputs[0].toTensor().is_cpu() && !inputs[1].toTensor().is_cpu();
  }
  if (name == "aten::_to_copy" && inputs.size() >= 4 && is_tensor(inputs[0]) &&
      inputs[3].isDevice()) {
    return !inputs[0].toTensor().is_cpu() && inputs[3].toDevice().is_cpu();
  }
  return false;
}

std::unique_ptr<at::ObserverContext> on_function_start(const at::RecordFunction& fn) {
  auto* s = g_active.load();
  if (s == nullptr) return nullptr;
  auto& t = t_state;
  const std::string_view name = fn.name();
  if (is_node_wrapper(name)) return nullptr;
  Frame frame{name, !no_work(name)};
  if (!t.frames.empty()) {
    const Frame& parent = t.frames.back();
    frame.in_ampt = parent.in_ampt || is_ampt(parent.name);
    // A foreach copy's per-tensor copies on a CPU were counted with it.
    frame.quiet = parent.quiet || parent.name == "aten::_foreach_copy_";
  }
  t.frames.push_back(frame);
  if (frame.quiet) return nullptr;
  const auto inputs = fn.inputs();
  // What happens inside an ampt operation is one kernel on a GPU: no host copy of its own.
  if (!frame.in_ampt && copies_to_host(name, inputs)) t.frames.back().host_copy = true;
  // Conversions count at every depth, those inside ampt operations also apart: a parameter's
  // conversion is one wherever it happens, the optimizer's pass that writes its half copy too.
  const auto op = t.frames.front().name;
  if (name == "aten::copy_" && inputs.size() >= 2 && is_tensor(inputs[0]) && is_tensor(inputs[1])) {
    const std::lock_guard lock(s->mutex);
    add_conversion(*s, op, frame.in_ampt, inputs[0].toTensor(), inputs[1].toTensor());
  } else if (name == "aten::_foreach_copy_" && inputs.size() >= 2 && inputs[0].isTensorList() &&
             inputs[1].isTensorList()) {
    const auto dst = inputs[0].toTensorList(), src = inputs[1].toTensorList();
    const std::lock_guard lock(s->mutex);
    for (size_t i = 0; i < dst.size() && i < src.size(); ++i) {
      add_conversion(*s, op, frame.in_ampt, dst[i], src[i]);
    }
  }
  return nullptr;
}

void on_function_end(const at::RecordFunction& fn, at::ObserverContext*) {
  auto* s = g_active.load();
  auto& t = t_state;
  // A node's wrapper opened no frame; a frame missing began before the census did.
  if (t.frames.empty() || is_node_wrapper(fn.name())) return;
  const Frame frame = t.frames.back();
  t.frames.pop_back();
  if (s == nullptr) return;
  if (!t.frames.empty()) {
    t.frames.back().work = t.frames.back().work || frame.work;
    t.frames.back().host_copy = t.frames.back().host_copy || frame.host_copy;
    return;
  }
  const std::lock_guard lock(s->mutex);
  if (frame.work) {
    ++s->census.counts.operators;
    ++s->census.operator_calls[std::string(frame.name)];
  }
  if (syncs(frame.name) || frame.host_copy) {
    ++s->census.counts.host_syncs;
    ++s->census.sync_calls[std::string(frame.name)];
  }
}

std::unique_ptr<at::ObserverContext> on_node_start(const at::RecordFunction& fn) {
  if (auto* s = g_active.load()) {
    const std::lock_guard lock(s->mutex);
    ++s->census.counts.autograd_nodes;
    ++s->census.node_calls[fn.name()];
  }
  return nullptr;
}

void on_node_end(const at::RecordFunction&, at::ObserverContext*) {}

const c10::StorageImpl* storage_of(const torch::Tensor& t) {
  return t.defined() && t.has_storage() ? t.storage().unsafeGetStorageImpl() : nullptr;
}

}  // namespace

std::string StepCensus::json() const {
  const auto object = [](const std::map<std::string, int64_t>& counts) {
    std::string text = "{";
    for (const auto& [name, n] : counts) {
      text += fmt::format("{}\"{}\": {}", text.size() > 1 ? ", " : "", name, n);
    }
    return text + "}";
  };
  return fmt::format(
      "{{\"step\": {}, \"operators\": {}, \"dtype_conversions\": {}, \"conversion_bytes\": {}, "
      "\"parameter_conversions\": {}, \"ampt_conversions\": {}, \"ampt_conversion_bytes\": {}, "
      "\"ampt_parameter_conversions\": {}, "
      "\"host_syncs\": {}, \"autograd_nodes\": {}, \"operator_calls\": {}, "
      "\"conversion_calls\": {}, \"sync_calls\": {}, \"node_calls\": {}}}",
      counts.step, counts.operators, counts.conversions, counts.conversion_bytes,
      counts.parameter_conversions, counts.ampt_conversions, counts.ampt_conversion_bytes,
      counts.ampt_parameter_conversions, counts.host_syncs, counts.autograd_nodes, object(operator_calls), object(conversion_calls),
      object(sync_calls), object(node_calls));
}

StepCensusRecorder::StepCensusRecorder(std::vector<torch::Tensor> parameters)
    : state_(std::make_unique<State>()) {
  state_->parameters = std::move(parameters);
}

StepCensusRecorder::~StepCensusRecorder() {
  State* mine = state_.get();
  if (g_active.compare_exchange_strong(mine, nullptr)) {
    for (const auto handle : state_->handles) at::removeCallback(handle);
  }
}

void StepCensusRecorder::begin(int64_t step) {
  auto& s = *state_;
  // On this thread, and on those the autograd engine runs its backward on (they take the
  // thread-local callbacks with the rest of the caller's state); not on the data loader's.
  s.handles = {at::addThreadLocalCallback(
                   at::RecordFunctionCallback(on_function_start, on_function_end)
                       .needsInputs(true)
                       .scopes({at::RecordScope::FUNCTION})),
               at::addThreadLocalCallback(at::RecordFunctionCallback(on_node_start, on_node_end)
                                              .scopes({at::RecordScope::BACKWARD_FUNCTION}))};
  s.census = StepCensus{};
  s.census.counts.step = step;
  s.converted.clear();
  s.gradient_storage.clear();
  s.parameter_storage.clear();
  for (const auto& p : s.parameters) {
    if (const auto* storage = storage_of(p)) s.parameter_storage.insert(storage);
  }
  g_active.store(&s);
}

void StepCensusRecorder::note_gradients(const std::vector<torch::Tensor>& gradients) {
  const std::lock_guard lock(state_->mutex);
  for (const auto& g : gradients) {
    if (const auto* storage = storage_of(g)) state_->gradient_storage.insert(storage);
  }
}

StepCensus StepCensusRecorder::end() {
  g_active.store(nullptr);
  auto& s = *state_;
  for (const auto handle : s.handles) at::removeCallback(handle);
  s.handles.clear();
  const std::lock_guard lock(s.mutex);
  for (const auto& [dst, src, in_ampt] : s.converted) {
    const auto known = [&](const StorageRef& ref) {
      const auto* impl = ref._unsafe_get_target();
      return s.parameter_storage.contains(impl) || s.gradient_storage.contains(impl);
    };
    if (!known(dst) && !known(src)) continue;
    ++s.census.counts.parameter_conversions;
    if (in_ampt) ++s.census.counts.ampt_parameter_conversions;
  }
  s.converted.clear();
  return s.census;
}

}  // namespace ampt::train
