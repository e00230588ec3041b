#include "sim/memory.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "hardware/collective_model.hpp"
#include "sim/plan.hpp"
#include "sim/shapes.hpp"
#include "sim/step_graph.hpp"

namespace sim {

namespace {

/// One row slice as the builder cuts it (sim/builder.cpp).
struct SliceShape {
  std::int64_t batch, seq, q_offset;
};

/// Calls f(slice) for each row slice of a micro-batch, in order.
template <class F>
void for_each_slice(const Plan& p, F&& f) {
  for (int i = 0; i < p.row_slices; ++i) {
    // a 2D / 2.5D grid's rows and depth split the batch (Plan::tp_rows)
    if (p.row_axis == RowAxis::batch) f(SliceShape{p.micro_batch / p.tp_rows() / p.row_slices, p.seq_len, 0});
    else f(SliceShape{p.micro_batch, p.seq_len / p.row_slices, i * (p.seq_len / p.row_slices)});
  }
}

/// What the attention forward of one slice keeps besides its output (Shapes::attention_aux_*).
double attention_aux_bytes(const ModelSpec& m, const Plan& p, const Shapes& sh, const SliceShape& s) {
  return static_cast<double>(s.batch * (m.heads / p.tp_width()) * s.seq) * static_cast<double>(sh.attention_aux_cols(s.seq, s.q_offset)) *
         common::dtype_bytes(sh.attention_aux_dtype());
}

double rows(const Plan& p, const SliceShape& s) {
  const double T = static_cast<double>(s.batch * s.seq);
  return p.sequence_parallel ? T / p.tp : T;
}

}  // namespace

MemoryStage whole_model(const ModelSpec& m) { return MemoryStage{.layers = m.layers, .embedding = true, .head = true, .in_flight = 1}; }

double layer_activation_bytes(const ModelSpec& m, const Plan& p) {
  const Shapes sh(m, p);
  const double e = common::dtype_bytes(sh.act_dtype), h = static_cast<double>(sh.h);
  double bytes = 0;
  for_each_slice(p, [&](const SliceShape& s) {
    const double T = static_cast<double>(s.batch * s.seq), R = rows(p, s);
    // x, x_mid, norm1 and norm2 outputs ([R, h]); QKV, attention output, FC1 and activation outputs ([T, width])
    bytes += e * (4.0 * R * h + T * static_cast<double>(sh.Q + sh.A + sh.F1 + sh.F)) + attention_aux_bytes(m, p, sh, s);
  });
  return bytes;
}

MemoryEstimate estimate_memory(const ModelSpec& m, const hardware::ClusterSpec& c, const Plan& p) {
  if (p.pp > 1) return worst_stage_memory(m, c, p);
  return estimate_memory(m, c, p, whole_model(m));
}

MemoryEstimate estimate_memory(const PlanMemory& shared) {
  if (shared.plan().pp > 1) return worst_stage_memory(shared);
  return shared.stage(whole_model(shared.model()));
}

MemoryEstimate estimate_memory(const StepGraph& g, const hardware::ClusterSpec& c) {
  if (g.pipelined()) return estimate_stage_memory(g, c);
  MemoryEstimate r;
  // the closed form needs a model; a hand-built graph without one gets only what its tensors say
  if (g.model.layers > 0 && g.model.heads > 0) r = estimate_memory(g.model, c, g.plan);
  r.activations = saved_activation_bytes(g);  // the graph's own tensors (equal for built graphs; edited ones may differ)
  r.recomputed = recompute_working_bytes(g);
  return r;
}

PlanMemory::PlanMemory(const ModelSpec& m, const hardware::ClusterSpec& c, const Plan& p) : m_(&m), p_(&p) {
  const Shapes sh(m, p);
  capacity_ = c.gpu.hbm_capacity_bytes;
  reserve_fraction_ = c.memory.fragmentation_reserve;
  cuda_context_ = c.memory.cuda_context_bytes;
  e_ = common::dtype_bytes(sh.act_dtype);
  const double e = e_, h = static_cast<double>(sh.h);
  fp32_ = sh.act_dtype == common::DType::fp32;
  layer_params_ = static_cast<double>(sh.layer_params());
  embedding_params_ = static_cast<double>(sh.embedding().params() + sh.positions().params());
  final_norm_params_ = static_cast<double>(sh.final_norm().params());
  lm_head_params_ = static_cast<double>(sh.lm_head().params());

  // ---- activations of one micro-batch (Korthikanti et al. 2022 per recompute mode), per layer
  layer_ = layer_activation_bytes(m, p);
  for_each_slice(p, [&](const SliceShape& s) {
    const double T = static_cast<double>(s.batch * s.seq);
    checkpoint_ += e * rows(p, s) * h;
    const double a = attention_aux_bytes(m, p, sh, s);
    aux_ += a;
    ctx_aux_max_ += e * T * static_cast<double>(sh.A) + a;
  });

  // ---- the largest op's transient buffers (one slice), with and without the head
  for_each_slice(p, [&](const SliceShape& s) {
    const double T = static_cast<double>(s.batch * s.seq);
    const auto att = sh.attention(s.batch, s.seq, s.q_offset, true);
    const double act = e * T * static_cast<double>(sh.F + sh.F1);  // activation backward: its input and output gradients
    const double logits = 8.0 * T * static_cast<double>(sh.V);      // fp32 logits and their gradient at the loss
    const double attn = hardware::materialises_scores(p.attention) ? 2.0 * e * att.score_elements()  // dP and dS
                                                                   : 4.0 * T * static_cast<double>(sh.A);  // flash backward's fp32 dQ accumulator
    temporaries_[0] = std::max(temporaries_[0], std::max(act, attn));
    temporaries_[1] = std::max(temporaries_[1], std::max(std::max(act, logits), attn));
  });

  // ---- communication buffers
  const int tp_nodes = std::max(1, p.tp / c.node.gpus_per_node);
  const int dp_nodes = std::max(1, c.nodes / tp_nodes);
  nccl_ = hardware::nccl_buffer_bytes(c, p.tp, tp_nodes) + hardware::nccl_buffer_bytes(c, p.dp, dp_nodes);
  if (p.grid_tp()) {
    // a grid rank's communicators: its row and column (q ranks each), depth x dp for the gradients.
    // The row's q ranks are adjacent in rank order (TpGridOrder::row; col: the column's); the other
    // group strides by q.
    const int q = p.tp_q, gpn = c.node.gpus_per_node;
    const int inner = std::max(1, q / gpn), outer = std::max(1, std::min(q, q * q / gpn));
    const int grad_nodes = std::max(1, std::min(p.tp_d * p.dp, static_cast<int>(c.nodes)));
    nccl_ = hardware::nccl_buffer_bytes(c, q, inner) + hardware::nccl_buffer_bytes(c, q, outer) +
            hardware::nccl_buffer_bytes(c, p.tp_d * p.dp, grad_nodes);
    // SUMMA's double buffers: two received input blocks and two weight blocks of the widest linear
    // (FC1 forward: [T, h/q] and [h/q, F1]; the head's [h/q, vocab/q] where it is wider)
    for (int head = 0; head < 2; ++head)
      for_each_slice(p, [&](const SliceShape& s) {
        const double T = static_cast<double>(s.batch * s.seq);
        const double wide = static_cast<double>(std::max(sh.F1, head ? sh.V : std::int64_t{0}));
        grid_buffers_[head] = std::max(grid_buffers_[head], 2.0 * e * (T * h + h * wide));
      });
  }
  if (c.gpu.arch == hardware::GpuArch::cpu) nccl_ = 0;  // MPI on the CPU backend
}

MemoryEstimate PlanMemory::stage(const MemoryStage& st) const {
  const Plan& p = *p_;
  MemoryEstimate r;
  r.capacity = capacity_;
  r.reserve_fraction = reserve_fraction_;
  r.cuda_context = cuda_context_;
  const double e = e_;
  const bool zero = p.dp > 1;  // ZeRO shards over dp ranks; at dp 1 every stage is stage 0

  // ---- model state: parameters x bytes
  double params = layer_params_ * st.layers;
  if (st.embedding) params += embedding_params_;
  if (st.head) params += final_norm_params_ + (m_->tied_embeddings && st.embedding ? 0 : lm_head_params_);
  const double dp = p.dp;
  const bool sh_w = zero && p.shards_weights(), sh_g = zero && p.shards_gradients(), sh_o = zero && p.shards_optimizer();
  r.weights = params * e / (sh_w ? dp : 1.0);
  if (sh_w) {
    // the root unit (embedding, positions, final norm, head) stays gathered; two layers at once
    double root = 0;
    if (st.embedding) root += embedding_params_;
    if (st.head) root += final_norm_params_ + (m_->tied_embeddings && st.embedding ? 0 : lm_head_params_);
    r.gathered_weights = e * (root + std::min(2, st.layers) * layer_params_);
  }
  r.gradients = 4.0 * params / (sh_g ? dp : 1.0);
  const double state_per_param = (fp32_ ? 0.0 : 4.0) + 8.0;  // master copy, Adam m and v
  r.optimizer = state_per_param * params / (sh_o ? dp : 1.0);

  // ---- activations of one micro-batch (Korthikanti et al. 2022 per recompute mode)
  double per_mb = 0;
  switch (p.recompute) {
    case Recompute::none: per_mb = layer_ * st.layers; break;
    case Recompute::selective:
      per_mb = (layer_ - aux_) * st.layers;
      r.recomputed = ctx_aux_max_;
      break;
    case Recompute::full: {
      // chunks of this stage's layers
      const RecomputeChunks chunks = recompute_chunk_count(p, st.layers);
      const int rc_layers = recomputed_layers(p, st.layers);
      per_mb = layer_ * (st.layers - rc_layers) + checkpoint_ * static_cast<double>(chunks.count);
      r.recomputed = layer_ * chunks.largest - checkpoint_;  // the chunk's tensors but its input, which is kept anyway
      break;
    }
  }
  if (st.head) per_mb += 2.0 * checkpoint_;  // the final norm's input and output (sequence-sharded under SP)
  r.activations = per_mb * std::max(1, st.in_flight);

  // ---- the largest op's transient buffers (one slice)
  r.temporaries = temporaries_[st.head ? 1 : 0];

  // ---- communication buffers
  if (zero && p.zero >= 2) {
    // full-size fp32 gradients of a bucket (ZeRO-3: a layer) until reduce-scattered; two in flight
    const double bucket = p.shards_weights() ? 4.0 * layer_params_ : std::min(p.dp_bucket_mb * 1e6, 4.0 * params);
    r.dp_buckets = 2.0 * bucket;
  }
  r.nccl = nccl_;
  if (p.grid_tp()) r.temporaries = std::max(r.temporaries, grid_buffers_[st.head ? 1 : 0]);
  return r;
}

namespace {
bool bucket_sizes_memory(const Plan& p) { return p.zero >= 2; }  // the bucket size sizes dp_buckets only under ZeRO-2 (ZeRO-3: a layer)
}  // namespace

MemoryKey memory_key(const Plan& p) {
  MemoryKey k;
  const bool buckets = bucket_sizes_memory(p);
  k.fields = {p.tp, static_cast<std::int64_t>(p.tp_layout), p.tp_q, p.tp_d, p.dp, p.pp, p.vp, static_cast<std::int64_t>(p.schedule),
              p.micro_batch, p.global_batch, p.seq_len, static_cast<std::int64_t>(p.dtype), p.sequence_parallel, p.row_slices,
              static_cast<std::int64_t>(p.row_axis), static_cast<std::int64_t>(p.recompute), static_cast<std::int64_t>(p.recompute_method),
              p.recompute_layers, p.zero, static_cast<std::int64_t>(p.attention),
              buckets ? static_cast<std::int64_t>(std::llround(p.dp_bucket_mb * 1e6)) : -1};
  k.pipeline_layers = p.pipeline_layers;
  return k;
}

MemoryKey memory_key_without_savers(const Plan& p) {
  MemoryKey k = memory_key(p);
  for (std::size_t f : {15, 16, 17, 18, 20}) k.fields[f] = -1;  // recompute, its method and layers, ZeRO, the bucket size
  return k;
}

bool same_memory_savers(const Plan& a, const Plan& b) {
  return a.recompute == b.recompute && a.recompute_method == b.recompute_method && a.recompute_layers == b.recompute_layers &&
         a.zero == b.zero && (!bucket_sizes_memory(a) || std::llround(a.dp_bucket_mb * 1e6) == std::llround(b.dp_bucket_mb * 1e6));
}

std::size_t MemoryKeyHash::operator()(const MemoryKey& k) const {
  std::size_t h = 1469598103934665603ull;
  auto mix = [&](std::uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (std::int64_t v : k.fields) mix(static_cast<std::uint64_t>(v));
  for (int v : k.pipeline_layers) mix(static_cast<std::uint64_t>(v));
  return h;
}

MemoryEstimate estimate_memory(const ModelSpec& m, const hardware::ClusterSpec& c, const Plan& p, const MemoryStage& st) {
  return PlanMemory(m, c, p).stage(st);
}

std::vector<char> saved_activations(const StepGraph& g) {
  std::vector<char> written(g.tensors.size(), 0), read_later(g.tensors.size(), 0);
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    const Task& t = g.tasks[i];
    if (t.phase == Phase::fwd && !t.recompute)
      for (TensorId x : g.outputs(i)) written[x] = 1;
    if (t.phase != Phase::fwd || t.recompute)
      for (TensorId x : g.inputs(i)) read_later[x] = 1;
  }
  for (std::size_t x = 0; x < g.tensors.size(); ++x)
    written[x] = written[x] && read_later[x] && g.tensors[x].role == TensorRole::activation;
  return written;
}

double saved_activation_bytes(const StepGraph& g) {
  const auto saved = saved_activations(g);
  double bytes = 0;
  for (std::size_t x = 0; x < g.tensors.size(); ++x)
    if (saved[x]) bytes += g.tensors[x].bytes();
  return bytes;
}

double recompute_working_bytes(const StepGraph& g) {
  std::vector<char> recomputed(g.tensors.size(), 0), read_bwd(g.tensors.size(), 0);
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    const Task& t = g.tasks[i];
    if (t.recompute)
      for (TensorId x : g.outputs(i)) recomputed[x] = 1;
    if (t.phase != Phase::fwd)
      for (TensorId x : g.inputs(i)) read_bwd[x] = 1;
  }
  // full: group by chunk; selective: by layer
  const auto chunks = recompute_chunks(g.plan, g.model.layers);
  std::vector<int> group(std::max(1, g.model.layers), 0);
  for (int l = 0; l < g.model.layers; ++l) group[l] = l;
  for (const auto& k : chunks)
    for (int l = k.first; l < k.end; ++l) group[l] = k.first;
  std::map<int, double> by_group;
  for (std::size_t x = 0; x < g.tensors.size(); ++x) {
    const auto& t = g.tensors[x];
    if (!recomputed[x] || !read_bwd[x] || t.role != TensorRole::activation || t.layer < 0) continue;
    by_group[group[t.layer]] += t.bytes();
  }
  double best = 0;
  for (const auto& [k, v] : by_group) best = std::max(best, v);
  return best;
}

}  // namespace sim
