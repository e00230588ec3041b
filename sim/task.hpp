// defines: sim::Task (one node of the step graph), TaskKind, Phase, Op, TensorInfo, TensorRole,
//          TensorId, FusedPiece
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <optional>
#include <variant>

#include "hardware/ops.hpp"
#include "sim/resources.hpp"

namespace sim {

/// @brief What a task does; the cost model prices it and the executor runs it.
using TaskKind = std::variant<hardware::GemmOp, hardware::AttentionOp, hardware::ElementwiseOp,
                              hardware::CollectiveOp, hardware::OptimizerOp>;

enum class Phase : std::uint8_t { fwd, bwd_dgrad, bwd_wgrad, dp_reduce, optimizer };
std::string_view to_string(Phase p);
bool parse_phase(std::string_view s, Phase& out);

/// @brief The operation's place in the model: what the executor dispatches on, with Phase.
enum class Op : std::uint8_t {
  embedding,      ///< token (+ position) lookup; bwd: scatter-add into the embedding gradient
  norm1,          ///< pre-attention norm
  qkv,            ///< column-parallel QKV projection
  attention,      ///< attention core (+ RoPE) per local head
  out_proj,       ///< row-parallel output projection (column chunks under domino)
  attn_comm,      ///< TP collective of the attention block (AllReduce, or AllGather / ReduceScatter with SP)
  residual1,      ///< x + attention output
  norm2,
  fc1,            ///< column-parallel (gate and up for SwiGLU)
  activation,
  fc2,            ///< row-parallel (column chunks under domino)
  mlp_comm,
  residual2,
  final_norm,
  lm_head,        ///< vocab-parallel logits (tied: the embedding weight)
  loss_comm,      ///< vocab-parallel cross-entropy statistics (max, sum-exp, target logit)
  loss,           ///< cross-entropy and its gradient
  embed_comm,     ///< vocab-parallel embedding AllReduce (fwd) / LM-head input-gradient AllReduce (bwd)
  dp_reduce,      ///< data-parallel gradient reduction of one bucket
  optimizer,
  pipe,           ///< pipeline point-to-point transfer: the activation to the next stage (fwd), its gradient to the previous (bwd)
  param_gather,   ///< ZeRO: all-gather of a bucket's (stage 1/2: updated; stage 3: sharded) parameters
};
std::string_view to_string(Op o);
bool parse_op(std::string_view s, Op& out);

using TensorId = std::uint32_t;

enum class TensorRole : std::uint8_t {
  input,       ///< token ids / targets (int32 stored in a float-sized slot count)
  activation,  ///< produced in forward; saved ones count towards activation memory
  gradient,    ///< activation gradient in backward
  weight,
  weight_grad, ///< fp32 main gradient, accumulated across slices and micro-batches
};
std::string_view to_string(TensorRole r);
bool parse_tensor_role(std::string_view s, TensorRole& out);

/// @brief A 2-D buffer [rows, cols] of `dtype`. Activations are token-major: row = token
/// (batch-major, then position) of the slice the tensor belongs to. Weights are [in, out] (Y = X W),
/// except the embedding and the LM head, stored [vocab / tp, hidden] (logits = X W^T).
struct TensorInfo {
  std::int64_t rows = 0, cols = 0;
  common::DType dtype = common::DType::bf16;
  TensorRole role = TensorRole::activation;
  Op op = Op::embedding;        ///< the op whose output (or weight) this is
  bool backward = false;        ///< a gradient flowing backward (for naming)
  std::int16_t layer = -1;      ///< -1 outside the layers
  std::int8_t slice = -1;       ///< row slice, -1 if not sliced
  std::int8_t chunk = -1;       ///< column chunk, -1 if not chunked
  std::uint8_t variant = 0;     ///< distinguishes tensors with equal tags (e.g. weight 0 = matrix, 1 = norm bias)
  std::int8_t model_chunk = -1; ///< pipelined graphs: the rank's model chunk (virtual stage) it belongs to; -1 otherwise
  std::int16_t micro = -1;      ///< pipelined graphs: the step's micro-batch it belongs to; -1: every micro-batch's (weights) or not pipelined

