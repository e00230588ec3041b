// defines: the operations a cost model prices and an executor runs:
//          GemmOp, AttentionOp, ElementwiseOp, CollectiveOp, OptimizerOp
#pragma once
#include <cstdint>
#include <string_view>

#include "common/units.hpp"

namespace hardware {

/// @brief C(m, n) = A(m, k) . B(k, n), fp32 accumulation; `batch` independent products.
struct GemmOp {
  std::int64_t m = 0, n = 0, k = 0;
  common::DType dtype = common::DType::bf16;
  std::int64_t batch = 1;

  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * batch; }
  double bytes() const {
    return static_cast<double>(common::dtype_bytes(dtype)) * batch *
           (static_cast<double>(m) * k + static_cast<double>(k) * n + static_cast<double>(m) * n);
  }
};

/// @brief The attention kernel: fused flash attention (FlashAttention-2/3 style: tiles of queries
/// and keys in on-chip memory with an online softmax, no score matrix in HBM; the forward keeps
/// only the output and the log-sum-exp of each query row, the backward recomputes the
/// probabilities); Megatron-LM's unfused core attention (batched GEMMs, a fused scale-mask-softmax
/// pass and a dropout pass over the score matrix each way, which the forward keeps for the
/// backward); or the same unfused attention with softmax and dropout compiled into one pass each
/// way (torch.compile) - priced with one pass, but its score matrix is materialised and kept as the
/// unfused kernel's is.
enum class AttentionKernel : std::uint8_t { flash, unfused, unfused_compiled };
std::string_view to_string(AttentionKernel k);  ///< "flash", "unfused", "unfused_compiled"
/// Parses "flash" | "unfused" | "unfused_compiled"; false on anything else.
bool parse_attention_kernel(std::string_view s, AttentionKernel& out);
/// True for the kernels that write the score matrix to memory and keep it for the backward
/// (unfused, unfused_compiled): what the memory model and the executors' kernel choice go by.
constexpr bool materialises_scores(AttentionKernel k) { return k != AttentionKernel::flash; }

/// @brief Attention core: softmax(Q K^T / sqrt(d)) V for `heads` query heads sharing `kv_heads`
/// K/V heads, run by `kernel`. Queries are positions [q_offset, q_offset + s_q) of the sequence,
/// keys [0, s_kv). Causal: query i sees keys <= i. Backward produces dQ, dK, dV.
struct AttentionOp {
  std::int64_t batch = 0, heads = 0, kv_heads = 0, s_q = 0, s_kv = 0, head_dim = 0;
  std::int64_t q_offset = 0;
  bool causal = true;
  bool backward = false;
  common::DType dtype = common::DType::bf16;
  AttentionKernel kernel = AttentionKernel::flash;

  /// (query, key) pairs scored per (sequence, head), counting the causal mask exactly.
  double pairs() const {
    if (!causal) return static_cast<double>(s_q) * static_cast<double>(s_kv);
    double total = 0;
    // query at absolute position p sees min(p + 1, s_kv) keys
    const std::int64_t first = q_offset, last = q_offset + s_q - 1;
    const std::int64_t full_from = std::max<std::int64_t>(first, s_kv - 1);  // rows that see all keys
    const std::int64_t tri_last = std::min(last, full_from - 1);
    if (tri_last >= first) total += 0.5 * static_cast<double>(first + 1 + tri_last + 1) * static_cast<double>(tri_last - first + 1);
    if (last >= full_from) total += static_cast<double>(last - std::max(first, full_from) + 1) * static_cast<double>(s_kv);
    return total;
  }
  /// Model FLOPs (what MFU counts): forward Q.K^T and P.V; backward twice the forward.
  double flops() const { return (backward ? 8.0 : 4.0) * pairs() * static_cast<double>(head_dim) * heads * batch; }
  /// FLOPs the kernel really executes: flash backward recomputes Q.K^T (5 matmuls instead of 4);
  /// the unfused backward reads the probabilities its forward kept.
  double executed_flops() const { return backward && kernel == AttentionKernel::flash ? flops() * 1.25 : flops(); }
  /// Score-matrix elements (query, key) of all heads: what the unfused kernel materialises (the
  /// whole s_q x s_kv block, the causal mask applied, not skipped).
  double score_elements() const { return static_cast<double>(batch) * heads * static_cast<double>(s_q) * static_cast<double>(s_kv); }
  double bytes() const {
    const double q = static_cast<double>(batch) * s_q * heads * head_dim;
    const double kv = 2.0 * static_cast<double>(batch) * s_kv * kv_heads * head_dim;
    return common::dtype_bytes(dtype) * (backward ? 3.0 * (2.0 * q + kv) : (2.0 * q + kv));
  }
};

enum class ElementwiseKind : std::uint8_t {
  embedding,      ///< token lookup (+ position), or its backward scatter-add
  layernorm,
  rmsnorm,
  rope,           ///< rotary position embedding on Q and K
  gelu,
  swiglu,         ///< silu(gate) * up
  residual_add,   ///< bias + dropout + residual, fused as in Megatron
  cross_entropy,  ///< softmax + loss over (vocab-parallel) logits
  concat,         ///< gathers column chunks or row slices into one tensor
  accumulate,     ///< adds a gradient contribution into an existing gradient
};
std::string_view to_string(ElementwiseKind k);

/// @brief A memory-bound kernel: `bytes` read plus written through HBM.
struct ElementwiseOp {
  ElementwiseKind kind = ElementwiseKind::residual_add;
  std::int64_t elements = 0;
  double bytes = 0;
  bool backward = false;
};

enum class CollectiveKind : std::uint8_t { all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, send_recv };
std::string_view to_string(CollectiveKind k);
bool parse_collective_kind(std::string_view s, CollectiveKind& out);

/// @brief A collective over `ranks` GPUs spread evenly over `nodes` nodes.
/// `bytes` is the whole array as nccl-tests counts it (AllGather: the output; ReduceScatter: the input).
struct CollectiveOp {
  CollectiveKind kind = CollectiveKind::all_reduce;
  std::int64_t bytes = 0;
  int ranks = 1;
  int nodes = 1;
  common::DType dtype = common::DType::bf16;

  int ranks_per_node() const { return ranks / nodes; }
};

/// @brief Fused AdamW over `params` parameters (fp32 master weights, m and v; low-precision copy out).
struct OptimizerOp {
  std::int64_t params = 0;
  double bytes() const { return 30.0 * static_cast<double>(params); }  // read g,p,m,v (16 B) + write p,m,v,w16 (14 B)
  double flops() const { return 12.0 * static_cast<double>(params); }
};

}  // namespace hardware
