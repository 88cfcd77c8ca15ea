#include "ampt/config/launch.h"

#include "ampt/core/errors.h"

#include <fmt/format.h>

#include <charconv>
#include <optional>

namespace ampt::config {
namespace {

using Env = std::map<std::string, std::string>;

std::optional<std::string> lookup(const Env& env, const std::string& name) {
  auto found = env.find(name);
  if (found == env.end()) return std::nullopt;
  return found->second;
}

std::optional<int64_t> to_int(std::string_view text) {
  int64_t value = 0;
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return value;
}

// The integer in variable `name`, which must lie in [low, high]; `bound` explains the upper bound.
int64_t integer(const Env& env, const std::string& name, int64_t low, int64_t high,
                std::string_view bound = "") {
  const std::string text = *lookup(env, name);
  const auto value = to_int(text);
  if (!value || *value < low || *value > high) {
    throw UsageError(fmt::format(
        "invalid value '{}' for {} (environment): expected an integer {}{}", text, name,
        high == INT64_MAX ? fmt::format(">= {}", low) : fmt::format("in [{}, {}]", low, high),
        bound.empty() ? "" : fmt::format(" ({})", bound)));
  }
  return *value;
}

int64_t integer_or(const Env& env, const std::string& name, int64_t fallback, int64_t low,
                   int64_t high, std::string_view bound = "") {
  return lookup(env, name) ? integer(env, name, low, high, bound) : fallback;
}

[[noreturn]] void half_set(std::string_view present, std::string_view missing,
                           std::string_view hint) {
  throw UsageError(fmt::format("{} is set but {} is not: {}", present, missing, hint));
}

void require(const Env& env, std::string_view present, const std::string& missing,
             std::string_view hint) {
  if (!lookup(env, missing)) half_set(present, missing, hint);
}

constexpr int64_t kMaxPort = 65535;

void read_master_port(const Env& env, Launch& launch) {
  launch.master_port = integer(env, "MASTER_PORT", 1, kMaxPort);
}

Launch from_torchrun(const Env& env) {
  constexpr std::string_view hint = "torchrun sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT; "
                                    "set all of them or none";
  const bool has_rank = lookup(env, "RANK").has_value();
  if (!has_rank) half_set("WORLD_SIZE", "RANK", hint);
  require(env, "RANK", "WORLD_SIZE", hint);
  Launch launch;
  launch.launcher = Launcher::torchrun;
  launch.world_size = integer(env, "WORLD_SIZE", 1, INT32_MAX);
  const auto world = fmt::format("WORLD_SIZE is {}", launch.world_size);
  launch.rank = integer(env, "RANK", 0, launch.world_size - 1, world);
  // Without LOCAL_* every rank is taken to be on this node, as a hand-written launch usually is.
  launch.local_world_size =
      integer_or(env, "LOCAL_WORLD_SIZE", launch.world_size, 1, launch.world_size, world);
  launch.local_rank =
      integer_or(env, "LOCAL_RANK", launch.rank, 0, launch.local_world_size - 1,
                 fmt::format("LOCAL_WORLD_SIZE is {}", launch.local_world_size));
  launch.node_rank = integer_or(env, "GROUP_RANK", launch.rank / launch.local_world_size, 0,
                                INT32_MAX);
  if (launch.distributed()) {
    const auto present = fmt::format("WORLD_SIZE={}", launch.world_size);
    require(env, present, "MASTER_ADDR", hint);
    require(env, present, "MASTER_PORT", hint);
  }
  if (auto addr = lookup(env, "MASTER_ADDR")) launch.master_addr = *addr;
  if (lookup(env, "MASTER_PORT")) read_master_port(env, launch);
  return launch;
}

// SLURM_TASKS_PER_NODE ("2(x3),1": 2 tasks on each of 3 nodes, then 1) → tasks on node `node`.
std::optional<int64_t> tasks_on_node(std::string_view spec, int64_t node) {
  int64_t first_node = 0;
  while (!spec.empty()) {
    const auto comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    int64_t repeat = 1;
    if (auto open = item.find("(x"); open != std::string_view::npos && item.ends_with(')')) {
      auto count = to_int(item.substr(open + 2, item.size() - open - 3));
      if (!count) return std::nullopt;
      repeat = *count;
      item = item.substr(0, open);
    }
    auto tasks = to_int(item);
    if (!tasks) return std::nullopt;
    if (node < first_node + repeat) return *tasks;
    first_node += repeat;
  }
  return std::nullopt;
}

Launch from_slurm(const Env& env) {
  constexpr std::string_view hint = "srun sets SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID for "
                                    "every task; launch ampt with srun inside the job";
  require(env, "SLURM_PROCID", "SLURM_NTASKS", hint);
  Launch launch;
  launch.launcher = Launcher::slurm;
  launch.world_size = integer(env, "SLURM_NTASKS", 1, INT32_MAX);
  const auto world = fmt::format("SLURM_NTASKS is {}", launch.world_size);
  launch.rank = integer(env, "SLURM_PROCID", 0, launch.world_size - 1, world);
  if (!launch.distributed()) return launch;

  const auto present = fmt::format("SLURM_NTASKS={}", launch.world_size);
  require(env, present, "SLURM_LOCALID", hint);
  launch.node_rank = integer_or(env, "SLURM_NODEID", 0, 0, INT32_MAX);
  launch.local_world_size = launch.world_size;
  if (auto spec = lookup(env, "SLURM_TASKS_PER_NODE")) {
    auto tasks = tasks_on_node(*spec, launch.node_rank);
    if (!tasks || *tasks < 1) {
      throw UsageError(fmt::format(
          "invalid value '{}' for SLURM_TASKS_PER_NODE (environment): expected counts like "
          "'4(x2),1' covering SLURM_NODEID {}",
          *spec, launch.node_rank));
    }
    launch.local_world_size = *tasks;
  }
  launch.local_rank = integer(env, "SLURM_LOCALID", 0, launch.local_world_size - 1,
                              fmt::format("{} tasks on this node", launch.local_world_size));

  if (auto addr = lookup(env, "MASTER_ADDR")) {
    launch.master_addr = *addr;
  } else {
    auto nodes = lookup(env, "SLURM_JOB_NODELIST");
    std::string variable = "SLURM_JOB_NODELIST";
    if (!nodes) {
      nodes = lookup(env, "SLURM_NODELIST");
      variable = "SLURM_NODELIST";
    }
    if (!nodes) half_set(present, "SLURM_JOB_NODELIST", "the master host is its first entry (or set MASTER_ADDR)");
    launch.master_addr = expand_nodelist(*nodes, variable).front();
  }
  if (lookup(env, "MASTER_PORT")) {
    read_master_port(env, launch);
  } else {
    if (!lookup(env, "SLURM_JOB_ID")) {
      half_set(present, "SLURM_JOB_ID", "the rendezvous port is derived from it (or set MASTER_PORT)");
    }
    launch.master_port = slurm_port(integer(env, "SLURM_JOB_ID", 0, INT64_MAX));
  }
  return launch;
}

// Appends every expansion of `pattern` ("rack[1-2]-n[01,03]") to `out`.
void expand_pattern(std::string_view pattern, const std::string& prefix,
                    std::vector<std::string>& out, std::string_view list, std::string_view variable) {
  const auto bad = [&](std::string_view why) {
    return UsageError(fmt::format("invalid value '{}' for {} (environment): {}; expected host "
                                  "names with ranges like node[01-04,07]",
                                  list, variable, why));
  };
  const auto open = pattern.find('[');
  if (open == std::string_view::npos) {
    if (pattern.find(']') != std::string_view::npos) throw bad("']' without '['");
    out.push_back(prefix + std::string(pattern));
    return;
  }
  const auto close = pattern.find(']', open);
  if (close == std::string_view::npos) throw bad("'[' without ']'");
  const std::string head = prefix + std::string(pattern.substr(0, open));
  if (head.find(']') != std::string::npos) throw bad("']' without '['");
  std::string_view ranges = pattern.substr(open + 1, close - open - 1);
  const std::string_view rest = pattern.substr(close + 1);
  if (ranges.empty()) throw bad("empty brackets");
  while (!ranges.empty()) {
    const auto comma = ranges.find(',');
    const std::string_view range = ranges.substr(0, comma);
    ranges = comma == std::string_view::npos ? std::string_view() : ranges.substr(comma + 1);
    const auto dash = range.find('-');
    const std::string_view first_text = range.substr(0, dash);
    const std::string_view last_text =
        dash == std::string_view::npos ? first_text : range.substr(dash + 1);
    const auto first = to_int(first_text);
    const auto last = to_int(last_text);
    if (!first || !last || *first < 0 || *last < *first) {
      throw bad(fmt::format("bad range '{}'", range));
    }
    // Slurm keeps the zero padding of the range's first number: node[08-10] → node08 .. node10.
    const auto width = first_text.size();
    for (int64_t n = *first; n <= *last; ++n) {
      expand_pattern(rest, head + fmt::format("{:0{}}", n, width), out, list, variable);
    }
  }
}

}  // namespace

std::vector<std::string> expand_nodelist(std::string_view list, std::string_view variable) {
  std::vector<std::string> hosts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size() && list[i] == '[') ++depth;
    if (i < list.size() && list[i] == ']') --depth;
    if (i == list.size() || (list[i] == ',' && depth == 0)) {
      const auto item = list.substr(start, i - start);
      if (item.empty()) {
        throw UsageError(fmt::format("invalid value '{}' for {} (environment): an empty host "
                                     "name; expected host names with ranges like node[01-04,07]",
                                     list, variable));
      }
      expand_pattern(item, "", hosts, list, variable);
      start = i + 1;
    }
  }
  return hosts;
}

