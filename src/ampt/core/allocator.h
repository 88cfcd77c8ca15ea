// Which malloc this process runs on: the ampt binary links tcmalloc ahead of glibc's
// (CMakeLists.txt), which a test binary or an embedding program may not.
#pragma once

#include <dlfcn.h>

namespace ampt {

inline const char* malloc_in_use() {
  return dlsym(RTLD_DEFAULT, "tc_malloc") != nullptr ? "tcmalloc" : "glibc";
}

}  // namespace ampt
