// The step-graph builder: a shared layer vocabulary (the emit_* members) and one function per
// strategy deciding slicing and issue order. Dependencies are derived from tensor operands
// (read-after-write, write-after-read, write-after-write), so a strategy only decides what runs
// on which slice, in which order, on which stream.
#include <algorithm>

#include "sim/step_graph.hpp"

namespace sim {
namespace {

using hardware::AttentionOp;
using hardware::CollectiveKind;
using hardware::CollectiveOp;
using common::DType;
using hardware::ElementwiseKind;
using hardware::ElementwiseOp;
using hardware::GemmOp;
using hardware::OptimizerOp;

constexpr std::int32_t kNone = -1;

/// One row slice of the micro-batch.
struct Slice {
  int index = 0;
  std::int64_t batch = 0;     ///< sequences in the slice
  std::int64_t seq = 0;       ///< positions per sequence in the slice
  std::int64_t q_offset = 0;  ///< first position (sequence axis)
  std::int64_t tokens() const { return batch * seq; }
};

/// Tensors of one layer's weights (shared by all slices) and their fp32 gradients.
struct LayerWeights {
  TensorId norm1, qkv, out, norm2, fc1, fc2;
  TensorId d_norm1, d_qkv, d_out, d_norm2, d_fc1, d_fc2;
};

constexpr TensorId kNoTensor = ~TensorId{0};

/// Per-slice tensors that cross from one emit_* call to the next.
struct SliceState {
  TensorId x = kNoTensor;         ///< residual stream entering the current block
  std::vector<TensorId> partial;  ///< row-parallel outputs after their collective (one per column chunk)
  TensorId dy = kNoTensor;        ///< backward: gradient of the residual stream leaving the current block
  TensorId d_in = kNoTensor;      ///< backward: input gradient after its collective (norm backward reads it)
};

/// Forward tensors of one layer and slice that backward reads.
struct Saved {
  TensorId x = kNoTensor, x_mid = kNoTensor;      ///< layer input, after the attention residual
  TensorId n1g = kNoTensor, n2g = kNoTensor;      ///< norm outputs as the GEMMs read them (gathered under SP)
  TensorId qkv = kNoTensor, ctx = kNoTensor, f1 = kNoTensor, act = kNoTensor;
  TensorId dqkv = kNoTensor;                      ///< backward: dQ, dK, dV of this slice
};

class Builder {
 public:
  Builder(const ModelSpec& m, const hardware::ClusterSpec& c, const Plan& p, int rank)
      : m_(m), c_(c), p_(p), act_dtype_(p.dtype == DType::fp8 ? DType::bf16 : p.dtype) {
    g_.model = m;
    g_.plan = p;
    g_.rank = rank;
    g_.represents = p.tp * p.dp;
    g_.tp_instance = rank / p.tp;
    g_.dp_instance = rank % p.tp;
    const int r = p.row_slices;
    for (int i = 0; i < r; ++i) {
      Slice s;
      s.index = i;
      if (p.row_axis == RowAxis::batch) {
        s.batch = p.micro_batch / r;
        s.seq = p.seq_len;
      } else {
        s.batch = p.micro_batch;
        s.seq = p.seq_len / r;
        s.q_offset = i * s.seq;
      }
      slices_.push_back(s);
    }
    sliced_ = r > 1;
    const std::size_t est = static_cast<std::size_t>(m.layers) * static_cast<std::size_t>(r) * (28 + 4 * p.col_slices) + 64;
    g_.tasks.reserve(est);
    g_.tensors.reserve(est * 2);
    g_.operands.reserve(est * 4);
    edges_.reserve(est * 4);
    state_.reserve(est * 2);
    tp_nodes_ = std::max(1, p.tp / c.node.gpus_per_node);
    dp_nodes_ = std::max(1, c.nodes / tp_nodes_);
  }

  StepGraph build();

 private:
  // ---- tensors, tasks and derived dependencies --------------------------------------------
  TensorId tensor(std::int64_t rows, std::int64_t cols, DType dt, TensorRole role, Op op, int layer, int slice,
                  int chunk = -1, bool backward = false, std::uint8_t variant = 0) {
    TensorInfo t;
    t.rows = rows;
    t.cols = cols;
    t.dtype = dt;
    t.role = role;
    t.op = op;
    t.layer = static_cast<std::int16_t>(layer);
    t.slice = static_cast<std::int8_t>(sliced_ ? slice : -1);
    t.chunk = static_cast<std::int8_t>(chunk);
    t.backward = backward;
    t.variant = variant;
    g_.tensors.push_back(t);
    state_.push_back({kNone, kNone});
    return static_cast<TensorId>(g_.tensors.size() - 1);
  }
  TensorId act(std::int64_t rows, std::int64_t cols, Op op, int layer, int slice, int chunk = -1) {
    return tensor(rows, cols, act_dtype_, TensorRole::activation, op, layer, slice, chunk);
  }
  TensorId grad(std::int64_t rows, std::int64_t cols, Op op, int layer, int slice, int chunk = -1) {
    return tensor(rows, cols, act_dtype_, TensorRole::gradient, op, layer, slice, chunk, true);
  }

