#include "executor/backend.hpp"

#include "common/config_reader.hpp"
#include "common/cuda_plugin.hpp"

namespace executor {

std::string_view to_string(BackendKind k) { return k == BackendKind::cpu ? "cpu" : "cuda"; }

bool parse_backend_kind(std::string_view s, BackendKind& out) {
  if (s == "cpu") out = BackendKind::cpu;
  else if (s == "cuda") out = BackendKind::cuda;
  else return false;
  return true;
}

std::unique_ptr<Backend> make_backend(BackendKind kind, const BackendOptions& options) {
  if (kind == BackendKind::cpu) return make_cpu_backend(options);
#ifdef SLICETUNE_CUDA_PLUGIN
  // the CUDA backend is a plug-in (executor/cuda/plugin.cpp), mapped only now
  using Make = Backend* (*)(const BackendOptions*);
  const auto make = reinterpret_cast<Make>(common::cuda_plugin_symbol("slicetune_cuda_make_backend"));
  return std::unique_ptr<Backend>(make(&options));
#else
  throw common::ConfigError("--backend", "", "cuda: this slicetune was built without the CUDA backend (CUDA, cuBLASLt or NCCL not found)");
#endif
}

}  // namespace executor
