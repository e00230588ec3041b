// defines: CUDA_CHECK, CUBLAS_CHECK, NCCL_CHECK, MPI_CHECK (throw with file:line), to_float / from_float
//          (fp32, bf16, fp16 element access), ceil_div, warp_sum, warp_max, block_sum, block_max
// Included by .cu files only (CUDA headers; STYLE rule 8).
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <stdexcept>
#include <type_traits>
#include <string>

#include "common/check.hpp"

// after a kernel launch: launch errors (bad configuration) surface here, with the kernel's line
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

namespace executor::cuda {

__host__ __device__ constexpr long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }

/// Grid size for a grid-stride loop over n elements.
inline unsigned grid_for(long long n, int block) { return static_cast<unsigned>(std::min<long long>(ceil_div(n, block), 1LL << 20)); }
#define GRID_STRIDE(i, n) \
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < (n); i += static_cast<long long>(gridDim.x) * blockDim.x)

__device__ inline float to_float(float x) { return x; }
__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ inline float to_float(__half x) { return __half2float(x); }

template <typename T> __device__ inline T from_float(float x);
template <> __device__ inline float from_float<float>(float x) { return x; }
template <> __device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <> __device__ inline __half from_float<__half>(float x) { return __float2half(x); }

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
  return v;
}
/// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
__device__ inline float block_sum(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // partial may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : 0.0f;
  return warp_sum(v);
}
__device__ inline float block_max(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : -INFINITY;
  return warp_max(v);
}

}  // namespace executor::cuda
