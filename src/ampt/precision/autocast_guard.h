// RAII autocast region for LibTorch, the C++ counterpart of Python's `with torch.autocast(...)`.
#pragma once

#include <ATen/autocast_mode.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

namespace ampt::precision {

// Enables (or disables) autocast for one device type on the current thread and restores the
// previous state on destruction. Autocast state is thread-local, so the guard must live on the
// thread that runs the forward pass. When the outermost guard closes, the autocast cache of
// low-precision weight copies is cleared: those copies go stale after the optimizer step.
// `cache_enabled` false makes every op cast its weights afresh (less memory, more casts).
class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType device_type, c10::ScalarType dtype, bool enabled,
                bool cache_enabled = true);
  ~AutocastGuard();

  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_type_;
  bool previous_enabled_;
  c10::ScalarType previous_dtype_;
  bool previous_cache_enabled_;
};

}  // namespace ampt::precision
