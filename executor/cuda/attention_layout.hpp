// defines: executor::cuda::AttentionLayout, attention_layout (byte offsets of the attention
//          kernels' scratch buffers; host-only so that plan sizes are unit-tested)
#pragma once
#include <cstdint>

#include "hardware/ops.hpp"

namespace executor::cuda {

/// @brief Scratch of one attention task, head-major (BH = batch x query heads, S = s_q, K = s_kv,
/// D = head_dim). K and V are expanded to one copy per query head (GQA repeats each K/V head
/// heads / kv_heads times), so that QK^T and PV are plain strided-batched GEMMs.
/// Offsets in bytes from the scratch base; X = the activation dtype (x_bytes), f = fp32.
struct AttentionLayout {
  std::uint64_t q = 0;      ///< X (BH, S, D), RoPE applied
  std::uint64_t k = 0;      ///< X (BH, K, D), RoPE applied
  std::uint64_t v = 0;      ///< X (BH, K, D)
  std::uint64_t s = 0;      ///< f (BH, S, K): scores; backward: dP
  std::uint64_t p = 0;      ///< X (BH, S, K): probabilities (causal softmax of s)
  std::uint64_t o = 0;      ///< X (BH, S, D): forward P.V; backward: dO
  std::uint64_t ds = 0;     ///< X (BH, S, K): backward dS = P * (dP - rowsum(dP * P))
  std::uint64_t dq = 0;     ///< f (BH, S, D)
  std::uint64_t dk = 0;     ///< f (BH, K, D), per query head (summed over the GQA group later)
  std::uint64_t dv = 0;     ///< f (BH, K, D)
  std::uint64_t bytes = 0;  ///< total
};

inline AttentionLayout attention_layout(const hardware::AttentionOp& a, int x_bytes) {
  const auto align = [](std::uint64_t b) { return (b + 255) / 256 * 256; };
  const std::uint64_t bh = static_cast<std::uint64_t>(a.batch * a.heads);
  const std::uint64_t S = static_cast<std::uint64_t>(a.s_q), K = static_cast<std::uint64_t>(a.s_kv),
                      D = static_cast<std::uint64_t>(a.head_dim);
  const std::uint64_t xb = static_cast<std::uint64_t>(x_bytes);
  AttentionLayout l;
  std::uint64_t off = 0;
  auto take = [&](std::uint64_t& field, std::uint64_t bytes) {
    field = off;
    off += align(bytes);
  };
  take(l.q, bh * S * D * xb);
  take(l.k, bh * K * D * xb);
  take(l.v, bh * K * D * xb);
  take(l.s, bh * S * K * 4);
  take(l.p, bh * S * K * xb);
  take(l.o, bh * S * D * xb);
  take(l.ds, bh * S * K * xb);
  take(l.dq, bh * S * D * 4);
  take(l.dk, bh * K * D * 4);
  take(l.dv, bh * K * D * 4);
  l.bytes = off;
  return l;
}

/// @brief Scratch of one flash-attention task: only the fp32 gradients of the backward (dQ, and dK,
/// dV per query head, summed over each GQA group afterwards); no score-sized buffer.
inline AttentionLayout flash_attention_layout(const hardware::AttentionOp& a) {
  const auto align = [](std::uint64_t b) { return (b + 255) / 256 * 256; };
  const std::uint64_t bh = static_cast<std::uint64_t>(a.batch * a.heads);
  const std::uint64_t S = static_cast<std::uint64_t>(a.s_q), K = static_cast<std::uint64_t>(a.s_kv),
                      D = static_cast<std::uint64_t>(a.head_dim);
  AttentionLayout l;
  if (!a.backward) return l;
  std::uint64_t off = 0;
  auto take = [&](std::uint64_t& field, std::uint64_t bytes) {
    field = off;
    off += align(bytes);
  };
  take(l.dq, bh * S * D * 4);
  take(l.dk, bh * K * D * 4);
  take(l.dv, bh * K * D * 4);
  l.bytes = off;
  return l;
}

/// @brief The head dimensions the CUDA flash kernel takes (one thread holds a query row's
/// accumulators; its key tile of kFlashKeyTile rows sits in shared memory).
inline constexpr long long kFlashMaxHeadDim = 256;

}  // namespace executor::cuda
