// The builder's pipeline part: a stage's streams and point-to-point groups, its whole step as the
// schedule's passes (sim/pipeline_schedule.hpp), and the transfers between virtual stages.
#include <fmt/format.h>

#include <map>

#include "sim/builder.hpp"

namespace sim {

using common::DType;
using hardware::CollectiveKind;
using hardware::CollectiveOp;

struct Builder::PassState {
  std::vector<SliceState> ss;
  std::vector<std::vector<Saved>> saved;
  std::vector<std::vector<std::vector<TensorId>>> kv_reads;
  std::vector<TensorId> tokens, targets, nf, logits, stats, dlogits;
  std::vector<std::vector<char>> recomputed;  ///< activation recompute: [chunk][slice] done in this pass
};

void Builder::save_pass(PassState& ps) {
  std::swap(ps.ss, ss_);
  std::swap(ps.saved, saved_);
  std::swap(ps.kv_reads, kv_reads_);
  std::swap(ps.tokens, tokens_);
  std::swap(ps.targets, targets_);
  std::swap(ps.nf, nf_);
  std::swap(ps.logits, logits_);
  std::swap(ps.stats, stats_);
  std::swap(ps.dlogits, dlogits_);
  std::swap(ps.recomputed, recomputed_);
}

void Builder::load_pass(PassState& ps) { save_pass(ps); }  // a swap either way

void Builder::setup_pipeline(int rank) {
  const PipelinePosition pos = pipeline_position(p_, rank);
  stage_ = pos.stage;
  const int pp = p_.pp, lanes = p_.tp * p_.dp;
  const auto vs = virtual_stage_layers(m_, p_);
  const int V = static_cast<int>(vs.size());
  chunks_.clear();
  bool recv_fwd = false, send_fwd = false;
  for (int c = 0; c < p_.vp; ++c) {
    const int v = c * pp + stage_;
    chunks_.push_back(vs[v]);
    recv_fwd |= v > 0;
    send_fwd |= v < V - 1;
  }
  g_.micro_batches = p_.grad_accum_steps();
  // Boundary b joins stage b and stage (b + 1) mod pp of this lane; it crosses a node when their ranks do.
  auto nodes = [&](int b) {
    const int a = world_rank_of(p_, pos.tp_rank, pos.dp_rank, b), z = world_rank_of(p_, pos.tp_rank, pos.dp_rank, (b + 1) % pp);
    return a / c_.node.gpus_per_node == z / c_.node.gpus_per_node ? 1 : 2;
  };
  const int next_b = stage_, prev_b = (stage_ + pp - 1) % pp;
  pipe_.nodes_next = nodes(next_b);
  pipe_.nodes_prev = nodes(prev_b);
  // One stream per direction and neighbour, each a communicator pair of its own, so that the
  // transfers of one direction never queue behind the other's (NCCL's batched send/recv does the same).
  if (send_fwd) {
    pipe_.send_next = add_stream({.name = "pp_fwd_send", .kind = StreamKind::comm});
    pipe_.fwd_out = add_group({.name = "pp_fwd", .size = 2, .nodes = pipe_.nodes_next, .instance = pos.lane + lanes * next_b});
    pipe_.recv_next = add_stream({.name = "pp_bwd_recv", .kind = StreamKind::comm});
    pipe_.bwd_in = add_group({.name = "pp_bwd", .size = 2, .nodes = pipe_.nodes_next, .instance = pos.lane + lanes * next_b});
  }
  if (recv_fwd) {
    pipe_.recv_prev = add_stream({.name = "pp_fwd_recv", .kind = StreamKind::comm});
    pipe_.fwd_in = add_group({.name = "pp_fwd", .size = 2, .nodes = pipe_.nodes_prev, .instance = pos.lane + lanes * prev_b});
    pipe_.send_prev = add_stream({.name = "pp_bwd_send", .kind = StreamKind::comm});
    pipe_.bwd_out = add_group({.name = "pp_bwd", .size = 2, .nodes = pipe_.nodes_prev, .instance = pos.lane + lanes * prev_b});
  }
  // Tied embeddings: the first and the last stage each hold the embedding matrix and sum its
  // gradient once per step (Megatron-LM's embedding group).
  bool first = false, last = false;
  for (const auto& ch : chunks_) {
    first |= ch.first == 0;
    last |= ch.end == m_.layers;
  }
  if (m_.tied_embeddings && (first || last)) {
    const int a = world_rank_of(p_, pos.tp_rank, pos.dp_rank, 0), z = world_rank_of(p_, pos.tp_rank, pos.dp_rank, pp - 1);
    embd_group_ = add_group({.name = "embd",
                             .size = 2,
                             .nodes = a / c_.node.gpus_per_node == z / c_.node.gpus_per_node ? 1 : 2,
                             .instance = pos.lane});
  }
  const std::size_t per_pass = static_cast<std::size_t>(vs[0].size() + 2) * slices_.size() * (28 + 4 * p_.col_slices) + 16;
  const std::size_t est = per_pass * static_cast<std::size_t>(g_.micro_batches) * static_cast<std::size_t>(p_.vp) + 64;
  g_.tasks.reserve(est);
  g_.tensors.reserve(est * 2);
  g_.operands.reserve(est * 4);
  edges_.reserve(est * 4);
  state_.reserve(est * 2);
}

TensorId Builder::target(const Slice& s) {
  while (targets_.size() <= static_cast<std::size_t>(s.index)) {
    const Slice& t = slices_[targets_.size()];
    targets_.push_back(tensor(t.tokens(), 1, DType::fp32, TensorRole::input, Op::loss, -1, t.index));
  }
  return targets_[static_cast<std::size_t>(s.index)];
}

TensorId Builder::transfer(bool forward, bool send, TensorId x, std::int64_t rows, const Slice& s) {
  const bool to_next = forward == send;  // forward sends and backward receives face the next stage
  const GroupId group = *(forward ? (send ? pipe_.fwd_out : pipe_.fwd_in) : (send ? pipe_.bwd_out : pipe_.bwd_in));
  const StreamId stream = forward ? (send ? pipe_.send_next : pipe_.recv_prev) : (send ? pipe_.send_prev : pipe_.recv_next);
  const std::int64_t R = send ? g_.tensors[x].rows : rows, h = sh_.h;
  Task t = task(CollectiveOp{.kind = CollectiveKind::send_recv,
                             .bytes = R * h * bpe(),
                             .ranks = 2,
                             .nodes = to_next ? pipe_.nodes_next : pipe_.nodes_prev,
                             .dtype = sh_.act_dtype},
                Op::pipe, forward ? Phase::fwd : Phase::bwd_dgrad, -1, s);
  t.stream = stream;
  t.group = group;
  if (send) {
    const auto id = add(std::move(t), std::span<const TensorId>(&x, 1), std::span<const TensorId>());
    if (!p_.p2p_overlap) pending_sends_.push_back(id);  // the compute stream waits for it (Megatron-LM without overlap_p2p_comm)
    return x;
  }
  const TensorId y = forward ? act(R, h, Op::pipe, -1, s.index) : grad(R, h, Op::pipe, -1, s.index);
  // Without p2p_overlap the engine makes the host wait at this receive (sim/engine.cpp, host_sync).
  add(std::move(t), std::span<const TensorId>(), std::span<const TensorId>(&y, 1));
  return y;
}

void Builder::emit_embedding_grads() {
  if (!embd_group_) return;
  const TensorId d = stage_first_ ? d_emb_ : d_head_;
  add_step_grad_all_reduce(g_.tensors[d].rows * g_.tensors[d].cols * 4, 2, g_.groups[*embd_group_].nodes, streams_.dp_comm,
                           *embd_group_, std::span<const TensorId>(&d, 1));
}

void Builder::emit_pipeline(void (*schedule)(Builder&)) {
  const int m = p_.grad_accum_steps();
  const auto order = pipeline_order(p_.schedule, p_.pp, p_.vp, m, stage_);
  const std::size_t r = slices_.size();
  std::map<std::pair<int, int>, PassState> in_flight;  // (micro-batch, chunk) between its forward and backward
  for (const PipelinePass& pass : order) {
    micro_ = pass.micro;
    model_chunk_ = pass.chunk;
    range_ = chunks_[static_cast<std::size_t>(pass.chunk)];
    const auto key = std::pair(pass.micro, pass.chunk);
    if (pass.forward) {
      PassState fresh;
      fresh.ss.assign(r, {});
      fresh.saved.assign(static_cast<std::size_t>(m_.layers), std::vector<Saved>(r));
      fresh.kv_reads.assign(static_cast<std::size_t>(m_.layers), std::vector<std::vector<TensorId>>(r));
      fresh.nf.assign(r, kNoTensor);
      fresh.logits.assign(r, kNoTensor);
      fresh.stats.assign(r, kNoTensor);
      fresh.dlogits.assign(r, kNoTensor);
      fresh.recomputed.assign(rc_chunks_.size(), std::vector<char>(r, 0));
      load_pass(fresh);
      live_ = Live::forward;
      grads_final_ = false;
      schedule(*this);
      save_pass(in_flight[key]);
    } else {
      auto it = in_flight.find(key);
      load_pass(it->second);
      live_ = Live::backward;
      grads_final_ = pass.micro == m - 1;  // weight gradients complete: they fill the DP buckets
      schedule(*this);
      save_pass(it->second);
      in_flight.erase(it);
    }
  }
  micro_ = -1;
  model_chunk_ = -1;
  live_ = Live::all;
  grads_final_ = true;
  range_ = {0, m_.layers};
}

}  // namespace sim
