// benchmarks/tokenizer.py runs this once per measurement, so every run starts with an empty word
// cache, as tiktoken (which keeps none) does:
//   ampt_tokenize_bench TOKENIZER TEXT_FILE THREADS
// prints {"bytes", "tokens", "seconds", "cpu_seconds", "checksum"} for encoding the file (as text,
// no special tokens) on THREADS threads: wall and CPU time (all threads) of the encoding alone.
#include "ampt/core/errors.h"
#include "ampt/text/read_file.h"
#include "ampt/text/tokenizer_files.h"

#include <fmt/format.h>

#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace {

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    fmt::print(stderr, "usage: ampt_tokenize_bench TOKENIZER TEXT_FILE THREADS\n");
    return 2;
  }
  try {
    const auto tokenizer = ampt::text::load_tokenizer(argv[1]);
    const std::string text = ampt::text::read_text_file(argv[2]);
    const int threads = std::stoi(argv[3]);
    const double cpu_start = cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    const auto ids = threads == 1 ? tokenizer.encode(text) : tokenizer.encode_parallel(text, threads);
    const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
    const double cpu = cpu_seconds() - cpu_start;
    uint64_t checksum = 0;  // order-sensitive, so a reordered chunk shows
    for (const int32_t id : ids) checksum = (checksum * 1000003 + static_cast<uint64_t>(id)) % 4294967291ULL;
    fmt::print("{{\"bytes\": {}, \"tokens\": {}, \"seconds\": {}, \"cpu_seconds\": {}, \"checksum\": {}}}\n",
               text.size(), ids.size(), seconds.count(), cpu, checksum);
  } catch (const std::exception& e) {
    fmt::print(stderr, "ampt_tokenize_bench: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
