#include "executor/cpu/kernels.hpp"

#include "executor/cpu/openblas.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

namespace executor::cpu {

void gemm(bool trans_a, bool trans_b, i64 m, i64 n, i64 k, float alpha, const float* a, i64 lda, const float* b, i64 ldb,
          float beta, float* c, i64 ldc) {
  static const OpenBlas& blas = openblas();
  blas.sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
}

namespace {
constexpr float kNormEps = 1e-5f;
}

void norm_forward(bool rms, const float* x, const float* w, float* out, i64 n, i64 h) {
  for (i64 r = 0; r < n; ++r) {
    const float* xr = x + r * h;
    float* o = out + r * h;
    double mean = 0, var = 0;
    if (!rms) {
      for (i64 i = 0; i < h; ++i) mean += xr[i];
      mean /= static_cast<double>(h);
    }
    for (i64 i = 0; i < h; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    const float rstd = static_cast<float>(1.0 / std::sqrt(var / static_cast<double>(h) + kNormEps));
    for (i64 i = 0; i < h; ++i) {
      const float xhat = (xr[i] - static_cast<float>(mean)) * rstd;
      o[i] = xhat * w[i] + (rms ? 0.0f : w[h + i]);
    }
  }
}

void norm_backward(bool rms, const float* dout, const float* x, const float* w, const float* residual, float* dx, float* dw,
                   i64 n, i64 h) {
  for (i64 r = 0; r < n; ++r) {
    const float* xr = x + r * h;
    const float* dy = dout + r * h;
    double mean = 0, var = 0;
    if (!rms) {
      for (i64 i = 0; i < h; ++i) mean += xr[i];
      mean /= static_cast<double>(h);
    }
    for (i64 i = 0; i < h; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    const double rstd = 1.0 / std::sqrt(var / static_cast<double>(h) + kNormEps);
    // dxhat = dy * w; dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))  (LayerNorm)
    //                 rstd * (dxhat - xhat * mean(dxhat * xhat))                    (RMSNorm)
    double sum_dxhat = 0, sum_dxhat_xhat = 0;
    for (i64 i = 0; i < h; ++i) {
      const double xhat = (xr[i] - mean) * rstd;
      const double dxhat = static_cast<double>(dy[i]) * w[i];
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * xhat;
      dw[i] += static_cast<float>(dy[i] * xhat);
      if (!rms) dw[h + i] += dy[i];
    }
    const double m1 = rms ? 0.0 : sum_dxhat / static_cast<double>(h), m2 = sum_dxhat_xhat / static_cast<double>(h);
    float* d = dx + r * h;
    for (i64 i = 0; i < h; ++i) {
      const double xhat = (xr[i] - mean) * rstd;
      const double dxhat = static_cast<double>(dy[i]) * w[i];
      d[i] = static_cast<float>(rstd * (dxhat - m1 - xhat * m2)) + (residual ? residual[r * h + i] : 0.0f);
    }
  }
}

void grid_norm_stats(bool rms, int part, const float* x, float* stats, i64 n, i64 h, i64 H) {
  for (i64 r = 0; r < n; ++r) {
    const float* xr = x + r * h;
    double s = 0;
    if (part == 0) {
      for (i64 i = 0; i < h; ++i) s += xr[i];
    } else {
      const double mean = rms ? 0.0 : stats[2 * r] / static_cast<double>(H);
      for (i64 i = 0; i < h; ++i) s += (xr[i] - mean) * (xr[i] - mean);
    }
    stats[2 * r + part] = static_cast<float>(s);
  }
}

namespace {
/// mean and 1 / std of row r from the all-reduced statistics
std::pair<double, double> grid_moments(bool rms, const float* stats, i64 r, i64 H) {
  const double mean = rms ? 0.0 : stats[2 * r] / static_cast<double>(H);
  return {mean, 1.0 / std::sqrt(stats[2 * r + 1] / static_cast<double>(H) + kNormEps)};
}
}  // namespace

void grid_norm_forward(bool rms, const float* x, const float* w, const float* stats, float* out, i64 n, i64 h, i64 H) {
  for (i64 r = 0; r < n; ++r) {
    const auto [mean, rstd_d] = grid_moments(rms, stats, r, H);
    const float rstd = static_cast<float>(rstd_d);
    const float* xr = x + r * h;
    float* o = out + r * h;
    for (i64 i = 0; i < h; ++i) {
      const float xhat = (xr[i] - static_cast<float>(mean)) * rstd;
      o[i] = xhat * w[i] + (rms ? 0.0f : w[h + i]);
    }
  }
}

void grid_norm_backward_sums(bool rms, const float* dout, const float* x, const float* w, const float* stats, float* sums, i64 n,
                             i64 h, i64 H) {
  for (i64 r = 0; r < n; ++r) {
    const auto [mean, rstd] = grid_moments(rms, stats, r, H);
    double s1 = 0, s2 = 0;
    for (i64 i = 0; i < h; ++i) {
      const double xhat = (x[r * h + i] - mean) * rstd;
      const double dxhat = static_cast<double>(dout[r * h + i]) * w[i];
      s1 += dxhat;
      s2 += dxhat * xhat;
    }
    sums[2 * r] = static_cast<float>(s1);
    sums[2 * r + 1] = static_cast<float>(s2);
  }
}

void grid_norm_backward(bool rms, const float* dout, const float* x, const float* w, const float* residual, const float* stats,
                        const float* sums, float* dx, float* dw, i64 n, i64 h, i64 H) {
  for (i64 r = 0; r < n; ++r) {
    const auto [mean, rstd] = grid_moments(rms, stats, r, H);
    const double m1 = rms ? 0.0 : sums[2 * r] / static_cast<double>(H), m2 = sums[2 * r + 1] / static_cast<double>(H);
    const float* dy = dout + r * h;
    float* d = dx + r * h;
    for (i64 i = 0; i < h; ++i) {
      const double xhat = (x[r * h + i] - mean) * rstd;
      const double dxhat = static_cast<double>(dy[i]) * w[i];
      dw[i] += static_cast<float>(dy[i] * xhat);
      if (!rms) dw[h + i] += dy[i];
      d[i] = static_cast<float>(rstd * (dxhat - m1 - xhat * m2)) + (residual ? residual[r * h + i] : 0.0f);
    }
  }
}

namespace {
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
}

void gelu_forward(const float* x, float* out, i64 count) {
  for (i64 i = 0; i < count; ++i) {
    const float v = x[i];
    out[i] = 0.5f * v * (1.0f + std::tanh(kGeluC * (v + 0.044715f * v * v * v)));
  }
}

void gelu_backward(const float* x, const float* dout, float* dx, i64 count) {
  for (i64 i = 0; i < count; ++i) {
    const float v = x[i];
    const float u = kGeluC * (v + 0.044715f * v * v * v);
    const float t = std::tanh(u);
    const float du = kGeluC * (1.0f + 3.0f * 0.044715f * v * v);
    dx[i] = dout[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
}

void swiglu_forward(const float* x, float* out, i64 n, i64 f) {
  for (i64 r = 0; r < n; ++r)
    for (i64 i = 0; i < f; ++i) {
      const float g = x[r * 2 * f + i], u = x[r * 2 * f + f + i];
      out[r * f + i] = g / (1.0f + std::exp(-g)) * u;
    }
}

void swiglu_backward(const float* x, const float* dout, float* dx, i64 n, i64 f) {
  for (i64 r = 0; r < n; ++r)
    for (i64 i = 0; i < f; ++i) {
      const float g = x[r * 2 * f + i], u = x[r * 2 * f + f + i], d = dout[r * f + i];
      const float sig = 1.0f / (1.0f + std::exp(-g));
      dx[r * 2 * f + i] = d * u * sig * (1.0f + g * (1.0f - sig));  // d silu(g) / dg = sig (1 + g (1 - sig))
      dx[r * 2 * f + f + i] = d * g * sig;
    }
}

/// Rotates (or, inverse, rotates back) the interleaved pairs of one head vector at `pos`.
void rope_rotate(float* v, i64 d, i64 pos, bool inverse) {
  for (i64 i = 0; i < d / 2; ++i) {
    const double freq = std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(d));
    const double ang = static_cast<double>(pos) * freq;
    const float c = static_cast<float>(std::cos(ang)), s = static_cast<float>(inverse ? -std::sin(ang) : std::sin(ang));
    const float a = v[2 * i], b = v[2 * i + 1];
    v[2 * i] = a * c - b * s;
    v[2 * i + 1] = a * s + b * c;
  }
}

AttentionRows gather_attention_rows(const AttentionShape& a, std::span<const float* const> qkv, i64 b) {
  const i64 d = a.head_dim, width = (a.heads + 2 * a.kv_heads) * d, qw = a.heads * d, kw = a.kv_heads * d;
  const i64 kv_len = a.q_offset + a.s_q;
  AttentionRows g;
  g.q.resize(static_cast<std::size_t>(a.s_q * qw));
  g.k.resize(static_cast<std::size_t>(kv_len * kw));
  g.v.resize(static_cast<std::size_t>(kv_len * kw));
  const float* own = qkv.back();
  for (i64 i = 0; i < a.s_q; ++i) {
    std::copy_n(own + (b * a.s_q + i) * width, qw, g.q.data() + i * qw);
    if (a.rope)
      for (i64 hh = 0; hh < a.heads; ++hh) rope_rotate(g.q.data() + i * qw + hh * d, d, a.q_offset + i, false);
  }
  for (i64 p = 0; p < kv_len; ++p) {
    const float* row = qkv[static_cast<std::size_t>(p / a.kv_block)] + (b * a.kv_block + p % a.kv_block) * width;
    std::copy_n(row + qw, kw, g.k.data() + p * kw);
    std::copy_n(row + qw + kw, kw, g.v.data() + p * kw);
    if (a.rope)
      for (i64 hh = 0; hh < a.kv_heads; ++hh) rope_rotate(g.k.data() + p * kw + hh * d, d, p, false);
  }
  return g;
}

void scatter_attention_grads(const AttentionShape& a, AttentionRows& grads, i64 b, std::span<float* const> dqkv) {
  const i64 d = a.head_dim, qw = a.heads * d, kw = a.kv_heads * d, width = qw + 2 * kw, kv_len = a.q_offset + a.s_q;
  float* own = dqkv.back();
  for (i64 i = 0; i < a.s_q; ++i) {
    float* dqi = grads.q.data() + i * qw;
    if (a.rope)
      for (i64 hh = 0; hh < a.heads; ++hh) rope_rotate(dqi + hh * d, d, a.q_offset + i, true);
    std::copy_n(dqi, qw, own + (b * a.s_q + i) * width);
  }
  for (i64 pos = 0; pos < kv_len; ++pos) {
    float* dkp = grads.k.data() + pos * kw;
    if (a.rope)
      for (i64 hh = 0; hh < a.kv_heads; ++hh) rope_rotate(dkp + hh * d, d, pos, true);
    float* row = dqkv[static_cast<std::size_t>(pos / a.kv_block)] + (b * a.kv_block + pos % a.kv_block) * width;
    for (i64 e = 0; e < kw; ++e) {
      row[qw + e] += dkp[e];
      row[qw + kw + e] += grads.v[pos * kw + e];
    }
  }
}

namespace {

// Softmax probabilities of query row i (its head's q) over the keys it sees (causal, with the
// slice's q_offset) for KV head kh, into p; returns how many keys.
i64 causal_probs(const AttentionShape& a, const AttentionRows& g, const float* q, i64 kh, i64 i, float* p) {
  const i64 d = a.head_dim, kw = a.kv_heads * d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const i64 n_keys = a.q_offset + i + 1;
  float mx = -std::numeric_limits<float>::infinity();
  for (i64 j = 0; j < n_keys; ++j) {
    const float* k = g.k.data() + j * kw + kh * d;
    float s = 0;
    for (i64 e = 0; e < d; ++e) s += q[e] * k[e];
    p[j] = s * scale;
    mx = std::max(mx, p[j]);
  }
  float sum = 0;
  for (i64 j = 0; j < n_keys; ++j) sum += (p[j] = std::exp(p[j] - mx));
  for (i64 j = 0; j < n_keys; ++j) p[j] /= sum;
  return n_keys;
}

}  // namespace

void attention_forward(const AttentionShape& a, std::span<const float* const> qkv, float* ctx, float* probs) {
  const i64 d = a.head_dim, qw = a.heads * d, kw = a.kv_heads * d, group = a.heads / a.kv_heads;
  const i64 kv_len = a.q_offset + a.s_q;
  for (i64 b = 0; b < a.batch; ++b) {
    const AttentionRows g = gather_attention_rows(a, qkv, b);
    for (i64 hh = 0; hh < a.heads; ++hh) {
      const i64 kh = hh / group;
      for (i64 i = 0; i < a.s_q; ++i) {
        const float* q = g.q.data() + i * qw + hh * d;
        float* p = probs + ((b * a.heads + hh) * a.s_q + i) * kv_len;  // kept for the backward
        const i64 n_keys = causal_probs(a, g, q, kh, i, p);
        std::fill(p + n_keys, p + kv_len, 0.0f);
        float* o = ctx + (b * a.s_q + i) * qw + hh * d;
        std::fill_n(o, d, 0.0f);
        for (i64 j = 0; j < n_keys; ++j) {
          const float w = p[j];
          const float* v = g.v.data() + j * kw + kh * d;
          for (i64 e = 0; e < d; ++e) o[e] += w * v[e];
        }
      }
    }
  }
}

void attention_backward(const AttentionShape& a, std::span<const float* const> qkv, const float* ctx, const float* probs,
                        const float* dctx, std::span<float* const> dqkv) {
  const i64 d = a.head_dim, qw = a.heads * d, kw = a.kv_heads * d, group = a.heads / a.kv_heads;
  const i64 kv_len = a.q_offset + a.s_q;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (i64 b = 0; b < a.batch; ++b) {
    const AttentionRows g = gather_attention_rows(a, qkv, b);
    AttentionRows grads{std::vector<float>(g.q.size(), 0.0f), std::vector<float>(g.k.size(), 0.0f), std::vector<float>(g.v.size(), 0.0f)};
    for (i64 hh = 0; hh < a.heads; ++hh) {
      const i64 kh = hh / group;
      for (i64 i = 0; i < a.s_q; ++i) {
        const float* q = g.q.data() + i * qw + hh * d;
        const float* p = probs + ((b * a.heads + hh) * a.s_q + i) * kv_len;  // what the forward kept
        const i64 n_keys = a.q_offset + i + 1;
        const float* o = ctx + (b * a.s_q + i) * qw + hh * d;
        const float* dout = dctx + (b * a.s_q + i) * qw + hh * d;
        float D = 0;  // rowsum(dO . O) = sum_j p_j dp_j
        for (i64 e = 0; e < d; ++e) D += dout[e] * o[e];
        float* dqi = grads.q.data() + i * qw + hh * d;
        for (i64 j = 0; j < n_keys; ++j) {
          const float* k = g.k.data() + j * kw + kh * d;
          const float* v = g.v.data() + j * kw + kh * d;
          float dp = 0;
          for (i64 e = 0; e < d; ++e) dp += dout[e] * v[e];
          const float ds = p[j] * (dp - D) * scale;
          float* dkj = grads.k.data() + j * kw + kh * d;
          float* dvj = grads.v.data() + j * kw + kh * d;
          for (i64 e = 0; e < d; ++e) {
            dqi[e] += ds * k[e];
            dkj[e] += ds * q[e];
            dvj[e] += p[j] * dout[e];
          }
        }
      }
    }
    scatter_attention_grads(a, grads, b, dqkv);  // back from rotated space, into the QKV-shaped gradients
  }
}


void embedding_forward(const std::int32_t* tokens, const std::int32_t* positions, const float* w, const float* pos_w,
                       i64 v_begin, i64 v_local, float* out, i64 n, i64 h) {
  for (i64 r = 0; r < n; ++r) {
    float* o = out + r * h;
    const i64 t = tokens[r] - v_begin;
    if (t >= 0 && t < v_local) std::copy_n(w + t * h, h, o);
    else std::fill_n(o, h, 0.0f);
    if (pos_w)
      for (i64 i = 0; i < h; ++i) o[i] += pos_w[positions[r] * h + i];
  }
}

void embedding_backward(const std::int32_t* tokens, const std::int32_t* positions, const float* dout, float* dw, float* dpos,
                        i64 v_begin, i64 v_local, i64 n, i64 h) {
  for (i64 r = 0; r < n; ++r) {
    const float* g = dout + r * h;
    const i64 t = tokens[r] - v_begin;
    if (t >= 0 && t < v_local)
      for (i64 i = 0; i < h; ++i) dw[t * h + i] += g[i];
    if (dpos)
      for (i64 i = 0; i < h; ++i) dpos[positions[r] * h + i] += g[i];
  }
}

void cross_entropy_stats(const float* logits, const std::int32_t* targets, i64 v_begin, i64 v_local, float* stats, i64 n) {
  for (i64 r = 0; r < n; ++r) {
    const float* l = logits + r * v_local;
    const float mx = *std::max_element(l, l + v_local);
    double sum = 0;
    for (i64 v = 0; v < v_local; ++v) sum += std::exp(static_cast<double>(l[v] - mx));
    const i64 t = targets[r] - v_begin;
    stats[r * 3 + 0] = mx;
    stats[r * 3 + 1] = static_cast<float>(sum);
    stats[r * 3 + 2] = (t >= 0 && t < v_local) ? l[t] : 0.0f;
  }
}

void combine_stats(const float* a, float* b, i64 n) {
  for (i64 r = 0; r < n; ++r) {
    const float ma = a[r * 3], mb = b[r * 3];
    const float m = std::max(ma, mb);
    b[r * 3 + 1] = a[r * 3 + 1] * std::exp(ma - m) + b[r * 3 + 1] * std::exp(mb - m);
    b[r * 3] = m;
    b[r * 3 + 2] = a[r * 3 + 2] + b[r * 3 + 2];
  }
}

void cross_entropy_backward(const float* logits, const float* stats, const std::int32_t* targets, i64 v_begin, i64 v_local,
                            float scale, float* dlogits, float* loss, i64 n) {
  for (i64 r = 0; r < n; ++r) {
    const float lse = stats[r * 3] + std::log(stats[r * 3 + 1]);
    loss[r] = lse - stats[r * 3 + 2];
    const float* l = logits + r * v_local;
    float* dl = dlogits + r * v_local;
    for (i64 v = 0; v < v_local; ++v) dl[v] = std::exp(l[v] - lse) * scale;
    const i64 t = targets[r] - v_begin;
    if (t >= 0 && t < v_local) dl[t] -= scale;
  }
}

void adamw(const AdamW& o, int step, float* param, float* grad, float* m, float* v, i64 count, bool decay) {
  const float c1 = 1.0f - std::pow(o.beta1, static_cast<float>(step));
  const float c2 = 1.0f - std::pow(o.beta2, static_cast<float>(step));
  for (i64 i = 0; i < count; ++i) {
    const float g = grad[i];
    m[i] = o.beta1 * m[i] + (1.0f - o.beta1) * g;
    v[i] = o.beta2 * v[i] + (1.0f - o.beta2) * g * g;
    if (decay) param[i] -= o.lr * o.weight_decay * param[i];
    param[i] -= o.lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + o.eps);
    grad[i] = 0.0f;
  }
}

}  // namespace executor::cpu