  std::uint32_t add(Task t, std::initializer_list<TensorId> in, std::initializer_list<TensorId> out) {
    return add(std::move(t), std::span<const TensorId>(in.begin(), in.size()), std::span<const TensorId>(out.begin(), out.size()));
  }
  std::uint32_t add(Task t, std::span<const TensorId> in, std::span<const TensorId> out) {
    const auto id = static_cast<std::uint32_t>(g_.tasks.size());
    t.operand_begin = static_cast<std::uint32_t>(g_.operands.size());
    t.n_inputs = static_cast<std::uint16_t>(in.size());
    t.n_outputs = static_cast<std::uint16_t>(out.size());
    g_.operands.insert(g_.operands.end(), in.begin(), in.end());
    g_.operands.insert(g_.operands.end(), out.begin(), out.end());
    for (TensorId x : in) {
      auto& s = state_[x];
      if (s.last_writer != kNone) edge(static_cast<std::uint32_t>(s.last_writer), id);
      readers_.push_back({static_cast<std::int32_t>(id), s.readers});
      s.readers = static_cast<std::int32_t>(readers_.size() - 1);
    }
    for (TensorId x : out) {
      auto& s = state_[x];
      if (s.last_writer != kNone) edge(static_cast<std::uint32_t>(s.last_writer), id);
      for (std::int32_t r = s.readers; r != kNone; r = readers_[r].next)
        if (readers_[r].task != static_cast<std::int32_t>(id)) edge(static_cast<std::uint32_t>(readers_[r].task), id);
      s.last_writer = static_cast<std::int32_t>(id);
      s.readers = kNone;
    }
    if (t.is_collective()) t.seq = t.group == CommGroup::tp ? tp_seq_++ : dp_seq_++;
    g_.tasks.push_back(std::move(t));
    return id;
  }
  void edge(std::uint32_t from, std::uint32_t to) {
    if (from == to) return;
    if (!edges_.empty() && edges_.back().first == from && edges_.back().second == to) return;
    edges_.emplace_back(from, to);
  }

  Task compute(TaskKind kind, Op op, Phase phase, int layer, const Slice& s, int chunk = -1) {
    Task t;
    t.kind = kind;
    t.stream = Stream::compute;
    t.op = op;
    t.phase = phase;
    t.layer = static_cast<std::int16_t>(layer);
    t.slice = static_cast<std::int8_t>(sliced_ ? s.index : -1);
    t.chunk = static_cast<std::int8_t>(chunk);
    return t;
  }

  // ---- TP collectives -----------------------------------------------------------------------
  CollectiveOp tp_op(CollectiveKind k, double bytes) const {
    return CollectiveOp{.kind = k, .bytes = static_cast<std::int64_t>(bytes), .ranks = p_.tp, .nodes = tp_nodes_, .dtype = act_dtype_};
  }
  Task tp_task(CollectiveKind k, double bytes, Op op, Phase phase, int layer, const Slice& s, int chunk = -1) {
    Task t = compute(tp_op(k, bytes), op, phase, layer, s, chunk);
    t.stream = Stream::tp_comm;
    t.group = CommGroup::tp;
    return t;
  }
  /// AllReduce in place (no SP), or ReduceScatter into a new [rows/tp, cols] tensor (SP).
  /// Returns the tensor the consumer reads and the collective's task id.
  std::pair<TensorId, std::int64_t> reduce_out(TensorId x, Op op, Phase phase, int layer, const Slice& s, int chunk = -1) {
    if (p_.tp == 1) return {x, -1};
    const auto& info = g_.tensors[x];
    const double bytes = info.bytes();
    if (!p_.sequence_parallel) {
      auto id = add(tp_task(CollectiveKind::all_reduce, bytes, op, phase, layer, s, chunk), {x}, {x});
      return {x, id};
    }
    TensorId y = tensor(info.rows / p_.tp, info.cols, info.dtype, info.role, info.op, layer, s.index, chunk, info.backward, 1);
    auto id = add(tp_task(CollectiveKind::reduce_scatter, bytes, op, phase, layer, s, chunk), {x}, {y});
    return {y, id};
  }
  /// SP only: AllGather [rows/tp, cols] into [rows, cols] before a column-parallel GEMM.
  TensorId gather_in(TensorId x, Op op, Phase phase, int layer, const Slice& s) {
    if (!p_.sequence_parallel || p_.tp == 1) return x;
    const auto& info = g_.tensors[x];
    TensorId y = tensor(info.rows * p_.tp, info.cols, info.dtype, info.role, info.op, layer, s.index, -1, info.backward, 2);
    add(tp_task(CollectiveKind::all_gather, static_cast<double>(info.rows) * p_.tp * info.cols * common::dtype_bytes(info.dtype),
                op, phase, layer, s),
        {x}, {y});
    return y;
  }

