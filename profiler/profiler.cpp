#include "profiler/profiler.hpp"

#include "hardware/config_error.hpp"

namespace profiler {

hardware::Profile measure_cpu(const Options& o);  // cpu_profiler.cpp

hardware::Profile measure(const Options& o) {
  if (o.backend == "cpu") return measure_cpu(o);
  if (o.backend == "cuda")
    throw hardware::ConfigError("--backend", "", "cuda: the CUDA profiler is not built in this version (see docs/profiler.md); use --backend cpu");
  throw hardware::ConfigError("--backend", "", "expected cpu | cuda, got '" + o.backend + "'");
}

bool cuda_available() { return false; }

}  // namespace profiler
