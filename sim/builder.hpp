// defines: sim::Builder (the vocabulary a strategy schedules one rank's training step with),
//          Slice, BackwardTasks
//
// Legend - the dimension names used here, in sim/shapes.hpp and in the strategies:
//   B  sequences of a row slice      S  positions of a row slice     T  tokens of a slice = B x S
//   R  rows a norm / residual kernel works on: T, or T / tp under sequence parallelism
//   h  hidden size     tp tensor-parallel size     L  layers
//   Q  QKV width / tp  A  attention output width / tp = h / tp     F  ffn_hidden / tp
//   F1 FC1 width / tp (2F for SwiGLU)     V  vocab / tp     C  column chunks of out-proj and FC2
// Activations are token-major [rows, cols] tensors; weights [in, out] (Y = X W).
//
// How a graph is made (build_step_graph): a Builder for the plan declares the rank's streams
// (compute, tp_comm, dp_comm, and param_comm under ZeRO), its communicator groups (tp, dp) and its
// weights; the plan's strategy (sim/strategy.hpp) calls the emit_* pieces below in the order the
// host issues them; finish() ends the step (the last DP bucket, sequence-parallel norm gradients,
// optimizer, ZeRO's parameter gathers) and assembles the DAG.
//
// The memory savers are the builder's, so every strategy gets them without a line of its own:
//  - activation recompute (sim/recompute.hpp): the first backward piece of a recomputed chunk's
//    top layer (emit_mlp_bwd) first re-emits the chunk's forward for that slice (tasks flagged
//    Task::recompute, TP collectives included); selective recompute re-runs the attention forward
//    right before the attention backward. The backward then reads the recomputed tensors, so the
//    first forward's ones are read by nobody after the forward: the saved activations that
//    disappear (sim/memory.hpp).
//  - ZeRO (sim/zero_emit.cpp): DP buckets are formed up front in reverse parameter order as
//    Megatron-LM's DDP does (ZeRO-3: one bucket per layer, FSDP's unit) and each is reduced when its
//    last gradient is ready (or all after the backward without overlap_grad_reduce); from stage 1
//    they are reduce-scattered into fp32 shards, the optimizer steps the shards and the updated
//    parameters are all-gathered on param_comm (stage 1/2: at the start of the next step's forward
//    with overlap_param_gather, else after the optimizer; stage 3: every layer before its forward
//    and again before its backward, one layer ahead). Dependencies are derived from the tensors each task reads and writes (read after write,
// write after read, write after write), so a strategy decides only what runs on which slice, in
// which order, on which stream - and may add ordering edges (edge()) where the real framework
// serialises more than the data requires.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <vector>

#include "hardware/cluster.hpp"
#include "sim/shapes.hpp"
#include "sim/step_graph.hpp"

namespace sim {

/// @brief One row slice of the micro-batch: B sequences of S positions starting at q_offset.
struct Slice {
  int index = 0;
  std::int64_t batch = 0;     ///< B
  std::int64_t seq = 0;       ///< S
  std::int64_t q_offset = 0;  ///< first position (sequence axis)
  std::int64_t tokens() const { return batch * seq; }
};

/// @brief What a backward block issued that a schedule may want to order: the input-gradient
/// collective (absent at tp 1) and the weight-gradient GEMM issued after it.
struct BackwardTasks {
  std::optional<std::uint32_t> collective;
  std::uint32_t wgrad = 0;
};

/// @brief Builds one rank's step graph. Not thread-safe; one per graph.
class Builder {
 public:
  /// The streams the emit_* pieces issue on. A strategy may point them elsewhere (all at compute:
  /// no overlap at all) or at streams it adds (add_stream) before it emits.
  struct Streams {
    StreamId compute = 0, tp_comm = 0, dp_comm = 0;
  };

  Builder(const ModelSpec& model, const hardware::ClusterSpec& cluster, const Plan& plan, int rank);

