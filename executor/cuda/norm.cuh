// defines: norm_forward_kernel, norm_forward, norm_backward_kernel, norm_backward
// LayerNorm (weight rows: scale, bias) or RMSNorm (weight row: scale), eps 1e-5, as the CPU
// reference (executor/cpu/kernels.hpp). One warp per row; statistics in fp32.
#pragma once
#include "executor/cuda/cuda_common.cuh"

namespace executor::cuda {

constexpr float kNormEps = 1e-5f;

// one row's statistics, computed by one warp (every lane gets them): mean (0 for RMSNorm) and
// 1 / sqrt(mean((x - mean)^2) + eps)
template <typename T>
__device__ inline void norm_row_stats(bool rms, const T* xr, int h, int lane, float& mean, float& rstd) {
  mean = 0.0f;
  if (!rms) {
    float s = 0.0f;
    for (int i = lane; i < h; i += 32) s += to_float(xr[i]);
    mean = warp_sum(s) / h;
  }
  float v = 0.0f;
  for (int i = lane; i < h; i += 32) {
    const float d = to_float(xr[i]) - mean;
    v += d * d;
  }
  rstd = rsqrtf(warp_sum(v) / h + kNormEps);
}

// out (N, H) = norm(x (N, H)) * w[0] (+ w[1])
template <typename T>
__global__ void norm_forward_kernel(bool rms, const T* x, const T* w, T* out, long long n, int h) {
  const long long row = blockIdx.x * static_cast<long long>(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n) return;
  const T* xr = x + row * h;
  float mean, rstd;
  norm_row_stats(rms, xr, h, lane, mean, rstd);
  T* o = out + row * h;
  for (int i = lane; i < h; i += 32) {
    const float xhat = (to_float(xr[i]) - mean) * rstd;
    o[i] = from_float<T>(xhat * to_float(w[i]) + (rms ? 0.0f : to_float(w[h + i])));
  }
}

template <typename T>
void norm_forward(bool rms, const T* x, const T* w, T* out, long long n, int h, cudaStream_t stream) {
  const int block = 256, rows_per_block = block / 32;
  norm_forward_kernel<T><<<static_cast<unsigned>(ceil_div(n, rows_per_block)), block, 0, stream>>>(rms, x, w, out, n, h);
  CUDA_CHECK_LAUNCH();
}

// backward to input, uses = (set): dx = residual + d norm / dx . dout (residual may be null);
// backward to weight, uses += (accumulate): dw (fp32, rows as w), through a per-block shared sum
template <typename T>
__global__ void norm_backward_kernel(bool rms, const T* dout, const T* x, const T* w, const T* residual, T* dx, float* dw,
                                     long long n, int h) {
  extern __shared__ float dw_shared[];  // (rms ? 1 : 2) x h
  const int np = rms ? 1 : 2;
  for (int i = threadIdx.x; i < np * h; i += blockDim.x) dw_shared[i] = 0.0f;
  __syncthreads();
  const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (long long row = blockIdx.x * static_cast<long long>(warps) + threadIdx.x / 32; row < n;
       row += static_cast<long long>(gridDim.x) * warps) {
    const T* xr = x + row * h;
    const T* dy = dout + row * h;
    float mean, rstd;
    norm_row_stats(rms, xr, h, lane, mean, rstd);
    // dxhat = dy * w; dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))  (LayerNorm)
    //                 rstd * (dxhat - xhat * mean(dxhat * xhat))                    (RMSNorm)
    float sum_dxhat = 0.0f, sum_dxhat_xhat = 0.0f;
    for (int i = lane; i < h; i += 32) {
      const float xhat = (to_float(xr[i]) - mean) * rstd;
      const float g = to_float(dy[i]);
      const float dxhat = g * to_float(w[i]);
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * xhat;
      atomicAdd(&dw_shared[i], g * xhat);
      if (!rms) atomicAdd(&dw_shared[h + i], g);
    }
    const float m1 = rms ? 0.0f : warp_sum(sum_dxhat) / h, m2 = warp_sum(sum_dxhat_xhat) / h;
    T* d = dx + row * h;
    for (int i = lane; i < h; i += 32) {
      const float xhat = (to_float(xr[i]) - mean) * rstd;
      const float dxhat = to_float(dy[i]) * to_float(w[i]);
      d[i] = from_float<T>(rstd * (dxhat - m1 - xhat * m2) + (residual ? to_float(residual[row * h + i]) : 0.0f));
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < np * h; i += blockDim.x) atomicAdd(&dw[i], dw_shared[i]);
}

template <typename T>
void norm_backward(bool rms, const T* dout, const T* x, const T* w, const T* residual, T* dx, float* dw, long long n, int h,
                   int sms, cudaStream_t stream) {
  const int block = 512, rows_per_block = block / 32;
  const long long grid = std::min<long long>(ceil_div(n, rows_per_block), 2LL * sms);
  const std::size_t shared = static_cast<std::size_t>(rms ? 1 : 2) * h * sizeof(float);
  if (shared > 48 * 1024)  // above the default limit (h > 6144 with LayerNorm): opt in
    CUDA_CHECK(cudaFuncSetAttribute(norm_backward_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
  norm_backward_kernel<T><<<static_cast<unsigned>(grid), block, shared, stream>>>(rms, dout, x, w, residual, dx, dw, n, h);
  CUDA_CHECK_LAUNCH();
}

}  // namespace executor::cuda
