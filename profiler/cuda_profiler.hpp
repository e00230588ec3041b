// defines: profiler::measure_cuda (the CUDA backend of the profiler: cuBLASLt GEMMs, the executor's
//          attention, element-wise and AdamW kernels, NCCL collectives), cuda_request, cuda_profile.
// Host-only header: no CUDA types, so CPU-only code can include it. Built only when SLICETUNE_CUDA.
#pragma once
#include "hardware/profile.hpp"
#include "common/config_reader.hpp"
#include "profiler/cuda/cuda_measure.hpp"
#include "profiler/profiler.hpp"

namespace profiler {

/// @brief Measures GEMMs (bf16 in, fp32 accumulate, cuBLASLt) over a grid and the model's shapes,
/// the CUDA executor's attention, element-wise and AdamW kernels as a bf16 plan runs them, and NCCL
/// AllReduce / AllGather / ReduceScatter over the job's GPUs (one MPI rank per GPU, ncclUniqueId
/// broadcast over MPI). Throws ConfigError when no GPU is visible or a measurement fails its check.
hardware::Profile measure_cuda(const Options& o);

/// @brief What measure_cuda asks the GPU for (host only, so tests check it without a GPU): the GEMM
/// grid and `o`'s GEMM shapes; `o`'s causal s_q = s_kv attention shapes; every element-wise kernel
/// of cuda::kElementwiseKernels over 64 .. 2^24 elements (2^20 with quick) in x4 steps, rows of at
/// most 1024 elements, plus `o`'s element-wise shapes at their own row width (kinds the CUDA executor
/// has no kernel for are left out); AdamW over 1024 .. 2^24 parameters (2^20 with quick) in x4 steps
/// plus `o`'s optimizer sizes. Each shape once, sorted.
cuda::Request cuda_request(const Options& o);

/// @brief The profile file's content for a CUDA measurement `r` of `req`: tables in bf16, element-wise
/// rows keyed by hardware::ElementwiseKind names with elements = rows x cols (ElementwisePoint's
/// convention), the GPU as a cluster mapping.
hardware::Profile cuda_profile(const Options& o, const cuda::Request& req, const cuda::Result& r);

/// MPI_Init_thread if nobody has (mpi_state.cpp).
void init_mpi_if_needed();

}  // namespace profiler
