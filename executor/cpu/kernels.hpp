// defines: executor::cpu kernels (fp32, row-major, single-threaded except the GEMM):
//          gemm, norm_forward, norm_backward, gelu_forward, gelu_backward, swiglu_forward,
//          swiglu_backward, attention_forward, attention_backward, embedding_forward,
//          embedding_backward, cross_entropy_stats, combine_stats, cross_entropy_backward, adamw
//
// Plain C++ reference kernels of the executor's kernel contract (docs/executor.md). No MPI, no
// graph types: the profiler reuses them to time CPU kernels. Shapes use fixed short names:
// N rows (tokens), H hidden, F ffn width (local), V vocab (local), D head dim.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace executor::cpu {

using i64 = std::int64_t;

/// C (m, n) = alpha * op(A) (m, k) . op(B) (k, n) + beta * C; row-major leading dimensions.
/// OpenBLAS cblas_sgemm. beta = 1 accumulates (weight gradients), beta = 0 sets.
void gemm(bool trans_a, bool trans_b, i64 m, i64 n, i64 k, float alpha, const float* a, i64 lda, const float* b, i64 ldb,
          float beta, float* c, i64 ldc);

/// LayerNorm (weight rows: scale, bias) or RMSNorm (weight row: scale), eps 1e-5.
/// out (N, H) = norm(x (N, H)) * w[0] (+ w[1]).
void norm_forward(bool rms, const float* x, const float* w, float* out, i64 n, i64 h);
/// Backward to input, uses = (set): dx = residual + d norm / dx . dout (residual may be null);
/// backward to weight, uses += (accumulate): dw (rows as w).
void norm_backward(bool rms, const float* dout, const float* x, const float* w, const float* residual, float* dx, float* dw,
                   i64 n, i64 h);

/// A norm whose hidden size H is split over a 2D / 2.5D grid row (executor/grid_pieces.hpp): this
/// rank holds h of the H columns; the row statistics stats (N, 2) are all-reduced over the row.
/// Local part of statistic `part` (stats column part, set): 0 the sum of x; 1 the sum of
/// (x - mean)^2 with mean = stats[., 0] / H (already all-reduced; RMSNorm: the sum of x^2).
void grid_norm_stats(bool rms, int part, const float* x, float* stats, i64 n, i64 h, i64 H);
/// out (N, h) = norm(x) * w[0] (+ w[1]) with mean stats[., 0] / H, variance stats[., 1] / H.
void grid_norm_forward(bool rms, const float* x, const float* w, const float* stats, float* out, i64 n, i64 h, i64 H);
/// The backward's local row sums (set): sums (N, 2) = (sum dxhat, sum dxhat . xhat), dxhat = dout . w.
void grid_norm_backward_sums(bool rms, const float* dout, const float* x, const float* w, const float* stats, float* sums, i64 n,
                             i64 h, i64 H);
/// norm_backward's contract on the local columns, with the all-reduced sums: dx (set), dw (+=).
void grid_norm_backward(bool rms, const float* dout, const float* x, const float* w, const float* residual, const float* stats,
                        const float* sums, float* dx, float* dw, i64 n, i64 h, i64 H);

/// GeLU (tanh approximation, as GPT-2): out = gelu(x), count elements.
void gelu_forward(const float* x, float* out, i64 count);
/// dx = gelu'(x) * dout (set).
void gelu_backward(const float* x, const float* dout, float* dx, i64 count);
/// SwiGLU: x (N, 2F) = [gate | up] -> out (N, F) = silu(gate) * up.
void swiglu_forward(const float* x, float* out, i64 n, i64 f);
/// dx (N, 2F) (set) from dout (N, F).
void swiglu_backward(const float* x, const float* dout, float* dx, i64 n, i64 f);

