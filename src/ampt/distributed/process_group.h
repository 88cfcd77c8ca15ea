// The ranks of a distributed run and the collectives training needs, on PyTorch's c10d: a
// TCPStore rendezvous, ProcessGroupNCCL for CUDA tensors or ProcessGroupGloo for CPU ones, and a
// Gloo group on the CPU for control messages (stop requests, barriers).
#pragma once

#include "ampt/config/config.h"
#include "ampt/core/errors.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace c10d {
class Backend;
class Store;
class Work;
}  // namespace c10d

namespace ampt::distributed {

class Heartbeat;
class Subgroup;

enum class Reduce { sum, max };

class Group {
 public:
  // Joins the job config.launch describes: rank 0 serves the store at master_addr:master_port,
  // every rank connects and waits for all the others (each bounded by config.dist_timeout, then
  // an error naming the host, port and missing ranks), checks that all agree on the world size
  // and, on CUDA, that no two share a GPU; then builds the backend config.dist_backend names.
  static std::unique_ptr<Group> connect(const config::Config& config, const c10::Device& device);

  // A group over an existing store (tests: threads sharing a c10d::HashStore). Gloo binds to
  // `gloo_interface` when given, else to 127.0.0.1 when `loopback`, else to the host name's
  // address.
  Group(c10::intrusive_ptr<c10d::Store> store, int64_t rank, int64_t world_size,
        config::DistBackend backend, const c10::Device& device, std::chrono::milliseconds timeout,
        std::string where, bool loopback, std::string gloo_interface = "");
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int64_t rank() const { return rank_; }
  int64_t world_size() const { return world_size_; }
  const c10::Device& device() const { return device_; }
  const std::string& backend_name() const { return backend_name_; }

  // Starts an all-reduce of one tensor on the data backend; finish it with wait().
  c10::intrusive_ptr<c10d::Work> all_reduce_async(at::Tensor& tensor, Reduce op);
  // Waits for `work`; a failure becomes a RuntimeError that names `what` and the lost rank.
  void wait(const c10::intrusive_ptr<c10d::Work>& work, std::string_view what);

  void all_reduce(at::Tensor& tensor, Reduce op, std::string_view what);
  // ZeRO's collectives on the data backend, started and finished with wait(): `output` (1/N of
  // `input`) := this rank's slice of the sum of every rank's `input`; and `output` := every
  // rank's `input` end to end, in rank order. Both are c10d's tensor forms (NCCL's
  // ReduceScatter and AllGather; Gloo has them too since PyTorch 2.6).
  c10::intrusive_ptr<c10d::Work> reduce_scatter_async(at::Tensor& output, at::Tensor& input,
                                                      std::string_view what);
  c10::intrusive_ptr<c10d::Work> all_gather_async(at::Tensor& output, at::Tensor& input,
                                                  std::string_view what);
  // Rank `root`'s values into `tensors` everywhere (one collective per dtype).
  void broadcast(const std::vector<at::Tensor>& tensors, int64_t root, std::string_view what);
  // Rank `root`'s `flags` on every rank (each rank passes as many).
  std::vector<bool> broadcast_flags(const std::vector<bool>& flags, int64_t root,
                                    std::string_view what);
  void barrier(std::string_view what);

  // Rank 0 gets every rank's `text` (in rank order) through the store, waiting up to the
  // timeout for the others, which publish theirs and get nothing back. Thread-safe: a
  // background checkpoint writer reports its shard this way while training goes on. `key`
  // must be new for each exchange.
  std::vector<std::string> gather_text(const std::string& key, const std::string& text,
                                       std::string_view what);

  // Stop requests (signal numbers, 0 for none) agreed by every rank without stalling the step:
  // returns the largest request any rank made at the previous call, and sends this one's.
  int agree_stop(int local_signal);
  // Waits for every rank, then stops watching the others: call once when training ends well.
  void finish();

