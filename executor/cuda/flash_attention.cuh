// defines: flash_attention_forward_kernel, flash_attention_backward_kernel, flash_attention_forward,
//          flash_attention_backward
// FlashAttention-2's algorithm (Dao 2023, Algorithms 1 and 2) in plain CUDA, the twin of the CPU
// kernel (executor/cpu/flash_attention.hpp): one thread per query row of one (sequence, head),
// key / value tiles of kFlashKeyTile rows staged in shared memory, an online softmax (running max
// and sum), no score matrix in HBM; the forward writes ctx and the fp32 log-sum-exp of each query
// row, the backward recomputes each probability as exp(s - lse) and accumulates dK, dV with fp32
// atomics into the scratch (executor/cuda/attention_layout.hpp flash_attention_layout), summed over
// each GQA group and rotated back by attention_grad_unpermute_kernel. Causal; RoPE as the unfused
// kernel; queries and keys are the slice's own positions (row_axis batch).
#pragma once
#include "executor/cuda/attention.cuh"

namespace executor::cuda {

inline constexpr int kFlashKeyTile = 32;
inline constexpr int kFlashThreads = 64;  ///< query rows per block

/// Element e (of an interleaved pair, RoPE applied when asked) of head `hd` of the Q (k_or_v = 0),
/// K (1) or V (2) part of token row `token` at position `pos`.
template <typename T>
__device__ inline float qkv_elem(const T* qkv, const AttentionDims& a, long long token, long long pos, int part, long long hd, long long e) {
  const long long D = a.head_dim, W = a.width();
  const long long col = part == 0 ? hd * D : part == 1 ? (a.heads + hd) * D : (a.heads + a.kv_heads + hd) * D;
  const T* row = qkv + token * W + col;
  if (part == 2 || !a.rope) return to_float(row[e]);
  const long long i = e / 2;
  const float x0 = to_float(row[2 * i]), x1 = to_float(row[2 * i + 1]);
  float c, s;
  rope_angle(pos, i, D, c, s);
  return e % 2 == 0 ? x0 * c - x1 * s : x0 * s + x1 * c;
}

// grid (batch x heads, ceil(S / kFlashThreads)); dynamic shared memory: K and V tiles, fp32
template <typename T>
__global__ void flash_attention_forward_kernel(const T* qkv, T* ctx, float* lse, AttentionDims a) {
  extern __shared__ float tile[];  // [kFlashKeyTile][D] keys, then values
  const long long D = a.head_dim, S = a.seq, group = a.heads / a.kv_heads;
  const long long bh = blockIdx.x, b = bh / a.heads, h = bh % a.heads, kh = h / group;
  const long long i = static_cast<long long>(blockIdx.y) * blockDim.x + threadIdx.x;  // query row
  float* ks = tile;
  float* vs = tile + kFlashKeyTile * D;
  const float scale = rsqrtf(static_cast<float>(D));
  float q[kFlashMaxHeadDim], o[kFlashMaxHeadDim];
  float m = -INFINITY, l = 0.0f;
  if (i < S)
    for (long long e = 0; e < D; ++e) {
      q[e] = qkv_elem(qkv, a, b * S + i, i, 0, h, e);
      o[e] = 0.0f;
    }
  const long long last_row = min(S - 1, static_cast<long long>(blockIdx.y + 1) * blockDim.x - 1);
  for (long long j0 = 0; j0 <= last_row; j0 += kFlashKeyTile) {
    const long long cols = min(static_cast<long long>(kFlashKeyTile), S - j0);
    __syncthreads();  // the previous tile is no longer read
    for (long long x = threadIdx.x; x < cols * D; x += blockDim.x) {
      const long long c = x / D, e = x % D;
      ks[c * D + e] = qkv_elem(qkv, a, b * S + j0 + c, j0 + c, 1, kh, e);
      vs[c * D + e] = qkv_elem(qkv, a, b * S + j0 + c, j0 + c, 2, kh, e);
    }
    __syncthreads();
    if (i >= S) continue;
    for (long long c = 0; c < cols && j0 + c <= i; ++c) {  // causal: keys <= i
      float sc = 0.0f;
      for (long long e = 0; e < D; ++e) sc += q[e] * ks[c * D + e];
      sc *= scale;
      const float m_new = fmaxf(m, sc);
      const float alpha = expf(m - m_new), p = expf(sc - m_new);  // online softmax: rescale what was summed
      for (long long e = 0; e < D; ++e) o[e] = o[e] * alpha + p * vs[c * D + e];
      l = l * alpha + p;
      m = m_new;
    }
  }
  if (i >= S) return;
  T* out = ctx + (b * S + i) * (a.heads * D) + h * D;
  for (long long e = 0; e < D; ++e) out[e] = from_float<T>(o[e] / l);
  lse[bh * S + i] = m + logf(l);
}

// grid as the forward; dq, dk, dv fp32 (BH, S, D), dk and dv zeroed before (atomics)
template <typename T>
__global__ void flash_attention_backward_kernel(const T* qkv, const T* ctx, const float* lse, const T* dctx, float* dq, float* dk,
                                                float* dv, AttentionDims a) {
  extern __shared__ float tile[];
  const long long D = a.head_dim, S = a.seq, group = a.heads / a.kv_heads;
  const long long bh = blockIdx.x, b = bh / a.heads, h = bh % a.heads, kh = h / group;
  const long long i = static_cast<long long>(blockIdx.y) * blockDim.x + threadIdx.x;
  float* ks = tile;
  float* vs = tile + kFlashKeyTile * D;
  const float scale = rsqrtf(static_cast<float>(D));
  float q[kFlashMaxHeadDim], dout[kFlashMaxHeadDim], dqi[kFlashMaxHeadDim];
  float Di = 0.0f, row_lse = 0.0f;  // D_i = rowsum(dO_i . O_i)
  if (i < S) {
    const T* o = ctx + (b * S + i) * (a.heads * D) + h * D;
    const T* g = dctx + (b * S + i) * (a.heads * D) + h * D;
    for (long long e = 0; e < D; ++e) {
      q[e] = qkv_elem(qkv, a, b * S + i, i, 0, h, e);
      dout[e] = to_float(g[e]);
      dqi[e] = 0.0f;
      Di += dout[e] * to_float(o[e]);
    }
    row_lse = lse[bh * S + i];
  }
  const long long last_row = min(S - 1, static_cast<long long>(blockIdx.y + 1) * blockDim.x - 1);
  for (long long j0 = 0; j0 <= last_row; j0 += kFlashKeyTile) {
    const long long cols = min(static_cast<long long>(kFlashKeyTile), S - j0);
    __syncthreads();
    for (long long x = threadIdx.x; x < cols * D; x += blockDim.x) {
      const long long c = x / D, e = x % D;
      ks[c * D + e] = qkv_elem(qkv, a, b * S + j0 + c, j0 + c, 1, kh, e);
      vs[c * D + e] = qkv_elem(qkv, a, b * S + j0 + c, j0 + c, 2, kh, e);
    }
    __syncthreads();
    if (i >= S) continue;
    for (long long c = 0; c < cols && j0 + c <= i; ++c) {
      float sc = 0.0f, dp = 0.0f;
      for (long long e = 0; e < D; ++e) {
        sc += q[e] * ks[c * D + e];
        dp += dout[e] * vs[c * D + e];
      }
      const float p = expf(sc * scale - row_lse);  // the probability, recomputed
      const float ds = p * (dp - Di) * scale;
      float* dkj = dk + (bh * S + j0 + c) * D;
      float* dvj = dv + (bh * S + j0 + c) * D;
      for (long long e = 0; e < D; ++e) {
        dqi[e] += ds * ks[c * D + e];
        atomicAdd(dkj + e, ds * q[e]);
        atomicAdd(dvj + e, p * dout[e]);
      }
    }
  }
  if (i >= S) return;
  for (long long e = 0; e < D; ++e) dq[(bh * S + i) * D + e] = dqi[e];
}

template <typename T>
void flash_attention_forward(const T* qkv, T* ctx, float* lse, const AttentionDims& a, cudaStream_t st) {
  const dim3 grid(static_cast<unsigned>(a.batch * a.heads), static_cast<unsigned>(ceil_div(a.seq, kFlashThreads)));
  const std::size_t shared = 2 * kFlashKeyTile * static_cast<std::size_t>(a.head_dim) * sizeof(float);
  flash_attention_forward_kernel<T><<<grid, kFlashThreads, shared, st>>>(qkv, ctx, lse, a);
  CUDA_CHECK_LAUNCH();
}

// dqkv (set) from dctx, ctx and the log-sum-exp; scratch: flash_attention_layout
template <typename T>
void flash_attention_backward(const T* qkv, const T* ctx, const float* lse, const T* dctx, T* dqkv, char* scratch, const AttentionLayout& l,
                              const AttentionDims& a, cudaStream_t st) {
  float* dq = reinterpret_cast<float*>(scratch + l.dq);
  float* dk = reinterpret_cast<float*>(scratch + l.dk);
  float* dv = reinterpret_cast<float*>(scratch + l.dv);
  const std::size_t kv_bytes = static_cast<std::size_t>(a.batch * a.heads * a.seq * a.head_dim) * sizeof(float);
  CUDA_CHECK(cudaMemsetAsync(dk, 0, kv_bytes, st));
  CUDA_CHECK(cudaMemsetAsync(dv, 0, kv_bytes, st));
  const dim3 grid(static_cast<unsigned>(a.batch * a.heads), static_cast<unsigned>(ceil_div(a.seq, kFlashThreads)));
  const std::size_t shared = 2 * kFlashKeyTile * static_cast<std::size_t>(a.head_dim) * sizeof(float);
  flash_attention_backward_kernel<T><<<grid, kFlashThreads, shared, st>>>(qkv, ctx, lse, dctx, dq, dk, dv, a);
  CUDA_CHECK_LAUNCH();
  attention_grad_unpermute_kernel<T><<<grid_for(a.batch * a.seq * a.width() / 2, 256), 256, 0, st>>>(dq, dk, dv, dqkv, a);
  CUDA_CHECK_LAUNCH();
}

}  // namespace executor::cuda