/// @brief The attention of one row slice. Q, K, V live in QKV tensors (rows: batch-major, then
/// position; columns [Q: heads x D | K: kv_heads x D | V: kv_heads x D]). The queries are in the
/// last tensor of `qkv`: positions [q_offset, q_offset + s_q). Keys at absolute position p are in
/// qkv[p / kv_block], row b * kv_block + p % kv_block. Causal over absolute positions.
struct AttentionShape {
  i64 batch = 0, heads = 0, kv_heads = 0, head_dim = 0;
  i64 s_q = 0, q_offset = 0;
  i64 kv_block = 0;  ///< positions per QKV tensor (the slice's sequence length)
  bool rope = false; ///< rotate Q and K by position (theta 10000, interleaved pairs) first
};
/// Unfused attention: ctx (batch * s_q, heads * D) = softmax(Q K^T / sqrt(D), causal) V, keeping
/// the probabilities: probs (batch * heads * s_q, q_offset + s_q), zero beyond each row's keys.
/// (Flash attention, which keeps only the log-sum-exp: executor/cpu/flash_attention.hpp.)
void attention_forward(const AttentionShape& a, std::span<const float* const> qkv, float* ctx, float* probs);
/// From ctx (the forward output), the kept probabilities and dctx: writes (=) dQ into the last dqkv
/// tensor, accumulates (+=) dK and dV into every dqkv tensor (same layout as qkv).
void attention_backward(const AttentionShape& a, std::span<const float* const> qkv, const float* ctx, const float* probs,
                        const float* dctx, std::span<float* const> dqkv);

/// Q of the query slice and K, V of positions [0, q_offset + s_q) of sequence b in dense
/// [position][head][D] buffers, RoPE applied to Q and K (shared by both attention kernels).
struct AttentionRows {
  std::vector<float> q, k, v;
};
AttentionRows gather_attention_rows(const AttentionShape& a, std::span<const float* const> qkv, i64 b);
/// The gradients of sequence b's rows (same layout, rotated space) back into the QKV-shaped
/// gradients: dQ (=) into the last dqkv tensor, dK and dV (+=) into every one.
void scatter_attention_grads(const AttentionShape& a, AttentionRows& grads, i64 b, std::span<float* const> dqkv);

/// Vocab-parallel embedding: out (N, H) = (token in [v_begin, v_begin + V) ? w[token - v_begin] : 0)
/// + (pos ? pos_w[position] : 0).
void embedding_forward(const std::int32_t* tokens, const std::int32_t* positions, const float* w, const float* pos_w,
                       i64 v_begin, i64 v_local, float* out, i64 n, i64 h);
/// dw[token - v_begin] += dout (tokens in range); dpos[position] += dout (if dpos).
void embedding_backward(const std::int32_t* tokens, const std::int32_t* positions, const float* dout, float* dw, float* dpos,
                        i64 v_begin, i64 v_local, i64 n, i64 h);

/// Local cross-entropy statistics of vocab-parallel logits (N, V): stats (N, 3) = (max, sum of
/// exp(logit - max), target logit if the target is local else 0).
void cross_entropy_stats(const float* logits, const std::int32_t* targets, i64 v_begin, i64 v_local, float* stats, i64 n);
/// Combines two ranks' statistics in place (b = a (+) b): the reduction the loss collective uses
/// (associative and commutative: max, rescaled sum-exp, sum).
void combine_stats(const float* a, float* b, i64 n);
/// With global stats: loss (N) = log-sum-exp - target logit; dlogits (N, V) (set) =
/// (softmax - one-hot) * scale.
void cross_entropy_backward(const float* logits, const float* stats, const std::int32_t* targets, i64 v_begin, i64 v_local,
                            float scale, float* dlogits, float* loss, i64 n);

/// AdamW step `step` (1-based) over count parameters; zeroes the gradient afterwards.
struct AdamW {
  float lr = 3e-3f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
};
void adamw(const AdamW& o, int step, float* param, float* grad, float* m, float* v, i64 count, bool decay);

}  // namespace executor::cpu
