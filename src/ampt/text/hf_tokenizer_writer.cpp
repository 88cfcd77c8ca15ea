#include "ampt/text/hf_tokenizer_writer.h"

#include "ampt/core/errors.h"
#include "ampt/core/json_text.h"
#include "ampt/text/byte_alphabet.h"
#include "ampt/text/pretokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <unordered_map>
#include <utility>

namespace ampt::text {
namespace {

class MergeFinder {
 public:
  explicit MergeFinder(const Vocabulary& vocabulary) : vocabulary_(vocabulary) {
    byte_ids_.fill(-1);
    std::vector<bool> special(vocabulary.tokens.size(), false);
    for (const int32_t id : vocabulary.special_ids) special[id] = true;
    for (std::size_t id = 0; id < vocabulary.tokens.size(); ++id) {
      if (!special[id] && vocabulary.tokens[id].size() == 1) {
        byte_ids_[static_cast<unsigned char>(vocabulary.tokens[id][0])] = static_cast<int32_t>(id);
      }
    }
    for (const Merge& m : vocabulary.merges) pairs_.emplace(pair_key(m.left, m.right), m);
  }

  // The pair BPE joins last to make `result`, applying only merges ranked below `rank`.
  std::pair<int32_t, int32_t> last_merge(int32_t result, int32_t rank) const {
    const std::string& bytes = vocabulary_.tokens[result];
    std::vector<int32_t> parts;
    for (const char b : bytes) parts.push_back(byte_ids_[static_cast<unsigned char>(b)]);
    while (parts.size() > 2) {
      std::size_t best = parts.size();
      const Merge* best_merge = nullptr;
      for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
        const auto it = pairs_.find(pair_key(parts[i], parts[i + 1]));
        if (it == pairs_.end() || it->second.rank >= rank) continue;
        if (best_merge == nullptr || it->second.rank < best_merge->rank) {
          best = i;
          best_merge = &it->second;
        }
      }
      if (best_merge == nullptr) break;
      parts[best] = best_merge->result;
      parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    }
    if (parts.size() != 2 || std::find(parts.begin(), parts.end(), -1) != parts.end()) {
      throw RuntimeError(fmt::format("{}: token {} cannot be built by BPE from lower-ranked merges, "
                                     "so it has no merges.txt line",
                                     vocabulary_.source, result));
    }
    return {parts[0], parts[1]};
  }

 private:
  const Vocabulary& vocabulary_;
  std::array<int32_t, 256> byte_ids_{};
  std::unordered_map<uint64_t, Merge> pairs_;
};

// One merge per token, in rank order.
std::vector<std::pair<int32_t, int32_t>> merge_lines(const Vocabulary& vocabulary) {
  std::map<int32_t, std::vector<const Merge*>> by_result;
  for (const Merge& m : vocabulary.merges) by_result[m.result].push_back(&m);
  std::vector<std::pair<int32_t, const std::vector<const Merge*>*>> ranked;
  for (const auto& [result, merges] : by_result) ranked.emplace_back(merges.front()->rank, &merges);
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  const MergeFinder finder(vocabulary);
  std::vector<std::pair<int32_t, int32_t>> lines;
  for (const auto& [rank, merges] : ranked) {
    if (merges->size() == 1) {
      lines.emplace_back(merges->front()->left, merges->front()->right);
    } else {
      lines.push_back(finder.last_merge(merges->front()->result, rank));
    }
  }
  return lines;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw RuntimeError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
}

}  // namespace

void write_hf_tokenizer(const Vocabulary& vocabulary, const std::string& dir,
                        int64_t model_max_length) {
  // vocab.json + merges.txt imply GPT-2's pre-tokenizer: another one's ids would change on the
  // way back.
  if (vocabulary.pre_tokenizer != PreTokenizer::gpt2) {
    throw RuntimeError(fmt::format("{}: writing a {} tokenizer is not implemented (only GPT-2's): "
                                   "copy its tokenizer files instead",
                                   vocabulary.source, pre_tokenizer_name(vocabulary.pre_tokenizer)));
  }
  std::vector<bool> special(vocabulary.tokens.size(), false);
  for (const int32_t id : vocabulary.special_ids) special[id] = true;
  const auto written = [&](int32_t id) {
    return special[id] ? vocabulary.tokens[id] : written_token(vocabulary.tokens[id]);
  };

  std::string vocab = "{";
  for (std::size_t id = 0; id < vocabulary.tokens.size(); ++id) {
    vocab += fmt::format("{}{}: {}", id == 0 ? "" : ", ", json_string(written(static_cast<int32_t>(id))), id);
  }
  write_file(dir + "/vocab.json", vocab + "}\n");

  std::string merges = "#version: 0.2\n";
  for (const auto& [left, right] : merge_lines(vocabulary)) {
    merges += written(left) + " " + written(right) + "\n";
  }
  write_file(dir + "/merges.txt", merges);

  // GPT-2's one special token is its beginning, end and unknown token alike.
  std::string end_of_text = "<|endoftext|>";
  if (std::none_of(vocabulary.special_ids.begin(), vocabulary.special_ids.end(),
                   [&](int32_t id) { return vocabulary.tokens[id] == end_of_text; })) {
    throw RuntimeError(fmt::format("{}: no {} token for Hugging Face's bos/eos/unk", vocabulary.source,
                                   end_of_text));
  }
  const std::string eot = json_string(end_of_text);
  write_file(dir + "/special_tokens_map.json",
             fmt::format("{{\"bos_token\": {0}, \"eos_token\": {0}, \"unk_token\": {0}}}\n", eot));
  write_file(dir + "/tokenizer_config.json",
             fmt::format("{{\n  \"add_prefix_space\": false,\n"
                         "  \"add_bos_token\": false,\n  \"bos_token\": {0},\n  \"eos_token\": {0},\n"
                         "  \"unk_token\": {0},\n  \"model_max_length\": {1}\n}}\n",
                         eot, model_max_length));
}

}  // namespace ampt::text
