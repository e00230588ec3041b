// The CUDA plug-in's entry points (libslicetune_cuda.so, loaded by common::cuda_plugin_symbol): the
// executor's CUDA backend and the profiler's CUDA measurements. Only these are exported.
#include "executor/backend.hpp"
#include "profiler/cuda_profiler.hpp"

#define SLICETUNE_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))

/// A new CUDA backend (the caller owns it and deletes it through Backend's virtual destructor).
SLICETUNE_PLUGIN_EXPORT executor::Backend* slicetune_cuda_make_backend(const executor::BackendOptions* options) {
  return executor::make_cuda_backend(*options).release();
}

/// profiler::measure_cuda into `*out` (MPI is initialised by the caller).
SLICETUNE_PLUGIN_EXPORT void slicetune_cuda_measure(const profiler::Options* options, hardware::Profile* out) {
  *out = profiler::measure_cuda(*options);
}
