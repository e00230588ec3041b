// executor::make_backend (the CPU backend, or the CUDA one through the CUDA plug-in)
#include "executor/backend.hpp"

#include "common/config_reader.hpp"
#include "common/plugin.hpp"

namespace executor {

std::unique_ptr<Backend> make_backend(BackendKind kind, const BackendOptions& options) {
  if (kind == BackendKind::cpu) return make_cpu_backend(options);
#ifdef SLICETUNE_CUDA_PLUGIN
  // the CUDA backend is a plug-in (executor/cuda/plugin.cpp), mapped only now
  using Make = Backend* (*)(const BackendOptions*);
  const auto make = reinterpret_cast<Make>(common::cuda_plugin_symbol("slicetune_cuda_make_backend"));
  return std::unique_ptr<Backend>(make(&options));
#else
  throw common::ConfigError("--backend", "",
                            "cuda: this slicetune was built without the CUDA backend (CUDA, cuBLASLt or NCCL not found)");
#endif
}

}  // namespace executor
