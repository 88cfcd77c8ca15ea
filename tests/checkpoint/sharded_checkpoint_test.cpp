// ZeRO checkpoints: every rank (a thread here) writes its shard, rank 0 the manifest; a reader
// assembles the whole state or re-cuts it for another world size, checking what it reads.
#include "ampt/checkpoint/checkpoint_reader.h"
#include "ampt/checkpoint/sharded_save.h"
#include "support/process.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

using namespace ampt::checkpoint;
using ampt::test::entries;
namespace fs = std::filesystem;

namespace {

// What DataParallel::gather_text does across processes, for threads.
class Reports {
 public:
  explicit Reports(int64_t world) : texts_(static_cast<size_t>(world)) {}
  std::vector<std::string> gather(int64_t rank, const std::string& text) {
    std::unique_lock lock(mutex_);
    texts_[rank] = text;
    changed_.notify_all();
    if (rank != 0) return {};
    changed_.wait(lock, [this] {
      return std::ranges::all_of(texts_, [](const auto& t) { return t.has_value(); });
    });
    std::vector<std::string> out;
    for (auto& t : texts_) out.push_back(*std::exchange(t, std::nullopt));
    return out;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::optional<std::string>> texts_;
};

// A run's whole state: three parameters in two units, AdamW's moments and step counts.
struct Whole {
  std::vector<std::string> names{"a.weight", "b.bias", "c.weight"};
  std::vector<std::vector<int64_t>> shapes{{3, 5}, {7}, {2, 2}};
  std::vector<ampt::FlatUnit> units{{{2, 0}, {4, 15}}, {{1}, {7}}};
  std::map<std::string, torch::Tensor> tensors;  // "<name>", "<name>.exp_avg", "<name>.step" ...
  torch::Tensor buffer = torch::arange(4, torch::kFloat32);

  Whole() {
    torch::manual_seed(2);
    for (size_t p = 0; p < names.size(); ++p) {
      tensors[names[p]] = torch::randn(shapes[p]);
      tensors[names[p] + ".exp_avg"] = torch::randn(shapes[p]);
      tensors[names[p] + ".exp_avg_sq"] = torch::rand(shapes[p]);
      tensors[names[p] + ".step"] = torch::full({}, 40.0F);
    }
  }

  ShardedLayout layout(int64_t world) const {
    return {names, shapes, ampt::FlatLayout(units, world), {"master", "exp_avg", "exp_avg_sq"}, {"step"}};
  }

