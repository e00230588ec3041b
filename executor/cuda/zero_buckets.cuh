// defines: shard_accumulate_kernel, shard_accumulate (ZeRO: this rank's reduce-scattered block of
//          a DP bucket added into its gradient shard)
// The packing of a bucket's tensors into one buffer (and back) is plain cudaMemcpyAsync on the
// communication stream (executor/zero_layout.hpp gives the offsets); only the add is a kernel.
#pragma once
#include "executor/cuda/cuda_common.cuh"

namespace executor::cuda {

// shard (+)= block, n elements (fp32 gradients)
template <typename F>
__global__ void shard_accumulate_kernel(F* shard, const F* block, long long n) {
  GRID_STRIDE(i, n) shard[i] += block[i];
}

inline void shard_accumulate(float* shard, const float* block, long long n, cudaStream_t s) {
  shard_accumulate_kernel<float><<<grid_for(n, 256), 256, 0, s>>>(shard, block, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace executor::cuda