  // ---- element-wise helpers -------------------------------------------------------------------
  ElementwiseOp ew(ElementwiseKind k, std::int64_t elements, double bytes_per_element, bool backward = false) const {
    return ElementwiseOp{.kind = k, .elements = elements, .bytes = static_cast<double>(elements) * bytes_per_element, .backward = backward};
  }
  ElementwiseKind norm_kind() const { return m_.norm == Norm::layernorm ? ElementwiseKind::layernorm : ElementwiseKind::rmsnorm; }
  std::int64_t rows(const Slice& s) const { return p_.sequence_parallel ? s.tokens() / p_.tp : s.tokens(); }
  GemmOp gemm(std::int64_t m, std::int64_t n, std::int64_t k) const { return GemmOp{.m = m, .n = n, .k = k, .dtype = p_.dtype}; }
  int bpe() const { return common::dtype_bytes(act_dtype_); }

  // ---- the layer vocabulary -------------------------------------------------------------------
  void emit_weights();
  void emit_embedding(const Slice& s);
  void emit_attn_fwd(int l, const Slice& s);
  void emit_attn_residual(int l, const Slice& s);
  void emit_mlp_fwd(int l, const Slice& s);
  void emit_mlp_residual(int l, const Slice& s);
  void emit_head_fwd(const Slice& s);
  void emit_loss(const Slice& s);
  void emit_head_bwd(const Slice& s);
  void emit_final_norm_bwd(const Slice& s);
  void emit_mlp_bwd(int l, const Slice& s);
  void emit_mlp_norm_bwd(int l, const Slice& s);
  void emit_attn_bwd(int l, const Slice& s);
  void emit_attn_norm_bwd(int l, const Slice& s);
  void emit_embedding_bwd(const Slice& s);
  void grad_ready(TensorId dw, std::int64_t params);
  void flush_bucket();
  void emit_optimizer();
  /// Megatron (no overlap): the weight-gradient GEMM waits for the input-gradient collective.
  void serialize_after(std::int64_t collective, std::uint32_t task) {
    if (collective >= 0 && p_.strategy == Strategy::none) edge(static_cast<std::uint32_t>(collective), task);
  }

