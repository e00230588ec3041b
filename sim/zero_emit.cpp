// The builder's data-parallel buckets and ZeRO (the part of sim::Builder that sim/builder.hpp's
// header comment calls "ZeRO"):
//  - stage 0: each bucket is one fp32 AllReduce of its gradients on dp_comm, after the last
//    micro-batch (PyTorch DDP / Megatron-LM DDP);
//  - stage 1 (Megatron-LM's distributed optimizer): ReduceScatter into this rank's fp32 shard of
//    the bucket after the last micro-batch, the optimizer steps only the shards, then an
//    AllGather of the updated parameters (activation dtype) on param_comm - at the start of the
//    next step's forward, each bucket before the first layer that reads it (overlap_param_gather),
//    or right after the optimizer;
//  - stage 2 (DeepSpeed ZeRO-2): as 1, but the gradients are reduce-scattered in every micro-batch
//    (the full gradient does not outlive its bucket);
//  - stage 3 (FSDP FULL_SHARD / ZeRO-3): one bucket per layer (FSDP's unit; the embedding, final
//    norm and head form the root unit), its parameters gathered before its forward and again
//    before its backward, one layer ahead, at most two layers at once; gradients reduce-scattered
//    per layer in every micro-batch.
// Shards: bucket b's n parameters, padded to a multiple of dp, rank r holding elements
// [r n_pad / dp, (r + 1) n_pad / dp) of the bucket's weights flattened in bucket order - the layout
// the executor packs and unpacks (docs/executor.md).
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "common/config_reader.hpp"
#include "sim/builder.hpp"

