#include "profiler/profiler.hpp"

#include "common/config_reader.hpp"
#include "common/plugin.hpp"
#include "profiler/cuda_profiler.hpp"

namespace profiler {

hardware::Profile measure_cpu(const Options& o);  // cpu_profiler.cpp

hardware::Profile measure(const Options& o) {
  if (o.backend == "cpu") return measure_cpu(o);
  if (o.backend == "cuda") {
#ifdef SLICETUNE_CUDA_PLUGIN
    // the CUDA measurements are in the CUDA plug-in (executor/cuda/plugin.cpp), mapped only now;
    // MPI is initialised here so that finish() (this copy of the profiler) finalises it
    init_mpi_if_needed();
    using Measure = void (*)(const Options*, hardware::Profile*);
    const auto measure_in_plugin = reinterpret_cast<Measure>(common::cuda_plugin_symbol("slicetune_cuda_measure"));
    hardware::Profile p;
    measure_in_plugin(&o, &p);
    return p;
#else
    throw common::ConfigError("--backend", "", "cuda: this slicetune was built without CUDA, cuBLASLt and NCCL (SLICETUNE_CUDA off)");
#endif
  }
  throw common::ConfigError("--backend", "", "expected cpu | cuda, got '" + o.backend + "'");
}

bool cuda_available() {
#ifdef SLICETUNE_CUDA_PLUGIN
  return true;
#else
  return false;
#endif
}

}  // namespace profiler
