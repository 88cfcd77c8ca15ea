#include "ampt/log/run_files.h"

#include "ampt/core/errors.h"
#include "ampt/log/logger.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <system_error>

namespace ampt::log {

namespace fs = std::filesystem;

fs::path keep_earlier_run(const fs::path& path, std::string_view what) {
  const auto numbered = [&](int n) {
    return path.parent_path() /
           fmt::format("{}.{}{}", path.stem().string(), n, path.extension().string());
  };
  int n = 1;
  while (fs::exists(numbered(n))) ++n;
  const auto kept = numbered(n);
  std::error_code ec;
  fs::rename(path, kept, ec);
  if (ec) throw RuntimeError("cannot rename '" + path.string() + "': " + ec.message());
  log::info("[AMP] Kept the previous run's {} as {}", what, kept.string());
  return kept;
}

void replace_file(const fs::path& path, const std::string& bytes) {
  // Named so that no reader takes it for one of its files (TensorBoard reads any "*tfevents*").
  const auto temporary = path.parent_path() / fmt::format(".rewrite-{}.partial", getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << bytes;
    if (!out.flush()) throw RuntimeError("cannot write '" + temporary.string() + "'");
  }
  std::error_code ec;
  fs::rename(temporary, path, ec);
  if (ec) throw RuntimeError("cannot replace '" + path.string() + "': " + ec.message());
}

}  // namespace ampt::log
