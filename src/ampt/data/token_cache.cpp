#include "ampt/data/token_cache.h"

#include "ampt/core/errors.h"
#include "ampt/core/fnv1a.h"
#include "ampt/data/loss_mask.h"
#include "ampt/data/text_shard.h"

#include <fmt/format.h>

#include <cctype>
#include <filesystem>
#include <system_error>

namespace ampt::data {

std::string token_cache_dir(const config::Config& config) {
  return config.token_cache.empty()
             ? (std::filesystem::path(config.output_dir) / "token_cache").string()
             : config.token_cache;
}
namespace {

namespace fs = std::filesystem;

// Changes whenever what a shard holds for the same inputs changes (its layout, the separators).
constexpr std::string_view kCacheVersion = "ampt token cache 1";

uint64_t cache_key(const text::Tokenizer& tokenizer, const std::vector<std::string>& inputs,
                   const text::TokenizeFilesOptions& options, const text::ChatTemplate* chat) {
  Fnv1a hash;
  hash.add_field(kCacheVersion).add_int(tokenizer.fingerprint());
  hash.add_int(static_cast<int>(options.format)).add_field(options.text_field);
  if (chat != nullptr) hash.add_field("chat").add_int(chat->fingerprint());
  for (const std::string& input : inputs) {
    std::error_code error;
    const fs::path absolute = fs::absolute(input, error);
    const auto size = fs::file_size(input, error);
    if (error) throw RuntimeError(fmt::format("{}: cannot open: {}", input, error.message()));
    const auto modified = fs::last_write_time(input, error).time_since_epoch().count();
    if (error) throw RuntimeError(fmt::format("{}: cannot open: {}", input, error.message()));
    hash.add_field(absolute.string()).add_int(size).add_int(modified);
  }
  return hash.digest();
}

// Letters, digits, '.', '-' and '_' of `name`, the rest as '_'.
std::string file_name_part(const std::string& name) {
  std::string out;
  for (const char c : name) {
    const bool plain = std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == '_';
    out.push_back(plain ? c : '_');
  }
  return out;
}

}  // namespace

CachedShard cached_text_shard(const text::Tokenizer& tokenizer,
                              const std::vector<std::string>& inputs,
                              const text::TokenizeFilesOptions& options,
                              const std::string& cache_dir, const std::string& name,
                              const text::ChatTemplate* chat) {
  CachedShard shard;
  shard.path = (fs::path(cache_dir) / fmt::format("{}-{:016x}.bin", file_name_part(name),
                                                  cache_key(tokenizer, inputs, options, chat)))
                   .string();
  if (chat != nullptr) shard.mask = loss_mask_path(shard.path);
  std::error_code error;
  if (fs::exists(shard.path, error)) {
    shard.reused = true;
    return shard;
  }
  fs::create_directories(cache_dir, error);
  if (error) {
    throw RuntimeError(fmt::format("{}: cannot create the token cache directory: {}", cache_dir,
                                   error.message()));
  }
  shard.written = write_text_shard(tokenizer, inputs, options, shard.path, chat);
  return shard;
}

}  // namespace ampt::data
