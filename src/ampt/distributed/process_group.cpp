#include "ampt/distributed/process_group.h"

#include "ampt/core/errors.h"
#include "ampt/distributed/heartbeat.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>
#include <c10/util/Logging.h>
#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#ifdef USE_C10D_NCCL
#include <ATen/cuda/CUDAContext.h>
#include <torch/csrc/distributed/c10d/NCCLUtils.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <map>
#include <thread>

namespace ampt::distributed {
namespace {

using std::chrono::milliseconds;

double seconds(milliseconds timeout) { return std::chrono::duration<double>(timeout).count(); }

std::string join(const std::vector<int64_t>& ranks) {
  std::string out;
  for (int64_t r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

// `tensors` broadcast a chunk (chunks()) at a time, each flattened into one buffer that
// `broadcast_one` sends or receives in place.
void broadcast_in_chunks(const std::vector<at::Tensor>& tensors,
                         const std::function<void(std::vector<at::Tensor>&)>& broadcast_one) {
  c10::NoGradGuard no_grad;
  for (auto& group : chunks(tensors, kChunkBytes)) {
    std::vector<at::Tensor> flat;
    for (const auto& t : group) flat.push_back(t.reshape(-1));
    std::vector<at::Tensor> buffer{at::cat(flat)};
    broadcast_one(buffer);
    int64_t offset = 0;
    for (auto& t : group) {
      t.copy_(buffer[0].narrow(0, offset, t.numel()).view_as(t));
      offset += t.numel();
    }
  }
}

std::string hostname() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

c10::intrusive_ptr<c10d::Backend> make_gloo(const c10::intrusive_ptr<c10d::Store>& store,
                                            std::string prefix, int64_t rank, int64_t world,
                                            milliseconds timeout, bool loopback,
                                            const std::string& interface) {
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->timeout = timeout;
  if (!interface.empty()) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
  } else if (loopback) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  } else {
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  return c10::make_intrusive<c10d::ProcessGroupGloo>(
      c10::make_intrusive<c10d::PrefixStore>(std::move(prefix), store), static_cast<int>(rank),
      static_cast<int>(world), options);
}

c10::intrusive_ptr<c10d::Backend> make_nccl(const c10::intrusive_ptr<c10d::Store>& store,
                                            std::string prefix, int64_t rank, int64_t world,
                                            milliseconds timeout) {
#ifdef USE_C10D_NCCL
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(
      c10::make_intrusive<c10d::PrefixStore>(std::move(prefix), store), static_cast<int>(rank),
      static_cast<int>(world), options);
#else
  throw RuntimeError("dist_backend nccl: this ampt was built without NCCL (NCCL's headers were "
                     "not found at configure time); rebuild, or use --dist_backend gloo");
#endif
}

// Every rank announces itself and its world size; each waits, bounded, for all the others and
// stops at the first rank launched with another world size.
void rendezvous(c10d::Store& store, const config::Launch& launch, milliseconds timeout,
                const std::string& where) {
  const auto world = std::to_string(launch.world_size);
  store.set(fmt::format("ampt/join/{}", launch.rank), world);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<bool> joined(static_cast<size_t>(launch.world_size), false);
  for (;;) {
    std::vector<int64_t> missing;
    for (int64_t r = 0; r < launch.world_size; ++r) {
      if (joined[r]) continue;
      const auto key = fmt::format("ampt/join/{}", r);
      if (!store.check({key})) {
        missing.push_back(r);
        continue;
      }
      joined[r] = true;
      const auto bytes = store.get(key);
      const std::string theirs(bytes.begin(), bytes.end());
      if (theirs != world) {
        throw RuntimeError(fmt::format(
            "rank {} was launched with world size {}, rank {} with {} ({}): every rank needs the "
            "same WORLD_SIZE or SLURM_NTASKS",
            launch.rank, world, r, theirs, where));
      }
    }
    if (missing.empty()) return;
    if (std::chrono::steady_clock::now() > deadline) {
      throw RuntimeError(fmt::format(
          "rank {}: rank{} {} of {} did not join {} within {} s (dist_timeout); are all {} ranks "
          "launched with the same MASTER_ADDR and MASTER_PORT?",
          launch.rank, missing.size() > 1 ? "s" : "", join(missing), launch.world_size, where,
          seconds(timeout), launch.world_size));
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
}

// Two ranks on one GPU would fight over its memory and NCCL refuses them: name them instead.
void check_gpus(c10d::Store& store, const config::Launch& launch, const c10::Device& device) {
#ifdef USE_C10D_NCCL
  const auto* props = at::cuda::getDeviceProperties(device.index());
  const auto gpu = fmt::format("{:04x}:{:02x}:{:02x}.0 on {}", props->pciDomainID,
                               props->pciBusID, props->pciDeviceID, hostname());
  store.set(fmt::format("ampt/gpu/{}", launch.rank), gpu);
  for (int64_t r = 0; r < launch.rank; ++r) {
    const auto bytes = store.get(fmt::format("ampt/gpu/{}", r));
    if (std::string(bytes.begin(), bytes.end()) == gpu) {
      throw RuntimeError(fmt::format(
          "ranks {} and {} both use GPU {}: run one rank per GPU (LOCAL_RANK picks the GPU; "
          "launch no more ranks per node than it has GPUs)",
          r, launch.rank, gpu));
    }
  }
#endif
}

bool is_loopback(const std::string& host) {
  return host.starts_with("127.") || host == "localhost" || host == "::1";
}

}  // namespace

milliseconds heartbeat_stale(milliseconds timeout) {
  return std::clamp<milliseconds>(timeout / 2, milliseconds(1000), milliseconds(30000));
}

std::unique_ptr<Group> Group::connect(const config::Config& config, const c10::Device& device) {
  const auto& launch = config.launch;
  // c10d logs errors and warnings with stack traces for every failed connection before it
  // throws; ampt reports each failure in one line that names the host, port or lost rank.
  // --debug keeps torch's own lines.
  if (!config.debug) FLAGS_caffe2_log_level = std::max(FLAGS_caffe2_log_level, 3);
  const milliseconds timeout(config.dist_timeout * 1000);
  const auto where = fmt::format("the rendezvous at {}:{}", launch.master_addr, launch.master_port);
  c10::intrusive_ptr<c10d::Store> store;
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(launch.master_port);
    options.isServer = launch.is_main();
    options.numWorkers = static_cast<size_t>(launch.world_size);
    options.waitWorkers = false;  // rendezvous() waits, and names the ranks that do not come
    options.timeout = timeout;
    store = c10::make_intrusive<c10d::TCPStore>(launch.master_addr, options);
  } catch (const std::exception& error) {
    if (launch.is_main()) {
      throw RuntimeError(fmt::format("rank 0 cannot serve {}: {} (is the port taken? set "
                                     "MASTER_PORT to a free one)",
                                     where, message_of(error)));
    }
    throw RuntimeError(fmt::format(
        "rank {} cannot reach {} within {} s (dist_timeout): {}; is rank 0 running, and are "
        "MASTER_ADDR and MASTER_PORT right?",
        launch.rank, where, config.dist_timeout, message_of(error)));
  }
  rendezvous(*store, launch, timeout, where);
  if (device.is_cuda()) check_gpus(*store, launch, device);
  return std::make_unique<Group>(store, launch.rank, launch.world_size, config.dist_backend, device,
                                 timeout, where, is_loopback(launch.master_addr),
                                 launch.gloo_interface);
}

Group::Group(c10::intrusive_ptr<c10d::Store> store, int64_t rank, int64_t world_size,
             config::DistBackend backend, const c10::Device& device, milliseconds timeout,
             std::string where, bool loopback, std::string gloo_interface)
    : store_(std::move(store)),
      rank_(rank),
      world_size_(world_size),
      device_(device),
      timeout_(timeout),
      where_(std::move(where)),
      loopback_(loopback),
      gloo_interface_(std::move(gloo_interface)) {
  if (backend == config::DistBackend::auto_select) {
    backend = device.is_cuda() ? config::DistBackend::nccl : config::DistBackend::gloo;
  }
  if (backend == config::DistBackend::nccl && !device.is_cuda()) {
    throw UsageError(fmt::format("dist_backend nccl needs CUDA tensors but this run trains on {}; "
                                 "use --dist_backend gloo or auto",
                                 device.str()));
  }
  backend_name_ = backend == config::DistBackend::nccl ? "nccl" : "gloo";
  try {
    control_ = make_gloo(store_, "ampt/gloo-control", rank, world_size, timeout, loopback_,
                         gloo_interface_);
    if (backend == config::DistBackend::nccl) {
      data_ = make_nccl(store_, "ampt/nccl", rank, world_size, timeout);
    } else if (device.is_cuda()) {
      data_ = make_gloo(store_, "ampt/gloo-data", rank, world_size, timeout, loopback_,
                        gloo_interface_);
    } else {
      data_ = control_;
    }
  } catch (const RuntimeError&) {
    throw;
  } catch (const std::exception& error) {
    throw RuntimeError(fmt::format("rank {}: cannot create the {} process group through {}: {}",
                                   rank, backend_name_, where_, message_of(error)));
  }
  stop_flag_ = at::zeros({1}, at::kInt);
  heartbeat_ = std::make_unique<Heartbeat>(store_, rank, world_size, heartbeat_stale(timeout));
}

Group::~Group() {
  heartbeat_.reset();
  if (std::uncaught_exceptions() > 0) {
    // Leaving on an error: the others may be inside a collective this rank will never join, and
    // a backend's destructor waits for its pending work. Leave the backends to the process's
    // exit, so the others see this rank go at once.
    (void)data_.release();
    (void)control_.release();
    (void)stop_work_.release();
  }
}

void Group::fail(std::string_view what, const std::exception& error) {
  const auto lost = heartbeat_->lost_ranks();
  if (!lost.empty()) {
    throw RuntimeError(fmt::format("rank {}: lost {} during {}; stopping ({})", rank_, lost, what,
                                   message_of(error)));
  }
  throw RuntimeError(fmt::format("rank {}: {} failed ({}): {}", rank_, what, where_,
                                 message_of(error)));
}

c10::intrusive_ptr<c10d::Work> Group::all_reduce_async(at::Tensor& tensor, Reduce op) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = op == Reduce::sum ? c10d::ReduceOp::SUM : c10d::ReduceOp::MAX;
  return data_->allreduce(tensors, options);
}

void Group::wait(const c10::intrusive_ptr<c10d::Work>& work, std::string_view what) {
  guarded(what, [&] { work->wait(); });
}

void Group::all_reduce(at::Tensor& tensor, Reduce op, std::string_view what) {
  wait(guarded(what, [&] { return all_reduce_async(tensor, op); }), what);
}

c10::intrusive_ptr<c10d::Work> Group::reduce_scatter_async(at::Tensor& output, at::Tensor& input,
                                                           std::string_view what) {
  c10d::ReduceScatterOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  return guarded(what, [&] { return data_->_reduce_scatter_base(output, input, options); });
}

c10::intrusive_ptr<c10d::Work> Group::all_gather_async(at::Tensor& output, at::Tensor& input,
                                                       std::string_view what) {
  return guarded(what, [&] { return data_->_allgather_base(output, input); });
}

std::vector<std::vector<at::Tensor>> chunks(const std::vector<at::Tensor>& tensors, int64_t max_bytes) {
  std::map<c10::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (const auto& t : tensors) by_dtype[t.scalar_type()].push_back(t);
  std::vector<std::vector<at::Tensor>> out;
  for (auto& [dtype, group] : by_dtype) {
    int64_t bytes = max_bytes;  // full: the first tensor opens a chunk
    for (const auto& t : group) {
      const auto size = static_cast<int64_t>(t.nbytes());
      if (bytes + size > max_bytes) {
        out.emplace_back();
        bytes = 0;
      }
      out.back().push_back(t);
      bytes += size;
    }
  }
  return out;
}

void Group::broadcast(const std::vector<at::Tensor>& tensors, int64_t root, std::string_view what) {
  broadcast_in_chunks(tensors, [&](std::vector<at::Tensor>& buffer) {
    c10d::BroadcastOptions options;
    options.rootRank = root;
    wait(guarded(what, [&] { return data_->broadcast(buffer, options); }), what);
  });
}

std::vector<std::string> Group::gather_text(const std::string& key, const std::string& text,
                                            std::string_view what) {
  const auto name = [&key](int64_t r) { return fmt::format("ampt/gather/{}/{}", key, r); };
  try {
    if (rank_ != 0) {
      store_->set(name(rank_), std::vector<uint8_t>(text.begin(), text.end()));
      return {};
    }
    std::vector<std::string> keys;
    for (int64_t r = 1; r < world_size_; ++r) keys.push_back(name(r));
    store_->wait(keys, timeout_);
    std::vector<std::string> texts{text};
    for (const auto& k : keys) {
      const auto bytes = store_->get(k);
      texts.emplace_back(bytes.begin(), bytes.end());
      store_->deleteKey(k);
    }
    return texts;
  } catch (const std::exception& error) {
    throw RuntimeError(fmt::format("rank {}: {} failed ({}): {}", rank_, what, where_,
                                   message_of(error)));
  }
}

std::vector<bool> Group::broadcast_flags(const std::vector<bool>& flags, int64_t root,
                                        std::string_view what) {
  std::vector<uint8_t> bytes(flags.begin(), flags.end());
  auto on_device = at::from_blob(bytes.data(), {static_cast<int64_t>(bytes.size())}, at::kByte)
                       .to(device_, /*non_blocking=*/false, /*copy=*/true);
  broadcast({on_device}, root, what);
  const auto host = on_device.cpu();
  const auto* out = host.data_ptr<uint8_t>();
  return std::vector<bool>(out, out + host.numel());
}

void Group::barrier(std::string_view what) {
  guarded(what, [&] { control_->barrier()->wait(); });
}

int Group::agree_stop(int local_signal) {
  int agreed = 0;
  if (stop_work_) {
    wait(stop_work_, "the exchange of stop requests");
    agreed = stop_flag_.item<int>();
  }
  stop_flag_.fill_(local_signal);
  std::vector<at::Tensor> tensors{stop_flag_};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  stop_work_ =
      guarded("the exchange of stop requests", [&] { return control_->allreduce(tensors, options); });
  return agreed;
}

std::string nccl_version() {
#ifdef USE_C10D_NCCL
  return c10d::getNcclVersion();
#else
  return "none: this build found no nccl.h (--dist_backend nccl is refused)";
#endif
}

void Group::finish() {
  if (stop_work_) {
    wait(stop_work_, "the exchange of stop requests");
    stop_work_.reset();
  }
  barrier("the final barrier");
  heartbeat_->stop();
}

std::unique_ptr<Subgroup> Group::subgroup(const std::string& name,
                                          const std::vector<int64_t>& members) {
  const auto at = std::ranges::find(members, rank_);
  if (at == members.end()) throw std::logic_error("Group::subgroup: this rank is not a member");
  const auto rank = at - members.begin();
  const auto size = static_cast<int64_t>(members.size());
  const auto what = fmt::format("the creation of the {} subgroup of ranks {}", name, join(members));
  auto backend = guarded(what, [&] {
    const auto prefix = "ampt/subgroup/" + name;
    return backend_name_ == "nccl" ? make_nccl(store_, prefix, rank, size, timeout_)
                                   : make_gloo(store_, prefix, rank, size, timeout_, loopback_,
                                               gloo_interface_);
  });
  return std::make_unique<Subgroup>(*this, members, std::move(backend));
}

Subgroup::Subgroup(Group& group, std::vector<int64_t> members,
                   c10::intrusive_ptr<c10d::Backend> backend)
    : group_(group),
      members_(std::move(members)),
      rank_(std::ranges::find(members_, group.rank()) - members_.begin()),
      backend_(std::move(backend)) {}

Subgroup::~Subgroup() {
  // As the group's own backends: leaving on an error, pending work is not waited for.
  if (std::uncaught_exceptions() > 0) (void)backend_.release();
}

void Subgroup::all_reduce(at::Tensor& tensor, std::string_view what) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  group_.wait(group_.guarded(what, [&] { return backend_->allreduce(tensors, options); }), what);
}

void Subgroup::all_to_all(at::Tensor& output, at::Tensor& input, const std::vector<int64_t>& send,
                          const std::vector<int64_t>& receive, std::string_view what) {
  c10d::AllToAllOptions options;
  auto send_rows = send, receive_rows = receive;
  group_.wait(group_.guarded(what, [&] {
                return backend_->alltoall_base(output, input, receive_rows, send_rows, options);
              }),
              what);
}

void Subgroup::all_gather(at::Tensor& output, at::Tensor& input, std::string_view what) {
  group_.wait(group_.guarded(what, [&] { return backend_->_allgather_base(output, input); }), what);
}

void Subgroup::gather(at::Tensor& output, at::Tensor& input, int64_t root, std::string_view what) {
  std::vector<std::vector<at::Tensor>> outputs;
  if (rank_ == root) {
    // Each member's rows land in place: views of `output`, contiguous as it is.
    outputs.emplace_back();
    const auto rows = input.size(0);
    for (int64_t m = 0; m < size(); ++m) outputs.back().push_back(output.narrow(0, m * rows, rows));
  }
  std::vector<at::Tensor> inputs{input};
  c10d::GatherOptions options;
  options.rootRank = root;
  group_.wait(group_.guarded(what, [&] { return backend_->gather(outputs, inputs, options); }), what);
}

void Subgroup::broadcast(const std::vector<at::Tensor>& tensors, int64_t root, std::string_view what) {
  broadcast_in_chunks(tensors, [&](std::vector<at::Tensor>& buffer) {
    c10d::BroadcastOptions options;
    options.rootRank = root;
    group_.wait(group_.guarded(what, [&] { return backend_->broadcast(buffer, options); }), what);
  });
}

}  // namespace ampt::distributed
