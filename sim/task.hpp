// defines: sim::Task (one node of the step graph), TaskKind, Stream, Phase, Op, CommGroup,
//          TensorInfo, TensorRole, TensorId, task_class
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "hardware/ops.hpp"

namespace sim {

/// @brief What a task does; the cost model prices it and the executor runs it.
using TaskKind = std::variant<hardware::GemmOp, hardware::AttentionOp, hardware::ElementwiseOp,
                              hardware::CollectiveOp, hardware::OptimizerOp>;

/// @brief In-order queues (CUDA streams). Edges across streams are events.
enum class Stream : std::uint8_t { compute, tp_comm, dp_comm };
inline constexpr int kStreams = 3;
std::string_view to_string(Stream s);

enum class Phase : std::uint8_t { fwd, bwd_dgrad, bwd_wgrad, dp_reduce, optimizer };
std::string_view to_string(Phase p);

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
};
std::string_view to_string(Op o);

/// @brief Which communicator a collective runs on.
enum class CommGroup : std::uint8_t { none, tp, dp };

using TensorId = std::uint32_t;

enum class TensorRole : std::uint8_t {
  input,       ///< token ids / targets (int32 stored in a float-sized slot count)
  activation,  ///< produced in forward; saved ones count towards activation memory
  gradient,    ///< activation gradient in backward
  weight,
  weight_grad, ///< fp32 main gradient, accumulated across slices and micro-batches
};

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

  double bytes() const { return static_cast<double>(rows) * static_cast<double>(cols) * common::dtype_bytes(dtype); }
  std::string name() const;
};

/// @brief One node of the step graph.
struct Task {
  TaskKind kind;
  Stream stream = Stream::compute;
  Op op = Op::embedding;
  Phase phase = Phase::fwd;
  CommGroup group = CommGroup::none;
  std::int16_t layer = -1;  ///< -1 outside the transformer layers
  std::int8_t slice = -1;   ///< row slice (-1: whole micro-batch)
  std::int8_t chunk = -1;   ///< column chunk (-1: whole)
  bool once_per_step = false;  ///< DP reduction and optimizer: only after the last micro-batch
  std::uint16_t launches = 1;  ///< kernels / collectives the host issues for this task
  std::uint32_t operand_begin = 0;  ///< into StepGraph::operands: inputs then outputs
  std::uint16_t n_inputs = 0, n_outputs = 0;
  std::uint32_t seq = 0;    ///< collectives: position among this group's collectives (cross-rank matching)

  bool is_collective() const { return std::holds_alternative<hardware::CollectiveOp>(kind); }
  /// Model FLOPs (MFU accounting); 0 for communication and memory-bound tasks.
  double flops() const;
};

/// @brief "GEMM", "attention", "element-wise", "optimizer", or the collective with its group:
/// "AllReduce (tp)", "AllGather (tp)", "ReduceScatter (tp)", "AllReduce (dp)" — the classes
/// validation and reports sum tasks by.
std::string task_class(const Task& t);

}  // namespace sim