  // ---- what is being built --------------------------------------------------------------------
  const ModelSpec& model() const { return m_; }
  const hardware::ClusterSpec& cluster() const { return c_; }
  const Plan& plan() const { return p_; }
  const Shapes& shapes() const { return sh_; }
  int layers() const { return m_.layers; }
  /// The row slices of the micro-batch (one, the whole micro-batch, when the plan does not slice).
  const std::vector<Slice>& slices() const { return slices_; }

  // ---- resources --------------------------------------------------------------------------------
  Streams& streams() { return streams_; }
  StreamId add_stream(StreamSpec s);
  GroupId add_group(GroupSpec g);
  GroupId tp_group() const { return tp_group_; }
  GroupId dp_group() const { return dp_group_; }
  /// Whether gradients are reduced over data parallelism (dp > 1): DP buckets, ZeRO.
  bool reduces_dp() const { return p_.dp > 1; }

  // ---- the layer vocabulary: forward, per slice, in data order ------------------------------------
  void emit_embedding(const Slice& s);             ///< token (+ position) lookup; vocab-parallel AllReduce
  void emit_attn_fwd(int l, const Slice& s);       ///< norm1, QKV, attention, out-proj chunks and their collectives
  void emit_attn_residual(int l, const Slice& s);  ///< x + attention output (consumes the collectives)
  void emit_mlp_fwd(int l, const Slice& s);        ///< norm2, FC1, activation, FC2 chunks and their collectives
  void emit_mlp_residual(int l, const Slice& s);
  void emit_head_fwd(const Slice& s);  ///< final norm, LM head, vocab-parallel loss statistics
  void emit_loss(const Slice& s);      ///< cross-entropy and its gradient
  // ---- backward, per slice, in data order (layers last to first) ----------------------------------
  BackwardTasks emit_head_bwd(const Slice& s);
  void emit_final_norm_bwd(const Slice& s);
  /// FC2 dgrad + wgrad, activation, FC1 dgrad, its collective, then FC1 wgrad (issued after the
  /// collective so that it can overlap it).
  BackwardTasks emit_mlp_bwd(int l, const Slice& s);
  void emit_mlp_norm_bwd(int l, const Slice& s);
  /// out-proj dgrad + wgrad, attention backward, QKV dgrad, its collective, then QKV wgrad.
  BackwardTasks emit_attn_bwd(int l, const Slice& s);
  void emit_attn_norm_bwd(int l, const Slice& s);
  void emit_embedding_bwd(const Slice& s);
  // ---- weight gradients complete for the micro-batch (call after every slice's contribution);
  // they fill data-parallel buckets in this order, each bucket one AllReduce on dp_comm
  void head_grads_ready();       ///< untied LM head
  void mlp_grads_ready(int l);   ///< the norm of the block after it (layer l + 1's norm1, or the final norm), FC2, FC1
  void attn_grads_ready(int l);  ///< norm2, out-proj, QKV
  void embedding_grads_ready();  ///< layer 0's norm1, positions, embedding

  // ---- low level: what the pieces above are made of ------------------------------------------------
  /// A tensor [rows, cols] (sim/task.hpp, TensorInfo); `slice` is dropped when the plan does not slice.
  TensorId tensor(std::int64_t rows, std::int64_t cols, common::DType dt, TensorRole role, Op op, int layer, int slice,
                  int chunk = -1, bool backward = false, std::uint8_t variant = 0);
  /// A task on the compute stream for slice `s` (change its stream, group or flags before add()).
  Task task(TaskKind kind, Op op, Phase phase, int layer, const Slice& s, int chunk = -1) const;
  /// Issues `t` (after everything issued so far), reading `in` and writing `out`; returns its id.
  std::uint32_t add(Task t, std::initializer_list<TensorId> in, std::initializer_list<TensorId> out) {
    return add(std::move(t), std::span<const TensorId>(in.begin(), in.size()),
               std::span<const TensorId>(out.begin(), out.size()));
  }
  std::uint32_t add(Task t, std::span<const TensorId> in, std::span<const TensorId> out);
  /// An ordering edge beyond the data dependencies: `to` waits for `from` (from < to).
  void edge(std::uint32_t from, std::uint32_t to) {
    if (from == to) return;
    if (!edges_.empty() && edges_.back().first == from && edges_.back().second == to) return;
    edges_.emplace_back(from, to);
  }