  double bytes() const { return static_cast<double>(rows) * static_cast<double>(cols) * common::dtype_bytes(dtype); }
  std::string name() const;
};

/// @brief What a task is of one fused GEMM + communication kernel (strategy fused: FLUX's kernels,
/// hardware/tp_overlap.hpp), which the cost table prices as that kernel's share instead of as a
/// kernel or an NCCL call of its own (sim/cost_table.hpp). The task's kind keeps the piece's own
/// shape (the rows it computes, the bytes it moves): what the executor runs and MFU counts.
enum class FusedPiece : std::uint8_t {
  none,
  /// a tile-row chunk of the kernel's GEMM: 1 / Task::fused_of of the whole GEMM's time (the kernel
  /// of fused_of x its rows), no kernel latency, wave tail or op overhead of its own
  gemm,
  /// all-gather + GEMM: one peer's shard brought by copy engines, 1 / (tp - 1) of NCCL's all-gather
  /// of the site (tp = Task::fused_of) at interference.copy_engine_bandwidth
  ag_copy,
  /// the site's first ag_copy, which also carries the all-gather's latency
  ag_copy_first,
  /// GEMM + reduce-scatter, Ampere: rows the GEMM's epilogue stores into their owner's buffer at one
  /// NVLink port's speed
  rs_store,
  /// GEMM + reduce-scatter, Hopper: tiles the kernel's fetch warps pull at gpu.fused_rs_pull_gb_per_s
  /// (a one-rank op: the local rows' pass through the same pipeline, on no link)
  rs_pull,
};
std::string_view to_string(FusedPiece f);
bool parse_fused_piece(std::string_view s, FusedPiece& out);

/// @brief One node of the step graph.
struct Task {
  TaskKind kind;
  StreamId stream = 0;             ///< index into StepGraph::streams
  Op op = Op::embedding;
  Phase phase = Phase::fwd;
  std::optional<GroupId> group;    ///< collectives: index into StepGraph::groups
  std::int16_t layer = -1;  ///< -1 outside the transformer layers
  std::int8_t slice = -1;   ///< row slice (-1: whole micro-batch)
  std::int8_t chunk = -1;   ///< column chunk (-1: whole)
  std::int8_t model_chunk = -1;  ///< pipelined graphs: the rank's model chunk; -1 outside a pass or not pipelined
  std::int16_t micro = -1;  ///< pipelined graphs (StepGraph::micro_batches > 1): the micro-batch; -1 otherwise
  bool once_per_step = false;  ///< DP reduction and optimizer: only after the last micro-batch
  bool step_start = false;     ///< only in the step's first micro-batch (ZeRO: the parameter gather of the updated weights)
  bool recompute = false;      ///< a forward op run again in the backward (activation recompute); phase fwd
  std::uint16_t launches = 1;  ///< kernels / collectives the host issues for this task
  /// Collectives: SMs the transfer holds when the strategy sets them (TE userbuffers' num_sm); 0: moved by
  /// copy engines (no SMs, at interference.copy_engine_bandwidth of NCCL's bandwidth); -1: NCCL's
  /// channels, as the cost model prices it (sim/cost_table.hpp)
  std::int16_t comm_sms = -1;
  FusedPiece fused = FusedPiece::none;  ///< a piece of a fused kernel (strategy fused), priced as its share
  std::uint16_t fused_of = 0;           ///< FusedPiece::gemm: the kernel's row chunks; ag_copy(_first): tp
  std::uint32_t operand_begin = 0;  ///< into StepGraph::operands: inputs then outputs
  std::uint16_t n_inputs = 0, n_outputs = 0;
  std::uint32_t seq = 0;    ///< collectives: position among this group's collectives (cross-rank matching)

  bool is_collective() const { return std::holds_alternative<hardware::CollectiveOp>(kind); }
  /// Model FLOPs (MFU accounting); 0 for communication and memory-bound tasks.
  double flops() const;
};

}  // namespace sim
