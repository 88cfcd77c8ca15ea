#include "ampt/text/tokenizer.h"

#include "ampt/core/errors.h"
#include "ampt/core/fnv1a.h"
#include "ampt/text/bpe_model.h"
#include "ampt/text/nfc.h"
#include "ampt/text/pretokenizer.h"
#include "ampt/text/utf8.h"
#include "ampt/text/word_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace ampt::text {
namespace {

// The end-of-text tokens looked for when the files name none, GPT-2's first.
constexpr std::array<std::string_view, 2> kEndOfTextNames = {"<|endoftext|>", "<|end_of_text|>"};
// Below this a chunk costs more in thread start-up than it saves.
constexpr std::size_t kMinParallelChunk = std::size_t{1} << 16;
// More chunks than threads, so a thread that drew easy text takes another chunk.
constexpr int kChunksPerThread = 4;

std::atomic<uint64_t> next_model_serial{1};

// Each thread's cache belongs to the last tokenizer that used the thread: another one empties it.
struct ThreadState {
  uint64_t owner = 0;
  WordCache cache;
  MergeScratch scratch;
};

ThreadState& thread_state(uint64_t owner) {
  thread_local ThreadState state;
  if (state.owner != owner) {
    state.cache.clear();
    state.owner = owner;
  }
  return state;
}

// Runs task(0..count-1) on `threads` threads, each taking the next index; rethrows the first
// exception after all have stopped.
void run_tasks(int threads, std::size_t count, const std::function<void(std::size_t)>& task) {
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const auto worker = [&] {
    try {
      for (std::size_t i = next++; i < count; i = next++) task(i);
    } catch (...) {
      const std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = count;
    }
  };
  std::vector<std::thread> pool;
  const auto n = std::min<std::size_t>(static_cast<std::size_t>(threads), count);
  for (std::size_t t = 1; t < n; ++t) pool.emplace_back(worker);
  worker();
  for (auto& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

struct Tokenizer::Model {
  explicit Model(Vocabulary v) : vocabulary(std::move(v)), bpe(vocabulary) {}

  Vocabulary vocabulary;
  BpeModel bpe;
  // With vocabulary.ignore_merges: the id of each non-special token's bytes.
  std::unordered_map<std::string_view, int32_t> whole_tokens;
  uint64_t serial = next_model_serial++;
};

int resolve_threads(int threads) {
  if (threads > 0) return threads;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

Tokenizer::Tokenizer(Vocabulary vocabulary) {
  auto model = std::make_shared<Model>(std::move(vocabulary));
  Vocabulary& v = model->vocabulary;
  const auto size = static_cast<int32_t>(v.tokens.size());
  std::vector<bool> special(v.tokens.size(), false);
  for (const int32_t id : v.special_ids) {
    if (id < 0 || id >= size || v.tokens[id].empty()) {
      throw RuntimeError(fmt::format("{}: special token id {} is not in the vocabulary", v.source, id));
    }
    special[id] = true;
  }
  for (const int32_t id : {v.bos, v.eos}) {
    if (id >= size) throw RuntimeError(fmt::format("{}: BOS/EOS id {} is not in the vocabulary", v.source, id));
  }
  for (const std::string_view name : kEndOfTextNames) {
    for (const int32_t id : v.special_ids) {
      if (v.eos < 0 && v.tokens[id] == name) v.eos = id;
    }
  }
  if (v.eos < 0) {
    throw RuntimeError(fmt::format(
        "{}: no special token {} or {}, and no eos_token in a tokenizer_config.json beside it",
        v.source, kEndOfTextNames[0], kEndOfTextNames[1]));
  }
  if (v.ignore_merges) {
    model->whole_tokens.reserve(v.tokens.size());
    for (int32_t id = 0; id < size; ++id) {
      if (!special[id]) model->whole_tokens.emplace(v.tokens[id], id);
    }
  }
  model_ = std::move(model);
}

int32_t Tokenizer::vocab_size() const {
  return static_cast<int32_t>(model_->vocabulary.tokens.size());
}
int32_t Tokenizer::eot_id() const { return model_->vocabulary.eos; }
int32_t Tokenizer::bos_id() const { return model_->vocabulary.bos; }
int32_t Tokenizer::special_id(std::string_view text) const {
  for (const int32_t id : model_->vocabulary.special_ids) {
    if (model_->vocabulary.tokens[id] == text) return id;
  }
  return -1;
}
bool Tokenizer::is_special(int32_t id) const {
  return std::ranges::find(model_->vocabulary.special_ids, id) != model_->vocabulary.special_ids.end();
}

std::vector<std::size_t> Tokenizer::token_ends(std::span<const int32_t> ids, std::string_view text) const {
  const auto& tokens = model_->vocabulary.tokens;
  const bool metaspace = model_->vocabulary.pre_tokenizer == PreTokenizer::sentencepiece;
  std::vector<std::size_t> ends;
  ends.reserve(ids.size());
  std::size_t pos = 0;
  std::string piece;
  for (const int32_t id : ids) {
    piece = tokens.at(static_cast<std::size_t>(id));
    if (metaspace) {
      for (std::size_t at = piece.find(kMetaspace); at != std::string::npos; at = piece.find(kMetaspace, at + 1)) {
        piece.replace(at, kMetaspace.size(), " ");
      }
      const std::string_view rest = text.substr(pos);
      if (!rest.starts_with(piece) && piece.starts_with(' ') && rest.starts_with(std::string_view(piece).substr(1))) {
        piece.erase(0, 1);  // a prepended "▁"
      }
    }
    pos = std::min(text.size(), pos + piece.size());
    ends.push_back(pos);
  }
  return ends;
}

PreTokenizer Tokenizer::pre_tokenizer() const { return model_->vocabulary.pre_tokenizer; }
std::string Tokenizer::kind() const {
  return fmt::format("{} BPE", pre_tokenizer_name(pre_tokenizer()));
}
const std::string& Tokenizer::source() const { return model_->vocabulary.source; }

uint64_t Tokenizer::fingerprint() const {
  const Vocabulary& v = model_->vocabulary;
  Fnv1a hash;
  hash.add_int(v.tokens.size());
  for (const std::string& token : v.tokens) hash.add_field(token);
  hash.add_int(v.merges.size());
  for (const Merge& m : v.merges) hash.add_int(m.left).add_int(m.right).add_int(m.rank).add_int(m.result);
  hash.add_int(v.special_ids.size());
  for (const int32_t id : v.special_ids) hash.add_int(id);
  hash.add_int(static_cast<int>(v.pre_tokenizer)).add_int(v.ignore_merges ? 1 : 0).add_int(v.nfc ? 1 : 0);
  hash.add_int(v.bos).add_int(v.eos);
  hash.add_int(v.metaspace.every_text ? 1 : 0).add_int(v.metaspace.unless_space ? 1 : 0);
  hash.add_int(v.byte_fallback.size());
  for (const int32_t id : v.byte_fallback) hash.add_int(id);
  return hash.digest();
}

void Tokenizer::encode_ordinary(std::string_view raw, bool input_start, bool after_special,
                                std::vector<int32_t>& out) const {
  // Special tokens were matched in the raw text; what lies between them is normalized, as
  // Hugging Face normalizes the text around added tokens that are not `normalized`.
  const Vocabulary& v = model_->vocabulary;
  std::string normalized;
  if (v.nfc) normalized = to_nfc(raw);
  if (v.pre_tokenizer == PreTokenizer::sentencepiece) {
    normalized = metaspace_text(raw, input_start || (after_special && v.metaspace.every_text));
  }
  const std::string_view text =
      v.nfc || v.pre_tokenizer == PreTokenizer::sentencepiece ? std::string_view(normalized) : raw;
  ThreadState& state = thread_state(model_->serial);
  const PreTokenizer pattern = model_->vocabulary.pre_tokenizer;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t end = piece_end(pattern, text, pos);
    const std::string_view piece = text.substr(pos, end - pos);
    pos = end;
    if (const auto cached = state.cache.find(piece); !cached.empty()) {
      out.insert(out.end(), cached.begin(), cached.end());
      continue;
    }
    const std::size_t first = out.size();
    if (const auto whole = model_->whole_tokens.find(piece); whole != model_->whole_tokens.end()) {
      out.push_back(whole->second);
    } else {
      model_->bpe.encode_piece(piece, out, state.scratch);
    }
    state.cache.insert(piece, std::span(out).subspan(first));
  }
}

std::string Tokenizer::metaspace_text(std::string_view raw, bool prefixed) const {
  std::string out;
  if (raw.empty()) return out;
  out.reserve(raw.size() + raw.size() / 4 + kMetaspace.size());
  const bool starts_with_space = raw.front() == ' ' || raw.starts_with(kMetaspace);
  if (prefixed && !(model_->vocabulary.metaspace.unless_space && starts_with_space)) {
    out += kMetaspace;
  }
  for (const char c : raw) {
    if (c == ' ') {
      out += kMetaspace;
    } else {
      out += c;
    }
  }
  return out;
}

void Tokenizer::encode_valid(std::string_view text, SpecialTokens specials, bool input_start,
                             std::vector<int32_t>& out) const {
  const Vocabulary& v = model_->vocabulary;
  if (specials == SpecialTokens::as_text || v.special_ids.empty()) {
    encode_ordinary(text, input_start, false, out);
    return;
  }
  std::size_t pos = 0;
  while (pos < text.size()) {
    // The leftmost special token, the longest among those starting there.
    std::size_t at = text.size();
    int32_t found = -1;
    for (const int32_t id : v.special_ids) {
      const std::size_t hit = text.find(v.tokens[id], pos);
      if (hit < at || (hit == at && hit != text.size() && v.tokens[id].size() > v.tokens[found].size())) {
        at = hit;
        found = id;
      }
    }
    encode_ordinary(text.substr(pos, at - pos), input_start && pos == 0, pos > 0, out);
    if (found < 0) break;
    out.push_back(found);
    pos = at + v.tokens[found].size();
  }
}

void Tokenizer::encode_append(std::string_view text, SpecialTokens specials,
                              std::vector<int32_t>& out) const {
  if (first_invalid_utf8(text) == text.size()) {
    encode_valid(text, specials, true, out);
  } else {
    encode_valid(replace_invalid_utf8(text), specials, true, out);
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, SpecialTokens specials) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 4 + 8);
  encode_append(text, specials, out);
  return out;
}

std::vector<std::string_view> Tokenizer::parallel_chunks(std::string_view text, int chunks,
                                                         SpecialTokens specials) const {
  const Vocabulary& v = model_->vocabulary;
  // Inside a special token, or (SentencePiece's) right after one, where a text begins that may
  // take a "▁" before it.
  const bool ends_count = v.pre_tokenizer == PreTokenizer::sentencepiece;
  const auto inside_special = [&](std::size_t pos) {
    if (specials == SpecialTokens::as_text) return false;
    for (const int32_t id : v.special_ids) {
      const std::string& s = v.tokens[id];
      for (std::size_t hit = text.find(s, pos >= s.size() ? pos - s.size() : 0); hit < pos;
           hit = text.find(s, hit + 1)) {
        if (hit + s.size() > pos || (ends_count && hit + s.size() == pos)) return true;
      }
    }
    return false;
  };
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (int k = 1; k < chunks; ++k) {
    const std::size_t limit = text.size() * (k + 1) / chunks;
    std::size_t cut = std::max(start + 1, text.size() * k / chunks);
    // Only cuts between two characters: skip UTF-8 continuation bytes.
    while (cut < limit && ((static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80 ||
                           !is_safe_cut(v.pre_tokenizer, text, cut) ||
                           (v.nfc && !is_nfc_boundary(text, cut)) || inside_special(cut))) {
      ++cut;
    }
    if (cut >= limit) continue;  // no safe cut here: the next chunk grows
    out.push_back(text.substr(start, cut - start));
    start = cut;
  }
  out.push_back(text.substr(start));
  return out;
}

std::vector<int32_t> Tokenizer::encode_parallel(std::string_view text, int threads,
                                                SpecialTokens specials) const {
  threads = resolve_threads(threads);
  const int chunks = static_cast<int>(std::min<std::size_t>(
      static_cast<std::size_t>(threads) * kChunksPerThread, text.size() / kMinParallelChunk));
  if (threads == 1 || chunks < 2) return encode(text, specials);
  std::string replaced;
  if (first_invalid_utf8(text) != text.size()) {
    replaced = replace_invalid_utf8(text);
    text = replaced;
  }
  const std::vector<std::string_view> pieces = parallel_chunks(text, chunks, specials);
  std::vector<std::vector<int32_t>> ids(pieces.size());
  run_tasks(threads, pieces.size(), [&](std::size_t i) {
    ids[i].reserve(pieces[i].size() / 4 + 8);
    encode_valid(pieces[i], specials, i == 0, ids[i]);
  });
  std::size_t total = 0;
  for (const auto& part : ids) total += part.size();
  std::vector<int32_t> out;
  out.reserve(total);
  for (const auto& part : ids) out.insert(out.end(), part.begin(), part.end());
  return out;
}

std::vector<std::vector<int32_t>> Tokenizer::encode_batch(std::span<const std::string_view> texts,
                                                          int threads,
                                                          SpecialTokens specials) const {
  std::vector<std::vector<int32_t>> out(texts.size());
  run_tasks(resolve_threads(threads), texts.size(),
            [&](std::size_t i) { encode_append(texts[i], specials, out[i]); });
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  const auto& tokens = model_->vocabulary.tokens;
  std::string out;
  for (const int32_t id : ids) {
    if (id < 0 || id >= static_cast<int32_t>(tokens.size())) {
      throw RuntimeError(fmt::format("token id {} is outside the vocabulary of {} (ids 0..{})", id,
                                     model_->vocabulary.source, tokens.size() - 1));
    }
    out += tokens[id];
  }
  if (model_->vocabulary.pre_tokenizer == PreTokenizer::sentencepiece) {
    // Hugging Face's decoder: every "▁" a space, and the text's first space dropped.
    std::string spaced;
    spaced.reserve(out.size());
    for (std::size_t i = 0; i < out.size();) {
      if (std::string_view(out).substr(i).starts_with(kMetaspace)) {
        spaced += ' ';
        i += kMetaspace.size();
      } else {
        spaced += out[i++];
      }
    }
    if (!spaced.empty() && spaced.front() == ' ') spaced.erase(0, 1);
    return spaced;
  }
  return out;
}

}  // namespace ampt::text
