// 2D and 2.5D tensor parallelism (Plan::tp_layout 2d | 2.5d): the layers as SUMMA products on a
// q x q grid, repeated on d depth layers (Tesseract, Wang et al. arXiv 2105.14500; Optimus for d = 1),
// the way Colossal-AI's 2.5D layers run them (its parallel_2p5d _operation.py: Matmul_AB / ABT /
// ATB, layernorm, vocab-parallel embedding and classifier). docs/tensor-parallel-2d.md has the model.
//
// A rank (row i, column j, depth k of the grid) holds [b/(q d) x s] tokens of the micro-batch and
// h/q of the hidden columns; weights are [in/q, out/q] blocks, one copy per depth layer, so their
// gradients are summed over depth x dp (the builder's dp group, Builder::grad_ranks_). Groups:
//   row  the q ranks of grid row i (same tokens, other hidden columns): input-block broadcasts,
//        dgrad reduces, norm and loss statistics
//   col  the q ranks of grid column j (same hidden columns, other tokens): weight-block
//        broadcasts, wgrad reduces, the vocab-parallel embedding's reduce-scatter
// Rank order (tp rank = column + q x row + q^2 x depth, Colossal-AI's; TpGridOrder::col swaps row
// and column) decides which group lies inside a node's NVLink domain and which crosses NICs.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "sim/builder.hpp"

