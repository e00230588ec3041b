// defines: attention_permute_kernel, causal_softmax_forward_kernel, attention_unpermute_kernel,
//          attention_dout_permute_kernel, causal_softmax_backward_kernel, attention_grad_unpermute_kernel,
//          attention_forward, attention_backward
// Causal attention of one row slice (row_axis batch: queries and keys are the slice's own positions)
// with grouped-query heads and optional RoPE (interleaved pairs, theta 10000), as the CPU reference.
// QKV rows are tokens (batch-major, then position), columns [Q: H x D | K: KVH x D | V: KVH x D].
// QK^T and PV are cuBLAS strided-batched GEMMs over (batch x query heads); K and V are expanded to
// one copy per query head; the scratch layout is executor/cuda/attention_layout.hpp.
#pragma once
#include "executor/cuda/attention_layout.hpp"
#include "executor/cuda/cuda_common.cuh"
#include "executor/cuda/matmul.cuh"

namespace executor::cuda {

struct AttentionDims {
  long long batch = 0, heads = 0, kv_heads = 0, seq = 0, head_dim = 0;
  bool rope = false;
  __host__ __device__ long long width() const { return (heads + 2 * kv_heads) * head_dim; }
};

/// Rotation of pair i at position pos (angle in double as the CPU reference, then fp32).
__device__ inline void rope_angle(long long pos, long long i, long long d, float& c, float& s) {
  const double freq = pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(d));
  double sd, cd;
  sincos(static_cast<double>(pos) * freq, &sd, &cd);
  c = static_cast<float>(cd);
  s = static_cast<float>(sd);
}

// q (BH, S, D), k, v (BH, S, D) expanded per query head; RoPE on q and k
template <typename T>
__global__ void attention_permute_kernel(const T* qkv, T* q, T* k, T* v, AttentionDims a) {
  const long long half = a.head_dim / 2, total = a.batch * a.heads * a.seq * half;
  const long long group = a.heads / a.kv_heads, W = a.width(), D = a.head_dim;
  GRID_STRIDE(idx, total) {
    const long long i = idx % half, s = (idx / half) % a.seq, h = (idx / (half * a.seq)) % a.heads, b = idx / (half * a.seq * a.heads);
    const long long kh = h / group;
    const T* row = qkv + (b * a.seq + s) * W;
    const long long dst = ((b * a.heads + h) * a.seq + s) * D + 2 * i;
    float q0 = to_float(row[h * D + 2 * i]), q1 = to_float(row[h * D + 2 * i + 1]);
    float k0 = to_float(row[a.heads * D + kh * D + 2 * i]), k1 = to_float(row[a.heads * D + kh * D + 2 * i + 1]);
    if (a.rope) {
      float c, sn;
      rope_angle(s, i, D, c, sn);
      const float rq0 = q0 * c - q1 * sn, rq1 = q0 * sn + q1 * c;
      const float rk0 = k0 * c - k1 * sn, rk1 = k0 * sn + k1 * c;
      q0 = rq0; q1 = rq1; k0 = rk0; k1 = rk1;
    }
    q[dst] = from_float<T>(q0);
    q[dst + 1] = from_float<T>(q1);
    k[dst] = from_float<T>(k0);
    k[dst + 1] = from_float<T>(k1);
    const long long vc = (a.heads + a.kv_heads) * D + kh * D + 2 * i;
    v[dst] = row[vc];
    v[dst + 1] = row[vc + 1];
  }
}