  const ModelSpec& m_;
  const hardware::ClusterSpec& c_;
  const Plan& p_;
  DType act_dtype_;
  bool sliced_ = false;
  int tp_nodes_ = 1, dp_nodes_ = 1;
  int current_layer_ = -1;
  std::uint32_t tp_seq_ = 0, dp_seq_ = 0;
  StepGraph g_;
  struct TensorState { std::int32_t last_writer, readers; };
  struct ReaderLink { std::int32_t task, next; };
  std::vector<TensorState> state_;
  std::vector<ReaderLink> readers_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges_;
  std::vector<Slice> slices_;
  std::vector<SliceState> ss_;
  std::vector<LayerWeights> lw_;
  std::vector<std::vector<Saved>> saved_;                      // [layer][slice]
  std::vector<std::vector<std::vector<TensorId>>> kv_reads_;  // [layer][slice] qkv tensors attention reads
  TensorId w_emb_ = 0, w_pos_ = 0, w_head_ = 0, w_fnorm_ = 0, d_emb_ = 0, d_pos_ = 0, d_head_ = 0, d_fnorm_ = 0;
  std::vector<TensorId> tokens_, targets_, nf_, logits_, stats_, dlogits_;
  // DP buckets
  std::vector<TensorId> bucket_;
  std::int64_t bucket_params_ = 0;
  std::vector<TensorId> all_weights_, all_grads_;
  std::int64_t rank_params_ = 0;
};

void Builder::emit_weights() {
  const std::int64_t h = m_.hidden, tp = p_.tp;
  const int np = m_.norm == Norm::layernorm ? 2 : 1;
  auto weight = [&](std::int64_t r, std::int64_t c, Op op, int layer, std::uint8_t v = 0) {
    TensorId w = tensor(r, c, act_dtype_, TensorRole::weight, op, layer, -1, -1, false, v);
    TensorId d = tensor(r, c, DType::fp32, TensorRole::weight_grad, op, layer, -1, -1, true, v);
    all_weights_.push_back(w);
    all_grads_.push_back(d);
    rank_params_ += r * c;
    return std::pair{w, d};
  };
  std::tie(w_emb_, d_emb_) = weight(m_.vocab / tp, h, Op::embedding, -1);
  if (m_.position == Position::learned) std::tie(w_pos_, d_pos_) = weight(p_.seq_len, h, Op::embedding, -1, 1);
  lw_.resize(m_.layers);
  for (int l = 0; l < m_.layers; ++l) {
    auto& w = lw_[l];
    std::tie(w.norm1, w.d_norm1) = weight(np, h, Op::norm1, l);
    std::tie(w.qkv, w.d_qkv) = weight(h, m_.qkv_out() / tp, Op::qkv, l);
    std::tie(w.out, w.d_out) = weight(h / tp, h, Op::out_proj, l);
    std::tie(w.norm2, w.d_norm2) = weight(np, h, Op::norm2, l);
    std::tie(w.fc1, w.d_fc1) = weight(h, m_.fc1_out() / tp, Op::fc1, l);
    std::tie(w.fc2, w.d_fc2) = weight(m_.ffn_hidden / tp, h, Op::fc2, l);
  }
  std::tie(w_fnorm_, d_fnorm_) = weight(np, h, Op::final_norm, -1);
  if (m_.tied_embeddings) {
    w_head_ = w_emb_;
    d_head_ = d_emb_;
  } else {
    std::tie(w_head_, d_head_) = weight(m_.vocab / tp, h, Op::lm_head, -1);
  }
}

void Builder::emit_embedding(const Slice& s) {
  const std::int64_t T = s.tokens(), h = m_.hidden;
  TensorId tok = tensor(T, 1, DType::fp32, TensorRole::input, Op::embedding, -1, s.index);
  TensorId tgt = tensor(T, 1, DType::fp32, TensorRole::input, Op::loss, -1, s.index);
  tokens_.push_back(tok);
  targets_.push_back(tgt);
  TensorId e = act(T, h, Op::embedding, -1, s.index);
  Task t = compute(ew(ElementwiseKind::embedding, T * h, 2.0 * bpe()), Op::embedding, Phase::fwd, -1, s);
  if (m_.position == Position::learned) add(std::move(t), {tok, w_emb_, w_pos_}, {e});
  else add(std::move(t), {tok, w_emb_}, {e});
  ss_[s.index].x = reduce_out(e, Op::embed_comm, Phase::fwd, -1, s).first;
}

void Builder::emit_attn_fwd(int l, const Slice& s) {
  auto& st = ss_[s.index];
  auto& sv = saved_[l][s.index];
  const auto& w = lw_[l];
  const std::int64_t T = s.tokens(), h = m_.hidden, tp = p_.tp, R = rows(s);
  sv.x = st.x;
  TensorId n1 = act(R, h, Op::norm1, l, s.index);
  add(compute(ew(norm_kind(), R * h, 2.0 * bpe()), Op::norm1, Phase::fwd, l, s), {st.x, w.norm1}, {n1});
  sv.n1g = gather_in(n1, Op::attn_comm, Phase::fwd, l, s);
  sv.qkv = act(T, m_.qkv_out() / tp, Op::qkv, l, s.index);
  add(compute(gemm(T, m_.qkv_out() / tp, h), Op::qkv, Phase::fwd, l, s), {sv.n1g, w.qkv}, {sv.qkv});
  // Causal attention over the sequence axis: slice i's queries see the keys of slices 0..i.
  auto& kv = kv_reads_[l][s.index];
  kv.clear();
  if (p_.row_axis == RowAxis::sequence)
    for (int j = 0; j <= s.index; ++j) kv.push_back(saved_[l][j].qkv);
  else
    kv.push_back(sv.qkv);
  sv.ctx = act(T, h / tp, Op::attention, l, s.index);
  AttentionOp a{.batch = s.batch, .heads = m_.heads / tp, .kv_heads = m_.kv_heads / tp, .s_q = s.seq,
                .s_kv = s.q_offset + s.seq, .head_dim = m_.head_dim(), .q_offset = s.q_offset, .causal = true,
                .backward = false, .dtype = p_.dtype == DType::fp8 ? DType::bf16 : p_.dtype};
  add(compute(a, Op::attention, Phase::fwd, l, s), kv, std::span<const TensorId>(&sv.ctx, 1));
  st.partial.clear();
  const int C = p_.col_slices;
  for (int c = 0; c < C; ++c) {
    TensorId o = act(T, h / C, Op::out_proj, l, s.index, C > 1 ? c : -1);
    add(compute(gemm(T, h / C, h / tp), Op::out_proj, Phase::fwd, l, s, C > 1 ? c : -1), {sv.ctx, w.out}, {o});
    st.partial.push_back(reduce_out(o, Op::attn_comm, Phase::fwd, l, s, C > 1 ? c : -1).first);
  }
}

void Builder::emit_attn_residual(int l, const Slice& s) {
  auto& st = ss_[s.index];
  const std::int64_t h = m_.hidden, R = rows(s);
  auto& sv = saved_[l][s.index];
  sv.x_mid = act(R, h, Op::residual1, l, s.index);
  std::vector<TensorId> in{st.x};
  in.insert(in.end(), st.partial.begin(), st.partial.end());
  add(compute(ew(ElementwiseKind::residual_add, R * h, 3.0 * bpe()), Op::residual1, Phase::fwd, l, s), in,
      std::span<const TensorId>(&sv.x_mid, 1));
  st.x = sv.x_mid;
}

void Builder::emit_mlp_fwd(int l, const Slice& s) {
  auto& st = ss_[s.index];
  auto& sv = saved_[l][s.index];
  const auto& w = lw_[l];
  const std::int64_t T = s.tokens(), h = m_.hidden, tp = p_.tp, R = rows(s);
  TensorId n2 = act(R, h, Op::norm2, l, s.index);
  add(compute(ew(norm_kind(), R * h, 2.0 * bpe()), Op::norm2, Phase::fwd, l, s), {sv.x_mid, w.norm2}, {n2});
  sv.n2g = gather_in(n2, Op::mlp_comm, Phase::fwd, l, s);
  sv.f1 = act(T, m_.fc1_out() / tp, Op::fc1, l, s.index);
  add(compute(gemm(T, m_.fc1_out() / tp, h), Op::fc1, Phase::fwd, l, s), {sv.n2g, w.fc1}, {sv.f1});
  sv.act = act(T, m_.ffn_hidden / tp, Op::activation, l, s.index);
  const auto ak = m_.activation == Activation::gelu ? ElementwiseKind::gelu : ElementwiseKind::swiglu;
  add(compute(ew(ak, T * m_.ffn_hidden / tp, (m_.fc1_out() / m_.ffn_hidden + 1.0) * bpe()), Op::activation, Phase::fwd, l, s),
      {sv.f1}, {sv.act});
  st.partial.clear();
  const int C = p_.col_slices;
  for (int c = 0; c < C; ++c) {
    TensorId y = act(T, h / C, Op::fc2, l, s.index, C > 1 ? c : -1);
    add(compute(gemm(T, h / C, m_.ffn_hidden / tp), Op::fc2, Phase::fwd, l, s, C > 1 ? c : -1), {sv.act, w.fc2}, {y});
    st.partial.push_back(reduce_out(y, Op::mlp_comm, Phase::fwd, l, s, C > 1 ? c : -1).first);
  }
}

void Builder::emit_mlp_residual(int l, const Slice& s) {
  auto& st = ss_[s.index];
  const std::int64_t h = m_.hidden, R = rows(s);
  TensorId x = act(R, h, Op::residual2, l, s.index);
  std::vector<TensorId> in{st.x};
  in.insert(in.end(), st.partial.begin(), st.partial.end());
  add(compute(ew(ElementwiseKind::residual_add, R * h, 3.0 * bpe()), Op::residual2, Phase::fwd, l, s), in,
      std::span<const TensorId>(&x, 1));
  st.x = x;
}

void Builder::emit_head_fwd(const Slice& s) {
  auto& st = ss_[s.index];
  const std::int64_t T = s.tokens(), h = m_.hidden, V = m_.vocab / p_.tp, R = rows(s);
  TensorId nf = act(R, h, Op::final_norm, -1, s.index);
  add(compute(ew(norm_kind(), R * h, 2.0 * bpe()), Op::final_norm, Phase::fwd, -1, s), {st.x, w_fnorm_}, {nf});
  nf_[s.index] = gather_in(nf, Op::embed_comm, Phase::fwd, -1, s);
  TensorId logits = tensor(T, V, DType::fp32, TensorRole::activation, Op::lm_head, -1, s.index);
  add(compute(gemm(T, V, h), Op::lm_head, Phase::fwd, -1, s), {nf_[s.index], w_head_}, {logits});
  logits_[s.index] = logits;
  // vocab-parallel cross-entropy: local max, sum-exp and target logit, then one TP AllReduce
  TensorId stats = tensor(T, 3, DType::fp32, TensorRole::activation, Op::loss_comm, -1, s.index);
  add(compute(ew(ElementwiseKind::cross_entropy, T * V, 4.0), Op::loss_comm, Phase::fwd, -1, s), {logits, targets_[s.index]}, {stats});
  if (p_.tp > 1) {
    Task t = tp_task(CollectiveKind::all_reduce, static_cast<double>(T) * 3 * 4, Op::loss_comm, Phase::fwd, -1, s);
    std::get<CollectiveOp>(t.kind).dtype = DType::fp32;
    add(std::move(t), {stats}, {stats});
  }
  stats_[s.index] = stats;
}

void Builder::emit_loss(const Slice& s) {
  const std::int64_t T = s.tokens(), V = m_.vocab / p_.tp;
  TensorId dl = tensor(T, V, DType::fp32, TensorRole::gradient, Op::lm_head, -1, s.index, -1, true);
  TensorId loss = tensor(T, 1, DType::fp32, TensorRole::activation, Op::loss, -1, s.index);
  add(compute(ew(ElementwiseKind::cross_entropy, T * V, 8.0), Op::loss, Phase::fwd, -1, s),
      {logits_[s.index], stats_[s.index], targets_[s.index]}, {dl, loss});
  dlogits_[s.index] = dl;
}

void Builder::emit_head_bwd(const Slice& s) {
  auto& st = ss_[s.index];
  const std::int64_t T = s.tokens(), h = m_.hidden, V = m_.vocab / p_.tp;
  TensorId dn = grad(T, h, Op::final_norm, -1, s.index);
  add(compute(gemm(T, h, V), Op::lm_head, Phase::bwd_dgrad, -1, s), {dlogits_[s.index], w_head_}, {dn});
  auto [din, coll] = reduce_out(dn, Op::embed_comm, Phase::bwd_dgrad, -1, s);
  st.d_in = din;
  auto wg = add(compute(gemm(V, h, T), Op::lm_head, Phase::bwd_wgrad, -1, s), {dlogits_[s.index], nf_[s.index]}, {d_head_});
  serialize_after(coll, wg);
}

void Builder::emit_final_norm_bwd(const Slice& s) {
  auto& st = ss_[s.index];
  const std::int64_t h = m_.hidden, R = rows(s);
  TensorId dx = grad(R, h, Op::final_norm, -1, s.index);
  add(compute(ew(norm_kind(), R * h, 3.0 * bpe(), true), Op::final_norm, Phase::bwd_dgrad, -1, s), {st.d_in, st.x, w_fnorm_},
      {dx, d_fnorm_});
  st.dy = dx;
}

// Backward of the MLP block up to (and including) the input-gradient collective; the weight-
// gradient GEMM of FC1 is issued after the collective so that it overlaps it (domino).
void Builder::emit_mlp_bwd(int l, const Slice& s) {
  auto& st = ss_[s.index];
  const auto& sv = saved_[l][s.index];
  const auto& w = lw_[l];
  const std::int64_t T = s.tokens(), h = m_.hidden, tp = p_.tp, F = m_.ffn_hidden / tp, F1 = m_.fc1_out() / tp;
  TensorId dyg = gather_in(st.dy, Op::mlp_comm, Phase::bwd_dgrad, l, s);
  TensorId da = grad(T, F, Op::activation, l, s.index);
  add(compute(gemm(T, F, h), Op::fc2, Phase::bwd_dgrad, l, s), {dyg, w.fc2}, {da});
  add(compute(gemm(F, h, T), Op::fc2, Phase::bwd_wgrad, l, s), {dyg, sv.act}, {w.d_fc2});
  TensorId df1 = grad(T, F1, Op::fc1, l, s.index);
  const auto ak = m_.activation == Activation::gelu ? ElementwiseKind::gelu : ElementwiseKind::swiglu;
  add(compute(ew(ak, T * F, (2.0 * F1 / F + 1.0) * bpe(), true), Op::activation, Phase::bwd_dgrad, l, s), {sv.f1, da}, {df1});
  TensorId dn2 = grad(T, h, Op::norm2, l, s.index);
  add(compute(gemm(T, h, F1), Op::fc1, Phase::bwd_dgrad, l, s), {df1, w.fc1}, {dn2});
  auto [din, coll] = reduce_out(dn2, Op::mlp_comm, Phase::bwd_dgrad, l, s);
  st.d_in = din;
  auto wg = add(compute(gemm(h, F1, T), Op::fc1, Phase::bwd_wgrad, l, s), {df1, sv.n2g}, {w.d_fc1});
  serialize_after(coll, wg);
}

void Builder::emit_mlp_norm_bwd(int l, const Slice& s) {
  auto& st = ss_[s.index];
  const auto& w = lw_[l];
  const std::int64_t h = m_.hidden, R = rows(s);
  TensorId dx = grad(R, h, Op::residual1, l, s.index);
  add(compute(ew(norm_kind(), R * h, 4.0 * bpe(), true), Op::norm2, Phase::bwd_dgrad, l, s), {st.d_in, saved_[l][s.index].x_mid, w.norm2, st.dy},
      {dx, w.d_norm2});
  st.dy = dx;
}

void Builder::emit_attn_bwd(int l, const Slice& s) {
  auto& st = ss_[s.index];
  const auto& w = lw_[l];
  const std::int64_t T = s.tokens(), h = m_.hidden, tp = p_.tp, Q = m_.qkv_out() / tp;
  TensorId dyg = gather_in(st.dy, Op::attn_comm, Phase::bwd_dgrad, l, s);
  TensorId dctx = grad(T, h / tp, Op::attention, l, s.index);
  auto& sv = saved_[l][s.index];
  const TensorId ctx = sv.ctx;
  add(compute(gemm(T, h / tp, h), Op::out_proj, Phase::bwd_dgrad, l, s), {dyg, w.out}, {dctx});
  add(compute(gemm(h / tp, h, T), Op::out_proj, Phase::bwd_wgrad, l, s), {dyg, ctx}, {w.d_out});
  // Attention backward writes dQ of its slice and accumulates dK, dV into every slice it read.
  const auto& kv = kv_reads_[l][s.index];
  std::vector<TensorId> in(kv.begin(), kv.end());
  in.push_back(ctx);
  in.push_back(dctx);
  std::vector<TensorId> out;
  for (std::size_t j = 0; j < kv.size(); ++j) {
    const int sj = p_.row_axis == RowAxis::sequence ? static_cast<int>(j) : s.index;
    auto& dq = saved_[l][sj].dqkv;
    if (dq == kNoTensor) dq = grad(T, Q, Op::qkv, l, sj);
    out.push_back(dq);
  }
  AttentionOp a{.batch = s.batch, .heads = m_.heads / tp, .kv_heads = m_.kv_heads / tp, .s_q = s.seq,
                .s_kv = s.q_offset + s.seq, .head_dim = m_.head_dim(), .q_offset = s.q_offset, .causal = true,
                .backward = true, .dtype = p_.dtype == DType::fp8 ? DType::bf16 : p_.dtype};
  add(compute(a, Op::attention, Phase::bwd_dgrad, l, s), in, out);
  TensorId dn1 = grad(T, h, Op::norm1, l, s.index);
  add(compute(gemm(T, h, Q), Op::qkv, Phase::bwd_dgrad, l, s), {sv.dqkv, w.qkv}, {dn1});
  auto [din, coll] = reduce_out(dn1, Op::attn_comm, Phase::bwd_dgrad, l, s);
  st.d_in = din;
  auto wg = add(compute(gemm(h, Q, T), Op::qkv, Phase::bwd_wgrad, l, s), {sv.dqkv, sv.n1g}, {w.d_qkv});
  serialize_after(coll, wg);
}

void Builder::emit_attn_norm_bwd(int l, const Slice& s) {
  auto& st = ss_[s.index];
  const auto& w = lw_[l];
  const std::int64_t h = m_.hidden, R = rows(s);
  TensorId dx = grad(R, h, Op::residual2, l - 1, s.index);
  add(compute(ew(norm_kind(), R * h, 4.0 * bpe(), true), Op::norm1, Phase::bwd_dgrad, l, s),
      {st.d_in, saved_[l][s.index].x, w.norm1, st.dy}, {dx, w.d_norm1});
  st.dy = dx;
}

void Builder::emit_embedding_bwd(const Slice& s) {
  auto& st = ss_[s.index];
  const std::int64_t T = s.tokens(), h = m_.hidden;
  TensorId dyg = gather_in(st.dy, Op::embed_comm, Phase::bwd_dgrad, -1, s);
  Task t = compute(ew(ElementwiseKind::embedding, T * h, bpe() + 8.0, true), Op::embedding, Phase::bwd_wgrad, -1, s);
  if (m_.position == Position::learned) add(std::move(t), {dyg, tokens_[s.index]}, {d_emb_, d_pos_});
  else add(std::move(t), {dyg, tokens_[s.index]}, {d_emb_});
}

void Builder::grad_ready(TensorId dw, std::int64_t params) {
  if (p_.dp == 1) return;
  bucket_.push_back(dw);
  bucket_params_ += params;
  if (static_cast<double>(bucket_params_) * 4.0 >= p_.dp_bucket_mb * 1e6) flush_bucket();
}

void Builder::flush_bucket() {
  if (bucket_.empty()) return;
  Task t;
  t.kind = CollectiveOp{.kind = CollectiveKind::all_reduce, .bytes = bucket_params_ * 4, .ranks = p_.dp, .nodes = dp_nodes_,
                        .dtype = DType::fp32};
  t.stream = Stream::dp_comm;
  t.op = Op::dp_reduce;
  t.phase = Phase::dp_reduce;
  t.group = CommGroup::dp;
  t.once_per_step = true;
  t.layer = -1;
  add(std::move(t), bucket_, bucket_);
  bucket_.clear();
  bucket_params_ = 0;
}

void Builder::emit_optimizer() {
  Task t;
  t.kind = OptimizerOp{.params = rank_params_};
  t.stream = Stream::compute;
  t.op = Op::optimizer;
  t.phase = Phase::optimizer;
  t.once_per_step = true;
  std::vector<TensorId> in(all_grads_);
  add(std::move(t), in, all_weights_);
}

}  // namespace
}  // namespace sim