  // A data backend of its own over `members` (ascending ranks of this group, this one among
  // them), `name` telling it apart in the store: collectives among those ranks only, which never
  // queue behind (or interleave with) the whole group's. Only the members create it, each once.
  std::unique_ptr<Subgroup> subgroup(const std::string& name, const std::vector<int64_t>& members);

 private:
  friend class Subgroup;
  [[noreturn]] void fail(std::string_view what, const std::exception& error);
  // call(), its failure made one line by fail() (one of ours passes as it is).
  template <class Call>
  auto guarded(std::string_view what, Call&& call) -> decltype(call()) {
    try {
      return call();
    } catch (const RuntimeError&) {
      throw;
    } catch (const std::exception& error) {
      fail(what, error);
    }
  }

  c10::intrusive_ptr<c10d::Store> store_;
  int64_t rank_;
  int64_t world_size_;
  c10::Device device_;
  std::chrono::milliseconds timeout_;
  std::string where_;  // "the rendezvous at host:port"
  bool loopback_;
  std::string gloo_interface_;
  std::string backend_name_;
  c10::intrusive_ptr<c10d::Backend> data_;
  c10::intrusive_ptr<c10d::Backend> control_;  // Gloo on the CPU; data_ itself on a CPU run
  c10::intrusive_ptr<c10d::Work> stop_work_;
  at::Tensor stop_flag_;
  std::unique_ptr<Heartbeat> heartbeat_;
};

// Some ranks of a Group (Group::subgroup): its errors name the rank in the whole group and a lost
// rank as the group's do.
class Subgroup {
 public:
  Subgroup(Group& group, std::vector<int64_t> members, c10::intrusive_ptr<c10d::Backend> backend);
  ~Subgroup();
  Subgroup(const Subgroup&) = delete;
  Subgroup& operator=(const Subgroup&) = delete;

  int64_t rank() const { return rank_; }  // this rank's index among the members
  int64_t size() const { return static_cast<int64_t>(members_.size()); }
  const std::vector<int64_t>& members() const { return members_; }

  void all_reduce(at::Tensor& tensor, std::string_view what);  // the sum, in place
  // `output` := member i's `input` rows meant for this one, in member order: `input` is cut
  // into `send[i]` rows for member i, and member i sends `receive[i]` rows here (c10d's
  // alltoall_base). `output` has sum(receive) rows.
  void all_to_all(at::Tensor& output, at::Tensor& input, const std::vector<int64_t>& send,
                  const std::vector<int64_t>& receive, std::string_view what);
  // `output` := every member's `input` end to end, in member order.
  void all_gather(at::Tensor& output, at::Tensor& input, std::string_view what);
  // The same on member `root` only: the others send `input` and leave `output` alone.
  void gather(at::Tensor& output, at::Tensor& input, int64_t root, std::string_view what);
  // Member `root`'s values into `tensors` everywhere.
  void broadcast(const std::vector<at::Tensor>& tensors, int64_t root, std::string_view what);

 private:
  Group& group_;
  std::vector<int64_t> members_;
  int64_t rank_;
  c10::intrusive_ptr<c10d::Backend> backend_;
};

// `tensors` in order, cut into runs of one dtype of at most `max_bytes` each (a larger tensor
// alone): what one collective copies at a time, so that passing a whole model around costs a
// transient copy of one run, not of the model.
std::vector<std::vector<at::Tensor>> chunks(const std::vector<at::Tensor>& tensors, int64_t max_bytes);
inline constexpr int64_t kChunkBytes = 25 * 1024 * 1024;

// How long a rank may miss heartbeats before the others call it lost, for a given dist_timeout.
std::chrono::milliseconds heartbeat_stale(std::chrono::milliseconds timeout);

// The NCCL that --dist_backend nccl would use ("2.27.3"), or why there is none in this build.
std::string nccl_version();

}  // namespace ampt::distributed
