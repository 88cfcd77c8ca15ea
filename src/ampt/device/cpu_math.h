// MKL's vector math (VML), through which ATen computes float exp, log, tanh, erf, sqrt, sin and
// the others on the CPU, set up from one thread before any parallel region reaches it.
//
// Why, as measured on a 2-core Xeon (AVX-512; the AVX2 kernels alike) with torch 2.11: when
// VML's first calls come from both OpenMP threads at once, about one process in 25 (two running
// side by side, gpt-tiny with dropout) computes the worker thread's share of every later exp
// through another, less accurate path (errors up to 2.4e-4 relative; the main thread's share
// exact), so two --deterministic runs differ and every run's softmax loses digits. With one
// call of each function first: 0 of 300 such processes (13 of 300 without; warming dropout's
// VSL alone: 6 of 300).
#pragma once

namespace ampt::device {

// One call of each of ATen's VML-backed float functions on a single element, on this thread.
// Cheap (microseconds); call it once at startup, before any parallel CPU work.
void initialize_cpu_math();

}  // namespace ampt::device
