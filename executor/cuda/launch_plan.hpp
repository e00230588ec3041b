// defines: executor::cuda::LaunchPlan (a StepGraph translated into the CUDA calls one rank issues:
//          which kernel or library call, with what shapes, on which stream, which events to record
//          and wait), plan_launches, check_cuda_plan, LaunchKind, GemmCall, TensorSlot
// Host-only C++ (no CUDA headers, STYLE rule 8): the GPU runner walks this list; the unit tests
// check it on machines without a GPU.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "sim/step_graph.hpp"

namespace executor::cuda {

/// @brief What one launch calls. GEMMs go to cuBLASLt, collectives to NCCL, the rest are our kernels
/// (named <op>_<pass>_kernel in executor/cuda/*.cu).
enum class LaunchKind : std::uint8_t {
  gemm,                 ///< cuBLASLt matmul, see GemmCall
  attention_forward,    ///< unfused: RoPE + QK^T (strided-batched GEMM) + causal softmax into the probs output + PV, GQA
  attention_backward,   ///< unfused: reads the kept P, then dV, dP, dS, dQ, dK; accumulates into dqkv
  flash_attention_forward,   ///< tiled online softmax, no score matrix in HBM; writes ctx and the log-sum-exp
  flash_attention_backward,  ///< recomputes P per key tile from the log-sum-exp; dQ, dK, dV in fp32 scratch
  norm_forward,         ///< LayerNorm or RMSNorm of each row
  norm_backward,        ///< input gradient (+ residual gradient) and fp32 weight gradient (+=)
  activation_forward,   ///< GeLU (tanh) or SwiGLU
  activation_backward,
  residual_forward,     ///< x + the row-parallel partials (column chunks side by side, TE's token chunks one under another)
  partial_sum,          ///< the sum of the tp partials of a GEMM + ReduceScatter (async-tp's local sum, FLUX's reduction; Launch::subs)
  embedding_forward,    ///< vocab-parallel token lookup (+ learned position on TP rank 0)
  embedding_backward,   ///< scatter-add into the fp32 embedding (and position) gradient
  cross_entropy_stats,  ///< per token: local sum exp(logit - shift), target logit, shift
  cross_entropy_loss,   ///< loss per token and dlogits
  all_reduce,           ///< NCCL, in place (sum)
  all_gather,           ///< NCCL, [rows/tp, cols] -> [rows, cols]
  reduce_scatter,       ///< NCCL, [rows, cols] -> [rows/tp, cols]
  send_recv,            ///< NCCL point-to-point: ncclSend of the input, or ncclRecv into the output (pipeline stages)
  tp_exchange,          ///< TP group point-to-point, grouped: ncclSend to one rank, ncclRecv from another (executor/tp_pieces.hpp)
  adamw,                ///< fused AdamW over every weight (ZeRO: over this rank's shards); zeroes the gradients
  bucket_reduce_scatter,  ///< ZeRO: pack a DP bucket's fp32 gradients, NCCL ReduceScatter, add into the shard, zero the gradients
  param_all_gather,       ///< ZeRO: NCCL AllGather of a parameter shard, unpacked into the bucket's weights
  // 2D / 2.5D grids (executor/grid_pieces.hpp): SUMMA's collectives rooted at rank Launch::root of
  // the row / column communicator, and the norms split over a grid row
  broadcast,              ///< NCCL Broadcast of the input (root) into the output (every rank)
  reduce,                 ///< NCCL Reduce of the partial onto the root: sets its outputs[1], or adds it (Launch::accumulate, fp32 gradient)
  grid_norm_stats,        ///< local row statistic Launch::part of x, NCCL AllReduce, into its column of the [T, 2] statistics
  grid_norm_sums,         ///< the norm backward's local row sums (from Launch::norm_task's operands), NCCL AllReduce
  grid_norm_forward,      ///< the norm of the local columns with the row statistics
  grid_norm_backward,     ///< the norm backward with the forward statistics and the all-reduced sums
};
std::string_view to_string(LaunchKind k);

/// @brief Operands of one issue of a GemmCall's shape: element offsets select row blocks of A and C
/// (the pieces of a decomposed TP site, executor/tp_pieces.hpp) or a column block of B.
struct GemmOperands {
  sim::TensorId a = 0, b = 0, c = 0;
  std::int64_t a_offset = 0, b_offset = 0, c_offset = 0;
};

/// @brief Row-major C[m, n] (+)= op(A) . op(B) with fp32 accumulation; element offsets select a
/// column block (the column chunk of a row-parallel weight under domino).
struct GemmCall {
  std::int64_t m = 0, n = 0, k = 0;
  sim::TensorId a = 0, b = 0, c = 0;
  bool trans_a = false, trans_b = false;
  std::int64_t lda = 0, ldb = 0, ldc = 0;  ///< leading dimensions (row-major: elements per row)
  std::int64_t b_offset = 0;               ///< element offset into B (column chunk)
  bool accumulate = false;                 ///< C += (weight gradients), else C =
  bool cast_a = false;                     ///< A is fp32 but B is not: cast A to B's dtype first (dlogits)
  /// A decomposed TP site's piece: the shape above issued once per entry on these operands (an
  /// AllGather step's rows of C, TE's chunk of every rank's rows, a peer step's rows of A, a weight
  /// gradient summed over the gathered pieces); empty: once on a, b, c at b_offset.
  std::vector<GemmOperands> parts{};
};

/// @brief One call the host issues. Waits come before the call on `stream`, the record after it.
struct Launch {
  std::uint32_t task = 0;
  LaunchKind kind = LaunchKind::gemm;
  sim::StreamId stream = 0;                  ///< the graph's stream (StepGraph::streams)
  bool once_per_step = false;                ///< only in the last micro-batch of a step
  bool step_start = false;                   ///< only in the first micro-batch of a step
  std::vector<std::uint32_t> waits;          ///< events (indices) to cudaStreamWaitEvent on first
  std::optional<std::uint32_t> record;       ///< event to cudaEventRecord after the call
  std::optional<GemmCall> gemm;              ///< for LaunchKind::gemm
  int send_to = -1, recv_from = -1;          ///< for LaunchKind::tp_exchange: TP ranks (ranks of the TP communicator); both
                                             ///< this rank: FLUX's local rows on Hopper, a device copy
  int subs = 1;                              ///< partial_sum: sub-chunks of the rows (inputs j x tp + o sum into sub-chunk j)
  // grids (executor/grid_pieces.hpp)
  int root = -1;                       ///< broadcast, reduce: the root's rank in the row / column communicator
  bool accumulate = false;             ///< reduce: the root adds the sum into an fp32 weight gradient
  int part = 0;                        ///< grid_norm_stats: 0 the sum of x, 1 the squared deviations
  sim::TensorId stats = 0, sums = 0;   ///< grid_norm_sums / backward: the forward's statistics; backward: the sums
  std::uint32_t norm_task = 0;         ///< grid_norm_sums: the norm backward whose operands it reads
};

/// @brief Where a tensor lives in the rank's device arena.
struct TensorSlot {
  std::uint64_t offset = 0;  ///< bytes from the arena base, 256-byte aligned
  std::uint64_t bytes = 0;   ///< rows x cols x dtype bytes (TensorInfo::bytes())
};

struct LaunchPlan {
  std::vector<Launch> launches;             ///< host issue order (= graph vertex order)
  std::uint32_t events = 0;                 ///< CUDA events to create
  std::vector<TensorSlot> tensors;          ///< indexed by TensorId
  std::uint64_t arena_bytes = 0;
  std::uint64_t attention_scratch_bytes = 0;  ///< largest attention task's scratch (compute stream only)
  std::uint64_t cast_scratch_bytes = 0;       ///< largest fp32 GEMM operand cast to the low-precision dtype
  std::uint64_t bucket_scratch_bytes = 0;     ///< ZeRO: largest padded bucket in fp32 plus its shard (per communication stream)
  std::uint64_t grid_scratch_bytes = 0;       ///< grids: the largest accumulated reduce or norm statistic (per communication stream)
  std::uint64_t weight_params = 0;            ///< elements over all weights (AdamW master, m, v)
  std::size_t cross_stream_edges = 0;         ///< dependencies that became event waits
};

/// @brief Translates `graph` (built by sim::build_step_graph) into the launches of TP rank
/// `tp_rank` (the pieces of a decomposed TP site touch rows that depend on it). Every cross-stream
/// edge becomes a wait on an event the producer records right after it; same-stream edges need
/// nothing (in-order streams). Throws common::ConfigError if the graph holds a task the CUDA
/// backend cannot run (call check_cuda_plan first for a friendlier message).
LaunchPlan plan_launches(const sim::StepGraph& graph, int tp_rank = 0);

/// @brief Why the CUDA backend refuses a plan (fp8, sequence-axis row slices, pipeline stages,
/// flash attention with a head dim its kernel does not take), as one line naming the key; nullopt
/// when it can run.
std::optional<std::string> check_cuda_plan(const sim::ModelSpec& model, const sim::Plan& plan);

}  // namespace executor::cuda