int64_t slurm_port(int64_t job_id) { return 15000 + job_id % 20000; }

Launch parse_launch(const std::map<std::string, std::string>& env) {
  Launch launch;
  if (lookup(env, "RANK") || lookup(env, "WORLD_SIZE")) {
    launch = from_torchrun(env);
  } else if (lookup(env, "SLURM_PROCID")) {
    launch = from_slurm(env);
  }
  if (auto ifname = lookup(env, "GLOO_SOCKET_IFNAME")) launch.gloo_interface = *ifname;
  if (launch.master_addr.empty()) {
    throw UsageError("invalid value '' for MASTER_ADDR (environment): expected the host name or "
                     "address of rank 0");
  }
  return launch;
}

std::string Launch::describe() const {
  if (launcher == Launcher::none) return "single process";
  return fmt::format("{} rank {} of {} (local {} of {}, node {}), master {}:{}",
                     launcher == Launcher::torchrun ? "torchrun" : "srun", rank, world_size,
                     local_rank, local_world_size, node_rank, master_addr, master_port);
}

void check_expert_groups(int64_t expert_parallel, int64_t world_size) {
  if (expert_parallel == 1 || world_size <= 1 || world_size % expert_parallel == 0) return;
  throw UsageError(fmt::format("expert_parallel {} does not divide the world size {}: each group "
                               "of {} consecutive ranks divides the experts; use a divisor of {}",
                               expert_parallel, world_size, expert_parallel, world_size));
}

ExpertLayout expert_layout(int64_t expert_parallel, const Launch& launch) {
  const int64_t rank = launch.rank;
  if (!launch.distributed()) return {0, 1, 0, {rank}, {rank}};
  check_expert_groups(expert_parallel, launch.world_size);
  ExpertLayout layout{rank % expert_parallel, expert_parallel, rank / expert_parallel, {}, {}};
  const int64_t first = rank - layout.shard;
  for (int64_t r = first; r < first + expert_parallel; ++r) layout.exchange.push_back(r);
  for (int64_t r = layout.shard; r < launch.world_size; r += expert_parallel) layout.replicas.push_back(r);
  return layout;
}

}  // namespace ampt::config
