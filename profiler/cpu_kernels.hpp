// defines: profiler::cpu kernels timed by the CPU profiler: gemm_f32, attention_forward,
//          attention_backward, layernorm_forward, layernorm_backward, gelu_forward, gelu_backward,
//          add, accumulate, copy, cross_entropy_forward, adamw_step
// Plain C++ over fp32 row-major buffers plus OpenBLAS. These stand in for the CPU executor's own
// kernels (executor/cpu) until those are shared; they do the same arithmetic the executor does.
#pragma once
#include <cstdint>

namespace profiler::cpu {

/// C(m, n) = A(m, k) . B(k, n), row-major, fp32 (cblas_sgemm).
void gemm_f32(const float* a, const float* b, float* c, std::int64_t m, std::int64_t n, std::int64_t k);

/// Causal attention for one sequence: q, k, v, out are (s, heads * d), token-major; p is scratch
/// (heads, s, s) holding the softmax probabilities that backward reads.
void attention_forward(const float* q, const float* k, const float* v, float* out, float* p, std::int64_t s, std::int64_t heads,
                       std::int64_t d);
/// Backward of attention_forward: dq, dk, dv from dout and the saved probabilities; dp scratch (s, s).
void attention_backward(const float* q, const float* k, const float* v, const float* p, const float* dout, float* dq, float* dk,
                        float* dv, float* dp, std::int64_t s, std::int64_t heads, std::int64_t d);

/// out = (x - mean) / sqrt(var + eps) * gamma + beta per row of (rows, cols); mean and rstd saved.
void layernorm_forward(const float* x, const float* gamma, const float* beta, float* out, float* mean, float* rstd, std::int64_t rows,
                       std::int64_t cols);
/// dx (set), dgamma and dbeta (accumulated, uses +=) from dout.
void layernorm_backward(const float* x, const float* gamma, const float* mean, const float* rstd, const float* dout, float* dx,
                        float* dgamma, float* dbeta, std::int64_t rows, std::int64_t cols);
void gelu_forward(const float* x, float* out, std::int64_t n);  ///< tanh approximation
void gelu_backward(const float* x, const float* dout, float* dx, std::int64_t n);
void add(const float* a, const float* b, float* out, std::int64_t n);  ///< residual: out = a + b
void accumulate(const float* x, float* y, std::int64_t n);             ///< y += x
void copy(const float* x, float* y, std::int64_t n);                   ///< concat of chunks
/// Mean cross-entropy of rows of logits (rows, vocab) against targets; dlogits = softmax - onehot.
float cross_entropy_forward(const float* logits, const std::int32_t* targets, float* dlogits, std::int64_t rows, std::int64_t vocab);
/// One AdamW step over n parameters (fp32 p, g, m, v), step number t >= 1.
void adamw_step(float* p, const float* g, float* m, float* v, std::int64_t n, int t, float lr);

}  // namespace profiler::cpu