namespace sim {
namespace {

// The schedule both strategies share. Megatron-LM (strategy none) is the case of one row slice and
// one column chunk, with the input-gradient collectives blocking the weight-gradient GEMMs.
// Domino: every block is issued for all slices before the block that consumes its collective,
// so slice i's collective overlaps slice i+1's compute, also across layer boundaries (the residual
// that consumes layer l's MLP collective is issued at the head of layer l+1's attention block).
StepGraph Builder::build() {
  const int L = m_.layers;
  const int r = static_cast<int>(slices_.size());
  ss_.assign(r, {});
  saved_.assign(L, std::vector<Saved>(r));
  kv_reads_.assign(L, std::vector<std::vector<TensorId>>(r));
  nf_.assign(r, kNoTensor);
  logits_.assign(r, kNoTensor);
  stats_.assign(r, kNoTensor);
  dlogits_.assign(r, kNoTensor);
  emit_weights();

  // ---- forward ----
  for (const auto& s : slices_) emit_embedding(s);
  for (int l = 0; l < L; ++l) {
    current_layer_ = l;
    for (const auto& s : slices_) {
      if (l > 0) emit_mlp_residual(l - 1, s);
      emit_attn_fwd(l, s);
    }
    for (const auto& s : slices_) {
      emit_attn_residual(l, s);
      emit_mlp_fwd(l, s);
    }
  }
  current_layer_ = -1;
  for (const auto& s : slices_) {
    emit_mlp_residual(L - 1, s);
    emit_head_fwd(s);
  }
  for (const auto& s : slices_) emit_loss(s);

  // ---- backward ----
  // Along the sequence axis slice i's attention backward adds into dK/dV of slices <= i, so the
  // slices run last-to-first; along the batch axis they are independent and run in order.
  std::vector<Slice> order(slices_);
  if (p_.row_axis == RowAxis::sequence) std::reverse(order.begin(), order.end());
  const std::int64_t h = m_.hidden, tp = p_.tp;
  const std::int64_t norm_p = (m_.norm == Norm::layernorm ? 2 : 1) * h;
  for (const auto& s : order) emit_head_bwd(s);
  if (!m_.tied_embeddings) grad_ready(d_head_, m_.vocab / tp * h);
  for (int l = L - 1; l >= 0; --l) {
    current_layer_ = l;
    for (const auto& s : order) {
      if (l == L - 1) emit_final_norm_bwd(s);
      else emit_attn_norm_bwd(l + 1, s);
      emit_mlp_bwd(l, s);
    }
    if (l == L - 1) grad_ready(d_fnorm_, norm_p);
    else grad_ready(lw_[l + 1].d_norm1, norm_p);
    grad_ready(lw_[l].d_fc2, m_.ffn_hidden / tp * h);
    grad_ready(lw_[l].d_fc1, h * m_.fc1_out() / tp);
    for (const auto& s : order) {
      emit_mlp_norm_bwd(l, s);
      emit_attn_bwd(l, s);
    }
    grad_ready(lw_[l].d_norm2, norm_p);
    grad_ready(lw_[l].d_out, h / tp * h);
    grad_ready(lw_[l].d_qkv, h * m_.qkv_out() / tp);
  }
  current_layer_ = -1;
  for (const auto& s : order) {
    emit_attn_norm_bwd(0, s);
    emit_embedding_bwd(s);
  }
  grad_ready(lw_[0].d_norm1, norm_p);
  if (m_.position == Position::learned) grad_ready(d_pos_, p_.seq_len * h);
  grad_ready(d_emb_, m_.vocab / tp * h);
  // Sequence parallelism: a TP rank's norm-weight gradients cover only its rows of the sequence;
  // Megatron sums them over the TP group once per step before the optimizer (finalize_model_grads).
  if (p_.sequence_parallel && p_.tp > 1) {
    std::vector<TensorId> norms{d_fnorm_};
    for (const auto& w : lw_) norms.insert(norms.end(), {w.d_norm1, w.d_norm2});
    Task t;
    t.kind = CollectiveOp{.kind = CollectiveKind::all_reduce, .bytes = static_cast<std::int64_t>(norms.size()) * norm_p * 4,
                          .ranks = p_.tp, .nodes = tp_nodes_, .dtype = DType::fp32};
    t.stream = Stream::tp_comm;
    t.op = Op::dp_reduce;
    t.phase = Phase::dp_reduce;
    t.group = CommGroup::tp;
    t.once_per_step = true;
    t.layer = -1;
    add(std::move(t), norms, norms);
  }
  flush_bucket();
  emit_optimizer();

  // ---- the DAG ----
  const auto n = g_.tasks.size();
  g_.graph = StepGraph::Graph(boost::edges_are_unsorted_multi_pass, edges_.begin(), edges_.end(), n);
  g_.in_degree.assign(n, 0);
  for (const auto& e : edges_) ++g_.in_degree[e.second];
  return std::move(g_);
}

}  // namespace

StepGraph build_step_graph(const ModelSpec& model, const hardware::ClusterSpec& cluster, const Plan& plan, int rank) {
  return Builder(model, cluster, plan, rank).build();
}

}  // namespace sim