  /// Ends the step and assembles the graph. Call once, after the strategy's schedule.
  StepGraph finish();

 private:
  struct LayerWeights {
    TensorId norm1, qkv, out, norm2, fc1, fc2;
    TensorId d_norm1, d_qkv, d_out, d_norm2, d_fc1, d_fc2;
  };
  static constexpr TensorId kNoTensor = ~TensorId{0};
  /// Per-slice tensors that cross from one emit_* call to the next.
  struct SliceState {
    TensorId x = kNoTensor;         ///< residual stream entering the current block
    std::vector<TensorId> partial;  ///< row-parallel outputs after their collective (one per column chunk)
    TensorId dy = kNoTensor;        ///< backward: gradient of the residual stream leaving the current block
    TensorId d_in = kNoTensor;      ///< backward: input gradient after its collective (norm backward reads it)
  };
  /// Forward tensors of one layer and slice that backward reads.
  struct Saved {
    TensorId x = kNoTensor, x_mid = kNoTensor;  ///< layer input, after the attention residual
    TensorId n1 = kNoTensor, n2 = kNoTensor;    ///< norm outputs (sequence-sharded under SP: the backward gathers them again)
    TensorId qkv = kNoTensor, ctx = kNoTensor, f1 = kNoTensor, act = kNoTensor;
    TensorId aux = kNoTensor;   ///< attention: probabilities (unfused) or log-sum-exp (flash)
    TensorId dqkv = kNoTensor;  ///< backward: dQ, dK, dV of this slice
  };
  /// One DP bucket: gradients reduced together (Megatron-LM's DDP bucket; ZeRO-3: one layer).
  struct Bucket {
    std::vector<TensorId> grads, weights;  ///< in bucket order (reverse parameter order)
    std::int64_t params = 0;
    int pending = 0;       ///< gradients not yet ready in this micro-batch
    bool full = false;     ///< reached dp_bucket_mb (a partial last bucket is reduced in finish())
    int unit = -1;         ///< ZeRO-3: the layer whose weights it holds (-1: embedding, positions, final norm, head)
    int first_use = 0;     ///< forward position that first reads its weights (-1 embedding, l layer, L head)
    TensorId grad_shard = kNoTensor, param_shard = kNoTensor;  ///< ZeRO: this rank's 1/dp of the bucket
  };

