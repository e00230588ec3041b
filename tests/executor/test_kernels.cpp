// The CPU kernels' backward passes against central finite differences of their forward passes.
// Objective J = sum(r . forward(x)) for a fixed random r, so dJ/dx is the backward of dout = r.
// fp32 forward, step 1e-2 on O(1) inputs: the difference quotient is good to ~1e-3 relative, so
// the gradients must agree to 1e-2 as whole tensors (a wrong term is off by O(1)).
#ifdef SLICETUNE_HAVE_EXECUTOR  // built only with MPI and OpenBLAS
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "executor/cpu/flash_attention.hpp"
#include "executor/cpu/kernels.hpp"

namespace cpu = executor::cpu;
using Vec = std::vector<float>;

namespace {

Vec random_vec(std::size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  Vec v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

/// Central differences of J(x) = sum(r . f(x)) with respect to every element of x.
Vec numeric_grad(Vec& x, const Vec& r, const std::function<Vec()>& f) {
  const float h = 1e-2f;
  Vec g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float keep = x[i];
    x[i] = keep + h;
    Vec a = f();
    x[i] = keep - h;
    Vec b = f();
    x[i] = keep;
    double d = 0;
    for (std::size_t k = 0; k < a.size(); ++k) d += static_cast<double>(r[k]) * (a[k] - b[k]);
    g[i] = static_cast<float>(d / (2 * h));
  }
  return g;
}

double rel_diff(const Vec& a, const Vec& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

}  // namespace

TEST_CASE("LayerNorm and RMSNorm backward match finite differences (input and weight)") {
  for (bool rms : {false, true}) {
    const cpu::i64 n = 3, h = 8;
    Vec x = random_vec(n * h, 1), w = random_vec(2 * h, 2), r = random_vec(n * h, 3), res = random_vec(n * h, 4);
    for (cpu::i64 i = 0; i < h; ++i) w[i] += 1.0f;  // scale near 1
    auto fwd = [&] {
      Vec o(n * h);
      cpu::norm_forward(rms, x.data(), w.data(), o.data(), n, h);
      return o;
    };
    Vec dx(n * h), dw(2 * h, 0.0f);
    cpu::norm_backward(rms, r.data(), x.data(), w.data(), res.data(), dx.data(), dw.data(), n, h);
    Vec nx = numeric_grad(x, r, fwd);
    for (std::size_t i = 0; i < nx.size(); ++i) nx[i] += res[i];  // the residual gradient passes through
    CHECK(rel_diff(dx, nx) < 1e-2);
    Vec nw = numeric_grad(w, r, fwd);
    if (rms) std::fill(nw.begin() + h, nw.end(), 0.0f);  // RMSNorm has no bias row
    CHECK(rel_diff(dw, nw) < 1e-2);
  }
}

TEST_CASE("GeLU and SwiGLU backward match finite differences") {
  Vec x = random_vec(24, 5, 2.0f), r = random_vec(24, 6);
  Vec dx(24);
  cpu::gelu_backward(x.data(), r.data(), dx.data(), 24);
  CHECK(rel_diff(dx, numeric_grad(x, r, [&] {
          Vec o(24);
          cpu::gelu_forward(x.data(), o.data(), 24);
          return o;
        })) < 1e-2);
  const cpu::i64 n = 3, f = 4;
  Vec xs = random_vec(n * 2 * f, 7, 2.0f), rs = random_vec(n * f, 8), dxs(n * 2 * f);
  cpu::swiglu_backward(xs.data(), rs.data(), dxs.data(), n, f);
  CHECK(rel_diff(dxs, numeric_grad(xs, rs, [&] {
          Vec o(n * f);
          cpu::swiglu_forward(xs.data(), o.data(), n, f);
          return o;
        })) < 1e-2);
}

TEST_CASE("causal attention with RoPE and grouped-query heads over two sequence slices: backward matches finite differences") {
  // batch 2, 4 query heads sharing 2 K/V heads, D 4; the query slice is positions [3, 6) and its
  // keys span two QKV tensors of 3 positions each (sequence-axis domino, slice 1 of 2).
  const cpu::AttentionShape a{.batch = 2, .heads = 4, .kv_heads = 2, .head_dim = 4, .s_q = 3, .q_offset = 3, .kv_block = 3, .rope = true};
  const cpu::i64 width = (4 + 2 * 2) * 4, rows = 2 * 3;
  Vec q0 = random_vec(rows * width, 9), q1 = random_vec(rows * width, 10), r = random_vec(rows * 16, 11);
  // the kept probabilities: batch x heads x s_q rows of q_offset + s_q keys
  Vec probs(2 * 4 * 3 * 6);
  auto fwd = [&] {
    Vec ctx(rows * 16);
    const float* kv[] = {q0.data(), q1.data()};
    cpu::attention_forward(a, kv, ctx.data(), probs.data());
    return ctx;
  };
  Vec ctx = fwd(), d0(rows * width, 0.0f), d1(rows * width, 0.0f);
  const float* kv[] = {q0.data(), q1.data()};
  float* dkv[] = {d0.data(), d1.data()};
  cpu::attention_backward(a, kv, ctx.data(), probs.data(), r.data(), dkv);
  // slice 0's tensor: only its K and V are read (its queries belong to another task): Q part 0
  CHECK(rel_diff(d0, numeric_grad(q0, r, fwd)) < 1e-2);
  CHECK(rel_diff(d1, numeric_grad(q1, r, fwd)) < 1e-2);
}

TEST_CASE("flash attention (tiled online softmax) equals the unfused kernel over several query and key tiles") {
  // Queries [40, 80) over keys [0, 80) in two QKV tensors of 40 positions (sequence-axis slice 1 of
  // 2), GQA 4 heads on 2 K/V heads, D 8, RoPE: 3 query tiles of 16 (the last partial) against up to
  // 3 key tiles of 32, so the running max and sum are rescaled across tiles and the causal edge
  // cuts tiles. Both kernels compute the same sums in another order: outputs and gradients agree to
  // fp32 rounding (<= 1e-5 relative as whole tensors). The backward of each reads what its own
  // forward kept (probabilities; log-sum-exp), so equal gradients also check what flash keeps.
  static_assert(cpu::kFlashQueryTile == 16 && cpu::kFlashKeyTile == 32);
  const cpu::AttentionShape a{.batch = 2, .heads = 4, .kv_heads = 2, .head_dim = 8, .s_q = 40, .q_offset = 40, .kv_block = 40, .rope = true};
  const cpu::i64 width = (4 + 2 * 2) * 8, rows = 2 * 40, qrows = 2 * 4 * 40;
  const Vec q0 = random_vec(rows * width, 21, 2.0f), q1 = random_vec(rows * width, 22, 2.0f), dctx = random_vec(rows * 32, 23);
  const float* kv[] = {q0.data(), q1.data()};
  Vec ctx_u(rows * 32), probs(qrows * 80), ctx_f(rows * 32), lse(qrows);
  cpu::attention_forward(a, kv, ctx_u.data(), probs.data());
  cpu::flash_attention_forward(a, kv, ctx_f.data(), lse.data());
  CHECK(rel_diff(ctx_f, ctx_u) < 1e-5);
  // the probabilities the unfused kernel keeps: every query row sums to 1 (zero beyond its keys)
  for (cpu::i64 r = 0; r < qrows; r += 37) {
    double sum = 0;
    for (cpu::i64 c = 0; c < 80; ++c) sum += probs[r * 80 + c];
    CHECK(sum == doctest::Approx(1.0).epsilon(1e-5));
  }
  Vec du0(rows * width, 0.0f), du1(rows * width, 0.0f), df0(rows * width, 0.0f), df1(rows * width, 0.0f);
  float* dkv_u[] = {du0.data(), du1.data()};
  float* dkv_f[] = {df0.data(), df1.data()};
  cpu::attention_backward(a, kv, ctx_u.data(), probs.data(), dctx.data(), dkv_u);
  cpu::flash_attention_backward(a, kv, ctx_f.data(), lse.data(), dctx.data(), dkv_f);
  CHECK(rel_diff(df0, du0) < 1e-5);
  CHECK(rel_diff(df1, du1) < 1e-5);
}

TEST_CASE("vocab-parallel cross-entropy: merged statistics equal the whole vocabulary's, gradient matches finite differences") {
  const cpu::i64 n = 3, V = 10, half = 5;
  Vec logits = random_vec(n * V, 12, 3.0f);
  const std::int32_t targets[] = {1, 7, 4};
  Vec whole(n * 3), a(n * 3), b(n * 3), left(n * half), right(n * half);
  for (cpu::i64 r = 0; r < n; ++r)
    for (cpu::i64 v = 0; v < half; ++v) {
      left[r * half + v] = logits[r * V + v];
      right[r * half + v] = logits[r * V + half + v];
    }
  cpu::cross_entropy_stats(logits.data(), targets, 0, V, whole.data(), n);
  cpu::cross_entropy_stats(left.data(), targets, 0, half, a.data(), n);
  cpu::cross_entropy_stats(right.data(), targets, half, half, b.data(), n);
  cpu::combine_stats(a.data(), b.data(), n);
  // log-sum-exp and target logit are what the loss reads: equal to fp32 rounding
  for (cpu::i64 r = 0; r < n; ++r) {
    CHECK(b[r * 3] + std::log(b[r * 3 + 1]) == doctest::Approx(whole[r * 3] + std::log(whole[r * 3 + 1])).epsilon(1e-6));
    CHECK(b[r * 3 + 2] == whole[r * 3 + 2]);
  }
  Vec dl(n * V), loss(n);
  cpu::cross_entropy_backward(logits.data(), whole.data(), targets, 0, V, 1.0f, dl.data(), loss.data(), n);
  const Vec ones(n, 1.0f);
  CHECK(rel_diff(dl, numeric_grad(logits, ones, [&] {
          Vec s(n * 3), d(n * V), l(n);
          cpu::cross_entropy_stats(logits.data(), targets, 0, V, s.data(), n);
          cpu::cross_entropy_backward(logits.data(), s.data(), targets, 0, V, 1.0f, d.data(), l.data(), n);
          return l;
        })) < 1e-2);
}
#endif
