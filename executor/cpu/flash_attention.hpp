// defines: executor::cpu::flash_attention_forward, flash_attention_backward (FlashAttention-2's
//          algorithm on the CPU: tiles of queries and keys, an online softmax, the log-sum-exp kept
//          instead of the probabilities, which the backward recomputes tile by tile)
//
// The kernel-contract twin of attention_forward / attention_backward (executor/cpu/kernels.hpp):
// same shapes, same results up to fp32 summation order; what differs is what the forward keeps
// for the backward: lse (batch * heads * s_q, 1) instead of probs (batch * heads * s_q, s_kv).
// Dao 2023, "FlashAttention-2", Algorithms 1 (forward) and 2 (backward).
#pragma once
#include <span>

#include "executor/cpu/kernels.hpp"

namespace executor::cpu {

/// Rows of queries and columns of keys per tile (the CPU's "SRAM" is its cache).
inline constexpr i64 kFlashQueryTile = 16, kFlashKeyTile = 32;

/// ctx (batch * s_q, heads * D) = softmax(Q K^T / sqrt(D), causal) V, one query tile against one
/// key tile at a time with a running max and sum; lse[row] = max + log(sum) of each query row.
void flash_attention_forward(const AttentionShape& a, std::span<const float* const> qkv, float* ctx, float* lse);
/// From ctx, lse and dctx: the probabilities recomputed per tile as exp(s - lse); writes (=) dQ into
/// the last dqkv tensor and accumulates (+=) dK and dV into every dqkv tensor.
void flash_attention_backward(const AttentionShape& a, std::span<const float* const> qkv, const float* ctx, const float* lse,
                              const float* dctx, std::span<float* const> dqkv);

}  // namespace executor::cpu
