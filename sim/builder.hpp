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
// Pipelined plans (pp > 1; sim/pipeline_schedule.hpp): the graph is one pipeline stage's whole step.
// The builder walks the stage's schedule - every forward and backward pass of every micro-batch
// through each of its model chunks, in order - and for each pass calls the strategy's schedule
// with only that pass's pieces live: a forward pass emits the forward pieces of the chunk's layers
// [first_layer(), end_layer()) and ignores the backward ones, and the reverse. At a chunk's edges
// the pieces change meaning: emit_embedding receives the activation from the previous virtual stage
// when the chunk does not hold the embedding, emit_head_fwd sends it on when the chunk does not hold
// the head, emit_head_bwd / emit_embedding_bwd receive and send the gradient. So a strategy that
// schedules [first_layer(), end_layer()) schedules a stage, and Domino and Megatron-LM work inside
// every stage unchanged.
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
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <vector>

#include "hardware/cluster.hpp"
#include "sim/pipeline_schedule.hpp"
#include "sim/shapes.hpp"
#include "sim/step_graph.hpp"
#include "sim/strategy.hpp"

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
  /// The model's layer count.
  int layers() const { return m_.layers; }
  /// The layers the pass being emitted covers, [first_layer(), end_layer()): every layer without
  /// pipelining, the current model chunk's with it. Strategies loop over this range.
  int first_layer() const { return range_.first; }
  int end_layer() const { return range_.end; }
  /// Whether the layers being emitted start at the embedding / end at the LM head (pipelining:
  /// virtual stage 0 / the last one; always without).
  bool holds_embedding() const { return range_.first == 0; }
  bool holds_head() const { return range_.end == m_.layers; }
  /// The row slices of the micro-batch (one, the whole micro-batch, when the plan does not slice).
  const std::vector<Slice>& slices() const { return slices_; }

  // ---- resources --------------------------------------------------------------------------------
  Streams& streams() { return streams_; }
  StreamId add_stream(StreamSpec s);
  GroupId add_group(GroupSpec g);
  GroupId tp_group() const { return tp_group_; }
  GroupId dp_group() const { return dp_group_; }
  /// Whether gradients are reduced over data parallelism (dp > 1; on a 2.5D grid also over its
  /// depth, whose layers hold copies of the weights): DP buckets, ZeRO.
  bool reduces_dp() const { return grad_ranks_ > 1; }

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
  /// collective so that it can overlap it). With `wgrad_before_collective` FC1's wgrad is issued
  /// before the collective instead: PyTorch autograd's MmBackward computes both gradients of a
  /// matmul before the next node (DeepSpeed-Domino's _CopyToModelParallelRegionA) issues the
  /// all-reduce, so the collective cannot overlap its own wgrad.
  BackwardTasks emit_mlp_bwd(int l, const Slice& s, bool wgrad_before_collective = false);
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
  /// handle.wait() on the compute stream: the next task issued on the compute stream waits for
  /// `task` (an asynchronous collective) - the next kernel a framework issues after it waits, not
  /// only the kernels that read its output.
  void next_compute_waits_for(std::uint32_t task) { wait_for_ = task; }
  /// An ordering edge beyond the data dependencies: `to` waits for `from` (from < to).
  void edge(std::uint32_t from, std::uint32_t to) {
    if (from == to) return;
    if (!edges_.empty() && edges_.back().first == from && edges_.back().second == to) return;
    edges_.emplace_back(from, to);
  }

  /// Pipelined plans: emits the stage's whole step - every pass of its schedule
  /// (pipeline_order), each through `schedule` (the strategy's) with only that pass's pieces live.
  void emit_pipeline(void (*schedule)(Builder&));

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
  using RowGemm = hardware::GemmOp (Shapes::*)(std::int64_t) const;
  using ChunkGemm = hardware::GemmOp (Shapes::*)(std::int64_t, std::int64_t) const;
  /// A column-parallel GEMM (or an input-gradient GEMM) on the gathered `x`: gather_in, then
  /// `gemm` of the slice's tokens reading it and `w`, writing make_out() (made after the gathered
  /// tensor, as before strategies could change this) - or, with
  /// TpOverlap::ag_peer_steps, tp GEMM steps on the shards as point-to-point steps bring them.
  /// Returns the gathered pieces (what a weight-gradient GEMM reads). A site's steps after its
  /// first are pieces of one framework call (TE's C++ loop, PyTorch's fused op): Task::launches 0,
  /// no host launch and no stack op_overhead of their own (sim/cost_table.hpp); so are the chunks'
  /// collectives and copy-engine steps.
  std::vector<TensorId> gathered_gemm(TensorId x, Op comm, Phase phase, int layer, const Slice& s, RowGemm gemm, Op op, TensorId w,
                                      const std::function<TensorId()>& make_out);
  /// A row-parallel GEMM and its TP collectives (out-proj, FC2 forward) into st.partial: column
  /// chunks (Domino's col_slices), token chunks each reduce-scattered (TpOverlap::rs_splits), tp
  /// peer steps and a local sum (TpOverlap::rs_peer_steps), or FLUX's fused kernel (TpOverlap::fused).
  void reduced_gemm(TensorId x, TensorId w, ChunkGemm gemm, Op op, Op comm, int layer, const Slice& s);
  // ---- FLUX's fused kernels (TpOverlap::fused; strategy fused, sim/strategy_fused.cpp) ----------
  /// How a fused GEMM + ReduceScatter moves its partial rows: on Ampere the epilogue stores them into
  /// their owner's buffer (FusedPiece::rs_store), on Hopper the kernel pulls every tile, the local
  /// ones too (rs_pull); on the CPU cluster each piece is what the CPU backend runs, an MPI
  /// point-to-point exchange priced as such (no FusedPiece: there is no FLUX kernel to price).
  enum class FusedRs : std::uint8_t { store, pull, mpi };
  /// AllGather + GEMM as one kernel: the tp - 1 peers' shards copied first (FLUX issues its copies
  /// before the GEMM kernel), one after another on fused_comm (a ring, as async-tp's steps, so that
  /// shard k arrives k-th), then the GEMM in tp tile-row chunks, the local shard's first, each on
  /// the shard it reads. Returns the pieces (what a weight-gradient GEMM reads).
  std::vector<TensorId> fused_gathered_gemm(TensorId x, Op comm, Phase phase, int layer, const Slice& s, RowGemm gemm, Op op,
                                            TensorId w, TensorId out);
  /// GEMM + ReduceScatter as one kernel (out-proj, FC2 forward: phase fwd; QKV, FC1 input
  /// gradients: bwd_dgrad): the GEMM of `x`'s rows in tp x sub tile-row chunks (`gemm` of a chunk's
  /// rows), the peers' rows first and the local ones last, each chunk's partial moved to its owner
  /// on fused_comm while the next chunk computes (FusedRs), then the local reduction of the tp
  /// partials of this rank's rows (an element-wise kernel reading tp segments, writing one).
  /// Task::chunk of a chunk and its transfer: peer offset x sub + sub-chunk (executor/tp_pieces.hpp).
  /// Returns the reduced [T / tp, h] rows and the last transfer.
  std::pair<TensorId, std::optional<std::uint32_t>> fused_reduced_gemm(TensorId x, TensorId w,
                                                                       const std::function<hardware::GemmOp(std::int64_t)>& gemm,
                                                                       Op op, Op comm, Phase phase, int layer, const Slice& s);
  /// Sub-chunks of each peer's rows in a fused GEMM + ReduceScatter of `whole` with R rows per
  /// rank: on Hopper about one wave of the kernel's tiles each (its waves / tp, at most
  /// TpOverlap::kFusedMaxSubchunks, dividing R), else 1.
  int fused_subchunks(const hardware::GemmOp& whole, std::int64_t R) const;
  /// TpOverlap::bulk_sms: task `id`, if it is a collective, becomes a bulk overlap (its SMs, no
  /// launch of its own), started no earlier than compute task `after` ends (the task before the GEMM it overlaps).
  void bulk_overlap(std::size_t id, std::optional<std::uint32_t> after = std::nullopt);
  hardware::ElementwiseOp ew(hardware::ElementwiseKind k, std::int64_t elements, double bytes_per_element,
                             bool backward = false) const {
    return sh_.elementwise(k, elements, bytes_per_element, backward);
  }
  hardware::ElementwiseKind norm_kind() const;
  hardware::ElementwiseKind activation_kind() const;
  std::int64_t rows(const Slice& s) const { return p_.sequence_parallel ? s.tokens() / p_.tp : s.tokens(); }
  int bpe() const { return sh_.bpe(); }
  void emit_weights();
  void grad_ready(TensorId dw);
  void emit_sp_norm_grads();
  /// a once-per-step fp32 all-reduce of gradients over `group` (DP buckets of a pipelined plan, the
  /// tied embedding, sequence-parallel norm weights): `grads` are read and written in place
  void add_step_grad_all_reduce(std::int64_t bytes, int ranks, int nodes, StreamId stream, GroupId group,
                                std::span<const TensorId> grads);
  void emit_embedding_grads();
  void flush_pp_bucket();  ///< pipelined plans: the DP bucket being filled (grad_ready)
  void emit_optimizer();
  // pipelining (sim/builder_pipeline.cpp)
  enum class Live : std::uint8_t { all, forward, backward };  ///< which pieces of the strategy's schedule emit
  bool skip_fwd() const { return live_ == Live::backward && !recomputing_; }  ///< recompute re-emits forward pieces in a backward pass
  bool skip_bwd() const { return live_ == Live::forward; }
  void setup_pipeline(int rank);
  /// A point-to-point transfer with the neighbouring virtual stage: sends `x`, or receives into a new
  /// tensor of `rows` x h (returned). Forward: the activation to the next stage; backward: its gradient to the previous.
  TensorId transfer(bool forward, bool send, TensorId x, std::int64_t rows, const Slice& s);
  TensorId target(const Slice& s);
  /// Per-pass state: what crosses from one emit_* call to the next within a (micro-batch, chunk).
  struct PassState;
  void save_pass(PassState& ps);
  void load_pass(PassState& ps);
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
  // 2D / 2.5D tensor parallelism: SUMMA layers on a q x q (x d) grid (sim/builder_grid.cpp)
  struct Grid {
    // per row slice (domino on a grid: each slice's collectives on communicators of their own)
    std::vector<GroupId> row, col;
    std::vector<StreamId> row_comm, col_comm;
    int row_nodes = 1, col_nodes = 1;
  } grid_;
  void setup_grid(int rank);
  Task grid_task(hardware::CollectiveKind k, double bytes, bool row, Op op, Phase phase, int layer, const Slice& s, int chunk,
                 common::DType dt) const;
  /// y = x w in q SUMMA steps: step i broadcasts the input block along the grid row and the weight
  /// block along the grid column, then multiplies them (`step`, accumulated into y); the next
  /// step's broadcasts are issued before the current GEMM (Colossal-AI's double buffering).
  void summa_fwd(TensorId x, TensorId w, TensorId y, hardware::GemmOp step, Op op, Op comm, int layer, const Slice& s);
  /// dx = dy w^T (q column broadcasts of w, q GEMMs, q row reduces of the partial dx) and then
  /// dw += x^T dy (q row broadcasts of x, q GEMMs, q column reduces of the partial dw); the compute
  /// stream waits for each half's last reduce. Returns the last reduce.
  std::uint32_t summa_bwd(TensorId dy, TensorId x, TensorId w, TensorId dx, TensorId dw, hardware::GemmOp dgrad, hardware::GemmOp wgrad,
                          Op op, Op comm, int layer, const Slice& s);
  /// A norm on the grid: its statistics (sum and sum of squares per token, fp32) all-reduced along
  /// the grid row, then the kernel on the local [T, h/q] block.
  TensorId grid_norm_fwd(TensorId x, TensorId w, Op op, int layer, const Slice& s);
  /// Backward: the two per-token sums all-reduced along the row; the norm kernel issued next waits.
  void grid_norm_bwd_stats(TensorId d_in, Op op, int layer, const Slice& s);
  void emit_grid_embedding(const Slice& s);
  void emit_grid_attn_fwd(int l, const Slice& s);
  void emit_grid_mlp_fwd(int l, const Slice& s);
  void emit_grid_head_fwd(const Slice& s);
  BackwardTasks emit_grid_head_bwd(const Slice& s);
  BackwardTasks emit_grid_mlp_bwd(int l, const Slice& s);
  BackwardTasks emit_grid_attn_bwd(int l, const Slice& s);
  void emit_grid_embedding_bwd(const Slice& s);
  void emit_grid_norm_grads();

  const ModelSpec& m_;
  const hardware::ClusterSpec& c_;
  const Plan& p_;
  Shapes sh_;
  bool sliced_ = false;
  int tp_nodes_ = 1, dp_nodes_ = 1;
  int grad_ranks_ = 1;  ///< ranks a weight's gradient is summed over: dp (x the depth on a 2.5D grid)
  Streams streams_;
  TpOverlap ov_;  ///< the strategy's decomposition of the TP collectives (sequence parallelism only)
  StreamId fused_comm_ = 0;          ///< TpOverlap::fused: the stream of the fused kernels' transfers
  FusedRs fused_rs_ = FusedRs::mpi;  ///< TpOverlap::fused: how its GEMM + ReduceScatter moves partials
  bool fused_priced_ = false;        ///< TpOverlap::fused on a GPU: pieces priced as FLUX's kernel (FusedPiece)
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
  std::optional<std::uint32_t> wait_for_;  ///< next_compute_waits_for: the next compute task waits for it
  std::vector<Slice> slices_;
  std::vector<SliceState> ss_;
  std::vector<LayerWeights> lw_;
  std::vector<std::vector<Saved>> saved_;                     // [layer][slice]
  std::vector<std::vector<std::vector<TensorId>>> kv_reads_;  // [layer][slice] qkv tensors attention reads
  TensorId w_emb_ = 0, w_pos_ = 0, w_head_ = 0, w_fnorm_ = 0, d_emb_ = 0, d_pos_ = 0, d_head_ = 0, d_fnorm_ = 0;
  std::vector<TensorId> tokens_, targets_, nf_, logits_, stats_, dlogits_;
  std::vector<TensorId> all_weights_, all_grads_;
  std::vector<TensorId> pp_bucket_;  // pipelined plans: DP bucket being filled
  std::int64_t pp_bucket_params_ = 0;
  std::int64_t rank_params_ = 0;
  // pipelining: what this stage holds and the pass being emitted
  LayerRange range_;                 ///< layers of the pass being emitted
  std::vector<LayerRange> chunks_;   ///< per model chunk of this rank: its layers
  int stage_ = 0, micro_ = -1, model_chunk_ = -1;
  bool stage_first_ = true, stage_last_ = true;  ///< holds the embedding / the final norm and head
  Live live_ = Live::all;
  bool grads_final_ = true;          ///< weight gradients complete when *_grads_ready is called (last micro-batch)
  struct Pipe {
    StreamId send_next = 0, recv_prev = 0, send_prev = 0, recv_next = 0;
    std::optional<GroupId> fwd_out, fwd_in, bwd_out, bwd_in;  ///< per direction: to / from the neighbouring ranks
    int nodes_next = 1, nodes_prev = 1;
  } pipe_;
  std::optional<GroupId> embd_group_;  ///< tied embeddings on the first and last stage (Megatron's embedding group)
  bool embd_reduced_ = false;          ///< ZeRO-1: summed over the embedding group before its bucket's reduce-scatter
  std::vector<std::uint32_t> pending_sends_;  ///< blocking transfers the next compute task waits for
  // ---- recompute
  std::vector<int> chunk_of_layer_;                    // -1: kept whole
  std::vector<RecomputeChunk> rc_chunks_;              // (chunks_ are the pipeline's model chunks)
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