namespace sim {

using common::DType;
using hardware::CollectiveKind;
using hardware::CollectiveOp;

namespace {
bool is_norm(Op op) { return op == Op::norm1 || op == Op::norm2 || op == Op::final_norm; }
}  // namespace

void Builder::plan_buckets() {
  // reverse parameter order: the order in which the backward completes gradients when a strategy
  // calls the *_grads_ready points in data order (Megatron-LM builds its buckets the same way).
  // A pipeline stage (ZeRO-1) holds model chunks: each is a DDP instance of its own in Megatron-LM,
  // with its own buckets, the last chunk's first (the backward reaches it first).
  std::vector<std::pair<TensorId, TensorId>> order;  // (gradient, weight)
  std::vector<std::size_t> chunk_end;                // per chunk: the end of its entries in order
  for (auto ch = chunks_.rbegin(); ch != chunks_.rend(); ++ch) {
    // the head: its own matrix unless the embedding on this rank is the head (tied embeddings)
    if (ch->end == m_.layers && !(m_.tied_embeddings && stage_first_)) order.emplace_back(d_head_, w_head_);
    for (int l = ch->end - 1; l >= ch->first; --l) {
      const auto& w = lw_[l];
      if (l == m_.layers - 1) order.emplace_back(d_fnorm_, w_fnorm_);
      else if (l + 1 < ch->end) order.emplace_back(lw_[l + 1].d_norm1, lw_[l + 1].norm1);
      order.insert(order.end(), {{w.d_fc2, w.fc2}, {w.d_fc1, w.fc1}, {w.d_norm2, w.norm2}, {w.d_out, w.out}, {w.d_qkv, w.qkv}});
    }
    order.emplace_back(lw_[ch->first].d_norm1, lw_[ch->first].norm1);
    if (ch->first == 0) {
      if (m_.position == Position::learned) order.emplace_back(d_pos_, w_pos_);
      order.emplace_back(d_emb_, w_emb_);
    }
    chunk_end.push_back(order.size());
  }

  // where the forward first reads a weight: -1 embedding, l its layer, L the final norm and head
  auto first_use = [&](TensorId w) {
    const auto& t = g_.tensors[w];
    if (stage_first_ && (w == w_emb_ || (m_.position == Position::learned && w == w_pos_))) return -1;
    return t.layer >= 0 ? static_cast<int>(t.layer) : m_.layers;
  };
  bucket_of_.assign(g_.tensors.size(), -1);
  auto add_to = [&](Bucket& b, TensorId dw, TensorId w) {
    b.grads.push_back(dw);
    b.weights.push_back(w);
    b.params += g_.tensors[dw].rows * g_.tensors[dw].cols;
    b.first_use = b.grads.size() == 1 ? first_use(w) : std::min(b.first_use, first_use(w));
  };
  if (p_.shards_weights()) {
    // ZeRO-3: one unit per layer plus the root (embedding, positions, final norm, head)
    buckets_.resize(m_.layers + 1);
    for (int u = -1; u < m_.layers; ++u) buckets_[u + 1].unit = u;
    for (const auto& [dw, w] : order) {
      const int u = g_.tensors[w].layer;
      add_to(buckets_[u + 1], dw, w);
    }
    for (auto& b : buckets_) b.full = true;
  } else {
    const double bucket_bytes = p_.dp_bucket_mb * 1e6;
    buckets_.emplace_back();
    std::size_t next_chunk = 0;
    for (std::size_t i = 0; i < order.size(); ++i) {
      const auto& [dw, w] = order[i];
      if (buckets_.back().full) buckets_.emplace_back();
      add_to(buckets_.back(), dw, w);
      if (static_cast<double>(buckets_.back().params) * 4.0 >= bucket_bytes) buckets_.back().full = true;
      // a model chunk's last bucket: complete with it (pipelined; the whole model's last bucket
      // without pipelining waits for finish(), as before)
      if (i + 1 == chunk_end[next_chunk]) {
        if (p_.pp > 1) buckets_.back().full = true;
        ++next_chunk;
      }
    }
  }
  if (buckets_.size() > static_cast<std::size_t>(std::numeric_limits<std::int16_t>::max()))
    throw common::ConfigError("plan", "dp_bucket_mb",
                              fmt::format("{} MB makes {} data-parallel buckets; at most {} (use larger buckets)", p_.dp_bucket_mb,
                                          buckets_.size(), std::numeric_limits<std::int16_t>::max()));
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    auto& k = buckets_[b];
    k.pending = static_cast<int>(k.grads.size());
    for (TensorId dw : k.grads) bucket_of_[dw] = static_cast<int>(b);
    if (!p_.shards_optimizer()) continue;
    const std::int64_t shard = (k.params + p_.dp - 1) / p_.dp;
    const int tag = static_cast<int>(b);  // the bucket, in the layer tag of its shard tensors
    k.grad_shard = tensor(shard, 1, DType::fp32, TensorRole::weight_grad, Op::dp_reduce, tag, -1, -1, true);
    k.param_shard = tensor(shard, 1, sh_.act_dtype, TensorRole::weight, Op::param_gather, tag, -1);
  }
  if (!p_.shards_optimizer()) return;
  param_comm_ = add_stream({.name = "param_comm", .kind = StreamKind::comm});
  gather_order_.resize(buckets_.size());
  for (std::size_t b = 0; b < buckets_.size(); ++b) gather_order_[b] = static_cast<int>(buckets_.size() - 1 - b);
  std::stable_sort(gather_order_.begin(), gather_order_.end(),
                   [&](int a, int b) { return buckets_[a].first_use < buckets_[b].first_use; });
  gathered_bwd_.assign(buckets_.size(), 0);
  if (p_.shards_weights()) {
    unit_of_weight_.assign(g_.tensors.size(), 0);
    unit_last_reader_.assign(m_.layers + 1, -1);
    for (const auto& b : buckets_)
      for (TensorId w : b.weights) unit_of_weight_[w] = b.unit + 2;  // unit + 1, 0: none
  }
}

