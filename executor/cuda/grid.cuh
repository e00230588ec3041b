// defines: grid_norm_stats, grid_stats_scatter, grid_norm_forward, grid_norm_backward_sums,
//          grid_norm_backward, accumulate_fp32 (2D / 2.5D grids, executor/grid_pieces.hpp)
// A norm whose hidden size H is split over a grid row: this rank holds h of the H columns and the
// row statistics (N, 2) fp32 are all-reduced over the row between these kernels, as the CPU
// reference (executor/cpu/kernels.hpp, grid_norm_*). One warp per row; sums in fp32.
#pragma once
#include "executor/cuda/cuda_common.cuh"
#include "executor/cuda/norm.cuh"

namespace executor::cuda {

// out[r] = the local part of statistic `part` of row r: 0 the sum of x; 1 the sum of (x - mean)^2,
// mean = stats[r, 0] / H already all-reduced (RMSNorm: the sum of x^2)
template <typename T>
__global__ void grid_norm_stats_kernel(bool rms, int part, const T* x, const float* stats, float* out, long long n, int h, int H) {
  const long long row = blockIdx.x * static_cast<long long>(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n) return;
  const T* xr = x + row * h;
  const float mean = part == 0 || rms ? 0.0f : stats[2 * row] / H;
  float s = 0.0f;
  for (int i = lane; i < h; i += 32) {
    const float v = to_float(xr[i]) - mean;
    s += part == 0 ? v : v * v;
  }
  s = warp_sum(s);
  if (lane == 0) out[row] = s;
}

template <typename T>
void grid_norm_stats(bool rms, int part, const T* x, const float* stats, float* out, long long n, int h, int H, cudaStream_t s) {
  const int block = 256;
  grid_norm_stats_kernel<T><<<static_cast<unsigned>(ceil_div(n, block / 32)), block, 0, s>>>(rms, part, x, stats, out, n, h, H);
  CUDA_CHECK_LAUNCH();
}

// stats[r, part] = v[r]
__global__ inline void grid_stats_scatter_kernel(const float* v, float* stats, int part, long long n) {
  GRID_STRIDE(r, n) stats[2 * r + part] = v[r];
}
inline void grid_stats_scatter(const float* v, float* stats, int part, long long n, cudaStream_t s) {
  grid_stats_scatter_kernel<<<grid_for(n, 256), 256, 0, s>>>(v, stats, part, n);
  CUDA_CHECK_LAUNCH();
}

__device__ inline void grid_moments(bool rms, const float* stats, long long row, int H, float& mean, float& rstd) {
  mean = rms ? 0.0f : stats[2 * row] / H;
  rstd = rsqrtf(stats[2 * row + 1] / H + kNormEps);
}

// out (N, h) = norm(x) * w[0] (+ w[1]) with the row's statistics
template <typename T>
__global__ void grid_norm_forward_kernel(bool rms, const T* x, const T* w, const float* stats, T* out, long long n, int h, int H) {
  const long long row = blockIdx.x * static_cast<long long>(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n) return;
  float mean, rstd;
  grid_moments(rms, stats, row, H, mean, rstd);
  const T* xr = x + row * h;
  T* o = out + row * h;
  for (int i = lane; i < h; i += 32) {
    const float xhat = (to_float(xr[i]) - mean) * rstd;
    o[i] = from_float<T>(xhat * to_float(w[i]) + (rms ? 0.0f : to_float(w[h + i])));
  }
}

template <typename T>
void grid_norm_forward(bool rms, const T* x, const T* w, const float* stats, T* out, long long n, int h, int H, cudaStream_t s) {
  const int block = 256;
  grid_norm_forward_kernel<T><<<static_cast<unsigned>(ceil_div(n, block / 32)), block, 0, s>>>(rms, x, w, stats, out, n, h, H);
  CUDA_CHECK_LAUNCH();
}

// sums (N, 2) = (sum dxhat, sum dxhat . xhat) over the local columns, dxhat = dout . w
template <typename T>
__global__ void grid_norm_backward_sums_kernel(bool rms, const T* dout, const T* x, const T* w, const float* stats, float* sums,
                                               long long n, int h, int H) {
  const long long row = blockIdx.x * static_cast<long long>(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n) return;
  float mean, rstd;
  grid_moments(rms, stats, row, H, mean, rstd);
  float s1 = 0.0f, s2 = 0.0f;
  for (int i = lane; i < h; i += 32) {
    const float xhat = (to_float(x[row * h + i]) - mean) * rstd;
    const float dxhat = to_float(dout[row * h + i]) * to_float(w[i]);
    s1 += dxhat;
    s2 += dxhat * xhat;
  }
  s1 = warp_sum(s1);
  s2 = warp_sum(s2);
  if (lane == 0) {
    sums[2 * row] = s1;
    sums[2 * row + 1] = s2;
  }
}

template <typename T>
void grid_norm_backward_sums(bool rms, const T* dout, const T* x, const T* w, const float* stats, float* sums, long long n, int h, int H,
                             cudaStream_t s) {
  const int block = 256;
  grid_norm_backward_sums_kernel<T><<<static_cast<unsigned>(ceil_div(n, block / 32)), block, 0, s>>>(rms, dout, x, w, stats, sums, n, h,
                                                                                                   H);
  CUDA_CHECK_LAUNCH();
}

// norm_backward's contract with the all-reduced sums: dx (set), dw (fp32, +=) through a per-block shared sum
template <typename T>
__global__ void grid_norm_backward_kernel(bool rms, const T* dout, const T* x, const T* w, const T* residual, const float* stats,
                                          const float* sums, T* dx, float* dw, long long n, int h, int H) {
  extern __shared__ float grid_dw_shared[];  // (rms ? 1 : 2) x h
  const int np = rms ? 1 : 2;
  for (int i = threadIdx.x; i < np * h; i += blockDim.x) grid_dw_shared[i] = 0.0f;
  __syncthreads();
  const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (long long row = blockIdx.x * static_cast<long long>(warps) + threadIdx.x / 32; row < n;
       row += static_cast<long long>(gridDim.x) * warps) {
    float mean, rstd;
    grid_moments(rms, stats, row, H, mean, rstd);
    const float m1 = rms ? 0.0f : sums[2 * row] / H, m2 = sums[2 * row + 1] / H;
    for (int i = lane; i < h; i += 32) {
      const float xhat = (to_float(x[row * h + i]) - mean) * rstd;
      const float g = to_float(dout[row * h + i]);
      const float dxhat = g * to_float(w[i]);
      atomicAdd(&grid_dw_shared[i], g * xhat);
      if (!rms) atomicAdd(&grid_dw_shared[h + i], g);
      dx[row * h + i] = from_float<T>(rstd * (dxhat - m1 - xhat * m2) + (residual ? to_float(residual[row * h + i]) : 0.0f));
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < np * h; i += blockDim.x) atomicAdd(&dw[i], grid_dw_shared[i]);
}

template <typename T>
void grid_norm_backward(bool rms, const T* dout, const T* x, const T* w, const T* residual, const float* stats, const float* sums, T* dx,
                        float* dw, long long n, int h, int H, int sms, cudaStream_t s) {
  const int block = 512, rows_per_block = block / 32;
  const long long grid = std::min<long long>(ceil_div(n, rows_per_block), 2LL * sms);
  const std::size_t shared = static_cast<std::size_t>(rms ? 1 : 2) * h * sizeof(float);
  if (shared > 48 * 1024)
    CUDA_CHECK(cudaFuncSetAttribute(grid_norm_backward_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
  grid_norm_backward_kernel<T><<<static_cast<unsigned>(grid), block, shared, s>>>(rms, dout, x, w, residual, stats, sums, dx, dw, n, h, H);
  CUDA_CHECK_LAUNCH();
}

// dst (fp32) += src: a reduced weight-gradient partial into the weight gradient
template <typename T>
__global__ void accumulate_fp32_kernel(float* dst, const T* src, long long n) {
  GRID_STRIDE(i, n) dst[i] += to_float(src[i]);
}
template <typename T>
void accumulate_fp32(float* dst, const T* src, long long n, cudaStream_t s) {
  accumulate_fp32_kernel<T><<<grid_for(n, 256), 256, 0, s>>>(dst, src, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace executor::cuda
