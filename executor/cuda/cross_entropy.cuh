// defines: cross_entropy_stats_kernel, stats_max_kernel, stats_rescale_kernel, cross_entropy_loss_kernel
//          and launchers. Vocab-parallel cross-entropy as the CPU reference: stats (N, 3) = (max, sum of
//          exp(logit - max), target logit if the target is local else 0). NCCL has no custom reduction,
//          so the TP merge is AllReduce(max) of the maxima, a rescale of each rank's sum to the global
//          max, then AllReduce(sum) (the max column carried by TP rank 0 only).
#pragma once
#include "executor/cuda/cuda_common.cuh"

namespace executor::cuda {

// The kernels are templates over the fp32 element type F (always float) only so that every .cu that
// includes this header (device.cu, the CUDA profiler) may: a template kernel is emitted once per
// program, a plain __global__ function defined in a header is a duplicate symbol at link time.

// one block per row; logits fp32
template <typename F>
__global__ void cross_entropy_stats_kernel(const F* logits, const int* targets, long long v_begin, long long v_local,
                                           F* stats) {
  const long long r = blockIdx.x;
  const F* l = logits + r * v_local;
  float mx = -INFINITY;
  for (long long v = threadIdx.x; v < v_local; v += blockDim.x) mx = fmaxf(mx, l[v]);
  mx = block_max(mx);
  float sum = 0.0f;
  for (long long v = threadIdx.x; v < v_local; v += blockDim.x) sum += expf(l[v] - mx);
  sum = block_sum(sum);
  if (threadIdx.x == 0) {
    const long long t = targets[r] - v_begin;
    stats[r * 3 + 0] = mx;
    stats[r * 3 + 1] = sum;
    stats[r * 3 + 2] = (t >= 0 && t < v_local) ? l[t] : 0.0f;
  }
}
inline void cross_entropy_stats(const float* logits, const int* targets, long long v_begin, long long v_local, float* stats, long long n,
                                cudaStream_t s) {
  cross_entropy_stats_kernel<float><<<static_cast<unsigned>(n), 256, 0, s>>>(logits, targets, v_begin, v_local, stats);
  CUDA_CHECK_LAUNCH();
}

// max_out (N) = stats[:, 0]
template <typename F>
__global__ void stats_max_kernel(const F* stats, F* max_out, long long n) {
  const long long r = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (r < n) max_out[r] = stats[r * 3];
}
// after AllReduce(max): sum-exp rescaled to the global max; the max column kept by TP rank 0 only,
// so that the following AllReduce(sum) leaves (global max, global sum-exp, target logit)
template <typename F>
__global__ void stats_rescale_kernel(F* stats, const F* global_max, long long n, bool keep_max) {
  const long long r = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (r >= n) return;
  const float m = global_max[r];
  stats[r * 3 + 1] *= expf(stats[r * 3] - m);
  stats[r * 3] = keep_max ? m : 0.0f;
}
inline void stats_max(const float* stats, float* max_out, long long n, cudaStream_t s) {
  stats_max_kernel<float><<<static_cast<unsigned>(ceil_div(n, 256)), 256, 0, s>>>(stats, max_out, n);
  CUDA_CHECK_LAUNCH();
}
inline void stats_rescale(float* stats, const float* global_max, long long n, bool keep_max, cudaStream_t s) {
  stats_rescale_kernel<float><<<static_cast<unsigned>(ceil_div(n, 256)), 256, 0, s>>>(stats, global_max, n, keep_max);
  CUDA_CHECK_LAUNCH();
}

// With global stats: loss (N) = log-sum-exp - target logit; dlogits (N, V) (set) = (softmax - one-hot) * scale
template <typename F>
__global__ void cross_entropy_loss_kernel(const F* logits, const F* stats, const int* targets, long long v_begin,
                                          long long v_local, float scale, F* dlogits, F* loss) {
  const long long r = blockIdx.x;
  const float lse = stats[r * 3] + logf(stats[r * 3 + 1]);
  const F* l = logits + r * v_local;
  F* dl = dlogits + r * v_local;
  const long long t = targets[r] - v_begin;
  for (long long v = threadIdx.x; v < v_local; v += blockDim.x)
    dl[v] = (expf(l[v] - lse) - (v == t ? 1.0f : 0.0f)) * scale;
  if (threadIdx.x == 0) loss[r] = lse - stats[r * 3 + 2];
}
inline void cross_entropy_loss(const float* logits, const float* stats, const int* targets, long long v_begin, long long v_local,
                               float scale, float* dlogits, float* loss, long long n, cudaStream_t s) {
  cross_entropy_loss_kernel<float><<<static_cast<unsigned>(n), 256, 0, s>>>(logits, stats, targets, v_begin, v_local, scale, dlogits, loss);
  CUDA_CHECK_LAUNCH();
}

}  // namespace executor::cuda