void Builder::flush_bucket(int bi) {
  auto& b = buckets_[bi];
  Task t;
  t.stream = streams_.dp_comm;
  t.op = Op::dp_reduce;
  t.phase = Phase::dp_reduce;
  t.group = dp_group_;
  t.layer = -1;
  if (!p_.shards_optimizer()) {
    t.kind = CollectiveOp{
        .kind = CollectiveKind::all_reduce, .bytes = b.params * 4, .ranks = grad_ranks_, .nodes = dp_nodes_, .dtype = DType::fp32};
    t.once_per_step = true;
    add(std::move(t), b.grads, b.grads);
    return;
  }
  t.once_per_step = !p_.shards_gradients();
  // tied embeddings across pipeline stages: the embedding group's sum first, while the bucket's
  // full gradient still exists (summing before or after the reduce-scatter gives the same shard)
  if (embd_group_ && !embd_reduced_) {
    const TensorId d = stage_first_ ? d_emb_ : d_head_;
    if (std::find(b.grads.begin(), b.grads.end(), d) != b.grads.end()) {
      emit_embedding_grads();
      embd_reduced_ = true;
    }
  }
  // sequence parallelism: a bucket's norm-weight gradients are summed over TP before they are
  // sharded (Megatron-LM sums them in place in its gradient buffer after the reduction; the sum is
  // linear, so summing first gives the same shard)
  if (p_.sequence_parallel && p_.tp > 1) {
    std::vector<TensorId> norms;
    for (TensorId dw : b.grads)
      if (is_norm(g_.tensors[dw].op)) norms.push_back(dw);
    if (!norms.empty()) {
      std::int64_t n = 0;
      for (TensorId dw : norms) n += g_.tensors[dw].rows * g_.tensors[dw].cols;
      Task s;
      s.kind = CollectiveOp{.kind = CollectiveKind::all_reduce, .bytes = n * 4, .ranks = p_.tp, .nodes = tp_nodes_, .dtype = DType::fp32};
      s.stream = streams_.tp_comm;
      s.op = Op::dp_reduce;
      s.phase = Phase::dp_reduce;
      s.group = tp_group_;
      s.once_per_step = t.once_per_step;
      s.layer = -1;
      add(std::move(s), norms, norms);
    }
  }
  const std::int64_t padded = g_.tensors[b.grad_shard].rows * p_.dp;
  t.kind = CollectiveOp{.kind = CollectiveKind::reduce_scatter, .bytes = padded * 4, .ranks = p_.dp, .nodes = dp_nodes_, .dtype = DType::fp32};
  if (p_.shards_weights()) t.layer = static_cast<std::int16_t>(b.unit);
  const TensorId shard[] = {b.grad_shard};
  add(std::move(t), b.grads, shard);
}

std::uint32_t Builder::emit_param_gather(int bi, bool step_start, bool once_per_step) {
  const auto& b = buckets_[bi];
  const std::int64_t padded = g_.tensors[b.param_shard].rows * p_.dp;
  Task t;
  t.kind = CollectiveOp{
      .kind = CollectiveKind::all_gather, .bytes = padded * bpe(), .ranks = p_.dp, .nodes = dp_nodes_, .dtype = sh_.act_dtype};
  t.stream = param_comm_;
  t.op = Op::param_gather;
  t.phase = Phase::dp_reduce;
  t.group = dp_group_;
  t.step_start = step_start;
  t.once_per_step = once_per_step;
  t.layer = static_cast<std::int16_t>(p_.shards_weights() ? b.unit : -1);
  t.recompute = false;
  const TensorId shard[] = {b.param_shard};
  return add(std::move(t), shard, b.weights);
}

void Builder::gather_for_forward(int position) {
  if (!p_.shards_optimizer() || !reduces_dp()) return;
  if (!p_.shards_weights() && !p_.overlap_param_gather) return;  // gathered after the optimizer instead
  // every bucket first read at or before the next position (one ahead, as Megatron-LM's forward
  // pre-hooks and FSDP's prefetch issue them)
  while (gathered_fwd_ < gather_order_.size() && buckets_[gather_order_[gathered_fwd_]].first_use <= position + 1) {
    const int bi = gather_order_[gathered_fwd_++];
    const auto id = emit_param_gather(bi, !p_.shards_weights(), false);
    // ZeRO-3: at most two layers gathered - wait until the layer two back has run its forward
    if (p_.shards_weights()) {
      const int freed = buckets_[bi].unit - 2;
      if (freed >= 0 && unit_last_reader_[freed + 1] >= 0) edge(static_cast<std::uint32_t>(unit_last_reader_[freed + 1]), id);
    }
  }
}

void Builder::gather_for_backward(int position) {
  if (!p_.shards_weights() || !reduces_dp()) return;
  auto gather = [&](int unit) {
    if (unit < 0 || unit >= m_.layers) return;
    const int bi = unit + 1;
    if (gathered_bwd_[bi]) return;
    gathered_bwd_[bi] = 1;
    const auto id = emit_param_gather(bi, false, false);
    // the backward runs down the layers: wait until the layer two above has run its backward
    const int freed = unit + 2;
    if (freed < m_.layers && unit_last_reader_[freed + 1] >= 0) edge(static_cast<std::uint32_t>(unit_last_reader_[freed + 1]), id);
  };
  gather(position);
  gather(position - 1);
}

void Builder::emit_zero_step_end() {
  if (!p_.shards_optimizer() || !reduces_dp() || p_.shards_weights() || p_.overlap_param_gather) return;
  // without overlap: every bucket's updated parameters gathered right after the optimizer
  for (int bi : gather_order_) emit_param_gather(bi, false, true);
}

}  // namespace sim
