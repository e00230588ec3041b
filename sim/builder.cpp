#include "sim/builder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>

#include "common/config_error.hpp"
#include "common/limits.hpp"
#include "hardware/gemm_model.hpp"
#include "sim/strategy.hpp"

namespace sim {

using common::DType;
using hardware::CollectiveKind;
using hardware::CollectiveOp;
using hardware::ElementwiseKind;
using hardware::OptimizerOp;

namespace {
constexpr std::int32_t kNone = -1;
}

Builder::Builder(const ModelSpec& m, const hardware::ClusterSpec& c, const Plan& p, int rank) : m_(m), c_(c), p_(p), sh_(m, p) {
  g_.model = m;
  g_.plan = p;
  g_.rank = rank;
  g_.represents = p.tp * p.dp;
  tp_nodes_ = std::max(1, p.tp / c.node.gpus_per_node);
  dp_nodes_ = std::max(1, c.nodes / tp_nodes_);
  // Megatron-LM's layout: TP ranks are adjacent (tp fastest), DP groups stride by tp.
  g_.streams.reserve(4);
  g_.groups.reserve(4);
  group_seq_.reserve(4);
  streams_.compute = add_stream({.name = "compute", .kind = StreamKind::compute});
  streams_.tp_comm = add_stream({.name = "tp_comm", .kind = StreamKind::comm});
  streams_.dp_comm = add_stream({.name = "dp_comm", .kind = StreamKind::comm});
  if (p.pp > 1) {
    // DP members of a stage: t + tp x (d + dp x s) for every d; count the nodes they span
    const PipelinePosition pos = pipeline_position(p, rank);
    int nodes = 0, last = -1;
    for (int d = 0; d < p.dp; ++d) {
      const int node = world_rank_of(p, pos.tp_rank, d, pos.stage) / c.node.gpus_per_node;
      if (node != last) ++nodes;
      last = node;
    }
    dp_nodes_ = std::max(1, nodes);
  }
  tp_group_ = add_group({.name = "tp", .size = p.tp, .nodes = tp_nodes_, .instance = rank / p.tp});
  dp_group_ = add_group({.name = "dp", .size = p.dp, .nodes = dp_nodes_, .instance = p.pp > 1 ? rank % p.tp + p.tp * pipeline_position(p, rank).stage : rank % p.tp});
  grad_ranks_ = p.dp;
  if (p.grid_tp()) setup_grid(rank);  // row, column streams and groups; the dp group spans the depth too
  if (p.tp > 1) {
    const TpOverlap o = p.strategy->tp_overlap(p);
    if (p.sequence_parallel)
      ov_ = o;
    else
      ov_.tp_sms = o.tp_sms;  // the sites' decomposition needs sequence parallelism; the communicator's channels do not
  }
  if (ov_.fused) {
    // FLUX's copy stream and in-kernel transfers: beside the NCCL collectives of tp_comm, not behind them
    fused_comm_ = add_stream({.name = "fused_comm", .kind = StreamKind::comm});
    fused_priced_ = c.gpu.arch != hardware::GpuArch::cpu;
    // sm90's in-kernel pull, sm80's epilogue stores (hardware::fused_rs_transfer; the strategy
    // refuses other GPUs), the CPU backend's MPI exchanges
    fused_rs_ = c.gpu.arch == hardware::GpuArch::hopper ? FusedRs::pull : fused_priced_ ? FusedRs::store : FusedRs::mpi;
  }
  range_ = {0, m.layers};
  chunks_ = {range_};
  if (p.pp > 1) setup_pipeline(rank);

  const int r = p.row_slices;
  for (int i = 0; i < r; ++i) {
    Slice s;
    s.index = i;
    if (p.row_axis == RowAxis::batch) {
      s.batch = p.micro_batch / p.tp_rows() / r;  // a 2D / 2.5D grid's rows and depth split the batch
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
  ss_.assign(r, {});
  saved_.assign(m.layers, std::vector<Saved>(r));
  kv_reads_.assign(m.layers, std::vector<std::vector<TensorId>>(r));
  nf_.assign(r, kNoTensor);
  logits_.assign(r, kNoTensor);
  stats_.assign(r, kNoTensor);
  dlogits_.assign(r, kNoTensor);
  emit_weights();
  // activation recompute: which layers run their forward again, in which chunks
  // (pipelined: each model chunk of the stage is a stage of its own to Megatron-LM's recompute)
  chunk_of_layer_.assign(m.layers, -1);
  for (const auto& ch : chunks_)
    for (const auto& k : recompute_chunks(p, ch.end - ch.first)) rc_chunks_.push_back({ch.first + k.first, ch.first + k.end});
  for (std::size_t c = 0; c < rc_chunks_.size(); ++c)
    for (int l = rc_chunks_[c].first; l < rc_chunks_[c].end; ++l) chunk_of_layer_[l] = static_cast<int>(c);
  recomputed_.assign(rc_chunks_.size(), std::vector<char>(r, 0));
  // DP buckets (and ZeRO's shards and parameter gathers); a pipeline stage without ZeRO fills its
  // own as the last micro-batch's gradients complete (grad_ready), with ZeRO-1 it plans them per
  // model chunk up front (the gathers of the next step's forward need them)
  if (reduces_dp() && (p.pp == 1 || p.shards_optimizer())) plan_buckets();
}

StreamId Builder::add_stream(StreamSpec s) {
  g_.streams.push_back(std::move(s));
  return static_cast<StreamId>(g_.streams.size() - 1);
}

GroupId Builder::add_group(GroupSpec gs) {
  g_.groups.push_back(std::move(gs));
  group_seq_.push_back(0);
  return static_cast<GroupId>(g_.groups.size() - 1);
}

// ---- tensors, tasks and derived dependencies ------------------------------------------------------

TensorId Builder::tensor(std::int64_t rows, std::int64_t cols, DType dt, TensorRole role, Op op, int layer, int slice, int chunk,
                         bool backward, std::uint8_t variant) {
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
  if (role != TensorRole::weight && role != TensorRole::weight_grad) {
    t.micro = static_cast<std::int16_t>(micro_);
    t.model_chunk = static_cast<std::int8_t>(model_chunk_);
  }
  g_.tensors.push_back(t);
  state_.push_back({kNone, kNone});
  return static_cast<TensorId>(g_.tensors.size() - 1);
}

Task Builder::task(TaskKind kind, Op op, Phase phase, int layer, const Slice& s, int chunk) const {
  Task t;
  t.kind = kind;
  t.stream = streams_.compute;
  t.op = op;
  t.phase = phase;
  t.layer = static_cast<std::int16_t>(layer);
  t.slice = static_cast<std::int8_t>(sliced_ ? s.index : -1);
  t.chunk = static_cast<std::int8_t>(chunk);
  t.micro = static_cast<std::int16_t>(micro_);
  t.model_chunk = static_cast<std::int8_t>(model_chunk_);
  t.recompute = recomputing_;
  return t;
}

std::uint32_t Builder::add(Task t, std::span<const TensorId> in, std::span<const TensorId> out) {
  // a backstop for any strategy's schedule (check_plan_limits bounds the built-in ones in closed
  // form before building): task ids and operand offsets are 32 bits, and a graph past kMaxTasks
  // would take gigabytes
  if (static_cast<std::int64_t>(g_.tasks.size()) >= common::limits::kMaxTasks)
    throw common::ConfigError("plan", "strategy",
                              fmt::format("strategy {} builds more than {} tasks per rank for this plan (common/limits.hpp); use fewer slices",
                                          g_.plan.strategy->name, common::limits::kMaxTasks));
  if (g_.operands.size() + in.size() + out.size() > std::numeric_limits<std::uint32_t>::max())
    throw common::ConfigError("plan", "strategy", "the step graph has more than 2^32 operands");
  const auto id = static_cast<std::uint32_t>(g_.tasks.size());
  if (wait_for_ && t.stream == streams_.compute) {
    edge(*wait_for_, id);
    wait_for_.reset();
  }
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
  if (t.is_collective() && t.group) t.seq = group_seq_[*t.group]++;
  // the plan's channels for the TP communicator (tp_channels), on every collective it carries
  if (ov_.tp_sms >= 0 && t.is_collective() && t.group == tp_group_ && t.comm_sms < 0) t.comm_sms = static_cast<std::int16_t>(ov_.tp_sms);
  if (!pending_sends_.empty() && t.stream == streams_.compute) {  // blocking transfers (p2p_overlap false)
    for (auto send : pending_sends_) edge(send, id);
    pending_sends_.clear();
  }
  if (!unit_of_weight_.empty())  // ZeRO-3: the last reader of each unit's gathered weights
    for (TensorId x : in)
      if (x < unit_of_weight_.size() && unit_of_weight_[x] > 0) unit_last_reader_[unit_of_weight_[x] - 1] = static_cast<std::int32_t>(id);
  g_.tasks.push_back(std::move(t));
  return id;
}

// ---- TP collectives ---------------------------------------------------------------------------------

Task Builder::tp_task(CollectiveKind k, double bytes, Op op, Phase phase, int layer, const Slice& s, int chunk) const {
  Task t = task(
      CollectiveOp{
          .kind = k, .bytes = static_cast<std::int64_t>(bytes), .ranks = p_.tp, .nodes = tp_nodes_, .dtype = sh_.act_dtype},
      op, phase, layer, s, chunk);
  t.stream = streams_.tp_comm;
  t.group = tp_group_;
  return t;
}

/// AllReduce in place (no SP), or ReduceScatter into a new [rows/tp, cols] tensor (SP). Returns the
/// tensor the consumer reads and the collective's task id (none at tp 1).
std::pair<TensorId, std::optional<std::uint32_t>> Builder::reduce_out(TensorId x, Op op, Phase phase, int layer, const Slice& s,
                                                                      int chunk) {
  if (p_.tp == 1) return {x, std::nullopt};
  const auto info = g_.tensors[x];  // a copy: tensor() below may grow g_.tensors
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
TensorId Builder::gather_in(TensorId x, Op op, Phase phase, int layer, const Slice& s) {
  if (!p_.sequence_parallel || p_.tp == 1) return x;
  const auto info = g_.tensors[x];  // a copy: tensor() below grows g_.tensors (the reference dangled)
  TensorId y = tensor(info.rows * p_.tp, info.cols, info.dtype, info.role, info.op, layer, s.index, -1, info.backward, 2);
  add(tp_task(CollectiveKind::all_gather, static_cast<double>(info.rows) * p_.tp * info.cols * common::dtype_bytes(info.dtype),
              op, phase, layer, s),
      {x}, {y});
  return y;
}

std::vector<TensorId> Builder::gathered_gemm(TensorId x, Op comm, Phase phase, int layer, const Slice& s, RowGemm gemm, Op op,
                                             TensorId w, const std::function<TensorId()>& make_out) {
  const Phase gp = phase == Phase::fwd ? Phase::fwd : Phase::bwd_dgrad;
  if (ov_.fused) return fused_gathered_gemm(x, comm, phase, layer, s, gemm, op, w, make_out());
  if (!ov_.ag_peer_steps) {
    const TensorId y = gather_in(x, comm, phase, layer, s);
    const TensorId out = make_out();
    add(task((sh_.*gemm)(s.tokens()), op, gp, layer, s), {y, w}, {out});
    return {y};
  }
  const TensorId out = make_out();
  // tp steps (TE's ring exchange, PyTorch's fused all-gather matmul): step k's GEMM runs on the
  // shard that arrived in step k - 1 (the local one first) while the copy engines bring the next
  const auto info = g_.tensors[x];  // a copy: tensor() below grows g_.tensors
  const int n = p_.tp;
  std::vector<TensorId> pieces{x};
  for (int k = 0; k < n; ++k) {
    if (k + 1 < n) {
      const TensorId next = tensor(info.rows, info.cols, info.dtype, info.role, info.op, layer, s.index, k + 1, info.backward, 2);
      Task t = tp_task(CollectiveKind::send_recv, info.bytes(), comm, phase, layer, s, k + 1);
      auto& c = std::get<CollectiveOp>(t.kind);
      c.ranks = 2;
      c.nodes = tp_nodes_ > 1 ? 2 : 1;
      t.comm_sms = 0;  // copy engines
      t.launches = 0;  // issued by the fused op's own loop
      add(std::move(t), {pieces.back()}, {next});
      pieces.push_back(next);
    }
    Task g = task((sh_.*gemm)(info.rows), op, gp, layer, s, k);
    if (k > 0) g.launches = 0;  // one framework call per site: the later steps are pieces of it
    add(std::move(g), {pieces[static_cast<std::size_t>(k)], w}, {out});
  }
  return pieces;
}

std::vector<TensorId> Builder::fused_gathered_gemm(TensorId x, Op comm, Phase phase, int layer, const Slice& s, RowGemm gemm, Op op,
                                                   TensorId w, TensorId out) {
  const Phase gp = phase == Phase::fwd ? Phase::fwd : Phase::bwd_dgrad;
  const auto info = g_.tensors[x];  // a copy: tensor() below grows g_.tensors
  const int n = p_.tp;
  std::vector<TensorId> pieces{x};
  // the copies first, in shard order, each to be moved when the one before has landed
  // (all_gather_gemm_op.cc: the copy stream's work is enqueued before the GEMM kernel)
  for (int k = 1; k < n; ++k) {
    const TensorId next = tensor(info.rows, info.cols, info.dtype, info.role, info.op, layer, s.index, k, info.backward, 2);
    Task t = tp_task(CollectiveKind::send_recv, info.bytes(), comm, phase, layer, s, k);
    auto& c = std::get<CollectiveOp>(t.kind);
    c.ranks = 2;
    c.nodes = 1;  // FLUX's intra-node kernels (the strategy refuses a TP group across nodes on GPUs)
    t.stream = fused_comm_;
    t.launches = k == 1 ? 1 : 0;  // the host enqueues the copies in one loop
    if (fused_priced_) {
      t.comm_sms = 0;  // copy engines
      t.fused = k == 1 ? FusedPiece::ag_copy_first : FusedPiece::ag_copy;
      t.fused_of = static_cast<std::uint16_t>(n);
    }
    add(std::move(t), {pieces.back()}, {next});
    pieces.push_back(next);
  }
  // one GEMM kernel: a chunk of rows per shard, the local shard's first, each once its shard is there
  for (int k = 0; k < n; ++k) {
    Task g = task((sh_.*gemm)(info.rows), op, gp, layer, s, k);
    if (k > 0) g.launches = 0;
    if (fused_priced_) {
      g.fused = FusedPiece::gemm;
      g.fused_of = static_cast<std::uint16_t>(n);
    }
    add(std::move(g), {pieces[static_cast<std::size_t>(k)], w}, {out});
  }
  return pieces;
}

int Builder::fused_subchunks(const hardware::GemmOp& whole, std::int64_t R) const {
  if (fused_rs_ != FusedRs::pull) return 1;
  const double waves = hardware::estimate_gemm(c_.gpu, whole).waves;
  int sub = static_cast<int>(std::clamp<long>(std::lround(waves / p_.tp), 1, TpOverlap::kFusedMaxSubchunks));
  while (sub > 1 && R % sub != 0) --sub;
  return sub;
}

std::pair<TensorId, std::optional<std::uint32_t>> Builder::fused_reduced_gemm(
    TensorId x, TensorId w, const std::function<hardware::GemmOp(std::int64_t)>& gemm, Op op, Op comm, Phase phase, int l,
    const Slice& s) {
  const bool bwd = phase != Phase::fwd;
  const int n = p_.tp;
  const std::int64_t T = s.tokens(), R = T / n, h = sh_.h;
  const int sub = fused_subchunks(gemm(T), R);
  const std::int64_t r = R / sub;
  const int chunks = n * sub;
  const TensorRole role = bwd ? TensorRole::gradient : TensorRole::activation;
  const Op tag = bwd ? (op == Op::qkv ? Op::norm1 : Op::norm2) : op;  // the tensor it is: out-proj / FC2 output, norm input gradient
  std::vector<TensorId> parts(static_cast<std::size_t>(chunks));  // [sub-chunk j x tp + peer offset o]
  std::optional<std::uint32_t> last;
  int issued = 0;
  for (int step = 1; step <= n; ++step) {
    const int o = step % n;  // the peers' rows first, the local ones last (FLUX's sm80 order, tp_gemm_fused)
    for (int j = 0; j < sub; ++j) {
      const int c = o * sub + j;
      const TensorId y = tensor(r, h, sh_.act_dtype, role, tag, l, s.index, c, bwd);
      Task g = task(gemm(r), op, phase, l, s, c);
      if (issued++ > 0) g.launches = 0;  // one kernel
      if (fused_priced_) {
        g.fused = FusedPiece::gemm;
        g.fused_of = static_cast<std::uint16_t>(chunks);
      }
      add(std::move(g), {x, w}, {y});
      TensorId part = y;
      if (o != 0 || fused_rs_ == FusedRs::pull) {  // to its owner (Hopper: the local tiles pass the pull too)
        Task t = tp_task(CollectiveKind::send_recv, static_cast<double>(r) * h * bpe(), comm, phase, l, s, c);
        auto& co = std::get<CollectiveOp>(t.kind);
        co.ranks = o == 0 ? 1 : 2;
        co.nodes = 1;
        t.stream = fused_comm_;
        t.launches = 0;  // in the kernel (the epilogue's stores, the fetch warps)
        if (fused_priced_) {
          t.comm_sms = 0;
          t.fused = fused_rs_ == FusedRs::pull ? FusedPiece::rs_pull : FusedPiece::rs_store;
        }
        part = tensor(r, h, sh_.act_dtype, role, tag, l, s.index, c, bwd, 1);
        last = add(std::move(t), {y}, {part});
      }
      parts[static_cast<std::size_t>(j * n + o)] = part;
    }
  }
  // the local reduction (FLUX's reduce kernel / local_reduction): the tp partials of each row
  // summed, reading tp segments and writing one - a kernel of its own that no stack fuses away
  // (accumulate: the stacks' `fused` lists name the residual add, which this is not)
  const TensorId sum = tensor(R, h, sh_.act_dtype, role, tag, l, s.index, -1, bwd, 1);
  Task t = task(ew(ElementwiseKind::accumulate, R * h, (n + 1.0) * bpe()), op, phase, l, s);
  t.launches = 0;  // part of the fused op's call
  add(std::move(t), parts, std::span<const TensorId>(&sum, 1));
  return {sum, last};
}

void Builder::bulk_overlap(std::size_t id, std::optional<std::uint32_t> after) {
  if (ov_.bulk_sms <= 0 || id >= g_.tasks.size() || !g_.tasks[id].is_collective()) return;  // no bulk overlap, or nothing was issued
  g_.tasks[id].comm_sms = static_cast<std::int16_t>(ov_.bulk_sms);
  g_.tasks[id].launches = 0;  // TE launches it inside the GEMM call it overlaps (bulk_overlap=True)
  // TE's CommOverlap::bulk_overlap first makes its communication stream wait for the main stream
  // (cudaStreamWaitEvent on _start_comm): the collective starts when the compute stream reaches the
  // GEMM beside it, not as soon as its input exists
  if (after) edge(*after, static_cast<std::uint32_t>(id));
}

void Builder::reduced_gemm(TensorId x, TensorId w, ChunkGemm gemm, Op op, Op comm, int l, const Slice& s) {
  auto& st = ss_[s.index];
  st.partial.clear();
  const std::int64_t T = s.tokens(), h = sh_.h;
  if (ov_.fused) {
    st.partial.push_back(
        fused_reduced_gemm(x, w, [&](std::int64_t rows) { return (sh_.*gemm)(rows, 1); }, op, comm, Phase::fwd, l, s).first);
    return;
  }
  if (ov_.rs_peer_steps) {
    // tp steps (PyTorch's fused matmul reduce-scatter): the rows of each peer's shard, pushed to it
    // by copy engines as soon as they are computed, the local rows last, then the sum of the tp partials
    const int n = p_.tp;
    const std::int64_t R = T / n;
    std::vector<TensorId> parts;
    for (int k = 1; k <= n; ++k) {
      const int c = k % n;  // 0: the local shard
      const TensorId y = act(R, h, op, l, s.index, c);
      Task g = task((sh_.*gemm)(R, 1), op, Phase::fwd, l, s, c);
      if (k > 1) g.launches = 0;  // one framework call per site: the later steps are pieces of it
      add(std::move(g), {x, w}, {y});
      if (c == 0) {
        parts.insert(parts.begin(), y);
        break;
      }
      Task t = tp_task(CollectiveKind::send_recv, static_cast<double>(R) * h * bpe(), comm, Phase::fwd, l, s, c);
      auto& co = std::get<CollectiveOp>(t.kind);
      co.ranks = 2;
      co.nodes = tp_nodes_ > 1 ? 2 : 1;
      t.comm_sms = 0;  // copy engines
      t.launches = 0;
      const TensorId r = tensor(R, h, sh_.act_dtype, TensorRole::activation, op, l, s.index, c, false, 1);
      add(std::move(t), {y}, {r});
      parts.push_back(r);
    }
    const TensorId sum = tensor(R, h, sh_.act_dtype, TensorRole::activation, op, l, s.index, -1, false, 1);
    Task t = task(ew(ElementwiseKind::residual_add, R * h, (n + 1.0) * bpe()), op, Phase::fwd, l, s);
    t.launches = 0;
    add(std::move(t), parts, std::span<const TensorId>(&sum, 1));
    st.partial.push_back(sum);
    return;
  }
  // token chunks (TE's pipeline method; rs_splits > 1 only under sequence parallelism) or column chunks (Domino)
  const int C = p_.col_slices, n = ov_.rs_splits;
  for (int k = 0; k < n; ++k)
    for (int c = 0; c < C; ++c) {
      const int chunk = n > 1 ? k : C > 1 ? c : -1;
      const TensorId y = act(T / n, h / C, op, l, s.index, chunk);
      Task g = task((sh_.*gemm)(T / n, C), op, Phase::fwd, l, s, chunk);
      if (k > 0) g.launches = 0;  // TE's loop issues the later chunks: pieces of one framework call
      add(std::move(g), {x, w}, {y});
      const auto [out, id] = reduce_out(y, comm, Phase::fwd, l, s, chunk);
      if (id && n > 1) {
        g_.tasks[*id].comm_sms = static_cast<std::int16_t>(ov_.rs_sms);
        g_.tasks[*id].launches = 0;
      }
      st.partial.push_back(out);
    }
}

ElementwiseKind Builder::norm_kind() const { return sh_.norm_kind(); }
ElementwiseKind Builder::activation_kind() const { return sh_.activation_kind(); }

// ---- weights ------------------------------------------------------------------------------------------

void Builder::emit_weights() {
  auto weight = [&](const WeightShape& s, int layer) {
    TensorId w = tensor(s.rows, s.cols, sh_.act_dtype, TensorRole::weight, s.op, layer, -1, -1, false, s.variant);
    TensorId d = tensor(s.rows, s.cols, DType::fp32, TensorRole::weight_grad, s.op, layer, -1, -1, true, s.variant);
    all_weights_.push_back(w);
    all_grads_.push_back(d);
    rank_params_ += s.params();
    return std::pair{w, d};
  };
  // A pipeline stage holds the embedding on virtual stage 0, the layers of its chunks, the final norm
  // and LM head on the last virtual stage; with tied embeddings the last stage keeps its own copy of
  // the embedding as the head (Megatron-LM), its gradient summed with the first stage's (embd group).
  bool first = false, last = false;
  for (const auto& ch : chunks_) {
    first |= ch.first == 0;
    last |= ch.end == m_.layers;
  }
  stage_first_ = first;
  stage_last_ = last;
  if (first) {
    std::tie(w_emb_, d_emb_) = weight(sh_.embedding(), -1);
    if (m_.position == Position::learned) std::tie(w_pos_, d_pos_) = weight(sh_.positions(), -1);
  }
  lw_.resize(m_.layers);
  const auto shapes = sh_.layer_weights();  // norm1, qkv, out_proj, norm2, fc1, fc2
  for (const auto& ch : chunks_)
    for (int l = ch.first; l < ch.end; ++l) {
      auto& w = lw_[l];
      std::tie(w.norm1, w.d_norm1) = weight(shapes[0], l);
      std::tie(w.qkv, w.d_qkv) = weight(shapes[1], l);
      std::tie(w.out, w.d_out) = weight(shapes[2], l);
      std::tie(w.norm2, w.d_norm2) = weight(shapes[3], l);
      std::tie(w.fc1, w.d_fc1) = weight(shapes[4], l);
      std::tie(w.fc2, w.d_fc2) = weight(shapes[5], l);
    }
  if (!last) return;
  std::tie(w_fnorm_, d_fnorm_) = weight(sh_.final_norm(), -1);
  if (m_.tied_embeddings && first) {
    w_head_ = w_emb_;
    d_head_ = d_emb_;
  } else if (m_.tied_embeddings) {
    std::tie(w_head_, d_head_) = weight(sh_.embedding(), -1);
  } else {
    std::tie(w_head_, d_head_) = weight(sh_.lm_head(), -1);
  }
}

// ---- forward ------------------------------------------------------------------------------------------

void Builder::emit_embedding(const Slice& s) {
  if (skip_fwd()) return;
  if (p_.grid_tp()) return emit_grid_embedding(s);
  if (!holds_embedding()) {  // the activation of the previous virtual stage
    ss_[s.index].x = transfer(true, false, kNoTensor, rows(s), s);
    return;
  }
  gather_for_forward(-1);
  const std::int64_t T = s.tokens(), h = sh_.h;
  TensorId tok = tensor(T, 1, DType::fp32, TensorRole::input, Op::embedding, -1, s.index);
  TensorId tgt = tensor(T, 1, DType::fp32, TensorRole::input, Op::loss, -1, s.index);
  tokens_.push_back(tok);
  targets_.push_back(tgt);
  TensorId e = act(T, h, Op::embedding, -1, s.index);
  Task t = task(sh_.embedding_fwd(T), Op::embedding, Phase::fwd, -1, s);
  if (m_.position == Position::learned)
    add(std::move(t), {tok, w_emb_, w_pos_}, {e});
  else
    add(std::move(t), {tok, w_emb_}, {e});
  ss_[s.index].x = reduce_out(e, Op::embed_comm, Phase::fwd, -1, s).first;
}

void Builder::emit_attn_fwd(int l, const Slice& s) {
  if (skip_fwd()) return;
  if (p_.grid_tp()) return emit_grid_attn_fwd(l, s);
  auto& st = ss_[s.index];
  auto& sv = saved_[l][s.index];
  const auto& w = lw_[l];
  const std::int64_t T = s.tokens(), h = sh_.h, R = rows(s);
  gather_for_forward(l);
  sv.x = st.x;
  sv.n1 = act(R, h, Op::norm1, l, s.index);
  add(task(sh_.norm_fwd(R), Op::norm1, Phase::fwd, l, s), {st.x, w.norm1}, {sv.n1});
  gathered_gemm(sv.n1, Op::attn_comm, Phase::fwd, l, s, &Shapes::qkv_fwd, Op::qkv, w.qkv,
                [&] { return sv.qkv = act(T, sh_.Q, Op::qkv, l, s.index); });
  // Causal attention over the sequence axis: slice i's queries see the keys of slices 0..i.
  auto& kv = kv_reads_[l][s.index];
  kv.clear();
  if (p_.row_axis == RowAxis::sequence)
    for (int j = 0; j <= s.index; ++j) kv.push_back(saved_[l][j].qkv);
  else
    kv.push_back(sv.qkv);
  sv.ctx = act(T, sh_.A, Op::attention, l, s.index);
  // what the kernel keeps for its backward: probabilities (unfused) or log-sum-exp (flash)
  sv.aux = tensor(s.batch * (m_.heads / p_.tp) * s.seq, sh_.attention_aux_cols(s.seq, s.q_offset), sh_.attention_aux_dtype(),
                  TensorRole::activation, Op::attention, l, s.index, -1, false, 1);
  const TensorId outs[] = {sv.ctx, sv.aux};
  add(task(sh_.attention(s.batch, s.seq, s.q_offset, false), Op::attention, Phase::fwd, l, s), kv, outs);
  reduced_gemm(sv.ctx, w.out, &Shapes::out_proj_fwd, Op::out_proj, Op::attn_comm, l, s);
}

void Builder::emit_attn_residual(int l, const Slice& s) {
  if (skip_fwd()) return;
  auto& st = ss_[s.index];
  const std::int64_t h = sh_.h, R = rows(s);
  auto& sv = saved_[l][s.index];
  sv.x_mid = act(R, h, Op::residual1, l, s.index);
  std::vector<TensorId> in{st.x};
  in.insert(in.end(), st.partial.begin(), st.partial.end());
  add(task(sh_.residual(R), Op::residual1, Phase::fwd, l, s), in,
      std::span<const TensorId>(&sv.x_mid, 1));
  st.x = sv.x_mid;
}

void Builder::emit_mlp_fwd(int l, const Slice& s) {
  if (skip_fwd()) return;
  if (p_.grid_tp()) return emit_grid_mlp_fwd(l, s);
  auto& sv = saved_[l][s.index];
  const auto& w = lw_[l];
  const std::int64_t T = s.tokens(), h = sh_.h, R = rows(s);
  sv.n2 = act(R, h, Op::norm2, l, s.index);
  add(task(sh_.norm_fwd(R), Op::norm2, Phase::fwd, l, s), {sv.x_mid, w.norm2}, {sv.n2});
  gathered_gemm(sv.n2, Op::mlp_comm, Phase::fwd, l, s, &Shapes::fc1_fwd, Op::fc1, w.fc1,
                [&] { return sv.f1 = act(T, sh_.F1, Op::fc1, l, s.index); });
  sv.act = act(T, sh_.F, Op::activation, l, s.index);
  add(task(sh_.activation_fwd(T), Op::activation, Phase::fwd, l, s), {sv.f1}, {sv.act});
  reduced_gemm(sv.act, w.fc2, &Shapes::fc2_fwd, Op::fc2, Op::mlp_comm, l, s);
}

void Builder::emit_mlp_residual(int l, const Slice& s) {
  if (skip_fwd()) return;
  auto& st = ss_[s.index];
  const std::int64_t h = sh_.h, R = rows(s);
  TensorId x = act(R, h, Op::residual2, l, s.index);
  std::vector<TensorId> in{st.x};
  in.insert(in.end(), st.partial.begin(), st.partial.end());
  add(task(sh_.residual(R), Op::residual2, Phase::fwd, l, s), in,
      std::span<const TensorId>(&x, 1));
  st.x = x;
}

void Builder::emit_head_fwd(const Slice& s) {
  if (skip_fwd()) return;
  if (p_.grid_tp()) return emit_grid_head_fwd(s);
  auto& st = ss_[s.index];
  if (!holds_head()) {  // on to the next virtual stage
    transfer(true, true, st.x, 0, s);
    return;
  }
  gather_for_forward(m_.layers);
  const std::int64_t T = s.tokens(), h = sh_.h, V = sh_.V, R = rows(s);
  TensorId nf = act(R, h, Op::final_norm, -1, s.index);
  add(task(sh_.norm_fwd(R), Op::final_norm, Phase::fwd, -1, s), {st.x, w_fnorm_}, {nf});
  nf_[s.index] = nf;
  const TensorId nfg = gather_in(nf, Op::embed_comm, Phase::fwd, -1, s);
  TensorId logits = tensor(T, V, DType::fp32, TensorRole::activation, Op::lm_head, -1, s.index);
  add(task(sh_.lm_head_fwd(T), Op::lm_head, Phase::fwd, -1, s), {nfg, w_head_}, {logits});
  logits_[s.index] = logits;
  // vocab-parallel cross-entropy: local max, sum-exp and target logit, then one TP AllReduce
  TensorId stats = tensor(T, 3, DType::fp32, TensorRole::activation, Op::loss_comm, -1, s.index);
  add(task(sh_.loss_stats(T), Op::loss_comm, Phase::fwd, -1, s), {logits, target(s)}, {stats});
  if (p_.tp > 1) {
    Task t = tp_task(CollectiveKind::all_reduce, static_cast<double>(T) * 3 * 4, Op::loss_comm, Phase::fwd, -1, s);
    std::get<CollectiveOp>(t.kind).dtype = DType::fp32;
    add(std::move(t), {stats}, {stats});
  }
  stats_[s.index] = stats;
}

void Builder::emit_loss(const Slice& s) {
  if (skip_fwd() || !holds_head()) return;
  const std::int64_t T = s.tokens(), V = sh_.V;
  TensorId dl = tensor(T, V, DType::fp32, TensorRole::gradient, Op::lm_head, -1, s.index, -1, true);
  TensorId loss = tensor(T, 1, DType::fp32, TensorRole::activation, Op::loss, -1, s.index);
  add(task(sh_.loss(T), Op::loss, Phase::fwd, -1, s),
      {logits_[s.index], stats_[s.index], target(s)}, {dl, loss});
  dlogits_[s.index] = dl;
}

// ---- backward -----------------------------------------------------------------------------------------

BackwardTasks Builder::emit_head_bwd(const Slice& s) {
  if (skip_bwd()) return {};
  if (p_.grid_tp()) return emit_grid_head_bwd(s);
  auto& st = ss_[s.index];
  if (!holds_head()) {  // the gradient of this chunk's output, from the next virtual stage
    st.dy = transfer(false, false, kNoTensor, rows(s), s);
    return {};
  }
  const std::int64_t T = s.tokens(), h = sh_.h;
  gather_for_backward(m_.layers);
  // sequence parallelism: the sequence-sharded norm output is gathered again for the weight
  // gradient (Megatron-LM keeps the shard), overlapping the input-gradient GEMM
  const TensorId nfg = gather_in(nf_[s.index], Op::embed_comm, Phase::bwd_dgrad, -1, s);
  TensorId dn = grad(T, h, Op::final_norm, -1, s.index);
  add(task(sh_.lm_head_dgrad(T), Op::lm_head, Phase::bwd_dgrad, -1, s), {dlogits_[s.index], w_head_}, {dn});
  auto [din, coll] = reduce_out(dn, Op::embed_comm, Phase::bwd_dgrad, -1, s);
  st.d_in = din;
  const auto wg = add(task(sh_.lm_head_wgrad(T), Op::lm_head, Phase::bwd_wgrad, -1, s), {dlogits_[s.index], nfg}, {d_head_});
  return {coll, wg};
}

void Builder::emit_final_norm_bwd(const Slice& s) {
  if (skip_bwd() || !holds_head()) return;
  auto& st = ss_[s.index];
  const std::int64_t h = sh_.h, R = rows(s);
  if (p_.grid_tp()) grid_norm_bwd_stats(st.d_in, Op::final_norm, -1, s);
  TensorId dx = grad(R, h, Op::final_norm, -1, s.index);
  add(task(sh_.final_norm_bwd(R), Op::final_norm, Phase::bwd_dgrad, -1, s), {st.d_in, st.x, w_fnorm_},
      {dx, d_fnorm_});
  st.dy = dx;
}

BackwardTasks Builder::emit_mlp_bwd(int l, const Slice& s, bool wgrad_before_collective) {
  if (skip_bwd()) return {};
  if (p_.grid_tp()) return emit_grid_mlp_bwd(l, s);
  gather_for_backward(l);
  ensure_recomputed(l, s);
  auto& st = ss_[s.index];
  const auto& sv = saved_[l][s.index];
  const auto& w = lw_[l];
  const std::int64_t T = s.tokens(), h = sh_.h, F = sh_.F, F1 = sh_.F1;
  TensorId da = kNoTensor;
  std::vector<TensorId> dyg = gathered_gemm(st.dy, Op::mlp_comm, Phase::bwd_dgrad, l, s, &Shapes::fc2_dgrad, Op::fc2, w.fc2,
                                            [&] { return da = grad(T, F, Op::activation, l, s.index); });
  dyg.push_back(sv.act);
  add(task(sh_.fc2_wgrad(T), Op::fc2, Phase::bwd_wgrad, l, s), dyg, std::span<const TensorId>(&w.d_fc2, 1));
  TensorId df1 = grad(T, F1, Op::fc1, l, s.index);
  const auto act_bwd = add(task(sh_.activation_bwd(T), Op::activation, Phase::bwd_dgrad, l, s),
                           {sv.f1, da}, {df1});
  const std::size_t ag = g_.tasks.size();
  const TensorId n2g = gather_in(sv.n2, Op::mlp_comm, Phase::bwd_dgrad, l, s);  // SP: gathered again
  bulk_overlap(ag, act_bwd);
  std::uint32_t wg = 0;
  if (ov_.fused) {  // FLUX's GEMM + ReduceScatter of the input gradient (wgrad_before_collective is Domino's)
    const auto [din, coll] = fused_reduced_gemm(
        df1, w.fc1, [&](std::int64_t rows) { return sh_.fc1_dgrad(rows); }, Op::fc1, Op::mlp_comm, Phase::bwd_dgrad, l, s);
    st.d_in = din;
    wg = add(task(sh_.fc1_wgrad(T), Op::fc1, Phase::bwd_wgrad, l, s), {df1, n2g}, {w.d_fc1});
    return {coll, wg};
  }
  TensorId dn2 = grad(T, h, Op::norm2, l, s.index);
  add(task(sh_.fc1_dgrad(T), Op::fc1, Phase::bwd_dgrad, l, s), {df1, w.fc1}, {dn2});
  if (wgrad_before_collective) wg = add(task(sh_.fc1_wgrad(T), Op::fc1, Phase::bwd_wgrad, l, s), {df1, n2g}, {w.d_fc1});
  auto [din, coll] = reduce_out(dn2, Op::mlp_comm, Phase::bwd_dgrad, l, s);
  if (coll) bulk_overlap(*coll);
  st.d_in = din;
  if (!wgrad_before_collective) wg = add(task(sh_.fc1_wgrad(T), Op::fc1, Phase::bwd_wgrad, l, s), {df1, n2g}, {w.d_fc1});
  return {coll, wg};
}

void Builder::emit_mlp_norm_bwd(int l, const Slice& s) {
  if (skip_bwd()) return;
  ensure_recomputed(l, s);
  auto& st = ss_[s.index];
  const auto& w = lw_[l];
  const std::int64_t h = sh_.h, R = rows(s);
  if (p_.grid_tp()) grid_norm_bwd_stats(st.d_in, Op::mlp_comm, l, s);
  TensorId dx = grad(R, h, Op::residual1, l, s.index);
  add(task(sh_.norm_bwd(R), Op::norm2, Phase::bwd_dgrad, l, s),
      {st.d_in, saved_[l][s.index].x_mid, w.norm2, st.dy}, {dx, w.d_norm2});
  st.dy = dx;
}

BackwardTasks Builder::emit_attn_bwd(int l, const Slice& s) {
  if (skip_bwd()) return {};
  if (p_.grid_tp()) return emit_grid_attn_bwd(l, s);
  ensure_recomputed(l, s);
  auto& st = ss_[s.index];
  const auto& w = lw_[l];
  const std::int64_t T = s.tokens(), h = sh_.h, Q = sh_.Q;
  TensorId dctx = kNoTensor;
  auto& sv = saved_[l][s.index];
  const TensorId ctx = sv.ctx;
  std::vector<TensorId> dyg = gathered_gemm(st.dy, Op::attn_comm, Phase::bwd_dgrad, l, s, &Shapes::out_proj_dgrad, Op::out_proj,
                                            w.out, [&] { return dctx = grad(T, sh_.A, Op::attention, l, s.index); });
  dyg.push_back(ctx);
  add(task(sh_.out_proj_wgrad(T), Op::out_proj, Phase::bwd_wgrad, l, s), dyg, std::span<const TensorId>(&w.d_out, 1));
  // Attention backward writes dQ of its slice and accumulates dK, dV into every slice it read;
  // selective recompute runs the attention forward again first and reads what it keeps
  const auto& kv = kv_reads_[l][s.index];
  std::vector<TensorId> in(kv.begin(), kv.end());
  if (p_.recompute == Recompute::selective) {
    const TensorId ctx2 = recompute_attention(l, s);
    in.push_back(ctx2);
    in.push_back(sv.aux);
  } else {
    in.push_back(ctx);
    in.push_back(sv.aux);
  }
  in.push_back(dctx);
  std::vector<TensorId> out;
  for (std::size_t j = 0; j < kv.size(); ++j) {
    const int sj = p_.row_axis == RowAxis::sequence ? static_cast<int>(j) : s.index;
    auto& dq = saved_[l][sj].dqkv;
    if (dq == kNoTensor) dq = grad(T, Q, Op::qkv, l, sj);
    out.push_back(dq);
  }
  const auto attn_bwd = add(task(sh_.attention(s.batch, s.seq, s.q_offset, true), Op::attention, Phase::bwd_dgrad, l, s), in, out);
  const std::size_t ag = g_.tasks.size();
  const TensorId n1g = gather_in(sv.n1, Op::attn_comm, Phase::bwd_dgrad, l, s);  // SP: gathered again
  bulk_overlap(ag, attn_bwd);
  if (ov_.fused) {  // FLUX's GEMM + ReduceScatter of the input gradient
    const auto [din, coll] = fused_reduced_gemm(
        sv.dqkv, w.qkv, [&](std::int64_t rows) { return sh_.qkv_dgrad(rows); }, Op::qkv, Op::attn_comm, Phase::bwd_dgrad, l, s);
    st.d_in = din;
    const auto wg = add(task(sh_.qkv_wgrad(T), Op::qkv, Phase::bwd_wgrad, l, s), {sv.dqkv, n1g}, {w.d_qkv});
    return {coll, wg};
  }
  TensorId dn1 = grad(T, h, Op::norm1, l, s.index);
  add(task(sh_.qkv_dgrad(T), Op::qkv, Phase::bwd_dgrad, l, s), {sv.dqkv, w.qkv}, {dn1});
  auto [din, coll] = reduce_out(dn1, Op::attn_comm, Phase::bwd_dgrad, l, s);
  if (coll) bulk_overlap(*coll);
  st.d_in = din;
  const auto wg = add(task(sh_.qkv_wgrad(T), Op::qkv, Phase::bwd_wgrad, l, s), {sv.dqkv, n1g}, {w.d_qkv});
  return {coll, wg};
}

void Builder::emit_attn_norm_bwd(int l, const Slice& s) {
  if (skip_bwd()) return;
  ensure_recomputed(l, s);
  auto& st = ss_[s.index];
  const auto& w = lw_[l];
  const std::int64_t h = sh_.h, R = rows(s);
  if (p_.grid_tp()) grid_norm_bwd_stats(st.d_in, Op::attn_comm, l, s);
  TensorId dx = grad(R, h, Op::residual2, l - 1, s.index);
  add(task(sh_.norm_bwd(R), Op::norm1, Phase::bwd_dgrad, l, s),
      {st.d_in, saved_[l][s.index].x, w.norm1, st.dy}, {dx, w.d_norm1});
  st.dy = dx;
}

void Builder::emit_embedding_bwd(const Slice& s) {
  if (skip_bwd()) return;
  if (p_.grid_tp()) return emit_grid_embedding_bwd(s);
  auto& st = ss_[s.index];
  if (!holds_embedding()) {  // the gradient of this chunk's input, to the previous virtual stage
    transfer(false, true, st.dy, 0, s);
    return;
  }
  const std::int64_t T = s.tokens();
  TensorId dyg = gather_in(st.dy, Op::embed_comm, Phase::bwd_dgrad, -1, s);
  Task t = task(sh_.embedding_bwd(T), Op::embedding, Phase::bwd_wgrad, -1, s);
  if (m_.position == Position::learned)
    add(std::move(t), {dyg, tokens_[s.index]}, {d_emb_, d_pos_});
  else
    add(std::move(t), {dyg, tokens_[s.index]}, {d_emb_});
}

// ---- data-parallel gradient buckets, the step's end -----------------------------------------------------

void Builder::head_grads_ready() {
  if (skip_bwd() || !holds_head()) return;
  if (!(m_.tied_embeddings && holds_embedding())) grad_ready(d_head_);  // tied on one rank: the embedding's gradient
}

void Builder::mlp_grads_ready(int l) {
  if (skip_bwd()) return;
  if (l + 1 < range_.end) grad_ready(lw_[l + 1].d_norm1);
  else if (l == m_.layers - 1) grad_ready(d_fnorm_);  // else: the next layer is another chunk's
  grad_ready(lw_[l].d_fc2);
  grad_ready(lw_[l].d_fc1);
}

void Builder::attn_grads_ready(int l) {
  if (skip_bwd()) return;
  grad_ready(lw_[l].d_norm2);
  grad_ready(lw_[l].d_out);
  grad_ready(lw_[l].d_qkv);
}

void Builder::embedding_grads_ready() {
  if (skip_bwd()) return;
  grad_ready(lw_[range_.first].d_norm1);
  if (!holds_embedding()) return;
  if (m_.position == Position::learned) grad_ready(d_pos_);
  grad_ready(d_emb_);
}

void Builder::grad_ready(TensorId dw) {
  if (!reduces_dp()) return;
  if (p_.pp > 1) {
    // a pipeline stage: its gradients are complete in the last micro-batch's backward (ZeRO-2/3,
    // which reduce every micro-batch, are refused with pp > 1: check_plan)
    if (!grads_final_) return;
    if (p_.shards_optimizer()) {  // ZeRO-1: the planned buckets, each reduce-scattered when complete
      const int b = bucket_of_.at(dw);
      if (b < 0 || --buckets_[b].pending > 0) return;
      if (p_.overlap_grad_reduce) flush_bucket(b);
      else deferred_.push_back(b);
      return;
    }
    // without ZeRO: buckets fill in that order and each is one AllReduce after it
    pp_bucket_.push_back(dw);
    pp_bucket_params_ += g_.tensors[dw].rows * g_.tensors[dw].cols;
    if (static_cast<double>(pp_bucket_params_) * 4.0 >= p_.dp_bucket_mb * 1e6) flush_pp_bucket();
    return;
  }
  const int b = bucket_of_.at(dw);
  if (b < 0 || --buckets_[b].pending > 0) return;
  // Megatron-LM's DDP starts a bucket's reduction when its last gradient is ready (with
  // overlap_grad_reduce; else after the backward); a partial last bucket waits for finish()
  if (p_.overlap_grad_reduce && (buckets_[b].full || p_.zero >= 2)) flush_bucket(b);
  else deferred_.push_back(b);
}

void Builder::flush_pp_bucket() {
  if (pp_bucket_.empty()) return;
  add_step_grad_all_reduce(pp_bucket_params_ * 4, p_.dp, dp_nodes_, streams_.dp_comm, dp_group_, pp_bucket_);
  pp_bucket_.clear();
  pp_bucket_params_ = 0;
}

// Sequence parallelism: a TP rank's norm-weight gradients cover only its rows of the sequence;
// Megatron sums them over the TP group once per step before the optimizer (finalize_model_grads).
void Builder::emit_sp_norm_grads() {
  if (p_.grid_tp()) return emit_grid_norm_grads();
  if (!p_.sequence_parallel || p_.tp == 1) return;
  std::vector<TensorId> norms;
  if (stage_last_) norms.push_back(d_fnorm_);
  for (const auto& ch : chunks_)
    for (int l = ch.first; l < ch.end; ++l) norms.insert(norms.end(), {lw_[l].d_norm1, lw_[l].d_norm2});
  add_step_grad_all_reduce(static_cast<std::int64_t>(norms.size()) * sh_.np * sh_.h * 4, p_.tp, tp_nodes_, streams_.tp_comm,
                           tp_group_, norms);
}

void Builder::add_step_grad_all_reduce(std::int64_t bytes, int ranks, int nodes, StreamId stream, GroupId group,
                                       std::span<const TensorId> grads) {
  Task t;
  t.kind = CollectiveOp{.kind = CollectiveKind::all_reduce, .bytes = bytes, .ranks = ranks, .nodes = nodes, .dtype = DType::fp32};
  t.stream = stream;
  t.op = Op::dp_reduce;
  t.phase = Phase::dp_reduce;
  t.group = group;
  t.once_per_step = true;
  t.layer = -1;
  add(std::move(t), grads, grads);
}

void Builder::emit_optimizer() {
  Task t;
  t.stream = streams_.compute;
  t.op = Op::optimizer;
  t.phase = Phase::optimizer;
  t.once_per_step = true;
  if (p_.shards_optimizer() && reduces_dp()) {
    // ZeRO: this rank's shard of every bucket (gradient shard i pairs with parameter shard i)
    std::vector<TensorId> in, out;
    std::int64_t params = 0;
    for (const auto& b : buckets_) {
      in.push_back(b.grad_shard);
      out.push_back(b.param_shard);
      params += g_.tensors[b.param_shard].rows;
    }
    t.kind = OptimizerOp{.params = params};
    add(std::move(t), in, out);
    return;
  }
  t.kind = OptimizerOp{.params = rank_params_};
  std::vector<TensorId> in(all_grads_);
  add(std::move(t), in, all_weights_);
}

StepGraph Builder::finish() {
  if (!p_.shards_optimizer() || !reduces_dp()) emit_sp_norm_grads();  // ZeRO: per bucket (flush_bucket)
  if (p_.pp > 1 && reduces_dp()) flush_pp_bucket();
  for (int b : deferred_) flush_bucket(b);
  deferred_.clear();
  if (!embd_reduced_) emit_embedding_grads();
  emit_optimizer();
  emit_zero_step_end();
  const auto n = g_.tasks.size();
  g_.graph = StepGraph::Graph(boost::edges_are_unsorted_multi_pass, edges_.begin(), edges_.end(), n);
  g_.in_degree.assign(n, 0);
  for (const auto& e : edges_) ++g_.in_degree[e.second];
  return std::move(g_);
}

StepGraph build_step_graph(const ModelSpec& model, const hardware::ClusterSpec& cluster, const Plan& plan, int rank) {
  Builder b(model, cluster, plan, rank);
  if (plan.pp > 1)
    b.emit_pipeline(plan.strategy->schedule);
  else
    plan.strategy->schedule(b);
  return b.finish();
}

}  // namespace sim
