#include "executor/cpu/flash_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace executor::cpu {

void flash_attention_forward(const AttentionShape& a, std::span<const float* const> qkv, float* ctx, float* lse) {
  const i64 d = a.head_dim, qw = a.heads * d, kw = a.kv_heads * d, group = a.heads / a.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  constexpr i64 Br = kFlashQueryTile, Bc = kFlashKeyTile;
  std::vector<float> s(static_cast<std::size_t>(Br * Bc)), o(static_cast<std::size_t>(Br * d)), m(Br), l(Br);
  for (i64 b = 0; b < a.batch; ++b) {
    const AttentionRows g = gather_attention_rows(a, qkv, b);
    for (i64 hh = 0; hh < a.heads; ++hh) {
      const i64 kh = hh / group;
      for (i64 i0 = 0; i0 < a.s_q; i0 += Br) {
        const i64 rows = std::min(Br, a.s_q - i0);
        std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
        std::fill(l.begin(), l.end(), 0.0f);
        std::fill(o.begin(), o.end(), 0.0f);
        const i64 last_key = a.q_offset + i0 + rows;  // keys the tile's last query sees
        for (i64 j0 = 0; j0 < last_key; j0 += Bc) {
          const i64 cols = std::min(Bc, last_key - j0);
          for (i64 r = 0; r < rows; ++r) {
            const i64 n_keys = a.q_offset + i0 + r + 1;  // causal: query sees keys < n_keys
            const float* q = g.q.data() + (i0 + r) * qw + hh * d;
            float tile_max = -std::numeric_limits<float>::infinity();
            for (i64 c = 0; c < cols; ++c) {
              float& sc = s[static_cast<std::size_t>(r * Bc + c)];
              if (j0 + c >= n_keys) {
                sc = -std::numeric_limits<float>::infinity();
                continue;
              }
              const float* k = g.k.data() + (j0 + c) * kw + kh * d;
              float acc = 0;
              for (i64 e = 0; e < d; ++e) acc += q[e] * k[e];
              sc = acc * scale;
              tile_max = std::max(tile_max, sc);
            }
            if (tile_max == -std::numeric_limits<float>::infinity()) continue;  // the whole tile is masked for this row
            // online softmax: rescale what was summed so far to the new running max
            const float m_new = std::max(m[r], tile_max);
            const float alpha = std::exp(m[r] - m_new);
            float* orow = o.data() + r * d;
            for (i64 e = 0; e < d; ++e) orow[e] *= alpha;
            float sum = 0;
            for (i64 c = 0; c < cols; ++c) {
              float& sc = s[static_cast<std::size_t>(r * Bc + c)];
              if (j0 + c >= n_keys) continue;
              const float p = std::exp(sc - m_new);
              sum += p;
              const float* v = g.v.data() + (j0 + c) * kw + kh * d;
              for (i64 e = 0; e < d; ++e) orow[e] += p * v[e];
            }
            l[r] = l[r] * alpha + sum;
            m[r] = m_new;
          }
        }
        for (i64 r = 0; r < rows; ++r) {
          float* out = ctx + (b * a.s_q + i0 + r) * qw + hh * d;
          for (i64 e = 0; e < d; ++e) out[e] = o[static_cast<std::size_t>(r * d + e)] / l[r];
          lse[(b * a.heads + hh) * a.s_q + i0 + r] = m[r] + std::log(l[r]);
        }
      }
    }
  }
}

void flash_attention_backward(const AttentionShape& a, std::span<const float* const> qkv, const float* ctx, const float* lse,
                              const float* dctx, std::span<float* const> dqkv) {
  const i64 d = a.head_dim, qw = a.heads * d, kw = a.kv_heads * d, group = a.heads / a.kv_heads;
  const i64 kv_len = a.q_offset + a.s_q;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  constexpr i64 Br = kFlashQueryTile, Bc = kFlashKeyTile;
  std::vector<float> D(static_cast<std::size_t>(a.s_q));
  for (i64 b = 0; b < a.batch; ++b) {
    const AttentionRows g = gather_attention_rows(a, qkv, b);
    AttentionRows grads{std::vector<float>(g.q.size(), 0.0f), std::vector<float>(g.k.size(), 0.0f), std::vector<float>(g.v.size(), 0.0f)};
    for (i64 hh = 0; hh < a.heads; ++hh) {
      const i64 kh = hh / group;
      // D_i = rowsum(dO_i . O_i) (FlashAttention-2, Algorithm 2, line 4)
      for (i64 i = 0; i < a.s_q; ++i) {
        const float* o = ctx + (b * a.s_q + i) * qw + hh * d;
        const float* dout = dctx + (b * a.s_q + i) * qw + hh * d;
        float acc = 0;
        for (i64 e = 0; e < d; ++e) acc += dout[e] * o[e];
        D[static_cast<std::size_t>(i)] = acc;
      }
      // outer loop over key tiles (dK, dV of the tile stay in place), inner over the query tiles that see them
      for (i64 j0 = 0; j0 < kv_len; j0 += Bc) {
        const i64 cols = std::min(Bc, kv_len - j0);
        const i64 first_row = std::max<i64>(0, j0 - a.q_offset);  // earlier queries see none of these keys
        for (i64 i0 = first_row - first_row % Br; i0 < a.s_q; i0 += Br) {
          const i64 rows = std::min(Br, a.s_q - i0);
          for (i64 r = 0; r < rows; ++r) {
            const i64 i = i0 + r, n_keys = a.q_offset + i + 1;
            const float* q = g.q.data() + i * qw + hh * d;
            const float* dout = dctx + (b * a.s_q + i) * qw + hh * d;
            const float row_lse = lse[(b * a.heads + hh) * a.s_q + i];
            float* dqi = grads.q.data() + i * qw + hh * d;
            for (i64 c = 0; c < cols; ++c) {
              const i64 j = j0 + c;
              if (j >= n_keys) break;
              const float* k = g.k.data() + j * kw + kh * d;
              const float* v = g.v.data() + j * kw + kh * d;
              float sc = 0, dp = 0;
              for (i64 e = 0; e < d; ++e) {
                sc += q[e] * k[e];
                dp += dout[e] * v[e];
              }
              const float p = std::exp(sc * scale - row_lse);  // the probability, recomputed
              const float ds = p * (dp - D[static_cast<std::size_t>(i)]) * scale;
              float* dkj = grads.k.data() + j * kw + kh * d;
              float* dvj = grads.v.data() + j * kw + kh * d;
              for (i64 e = 0; e < d; ++e) {
                dqi[e] += ds * k[e];
                dkj[e] += ds * q[e];
                dvj[e] += p * dout[e];
              }
            }
          }
        }
      }
    }
    scatter_attention_grads(a, grads, b, dqkv);
  }
}

}  // namespace executor::cpu