// p (rows = BH x S, S) = causal softmax of the scaled scores s (fp32); masked entries 0. Warp per row.
template <typename T>
__global__ void causal_softmax_forward_kernel(const float* s, T* p, long long rows, long long seq) {
  const long long r = blockIdx.x * static_cast<long long>(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  const long long qi = r % seq, n_keys = qi + 1;
  const float* sr = s + r * seq;
  T* pr = p + r * seq;
  float mx = -INFINITY;
  for (long long j = lane; j < n_keys; j += 32) mx = fmaxf(mx, sr[j]);
  mx = warp_max(mx);
  float sum = 0.0f;
  for (long long j = lane; j < n_keys; j += 32) sum += expf(sr[j] - mx);
  sum = warp_sum(sum);
  const float inv = 1.0f / sum;
  for (long long j = lane; j < seq; j += 32) pr[j] = from_float<T>(j < n_keys ? expf(sr[j] - mx) * inv : 0.0f);
}

// ctx (B x S, H x D) from o (BH, S, D)
template <typename T>
__global__ void attention_unpermute_kernel(const T* o, T* ctx, AttentionDims a) {
  const long long D = a.head_dim, total = a.batch * a.seq * a.heads * D;
  GRID_STRIDE(idx, total) {
    const long long d = idx % D, h = (idx / D) % a.heads, s = (idx / (D * a.heads)) % a.seq, b = idx / (D * a.heads * a.seq);
    ctx[idx] = o[((b * a.heads + h) * a.seq + s) * D + d];
  }
}
// dout (BH, S, D) from dctx (B x S, H x D)
template <typename T>
__global__ void attention_dout_permute_kernel(const T* dctx, T* dout, AttentionDims a) {
  const long long D = a.head_dim, total = a.batch * a.seq * a.heads * D;
  GRID_STRIDE(idx, total) {
    const long long d = idx % D, h = (idx / D) % a.heads, s = (idx / (D * a.heads)) % a.seq, b = idx / (D * a.heads * a.seq);
    dout[((b * a.heads + h) * a.seq + s) * D + d] = dctx[idx];
  }
}

// dS = P * (dP - rowsum(P * dP)) * scale, masked entries 0. Warp per row; dp fp32.
template <typename T>
__global__ void causal_softmax_backward_kernel(const T* p, const float* dp, T* ds, long long rows, long long seq, float scale) {
  const long long r = blockIdx.x * static_cast<long long>(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  const long long n_keys = r % seq + 1;
  const T* pr = p + r * seq;
  const float* dpr = dp + r * seq;
  float dot = 0.0f;
  for (long long j = lane; j < n_keys; j += 32) dot += to_float(pr[j]) * dpr[j];
  dot = warp_sum(dot);
  T* dsr = ds + r * seq;
  for (long long j = lane; j < seq; j += 32) dsr[j] = from_float<T>(j < n_keys ? to_float(pr[j]) * (dpr[j] - dot) * scale : 0.0f);
}

// dqkv (B x S, width) (set): dQ rotated back; dK summed over each K/V head's query heads and rotated
// back; dV summed likewise. dq, dk, dv fp32 (BH, S, D).
template <typename T>
__global__ void attention_grad_unpermute_kernel(const float* dq, const float* dk, const float* dv, T* dqkv, AttentionDims a) {
  const long long D = a.head_dim, half = D / 2, W = a.width(), group = a.heads / a.kv_heads;
  const long long pairs = W / 2, total = a.batch * a.seq * pairs;
  GRID_STRIDE(idx, total) {
    const long long col = (idx % pairs) * 2, token = idx / pairs, s = token % a.seq, b = token / a.seq;
    const long long i = (col % D) / 2;
    float g0 = 0.0f, g1 = 0.0f;
    bool rotate = false;
    if (col < a.heads * D) {
      const long long h = col / D;
      const long long src = ((b * a.heads + h) * a.seq + s) * D + 2 * i;
      g0 = dq[src];
      g1 = dq[src + 1];
      rotate = a.rope;
    } else {
      const bool is_k = col < (a.heads + a.kv_heads) * D;
      const long long kh = (col - (is_k ? a.heads : a.heads + a.kv_heads) * D) / D;
      const float* src = is_k ? dk : dv;
      for (long long g = 0; g < group; ++g) {
        const long long o = ((b * a.heads + kh * group + g) * a.seq + s) * D + 2 * i;
        g0 += src[o];
        g1 += src[o + 1];
      }
      rotate = is_k && a.rope;
    }
    if (rotate) {  // inverse rotation: angle -theta
      float c, sn;
      rope_angle(s, i, D, c, sn);
      const float r0 = g0 * c + g1 * sn, r1 = -g0 * sn + g1 * c;
      g0 = r0;
      g1 = r1;
    }
    dqkv[token * W + col] = from_float<T>(g0);
    dqkv[token * W + col + 1] = from_float<T>(g1);
    (void)half;
  }
}

template <typename T>
constexpr cudaDataType_t cuda_type_of() {
  if constexpr (std::is_same_v<T, float>) return CUDA_R_32F;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return CUDA_R_16BF;
  else return CUDA_R_16F;
}

template <typename T>
struct AttentionScratch {
  T *q, *k, *v, *p, *o, *ds;
  float *s, *dq, *dk, *dv;
  AttentionScratch(char* base, const AttentionLayout& l)
      : q(reinterpret_cast<T*>(base + l.q)), k(reinterpret_cast<T*>(base + l.k)), v(reinterpret_cast<T*>(base + l.v)),
        p(reinterpret_cast<T*>(base + l.p)), o(reinterpret_cast<T*>(base + l.o)), ds(reinterpret_cast<T*>(base + l.ds)),
        s(reinterpret_cast<float*>(base + l.s)), dq(reinterpret_cast<float*>(base + l.dq)), dk(reinterpret_cast<float*>(base + l.dk)),
        dv(reinterpret_cast<float*>(base + l.dv)) {}
};

/// q, k, v permuted (RoPE applied), scores and probabilities: shared by forward and backward.
template <typename T>
void attention_probabilities(cublasHandle_t blas, const T* qkv, const AttentionScratch<T>& w, const AttentionDims& a, cudaStream_t st) {
  const long long bh = a.batch * a.heads, S = a.seq, D = a.head_dim;
  attention_permute_kernel<T><<<grid_for(bh * S * (D / 2), 256), 256, 0, st>>>(qkv, w.q, w.k, w.v, a);
  CUDA_CHECK_LAUNCH();
  // s (S, S) = q (S, D) . k^T / sqrt(D), per (batch, head)
  gemm_strided_batched(blas, {.trans_a = false, .trans_b = true, .m = S, .n = S, .k = D, .a = w.q, .lda = D, .stride_a = S * D,
                              .b = w.k, .ldb = D, .stride_b = S * D, .c = w.s, .ldc = S, .stride_c = S * S, .batch = bh,
                              .alpha = 1.0f / sqrtf(static_cast<float>(D)), .beta = 0.0f, .ab_type = cuda_type_of<T>(), .c_type = CUDA_R_32F},
                       st);
  causal_softmax_forward_kernel<T><<<static_cast<unsigned>(ceil_div(bh * S, 8)), 256, 0, st>>>(w.s, w.p, bh * S, S);
  CUDA_CHECK_LAUNCH();
}

// ctx (B x S, H x D) = softmax(Q K^T / sqrt(D), causal) V; the probabilities go to `probs`
// ((B x H x S, S), what the unfused kernel keeps for its backward), or stay in the scratch if null
template <typename T>
void attention_forward(cublasHandle_t blas, const T* qkv, T* ctx, char* scratch, const AttentionLayout& l, const AttentionDims& a,
                       cudaStream_t st, T* probs = nullptr) {
  AttentionScratch<T> w(scratch, l);
  if (probs) w.p = probs;
  const long long bh = a.batch * a.heads, S = a.seq, D = a.head_dim;
  attention_probabilities(blas, qkv, w, a, st);
  gemm_strided_batched(blas, {.m = S, .n = D, .k = S, .a = w.p, .lda = S, .stride_a = S * S, .b = w.v, .ldb = D, .stride_b = S * D,
                              .c = w.o, .ldc = D, .stride_c = S * D, .batch = bh, .ab_type = cuda_type_of<T>(), .c_type = cuda_type_of<T>()},
                       st);
  attention_unpermute_kernel<T><<<grid_for(bh * S * D, 256), 256, 0, st>>>(w.o, ctx, a);
  CUDA_CHECK_LAUNCH();
}

// dqkv (set) from dctx, with the probabilities the forward kept (`probs`), or recomputed from qkv if null
template <typename T>
void attention_backward(cublasHandle_t blas, const T* qkv, const T* dctx, T* dqkv, char* scratch, const AttentionLayout& l,
                        const AttentionDims& a, cudaStream_t st, const T* probs = nullptr) {
  AttentionScratch<T> w(scratch, l);
  const long long bh = a.batch * a.heads, S = a.seq, D = a.head_dim;
  const cudaDataType_t X = cuda_type_of<T>();
  if (probs) {  // q, k, v permuted again (cheap); P as the forward left it
    w.p = const_cast<T*>(probs);
    attention_permute_kernel<T><<<grid_for(bh * S * (D / 2), 256), 256, 0, st>>>(qkv, w.q, w.k, w.v, a);
    CUDA_CHECK_LAUNCH();
  } else {
    attention_probabilities(blas, qkv, w, a, st);
  }
  attention_dout_permute_kernel<T><<<grid_for(bh * S * D, 256), 256, 0, st>>>(dctx, w.o, a);
  CUDA_CHECK_LAUNCH();
  // dP (S, S) = dO (S, D) . V^T, into the scores buffer
  gemm_strided_batched(blas, {.trans_b = true, .m = S, .n = S, .k = D, .a = w.o, .lda = D, .stride_a = S * D, .b = w.v, .ldb = D,
                              .stride_b = S * D, .c = w.s, .ldc = S, .stride_c = S * S, .batch = bh, .ab_type = X, .c_type = CUDA_R_32F},
                       st);
  // dV (S, D) = P^T (S, S) . dO (S, D)
  gemm_strided_batched(blas, {.trans_a = true, .m = S, .n = D, .k = S, .a = w.p, .lda = S, .stride_a = S * S, .b = w.o, .ldb = D,
                              .stride_b = S * D, .c = w.dv, .ldc = D, .stride_c = S * D, .batch = bh, .ab_type = X, .c_type = CUDA_R_32F},
                       st);
  causal_softmax_backward_kernel<T><<<static_cast<unsigned>(ceil_div(bh * S, 8)), 256, 0, st>>>(w.p, w.s, w.ds, bh * S, S,
                                                                                                 1.0f / sqrtf(static_cast<float>(D)));
  CUDA_CHECK_LAUNCH();
  // dQ (S, D) = dS (S, S) . K (S, D);  dK (S, D) = dS^T . Q
  gemm_strided_batched(blas, {.m = S, .n = D, .k = S, .a = w.ds, .lda = S, .stride_a = S * S, .b = w.k, .ldb = D, .stride_b = S * D,
                              .c = w.dq, .ldc = D, .stride_c = S * D, .batch = bh, .ab_type = X, .c_type = CUDA_R_32F},
                       st);
  gemm_strided_batched(blas, {.trans_a = true, .m = S, .n = D, .k = S, .a = w.ds, .lda = S, .stride_a = S * S, .b = w.q, .ldb = D,
                              .stride_b = S * D, .c = w.dk, .ldc = D, .stride_c = S * D, .batch = bh, .ab_type = X, .c_type = CUDA_R_32F},
                       st);
  attention_grad_unpermute_kernel<T><<<grid_for(a.batch * S * a.width() / 2, 256), 256, 0, st>>>(w.dq, w.dk, w.dv, dqkv, a);
  CUDA_CHECK_LAUNCH();
}

}  // namespace executor::cuda