  // Rank `rank`'s shard of it, cut as a ZeRO run cuts its state.
  ShardedSave save(int64_t world, int64_t rank, int64_t step = 40) const {
    ShardedSave s;
    s.meta.step = step;
    s.meta.world_size = world;
    s.meta.batch_size = 8;
    s.meta.data_position = 5;
    s.meta.optimizer_kind = "adamw";
    s.meta.config = "lr: 0.01\nmodel: \"gpt\"\n";
    s.meta.initial_loss = 2.302585092994046;
    s.meta.scaler = ampt::checkpoint::SavedScaler{1024.0F, 7};
    s.meta.cpu_rng = torch::arange(16, torch::kUInt8);
    s.meta.model = {{"norm.running_mean", buffer}};
    s.layout = layout(world);
    s.rank = rank;
    const auto pieces = s.layout.layout.segments(rank);
    for (const auto* kind : {"master", "exp_avg", "exp_avg_sq"}) {
      auto flat = torch::zeros({s.layout.layout.shard_numel()});
      for (const auto& piece : pieces) {
        const auto& name = names[piece.param];
        const auto& whole = tensors.at(std::string(kind) == "master" ? name : name + "." + kind);
        flat.narrow(0, piece.shard_offset, piece.count).copy_(whole.reshape(-1).narrow(0, piece.begin, piece.count));
      }
      s.shard.emplace_back(kind, flat);
    }
    auto steps = torch::zeros({static_cast<int64_t>(pieces.size())});
    for (size_t i = 0; i < pieces.size(); ++i) steps[i] = tensors.at(names[pieces[i].param] + ".step");
    s.shard.emplace_back("step", steps);
    return s;
  }
};

// Every rank saves, each on its own thread; the errors they threw, by rank.
std::vector<std::string> save_all(const Whole& whole, const std::string& dir, int64_t world,
                                  int64_t step = 40, int64_t keep = 3) {
  Reports reports(world);
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        save_sharded(dir, whole.save(world, r, step), keep,
                     [&, r](const std::string& text) { return reports.gather(r, text); });
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace

TEST_CASE("sharded checkpoint: assembles to the whole state and re-cuts for any world size",
          "[checkpoint][zero]") {
  const int64_t saved_world = GENERATE(1, 2, 3);
  const Whole whole;
  const auto dir = ampt::test::make_temp_dir();
  for (const auto& error : save_all(whole, dir, saved_world)) REQUIRE(error.empty());
  CHECK(entries(dir) == std::vector<std::string>{"ckpt-00000040", "latest"});
  std::vector<std::string> files{"common.pt", "manifest.json"};
  for (int64_t r = 0; r < saved_world; ++r) files.push_back(fmt::format("rank-{:05}.pt", r));
  std::sort(files.begin(), files.end());
  CHECK(entries(dir + "/ckpt-00000040") == files);

  // The whole state, from the run directory as from the checkpoint's own.
  const auto c = load(dir);
  CHECK(c.step == 40);
  CHECK(c.world_size == saved_world);
  CHECK(c.data_position == 5);
  CHECK(c.optimizer_kind == "adamw");
  CHECK(c.config == "lr: 0.01\nmodel: \"gpt\"\n");
  CHECK(c.initial_loss == 2.302585092994046);
  REQUIRE(c.scaler);
  CHECK(c.scaler->scale == 1024.0F);
  CHECK(c.scaler->growth_tracker == 7);
  CHECK(torch::equal(c.cpu_rng, torch::arange(16, torch::kUInt8)));
  std::map<std::string, torch::Tensor> got;
  for (const auto* group : {&c.model, &c.optimizer}) {
    for (const auto& [name, tensor] : *group) got[name] = tensor;
  }
  CHECK(torch::equal(got.at("norm.running_mean"), whole.buffer));
  for (const auto& [name, tensor] : whole.tensors) {
    INFO(name);
    REQUIRE(got.count(name) == 1);
    CHECK(torch::equal(got.at(name), tensor));
  }
  CHECK(got.size() == whole.tensors.size() + 1);

  // Re-cut: every rank of another world size reads its pieces, and only those.
  CheckpointReader reader(dir + "/ckpt-00000040");
  for (const int64_t world : {1, 2, 4}) {
    const ampt::FlatLayout layout(whole.units, world);
    for (int64_t rank = 0; rank < world; ++rank) {
      for (const auto& piece : layout.segments(rank)) {
        const auto& name = whole.names[piece.param];
        auto out = torch::empty({piece.count});
        reader.read(name + ".exp_avg_sq", piece.begin, piece.count, out);
        CHECK(torch::equal(out, whole.tensors.at(name + ".exp_avg_sq").reshape(-1).narrow(0, piece.begin, piece.count)));
      }
    }
  }
  CHECK(reader.shape("b.bias") == std::vector<int64_t>{7});
  CHECK(reader.shape("b.bias.step") == std::vector<int64_t>{});
  CHECK_FALSE(reader.shape("b.bias.master"));
  CHECK_FALSE(reader.shape("d.weight"));
}

TEST_CASE("sharded checkpoint: a damaged shard or manifest is named", "[checkpoint][zero]") {
  const Whole whole;
  const auto dir = ampt::test::make_temp_dir();
  for (const auto& error : save_all(whole, dir, 2)) REQUIRE(error.empty());
  const auto ckpt = dir + "/ckpt-00000040";
  // Flip the bytes of one value of rank 1's exp_avg record, found by its bit pattern.
  const auto piece = ampt::FlatLayout(whole.units, 2).segments(1).front();
  const float value = whole.tensors.at(whole.names[piece.param] + ".exp_avg").reshape(-1)[piece.begin].item<float>();
  std::string bytes = ampt::test::read_file(ckpt + "/rank-00001.pt");
  const auto at = bytes.find(std::string(reinterpret_cast<const char*>(&value), sizeof value));
  REQUIRE(at != std::string::npos);
  bytes[at] = static_cast<char>(bytes[at] ^ 0x5A);
  std::ofstream(ckpt + "/rank-00001.pt", std::ios::binary) << bytes;

  CheckpointReader reader(ckpt);
  auto out = torch::empty({piece.count});
  const auto& name = whole.names[piece.param];
  reader.read(name, piece.begin, piece.count, out);  // the master record is intact
  CHECK_THROWS_WITH(reader.read(name + ".exp_avg", piece.begin, piece.count, out),
                    "checkpoint '" + ckpt + "' is corrupt: record 'exp_avg' of rank-00001.pt does "
                    "not match its checksum");
  CHECK_THROWS_WITH(load(dir), Catch::Contains("record 'exp_avg' of rank-00001.pt does not match"));

  std::ofstream(ckpt + "/manifest.json") << "{\"format\": \"ampt-sharded-checkpoint\"";
  CHECK_THROWS_WITH(load(dir), Catch::StartsWith("checkpoint manifest '" + ckpt +
                                                 "/manifest.json' is truncated or corrupt"));
  fs::remove(ckpt + "/rank-00000.pt");
  std::ofstream(ckpt + "/manifest.json") << "{\"format\": \"something else\"}";
  CHECK_THROWS_WITH(load(dir), Catch::Contains("it is not an ampt sharded checkpoint's manifest"));
}

TEST_CASE("sharded checkpoint: a rank that cannot write is named and nothing is published",
          "[checkpoint][zero]") {
  const Whole whole;
  const auto dir = ampt::test::make_temp_dir();
  // A directory where rank 1's file goes: its rename fails.
  fs::create_directories(dir + "/ckpt-00000040/rank-00001.pt/x");
  const auto errors = save_all(whole, dir, 2);
  const auto failure = "cannot rename the complete temporary file into '" + dir +
                       "/ckpt-00000040/rank-00001.pt': Is a directory (EISDIR)";
  CHECK(errors[0] == "rank 1 could not write its shard: " + failure);
  CHECK(errors[1] == failure);
  CHECK_FALSE(fs::exists(dir + "/latest"));
  CHECK_FALSE(fs::exists(dir + "/ckpt-00000040/manifest.json"));
}

TEST_CASE("sharded checkpoint: only the newest keep_checkpoints stay, files or directories",
          "[checkpoint][zero]") {
  const Whole whole;
  const auto dir = ampt::test::make_temp_dir();
  std::ofstream(dir + "/ckpt-00000010.pt") << "an older checkpoint of a run without ZeRO";
  for (const int64_t step : {20, 30, 40}) {
    for (const auto& error : save_all(whole, dir, 2, step, /*keep=*/2)) REQUIRE(error.empty());
  }
  CHECK(entries(dir) == std::vector<std::string>{"ckpt-00000030", "ckpt-00000040", "latest"});
  CHECK(find_latest(dir) == dir + "/ckpt-00000040");
}
