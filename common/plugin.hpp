// defines: common::cuda_plugin_symbol, common::mpi_plugin_symbol (the parts of slicetune that need
//          large shared libraries live in plug-ins beside the program, loaded only when a command
//          needs them, so that simulate, tune, list and --help never map those libraries:
//          libslicetune_cuda.so (CUDA, cuBLASLt, NCCL) and libslicetune_mpi.so (Open MPI))
#pragma once

namespace common {

/// @brief The address of `name` (an extern "C" entry point) in the CUDA plug-in, loading it on first
/// use from $SLICETUNE_CUDA_PLUGIN or, by default, libslicetune_cuda.so beside the running program.
/// Throws common::ConfigError naming --backend cuda and the loader's reason (a missing plug-in, or
/// missing CUDA, cuBLASLt or NCCL libraries on this machine). Thread-safe.
void* cuda_plugin_symbol(const char* name);

/// @brief The address of `name` in the MPI plug-in (the executor's and profiler's MPI half,
/// executor/mpi_plugin.hpp), loading it on first use from $SLICETUNE_MPI_PLUGIN or, by default,
/// libslicetune_mpi.so beside the running program. Throws common::ConfigError naming the plug-in and
/// the loader's reason (a missing plug-in or missing Open MPI libraries). Thread-safe.
void* mpi_plugin_symbol(const char* name);

}  // namespace common
