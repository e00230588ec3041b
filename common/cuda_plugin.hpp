// defines: common::cuda_plugin_symbol (the CUDA backend lives in a plug-in, libslicetune_cuda.so,
//          loaded only when a CUDA command runs, so that other commands never map cuBLASLt or NCCL)
#pragma once

namespace common {

/// @brief The address of `name` (an extern "C" entry point) in the CUDA plug-in, loading it on first
/// use from $SLICETUNE_CUDA_PLUGIN or, by default, libslicetune_cuda.so beside the running program.
/// Throws common::ConfigError naming --backend cuda and the loader's reason (a missing plug-in, or
/// missing CUDA, cuBLASLt or NCCL libraries on this machine). Thread-safe.
void* cuda_plugin_symbol(const char* name);

}  // namespace common