namespace sim {

using common::DType;
using hardware::CollectiveKind;
using hardware::CollectiveOp;
using hardware::ElementwiseKind;
using hardware::GemmOp;

namespace {

/// Nodes spanned by the world ranks first + stride x m (m < n).
int nodes_spanned(int first, int stride, int n, int gpus_per_node) {
  std::set<int> nodes;
  for (int m = 0; m < n; ++m) nodes.insert((first + stride * m) / gpus_per_node);
  return static_cast<int>(nodes.size());
}

}  // namespace

void Builder::setup_grid(int rank) {
  const int q = p_.tp_q, d = p_.tp_d, tp = p_.tp, gpn = c_.node.gpus_per_node;
  const int t = rank % tp, base = rank - t;  // tp rank; world rank of tp rank 0 (pp = 1: rank = t + tp x dp rank)
  // the coordinate that is fastest in rank order is the one a row group varies (TpGridOrder::row);
  // a group's first member is the rank of its row (column) at column (row) 0
  const bool rows_inner = p_.tp_grid_order == TpGridOrder::row;
  const auto at = p_.grid_coord(t);
  const int k = at.depth;
  const int row_stride = rows_inner ? 1 : q, col_stride = rows_inner ? q : 1;
  const int row_first = base + k * q * q + (rows_inner ? at.row * q : at.row);
  const int col_first = base + k * q * q + (rows_inner ? at.col : at.col * q);
  grid_.row_nodes = nodes_spanned(row_first, row_stride, q, gpn);
  grid_.col_nodes = nodes_spanned(col_first, col_stride, q, gpn);
  // domino's row slices: one row and one column communicator per slice, each on its own stream (as
  // NCCL runs each communicator), so a slice's collectives do not queue behind another slice's,
  // which wait for that slice's GEMMs (the double buffers); they share the links (the engine's link
  // sharing). Slice 0's keep the names of the unsliced grid: "row" / "row_comm", slice i "row<i>".
  for (int i = 0; i < p_.row_slices; ++i) {
    const std::string n = i == 0 ? "" : std::to_string(i);
    grid_.row_comm.push_back(add_stream({.name = "row" + n + "_comm", .kind = StreamKind::comm}));
    grid_.col_comm.push_back(add_stream({.name = "col" + n + "_comm", .kind = StreamKind::comm}));
    grid_.row.push_back(add_group({.name = "row" + n, .size = q, .nodes = grid_.row_nodes, .instance = row_first}));
    grid_.col.push_back(add_group({.name = "col" + n, .size = q, .nodes = grid_.col_nodes, .instance = col_first}));
  }
  // weight gradients: every depth layer of every data-parallel replica holds the same block
  // (tp rank t mod q^2 at depth 0..d-1 of replicas 0..dp-1): one group of d x dp ranks
  grad_ranks_ = d * p_.dp;
  std::set<int> nodes;
  const int t0 = t % (q * q);
  for (int r = 0; r < p_.dp; ++r)
    for (int kk = 0; kk < d; ++kk) nodes.insert((t0 + kk * q * q + r * tp) / gpn);
  dp_nodes_ = static_cast<int>(nodes.size());
  auto& dg = g_.groups[dp_group_];
  dg.name = d > 1 ? "depth_dp" : "dp";
  dg.size = grad_ranks_;
  dg.nodes = dp_nodes_;
  dg.instance = t0;
}

Task Builder::grid_task(CollectiveKind k, double bytes, bool row, Op op, Phase phase, int layer, const Slice& s, int chunk,
                        DType dt) const {
  Task t = task(CollectiveOp{.kind = k,
                             .bytes = static_cast<std::int64_t>(bytes),
                             .ranks = p_.tp_q,
                             .nodes = row ? grid_.row_nodes : grid_.col_nodes,
                             .dtype = dt},
                op, phase, layer, s, chunk);
  const auto i = static_cast<std::size_t>(s.index);
  t.stream = row ? grid_.row_comm[i] : grid_.col_comm[i];
  t.group = row ? grid_.row[i] : grid_.col[i];
  return t;
}

// ---- SUMMA ---------------------------------------------------------------------------------------------

void Builder::summa_fwd(TensorId x, TensorId w, TensorId y, GemmOp step, Op op, Op comm, int l, const Slice& s) {
  const int q = p_.tp_q;
  const auto xi = g_.tensors[x];  // copies: tensor() below grows g_.tensors
  const auto wi = g_.tensors[w];
  // two receive buffers each (Colossal-AI's circular buffers): writing buffer i % 2 for step i waits
  // for the GEMM of step i - 2 that read it (a write-after-read edge)
  TensorId a[2], b[2];
  for (int k = 0; k < 2; ++k) {
    a[k] = tensor(xi.rows, xi.cols, xi.dtype, TensorRole::activation, op, l, s.index, k, false, 3);
    b[k] = tensor(wi.rows, wi.cols, wi.dtype, TensorRole::activation, op, l, s.index, k, false, 4);
  }
  auto broadcast = [&](int i) {
    add(grid_task(CollectiveKind::broadcast, xi.bytes(), true, comm, Phase::fwd, l, s, i, xi.dtype), {x}, {a[i % 2]});
    add(grid_task(CollectiveKind::broadcast, wi.bytes(), false, comm, Phase::fwd, l, s, i, wi.dtype), {w}, {b[i % 2]});
  };
  broadcast(0);
  for (int i = 0; i < q; ++i) {
    if (i + 1 < q) broadcast(i + 1);  // the next step's blocks move while this step's GEMM runs
    add(task(step, op, Phase::fwd, l, s, i), {a[i % 2], b[i % 2], y}, {y});
  }
}

std::uint32_t Builder::summa_bwd(TensorId dy, TensorId x, TensorId w, TensorId dx, TensorId dw, GemmOp dgrad, GemmOp wgrad, Op op,
                                 Op comm, int l, const Slice& s) {
  const int q = p_.tp_q;
  const auto xi = g_.tensors[x];
  const auto wi = g_.tensors[w];
  const auto dxi = g_.tensors[dx];
  // dx = dy w^T (Colossal-AI's Matmul_ABT): step i broadcasts w's block along the column, multiplies
  // and reduces the partial [T, in/q] along the row to the rank that owns it
  TensorId wb[2], c[2];
  for (int k = 0; k < 2; ++k) {
    wb[k] = tensor(wi.rows, wi.cols, wi.dtype, TensorRole::gradient, op, l, s.index, k, true, 4);
    c[k] = tensor(dxi.rows, dxi.cols, dxi.dtype, TensorRole::gradient, op, l, s.index, k, true, 5);
  }
  auto bcast_w = [&](int i) {
    add(grid_task(CollectiveKind::broadcast, wi.bytes(), false, comm, Phase::bwd_dgrad, l, s, i, wi.dtype), {w}, {wb[i % 2]});
  };
  bcast_w(0);
  std::uint32_t last = 0;
  for (int i = 0; i < q; ++i) {
    if (i + 1 < q) bcast_w(i + 1);
    add(task(dgrad, op, Phase::bwd_dgrad, l, s, i), {dy, wb[i % 2]}, {c[i % 2]});
    last = add(grid_task(CollectiveKind::reduce, dxi.bytes(), true, comm, Phase::bwd_dgrad, l, s, i, dxi.dtype), {c[i % 2]},
               {c[i % 2], dx});
  }
  // one slice: every reduce waited before the function returns (Colossal-AI's op.wait() loop);
  // domino's row slices: the consumer of dx waits for it (a data edge), so this slice's reduces
  // overlap the next slice's GEMMs
  if (!sliced_) next_compute_waits_for(last);
  // dw += x^T dy (Matmul_ATB): step i broadcasts x's block along the row, multiplies and reduces
  // the partial [in/q, out/q] along the column
  TensorId xb[2], e[2];
  for (int k = 0; k < 2; ++k) {
    xb[k] = tensor(xi.rows, xi.cols, xi.dtype, TensorRole::gradient, op, l, s.index, k, true, 6);
    e[k] = tensor(wi.rows, wi.cols, wi.dtype, TensorRole::gradient, op, l, s.index, k, true, 7);
  }
  auto bcast_x = [&](int i) {
    add(grid_task(CollectiveKind::broadcast, xi.bytes(), true, comm, Phase::bwd_wgrad, l, s, i, xi.dtype), {x}, {xb[i % 2]});
  };
  bcast_x(0);
  for (int i = 0; i < q; ++i) {
    if (i + 1 < q) bcast_x(i + 1);
    add(task(wgrad, op, Phase::bwd_wgrad, l, s, i), {xb[i % 2], dy}, {e[i % 2]});
    last = add(grid_task(CollectiveKind::reduce, wi.bytes(), false, comm, Phase::bwd_wgrad, l, s, i, wi.dtype), {e[i % 2]},
               {e[i % 2], dw});
  }
  if (!sliced_) next_compute_waits_for(last);  // sliced: dw's readers (the DP buckets, the optimizer) wait for it
  return last;
}

// ---- norms -----------------------------------------------------------------------------------------------

TensorId Builder::grid_norm_fwd(TensorId x, TensorId w, Op op, int l, const Slice& s) {
  const std::int64_t T = s.tokens(), h = sh_.h;
  const Op comm = op == Op::norm2 ? Op::mlp_comm : op == Op::final_norm ? Op::embed_comm : Op::attn_comm;
  // Colossal-AI's LayerNorm2p5D: the row sums of x, then of x^2, each all-reduced along the row
  // (one fp32 value per token each); the local sums are part of the norm kernel's passes here
  TensorId stats = tensor(T, 2, DType::fp32, TensorRole::activation, op, l, s.index, -1, false, 5);
  for (int k = 0; k < 2; ++k)
    add(grid_task(CollectiveKind::all_reduce, static_cast<double>(T) * 4, true, comm, Phase::fwd, l, s, k, DType::fp32), {x}, {stats});
  TensorId n = act(T, h, op, l, s.index);
  add(task(ew(norm_kind(), T * h, 2.0 * bpe()), op, Phase::fwd, l, s), {x, w, stats}, {n});
  return n;
}

void Builder::grid_norm_bwd_stats(TensorId d_in, Op comm, int l, const Slice& s) {
  // the norm backward's two per-token sums (of dy x w and dy x w x x-hat), all-reduced along the row
  TensorId stats = tensor(s.tokens(), 2, DType::fp32, TensorRole::gradient, comm, l, s.index, -1, true, 5);
  const auto id = add(grid_task(CollectiveKind::all_reduce, static_cast<double>(s.tokens()) * 2 * 4, true, comm, Phase::bwd_dgrad, l, s,
                                -1, DType::fp32),
                      {d_in}, {stats});
  next_compute_waits_for(id);
}

void Builder::emit_grid_norm_grads() {
  // a norm's [np, h/q] weights are held by every row and depth layer of a grid column: their
  // gradients are summed along the column once per step (the depth x dp sum is in the DP buckets)
  std::vector<TensorId> norms{d_fnorm_};
  for (int l = 0; l < m_.layers; ++l) norms.insert(norms.end(), {lw_[l].d_norm1, lw_[l].d_norm2});
  Task t;
  t.kind = CollectiveOp{.kind = CollectiveKind::all_reduce,
                        .bytes = static_cast<std::int64_t>(norms.size()) * sh_.np * sh_.h * 4,
                        .ranks = p_.tp_q,
                        .nodes = grid_.col_nodes,
                        .dtype = DType::fp32};
  t.stream = grid_.col_comm[0];
  t.op = Op::dp_reduce;
  t.phase = Phase::dp_reduce;
  t.group = grid_.col[0];
  t.once_per_step = true;
  t.layer = -1;
  add(std::move(t), norms, norms);
}

// ---- the layer vocabulary on the grid -----------------------------------------------------------------------

void Builder::emit_grid_embedding(const Slice& s) {
  const std::int64_t T = s.tokens(), h = sh_.h, q = p_.tp_q;
  TensorId tok = tensor(T, 1, DType::fp32, TensorRole::input, Op::embedding, -1, s.index);
  TensorId tgt = tensor(T, 1, DType::fp32, TensorRole::input, Op::loss, -1, s.index);
  tokens_.push_back(tok);
  targets_.push_back(tgt);
  // vocab-parallel along the column (Colossal-AI's VocabParallelEmbedding2p5D): the column's q x T
  // tokens looked up in this rank's [vocab/q, h/q] block, then reduce-scattered along the column
  // (the token ids' all-gather, 4 bytes a token, is left out)
  TensorId e = act(q * T, h, Op::embedding, -1, s.index);
  Task t = task(ew(ElementwiseKind::embedding, q * T * h, 2.0 * bpe()), Op::embedding, Phase::fwd, -1, s);
  if (m_.position == Position::learned)
    add(std::move(t), {tok, w_emb_, w_pos_}, {e});
  else
    add(std::move(t), {tok, w_emb_}, {e});
  TensorId x = tensor(T, h, sh_.act_dtype, TensorRole::activation, Op::embedding, -1, s.index, -1, false, 1);
  add(grid_task(CollectiveKind::reduce_scatter, static_cast<double>(q * T * h) * bpe(), false, Op::embed_comm, Phase::fwd, -1, s, -1,
                sh_.act_dtype),
      {e}, {x});
  ss_[s.index].x = x;
}

void Builder::emit_grid_attn_fwd(int l, const Slice& s) {
  auto& st = ss_[s.index];
  auto& sv = saved_[l][s.index];
  const auto& w = lw_[l];
  const std::int64_t T = s.tokens(), h = sh_.h;
  sv.x = st.x;
  sv.n1 = grid_norm_fwd(st.x, w.norm1, Op::norm1, l, s);
  sv.qkv = act(T, sh_.Q, Op::qkv, l, s.index);
  summa_fwd(sv.n1, w.qkv, sv.qkv, sh_.qkv_fwd(T), Op::qkv, Op::attn_comm, l, s);
  // the local heads (heads/q of the column) of the local sequences: no communication
  auto& kv = kv_reads_[l][s.index];
  kv.assign(1, sv.qkv);
  sv.ctx = act(T, sh_.A, Op::attention, l, s.index);
  sv.aux = tensor(s.batch * (m_.heads / p_.tp_q) * s.seq, sh_.attention_aux_cols(s.seq, s.q_offset), sh_.attention_aux_dtype(),
                  TensorRole::activation, Op::attention, l, s.index, -1, false, 1);
  const TensorId outs[] = {sv.ctx, sv.aux};
  add(task(sh_.attention(s.batch, s.seq, s.q_offset, false), Op::attention, Phase::fwd, l, s), kv, outs);
  const TensorId y = act(T, h, Op::out_proj, l, s.index);
  summa_fwd(sv.ctx, w.out, y, sh_.out_proj_fwd(T, 1), Op::out_proj, Op::attn_comm, l, s);
  st.partial.assign(1, y);
}

void Builder::emit_grid_mlp_fwd(int l, const Slice& s) {
  auto& st = ss_[s.index];
  auto& sv = saved_[l][s.index];
  const auto& w = lw_[l];
  const std::int64_t T = s.tokens(), h = sh_.h;
  sv.n2 = grid_norm_fwd(sv.x_mid, w.norm2, Op::norm2, l, s);
  sv.f1 = act(T, sh_.F1, Op::fc1, l, s.index);
  summa_fwd(sv.n2, w.fc1, sv.f1, sh_.fc1_fwd(T), Op::fc1, Op::mlp_comm, l, s);
  sv.act = act(T, sh_.F, Op::activation, l, s.index);
  add(task(ew(activation_kind(), T * sh_.F, (m_.fc1_out() / m_.ffn_hidden + 1.0) * bpe()), Op::activation, Phase::fwd, l, s),
      {sv.f1}, {sv.act});
  const TensorId y = act(T, h, Op::fc2, l, s.index);
  summa_fwd(sv.act, w.fc2, y, sh_.fc2_fwd(T, 1), Op::fc2, Op::mlp_comm, l, s);
  st.partial.assign(1, y);
}

void Builder::emit_grid_head_fwd(const Slice& s) {
  auto& st = ss_[s.index];
  const std::int64_t T = s.tokens(), V = sh_.V;
  TensorId nf = grid_norm_fwd(st.x, w_fnorm_, Op::final_norm, -1, s);
  nf_[s.index] = nf;
  // logits [T, vocab/q] as one more SUMMA product (the head's [h/q, vocab/q] block)
  TensorId logits = tensor(T, V, DType::fp32, TensorRole::activation, Op::lm_head, -1, s.index);
  summa_fwd(nf, w_head_, logits, sh_.lm_head_fwd(T), Op::lm_head, Op::embed_comm, -1, s);
  logits_[s.index] = logits;
  // vocab-parallel cross-entropy along the row: local max, sum-exp and target logit, one all-reduce
  TensorId stats = tensor(T, 3, DType::fp32, TensorRole::activation, Op::loss_comm, -1, s.index);
  add(task(ew(ElementwiseKind::cross_entropy, T * V, 4.0), Op::loss_comm, Phase::fwd, -1, s), {logits, target(s)}, {stats});
  add(grid_task(CollectiveKind::all_reduce, static_cast<double>(T) * 3 * 4, true, Op::loss_comm, Phase::fwd, -1, s, -1, DType::fp32),
      {stats}, {stats});
  stats_[s.index] = stats;
}

BackwardTasks Builder::emit_grid_head_bwd(const Slice& s) {
  auto& st = ss_[s.index];
  const std::int64_t T = s.tokens(), h = sh_.h;
  TensorId dn = grad(T, h, Op::final_norm, -1, s.index);
  const auto last = summa_bwd(dlogits_[s.index], nf_[s.index], w_head_, dn, d_head_, sh_.lm_head_dgrad(T), sh_.lm_head_wgrad(T),
                              Op::lm_head, Op::embed_comm, -1, s);
  st.d_in = dn;
  return {last, last};
}

BackwardTasks Builder::emit_grid_mlp_bwd(int l, const Slice& s) {
  auto& st = ss_[s.index];
  const auto& sv = saved_[l][s.index];
  const auto& w = lw_[l];
  const std::int64_t T = s.tokens(), h = sh_.h, F = sh_.F, F1 = sh_.F1;
  TensorId da = grad(T, F, Op::activation, l, s.index);
  summa_bwd(st.dy, sv.act, w.fc2, da, w.d_fc2, sh_.fc2_dgrad(T), sh_.fc2_wgrad(T), Op::fc2, Op::mlp_comm, l, s);
  TensorId df1 = grad(T, F1, Op::fc1, l, s.index);
  add(task(ew(activation_kind(), T * F, (2.0 * F1 / F + 1.0) * bpe(), true), Op::activation, Phase::bwd_dgrad, l, s), {sv.f1, da},
      {df1});
  TensorId dn2 = grad(T, h, Op::norm2, l, s.index);
  const auto last = summa_bwd(df1, sv.n2, w.fc1, dn2, w.d_fc1, sh_.fc1_dgrad(T), sh_.fc1_wgrad(T), Op::fc1, Op::mlp_comm, l, s);
  st.d_in = dn2;
  return {last, last};
}

BackwardTasks Builder::emit_grid_attn_bwd(int l, const Slice& s) {
  auto& st = ss_[s.index];
  auto& sv = saved_[l][s.index];
  const auto& w = lw_[l];
  const std::int64_t T = s.tokens(), h = sh_.h, Q = sh_.Q;
  TensorId dctx = grad(T, sh_.A, Op::attention, l, s.index);
  summa_bwd(st.dy, sv.ctx, w.out, dctx, w.d_out, sh_.out_proj_dgrad(T), sh_.out_proj_wgrad(T), Op::out_proj, Op::attn_comm, l, s);
  sv.dqkv = grad(T, Q, Op::qkv, l, s.index);
  const TensorId in[] = {sv.qkv, sv.ctx, sv.aux, dctx};
  add(task(sh_.attention(s.batch, s.seq, s.q_offset, true), Op::attention, Phase::bwd_dgrad, l, s), in,
      std::span<const TensorId>(&sv.dqkv, 1));
  TensorId dn1 = grad(T, h, Op::norm1, l, s.index);
  const auto last = summa_bwd(sv.dqkv, sv.n1, w.qkv, dn1, w.d_qkv, sh_.qkv_dgrad(T), sh_.qkv_wgrad(T), Op::qkv, Op::attn_comm, l, s);
  st.d_in = dn1;
  return {last, last};
}

void Builder::emit_grid_embedding_bwd(const Slice& s) {
  auto& st = ss_[s.index];
  const std::int64_t T = s.tokens(), h = sh_.h, q = p_.tp_q;
  // the reduce-scatter's backward: the column's gradients all-gathered, then scatter-added into
  // this rank's vocabulary rows
  TensorId dyg = tensor(q * T, h, sh_.act_dtype, TensorRole::gradient, Op::embedding, -1, s.index, -1, true, 2);
  add(grid_task(CollectiveKind::all_gather, static_cast<double>(q * T * h) * bpe(), false, Op::embed_comm, Phase::bwd_dgrad, -1, s, -1,
                sh_.act_dtype),
      {st.dy}, {dyg});
  Task t = task(ew(ElementwiseKind::embedding, q * T * h, bpe() + 8.0, true), Op::embedding, Phase::bwd_wgrad, -1, s);
  if (m_.position == Position::learned)
    add(std::move(t), {dyg, tokens_[s.index]}, {d_emb_, d_pos_});
  else
    add(std::move(t), {dyg, tokens_[s.index]}, {d_emb_});
}

}  // namespace sim
