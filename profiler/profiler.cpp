#include "profiler/profiler.hpp"

#include "common/config_reader.hpp"
#include "profiler/cuda_profiler.hpp"

namespace profiler {

hardware::Profile measure_cpu(const Options& o);  // cpu_profiler.cpp

hardware::Profile measure(const Options& o) {
  if (o.backend == "cpu") return measure_cpu(o);
  if (o.backend == "cuda") {
#ifdef SLICETUNE_PROFILER_CUDA
    return measure_cuda(o);
#else
    throw common::ConfigError("--backend", "", "cuda: this slicetune was built without CUDA, cuBLASLt and NCCL (SLICETUNE_CUDA off)");
#endif
  }
  throw common::ConfigError("--backend", "", "expected cpu | cuda, got '" + o.backend + "'");
}

bool cuda_available() {
#ifdef SLICETUNE_PROFILER_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace profiler
