// defines: profiler::measure_cuda (the CUDA backend of the profiler: cuBLASLt GEMMs, NCCL collectives).
// Host-only header: no CUDA types, so CPU-only code can include it. Built only when SLICETUNE_CUDA.
#pragma once
#include "hardware/profile.hpp"
#include "common/config_reader.hpp"
#include "profiler/profiler.hpp"

namespace profiler {

/// @brief Measures GEMMs (bf16 in, fp32 accumulate, cuBLASLt) over a grid and the model's shapes, and
/// NCCL AllReduce / AllGather / ReduceScatter over the job's GPUs (one MPI rank per GPU, ncclUniqueId
/// broadcast over MPI). Attention and element-wise kernels are not measured yet (the profiled model
/// falls back to the analytic model for them and says so). Throws ConfigError when no GPU is visible.
hardware::Profile measure_cuda(const Options& o);

/// MPI_Init_thread if nobody has (mpi_state.cpp).
void init_mpi_if_needed();

}  // namespace profiler
