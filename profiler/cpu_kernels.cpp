#include "profiler/cpu_kernels.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>

namespace profiler::cpu {

void gemm_f32(const float* a, const float* b, float* c, std::int64_t m, std::int64_t n, std::int64_t k) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(k), b, static_cast<int>(n), 0.0f, c, static_cast<int>(n));
}

void attention_forward(const float* q, const float* k, const float* v, float* out, float* p, std::int64_t s, std::int64_t heads,
                       std::int64_t d) {
  const int ld = static_cast<int>(heads * d), S = static_cast<int>(s), D = static_cast<int>(d);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (std::int64_t h = 0; h < heads; ++h) {
    float* ph = p + h * s * s;  // (s, s)
    // scores = scale * Q_h K_h^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, S, S, D, scale, q + h * d, ld, k + h * d, ld, 0.0f, ph, S);
    for (std::int64_t i = 0; i < s; ++i) {  // causal softmax: query i sees keys 0..i
      float* row = ph + i * s;
      float mx = row[0];
      for (std::int64_t j = 1; j <= i; ++j) mx = std::max(mx, row[j]);
      float sum = 0;
      for (std::int64_t j = 0; j <= i; ++j) sum += (row[j] = std::exp(row[j] - mx));
      const float inv = 1.0f / sum;
      for (std::int64_t j = 0; j <= i; ++j) row[j] *= inv;
      for (std::int64_t j = i + 1; j < s; ++j) row[j] = 0.0f;
    }
    // out_h = P V_h
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S, D, S, 1.0f, ph, S, v + h * d, ld, 0.0f, out + h * d, ld);
  }
}

void attention_backward(const float* q, const float* k, const float* v, const float* p, const float* dout, float* dq, float* dk,
                        float* dv, float* dp, std::int64_t s, std::int64_t heads, std::int64_t d) {
  const int ld = static_cast<int>(heads * d), S = static_cast<int>(s), D = static_cast<int>(d);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (std::int64_t h = 0; h < heads; ++h) {
    const float* ph = p + h * s * s;
    // dV_h = P^T dO_h ; dP = dO_h V_h^T
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, S, D, S, 1.0f, ph, S, dout + h * d, ld, 0.0f, dv + h * d, ld);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, S, S, D, 1.0f, dout + h * d, ld, v + h * d, ld, 0.0f, dp, S);
    // dS = P o (dP - rowsum(dP o P)), then scaled
    for (std::int64_t i = 0; i < s; ++i) {
      float dot = 0;
      for (std::int64_t j = 0; j <= i; ++j) dot += dp[i * s + j] * ph[i * s + j];
      for (std::int64_t j = 0; j < s; ++j) dp[i * s + j] = j <= i ? ph[i * s + j] * (dp[i * s + j] - dot) * scale : 0.0f;
    }
    // dQ_h = dS K_h ; dK_h = dS^T Q_h
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S, D, S, 1.0f, dp, S, k + h * d, ld, 0.0f, dq + h * d, ld);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, S, D, S, 1.0f, dp, S, q + h * d, ld, 0.0f, dk + h * d, ld);
  }
}

void layernorm_forward(const float* x, const float* gamma, const float* beta, float* out, float* mean, float* rstd, std::int64_t rows,
                       std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float m = 0;
    for (std::int64_t c = 0; c < cols; ++c) m += xr[c];
    m /= static_cast<float>(cols);
    float var = 0;
    for (std::int64_t c = 0; c < cols; ++c) var += (xr[c] - m) * (xr[c] - m);
    const float rs = 1.0f / std::sqrt(var / static_cast<float>(cols) + 1e-5f);
    float* o = out + r * cols;
    for (std::int64_t c = 0; c < cols; ++c) o[c] = (xr[c] - m) * rs * gamma[c] + beta[c];
    mean[r] = m;
    rstd[r] = rs;
  }
}

void layernorm_backward(const float* x, const float* gamma, const float* mean, const float* rstd, const float* dout, float* dx,
                        float* dgamma, float* dbeta, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* dr = dout + r * cols;
    float dnorm_mean = 0, dnorm_norm_mean = 0;
    for (std::int64_t c = 0; c < cols; ++c) {
      const float norm = (xr[c] - mean[r]) * rstd[r];
      const float dnorm = gamma[c] * dr[c];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
      dbeta[c] += dr[c];
      dgamma[c] += norm * dr[c];
    }
    dnorm_mean /= static_cast<float>(cols);
    dnorm_norm_mean /= static_cast<float>(cols);
    for (std::int64_t c = 0; c < cols; ++c) {
      const float norm = (xr[c] - mean[r]) * rstd[r];
      dx[r * cols + c] = (gamma[c] * dr[c] - dnorm_mean - norm * dnorm_norm_mean) * rstd[r];
    }
  }
}

namespace {
constexpr float kGeluScale = 0.7978845608f;  // sqrt(2 / pi)
}

void gelu_forward(const float* x, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float u = kGeluScale * (x[i] + 0.044715f * x[i] * x[i] * x[i]);
    out[i] = 0.5f * x[i] * (1.0f + std::tanh(u));
  }
}

void gelu_backward(const float* x, const float* dout, float* dx, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float u = kGeluScale * (x[i] + 0.044715f * x[i] * x[i] * x[i]);
    const float t = std::tanh(u);
    const float du = kGeluScale * (1.0f + 3.0f * 0.044715f * x[i] * x[i]);
    dx[i] = dout[i] * (0.5f * (1.0f + t) + 0.5f * x[i] * (1.0f - t * t) * du);
  }
}

void add(const float* a, const float* b, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
void accumulate(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] += x[i];
}
void copy(const float* x, float* y, std::int64_t n) { std::copy(x, x + n, y); }

float cross_entropy_forward(const float* logits, const std::int32_t* targets, float* dlogits, std::int64_t rows, std::int64_t vocab) {
  double loss = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* l = logits + r * vocab;
    float mx = l[0];
    for (std::int64_t j = 1; j < vocab; ++j) mx = std::max(mx, l[j]);
    float sum = 0;
    for (std::int64_t j = 0; j < vocab; ++j) sum += std::exp(l[j] - mx);
    const float lse = mx + std::log(sum);
    loss += lse - l[targets[r]];
    float* d = dlogits + r * vocab;
    const float inv_rows = 1.0f / static_cast<float>(rows);
    for (std::int64_t j = 0; j < vocab; ++j) d[j] = (std::exp(l[j] - lse) - (j == targets[r] ? 1.0f : 0.0f)) * inv_rows;
  }
  return static_cast<float>(loss / static_cast<double>(rows));
}

void adamw_step(float* p, const float* g, float* m, float* v, std::int64_t n, int t, float lr) {
  constexpr float b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
  const float c1 = 1.0f - std::pow(b1, static_cast<float>(t)), c2 = 1.0f - std::pow(b2, static_cast<float>(t));
  for (std::int64_t i = 0; i < n; ++i) {
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
    p[i] -= lr * ((m[i] / c1) / (std::sqrt(v[i] / c2) + eps) + wd * p[i]);
  }
}

}  // namespace profiler::cpu