  TensorId act(std::int64_t rows, std::int64_t cols, Op op, int layer, int slice, int chunk = -1) {
    return tensor(rows, cols, sh_.act_dtype, TensorRole::activation, op, layer, slice, chunk);
  }
  TensorId grad(std::int64_t rows, std::int64_t cols, Op op, int layer, int slice, int chunk = -1) {
    return tensor(rows, cols, sh_.act_dtype, TensorRole::gradient, op, layer, slice, chunk, true);
  }
  Task tp_task(hardware::CollectiveKind k, double bytes, Op op, Phase phase, int layer, const Slice& s, int chunk = -1) const;
  std::pair<TensorId, std::optional<std::uint32_t>> reduce_out(TensorId x, Op op, Phase phase, int layer, const Slice& s,
                                                               int chunk = -1);
  TensorId gather_in(TensorId x, Op op, Phase phase, int layer, const Slice& s);
  hardware::ElementwiseOp ew(hardware::ElementwiseKind k, std::int64_t elements, double bytes_per_element,
                             bool backward = false) const {
    return hardware::ElementwiseOp{
        .kind = k, .elements = elements, .bytes = static_cast<double>(elements) * bytes_per_element, .backward = backward};
  }
  hardware::ElementwiseKind norm_kind() const;
  hardware::ElementwiseKind activation_kind() const;
  std::int64_t rows(const Slice& s) const { return p_.sequence_parallel ? s.tokens() / p_.tp : s.tokens(); }
  int bpe() const { return common::dtype_bytes(sh_.act_dtype); }
  void emit_weights();
  void grad_ready(TensorId dw);
  void emit_sp_norm_grads();
  void emit_optimizer();
  // activation recompute (sim/recompute_emit.cpp)
  void ensure_recomputed(int l, const Slice& s);
  void recompute_chunk(int chunk, const Slice& s);
  TensorId recompute_attention(int l, const Slice& s);
  // DP buckets and ZeRO (sim/zero_emit.cpp)
  void plan_buckets();
  void flush_bucket(int b);
  std::uint32_t emit_param_gather(int b, bool step_start, bool once_per_step);
  void gather_for_forward(int position);   ///< ZeRO: the forward reaches the embedding (-1), layer l, or the head (L)
  void gather_for_backward(int position);  ///< ZeRO-3: the backward reaches layer l (L: the head)
  void emit_zero_step_end();

  const ModelSpec& m_;
  const hardware::ClusterSpec& c_;
  const Plan& p_;
  Shapes sh_;
  bool sliced_ = false;
  int tp_nodes_ = 1, dp_nodes_ = 1;
  Streams streams_;
  GroupId tp_group_ = 0, dp_group_ = 0;
  std::vector<std::uint32_t> group_seq_;  // next sequence number per group
  StepGraph g_;
  struct TensorState {
    std::int32_t last_writer, readers;
  };
  struct ReaderLink {
    std::int32_t task, next;
  };
  std::vector<TensorState> state_;
  std::vector<ReaderLink> readers_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges_;
  std::vector<Slice> slices_;
  std::vector<SliceState> ss_;
  std::vector<LayerWeights> lw_;
  std::vector<std::vector<Saved>> saved_;                     // [layer][slice]
  std::vector<std::vector<std::vector<TensorId>>> kv_reads_;  // [layer][slice] qkv tensors attention reads
  TensorId w_emb_ = 0, w_pos_ = 0, w_head_ = 0, w_fnorm_ = 0, d_emb_ = 0, d_pos_ = 0, d_head_ = 0, d_fnorm_ = 0;
  std::vector<TensorId> tokens_, targets_, nf_, logits_, stats_, dlogits_;
  std::vector<TensorId> all_weights_, all_grads_;
  std::int64_t rank_params_ = 0;
  // ---- recompute
  std::vector<int> chunk_of_layer_;                    // -1: kept whole
  std::vector<RecomputeChunk> chunks_;
  std::vector<std::vector<char>> recomputed_;          // [chunk][slice]
  bool recomputing_ = false;                           // tasks made now are flagged Task::recompute
  // ---- DP buckets and ZeRO
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;                         // per tensor id (weight gradients): its bucket, -1 none
  std::vector<int> deferred_;                          // buckets complete but held for finish()
  StreamId param_comm_ = 0;                            // ZeRO parameter gathers
  std::vector<int> gather_order_;                      // ZeRO: buckets by first forward use
  std::size_t gathered_fwd_ = 0;                       // ZeRO: gathers issued in the forward (a prefix of gather_order_)
  std::vector<char> gathered_bwd_;                     // ZeRO-3: per bucket, gathered again for the backward
  std::vector<std::int32_t> unit_last_reader_;         // ZeRO-3: per unit, last task that read its weights
  std::vector<std::int32_t> unit_of_weight_;           // ZeRO-3: per tensor id (weights): its unit + 1, 0 none
};

}  // namespace sim
