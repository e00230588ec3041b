#include "tuner/evaluate.hpp"

#include <algorithm>
#include <memory>
#include <shared_mutex>
#include <stdexcept>

#include <fmt/format.h>
#include <cmath>

#include "sim/cost_table.hpp"
#include "sim/pipeline_schedule.hpp"
#include "sim/pipeline_step.hpp"
#include "sim/shapes.hpp"
#include "sim/step_graph.hpp"
#include "sim/strategy.hpp"

namespace tuner {

std::int64_t stage_params(const sim::ModelSpec& m, const sim::Plan& p, int stage) {
  const auto vs = sim::virtual_stage_layers(m, p);
  int layers = 0;
  for (int c = 0; c < p.vp; ++c) layers += vs[static_cast<std::size_t>(c * p.pp + stage)].size();
  return sim::Shapes(m, p).stage_params(stage == 0, stage == p.pp - 1, layers);
}

std::int64_t rank_params(const sim::ModelSpec& m, const sim::Plan& p) {
  if (p.pp == 1) return sim::Shapes(m, p).rank_params();
  std::int64_t most = 0;
  for (int s = 0; s < p.pp; ++s) most = std::max(most, stage_params(m, p, s));
  return most;
}

std::int64_t stage_optimizer_params(const sim::ModelSpec& m, const sim::Plan& p, int stage) {
  const std::int64_t n = stage_params(m, p, stage);
  return p.shards_optimizer() && p.dp > 1 ? (n + p.dp - 1) / p.dp : n;
}

namespace {
/// Parameters the optimizer steps on this rank: its ZeRO shard (padding aside) or all of them.
std::int64_t optimizer_params(const sim::ModelSpec& m, const sim::Plan& p) {
  const std::int64_t n = rank_params(m, p);
  return p.shards_optimizer() && p.dp > 1 ? (n + p.dp - 1) / p.dp : n;
}
struct GemmPartsFront;  // common::ThreadFront's tag of gemm_parts
}  // namespace

Evaluator::ClassKey Evaluator::class_key(const sim::Plan& p, bool neutral_as_default, const sim::Strategy*& st) const {
  st = p.strategy;
  bool neutral = true;
  ClassKey key{{}, p.tp, p.micro_batch, p.sequence_parallel, p.seq_len, static_cast<int>(p.dtype), static_cast<int>(p.stack),
               static_cast<int>(p.recompute), static_cast<int>(p.attention), {}};
  const auto knobs = sim::plan_knobs();
  if (knobs.size() + 4 > kMaxKeyKnobs)
    throw std::logic_error(fmt::format("tuner: {} plan knobs are registered; a class key holds {}", knobs.size(), kMaxKeyKnobs - 4));
  std::size_t n = 0;
  for (const sim::Knob* k : knobs) {
    key.knobs[n] = k->applies(p) ? k->get(p) : k->neutral;
    neutral &= key.knobs[n++] == k->neutral;
  }
  if (neutral_as_default && neutral && st->neutral_tasks_are_default) st = &sim::default_strategy();
  key.strategy = st->name;
  // the grid shapes the tasks as much as tp does
  for (int v : {static_cast<int>(p.tp_layout), p.tp_q, p.tp_d, static_cast<int>(p.tp_grid_order)}) key.knobs[n++] = v;
  return key;
}

std::size_t Evaluator::bound_class_hash(const sim::Plan& p) const {
  const sim::Strategy* st = nullptr;
  sim::Plan q = p;
  q.tp_channels = 0;  // siblings at other channel counts share the NCCL-choice graph (class_bound)
  return class_hash(class_key(q, false, st));
}

std::size_t Evaluator::class_hash(const ClassKey& k) {
  std::size_t h = std::hash<std::string_view>{}(k.strategy);
  auto mix = [&h](std::int64_t v) { h = (h ^ static_cast<std::uint64_t>(v)) * 1099511628211ull; };
  for (std::int64_t v : {std::int64_t{k.tp}, std::int64_t{k.micro_batch}, std::int64_t{k.sequence_parallel}, k.seq_len, std::int64_t{k.dtype},
                         std::int64_t{k.stack}, std::int64_t{k.recompute}, std::int64_t{k.attention}})
    mix(v);
  for (int v : k.knobs) mix(v);
  return h;
}

namespace {
/// whether gemm_parts counts the element-wise kernels of `p`'s layers, head and embedding: the
/// strategy issues every builder piece that emits them, and not a grid (its own pieces: sim/builder_grid.cpp)
bool elementwise_counted(const sim::Plan& p) { return p.strategy->issues_builder_pieces && !p.grid_tp(); }
}  // namespace

Evaluator::GemmParts Evaluator::gemm_parts(const sim::Plan& p) const {
  // the strategy's token chunks of the GEMMs around the TP collectives (what the builder emits)
  const sim::TpOverlap ov = p.sequence_parallel && p.tp > 1 ? p.strategy->tp_overlap(p) : sim::TpOverlap{};
  // keyed by what the sums below read: the shapes (tp, grid, micro-batch, sequence, dtype, kernel),
  // the row slices, column chunks and token chunks, whether the element-wise kernels are counted and
  // on what rows (sequence parallelism) (plans of strategies and knobs that emit the same kernels share one)
  const GemmKey key{p.tp,          static_cast<std::int64_t>(p.tp_layout), p.tp_q, p.tp_d, p.micro_batch, p.seq_len,
                    static_cast<std::int64_t>(p.dtype), static_cast<std::int64_t>(p.attention), static_cast<std::int64_t>(p.stack),
                    p.row_slices,  static_cast<std::int64_t>(p.row_axis), p.col_slices, ov.ag_chunks(p.tp), ov.rs_chunks(p.tp),
                    elementwise_counted(p), p.sequence_parallel};
  // each thread's own copy first (common::ThreadFront): the plans of a block ask for the same parts
  return common::ThreadFront<GemmKey, GemmParts, GemmKeyHash, GemmPartsFront>::get(id_, key, [&] { return shared_gemm_parts(p, key); });
}

Evaluator::GemmParts Evaluator::shared_gemm_parts(const sim::Plan& p, const GemmKey& key) const {
  GemmShard& shard = gemm_parts_[GemmKeyHash{}(key) % kShards];
  {
    std::shared_lock lock(shard.mu);  // lookups do not exclude each other
    if (auto it = shard.parts.find(key); it != shard.parts.end()) return it->second;
  }
  const sim::TpOverlap ov = p.sequence_parallel && p.tp > 1 ? p.strategy->tp_overlap(p) : sim::TpOverlap{};
  const sim::Shapes sh(model_, p);
  auto ps = [&](const hardware::GemmOp& g) { return cost_.gemm(g).time.ps; };
  GemmParts r;
  std::int64_t& layer_ps = r.layer_ps;
  std::int64_t& head_ps = r.head_ps;
  // Every row slice has T tokens (the batch or the sequence split evenly): its GEMMs are the same
  // in every slice, priced once and counted row_slices times (integer sums: the same as slice by
  // slice). Attention differs by slice only along the sequence (a slice's causal offset).
  std::int64_t gemm_layer = 0, gemm_fwd = 0, gemm_head = 0;  // one slice's
  std::int64_t ew_layer = 0, ew_fwd = 0, ew_head = 0, ew_emb = 0;  // one slice's (every slice has T tokens and R rows)
  std::int64_t n_layer = 0, n_fwd = 0, n_head = 0, n_emb = 0;      // and how many kernels
  std::int64_t sites_layer = 0, sites_fwd = 0, sites_head = 0;     // one slice's GEMM sites (a call each)
  auto ew_ps = [&](const hardware::ElementwiseOp& e) { return cost_.elementwise(e).time.ps; };
  for (int i = 0; i < p.row_slices; ++i) {
    std::int64_t batch = p.micro_batch / p.tp_rows(), seq = p.seq_len, off = 0;  // a grid's rows and depth split the batch
    if (p.row_axis == sim::RowAxis::batch) batch /= p.row_slices;
    else {
      seq /= p.row_slices;
      off = i * seq;
    }
    const std::int64_t T = batch * seq;
    const std::int64_t attention_fwd = cost_.attention(sh.attention(batch, seq, off, false)).time.ps;
    layer_ps += attention_fwd + cost_.attention(sh.attention(batch, seq, off, true)).time.ps;
    r.attention_fwd_ps += attention_fwd;  // selective recompute: the builder's recompute_attention
    r.layer_fwd_ps += attention_fwd;      // full: recompute_chunk runs the layer's forward again
    if (i == 0) {
      // a grid runs each of these as q SUMMA steps of the block shapes Shapes gives (sim/builder_grid.cpp)
      const std::int64_t steps = p.grid_tp() ? p.tp_q : 1;
      // each call of f is a GEMM site: whole, chunked or fused, it issues at least its first piece as a call
      sh.for_each_layer_gemm(T, p.col_slices, ov.ag_chunks(p.tp), ov.rs_chunks(p.tp),
                             [&](const hardware::GemmOp& g, std::int64_t n) { gemm_layer += steps * n * ps(g), ++sites_layer; });
      sh.for_each_layer_fwd_gemm(T, p.col_slices, ov.ag_chunks(p.tp), ov.rs_chunks(p.tp),
                                 [&](const hardware::GemmOp& g, std::int64_t n) { gemm_fwd += steps * n * ps(g), ++sites_fwd; });
      sh.for_each_lm_head_gemm(T, [&](const hardware::GemmOp& g, std::int64_t n) { gemm_head += steps * n * ps(g), ++sites_head; });
      if (elementwise_counted(p)) {
        const std::int64_t R = p.sequence_parallel ? T / p.tp : T;  // Builder::rows
        sh.for_each_layer_elementwise(T, R, [&](const hardware::ElementwiseOp& e) {
          const std::int64_t t = ew_ps(e);
          ew_layer += t, ++n_layer;
          if (!e.backward) ew_fwd += t, ++n_fwd;  // what full recompute runs again
        });
        sh.for_each_head_elementwise(T, R, [&](const hardware::ElementwiseOp& e) { ew_head += ew_ps(e), ++n_head; });
        sh.for_each_embedding_elementwise(T, [&](const hardware::ElementwiseOp& e) { ew_emb += ew_ps(e), ++n_emb; });
      }
    }
    if (elementwise_counted(p)) {  // and the attention forward and backward, a kernel each
      r.launched_layer_n += sites_layer + 2;
      r.launched_layer_fwd_n += sites_fwd + 1;
      r.launched_head_n += sites_head;
      r.launched_attention_fwd_n += 1;
    }
    r.ew_layer_ps += ew_layer;
    r.ew_layer_fwd_ps += ew_fwd;
    r.ew_head_ps += ew_head;
    r.ew_emb_ps += ew_emb;
    r.ew_layer_n += n_layer;
    r.ew_layer_fwd_n += n_fwd;
    r.ew_head_n += n_head;
    r.ew_emb_n += n_emb;
    layer_ps += gemm_layer;
    r.layer_fwd_ps += gemm_fwd;
    head_ps += gemm_head;
  }
  std::unique_lock lock(shard.mu);
  shard.parts.emplace(key, r);
  return r;
}

Duration Evaluator::cheap_lower_bound(const sim::Plan& p, const GemmParts& g) const {
  const double eff = cluster_.host.kernel_efficiency_for(p.stack);
  // what recompute runs again: selective, every layer's attention forward; full, the forward of
  // the layers it recomputes (pipelined plans: per layer, the smallest recomputed fraction of any
  // virtual stage, as compute_lower_bound has it) - its GEMMs, attention and element-wise kernels.
  // The sums below are of kernel time, divided by the efficiency at the end; the op overhead of
  // each call counted (a launched task's solo time has one, stack_compute_ps) is kernel time times
  // the efficiency here
  const double over = static_cast<double>(cluster_.host.op_overhead_for(p.stack).ps) * eff;
  const double fwd = static_cast<double>(g.layer_fwd_ps + g.ew_layer_fwd_ps) + over * static_cast<double>(g.ew_layer_fwd_n + g.launched_layer_fwd_n);
  double layer = static_cast<double>(g.layer_ps + g.ew_layer_ps) + over * static_cast<double>(g.ew_layer_n + g.launched_layer_n),
         recomputed = 0;  // recomputed: layers (pp 1) or fraction of each (pp > 1)
  if (p.recompute == sim::Recompute::selective)
    layer += static_cast<double>(g.attention_fwd_ps) + over * static_cast<double>(g.launched_attention_fwd_n);
  if (p.recompute == sim::Recompute::full) {
    if (p.pp > 1) {
      recomputed = 1.0;
      thread_local std::vector<sim::LayerRange> vs;  // reused from candidate to candidate
      sim::virtual_stage_layers(model_, p, vs);
      for (const auto& v : vs)
        recomputed = std::min(recomputed, static_cast<double>(sim::recomputed_layers(p, static_cast<int>(v.size()))) / static_cast<double>(v.size()));
      layer += recomputed * fwd;
    } else {
      recomputed = sim::recomputed_layers(p, model_.layers);
    }
  }
  const double head = static_cast<double>(g.head_ps + g.ew_head_ps) + over * static_cast<double>(g.ew_head_n + g.launched_head_n),
               emb = static_cast<double>(g.ew_emb_ps) + over * static_cast<double>(g.ew_emb_n);
  // Each kernel summed here is one task of the class graph's compute stream at its solo time
  // (kernel time / efficiency, plus the op overhead of a call, counted here for at most the calls
  // the graph makes), so every term is at most
  // compute_lower_bound's; below it strictly: a relative margin for the rounding of sums taken in
  // another order, and 1 ps for the floors
  auto below = [](double ps) { return Duration::from_ps(std::max<std::int64_t>(0, static_cast<std::int64_t>(std::floor(ps * (1 - 1e-9))) - 1)); };
  if (p.pp > 1) {
    // pipeline_lower_bound with only these kernels of each virtual stage (at the stack's kernel
    // efficiency), no optimizer or host: each term is at most the full bound's
    ClassBound b;
    b.layer_ps = layer / eff;
    b.head_ps = head / eff;
    b.emb_ps = emb / eff;
    return below(pipeline_work_bound(p, b, false));
  }
  const double per_mb = layer * model_.layers + recomputed * fwd + head + emb;
  return below(per_mb * p.grad_accum_steps() / eff);
}

Duration Evaluator::gemm_lower_bound(const sim::Plan& p) const {
  const GemmParts g = gemm_parts(p);
  const std::int64_t layer_ps = g.layer_ps, head_ps = g.head_ps;
  // kernels run at host.kernel_efficiency of their modelled speed on this stack (floor: a bound)
  const double eff = cluster_.host.kernel_efficiency_for(p.stack);
  if (p.pp > 1) {  // the busiest pipeline rank's own kernels
    const auto vs = sim::virtual_stage_layers(model_, p);
    double most = 0;
    for (int r = 0; r < p.pp; ++r) {
      std::int64_t layers = 0;
      for (int c = 0; c < p.vp; ++c) layers += vs[static_cast<std::size_t>(c * p.pp + r)].size();
      const std::int64_t per_mb = layer_ps * layers + (r == p.pp - 1 ? head_ps : 0);
      const std::int64_t opt = cost_.optimizer(hardware::OptimizerOp{.params = stage_optimizer_params(model_, p, r)}).time.ps;
      most = std::max(most, static_cast<double>(per_mb * p.grad_accum_steps() + opt));
    }
    return Duration::from_ps(static_cast<std::int64_t>(std::floor(most / eff)));
  }
  const std::int64_t per_mb = layer_ps * model_.layers + head_ps;
  const std::int64_t opt = cost_.optimizer(hardware::OptimizerOp{.params = optimizer_params(model_, p)}).time.ps;
  return Duration::from_ps(static_cast<std::int64_t>(std::floor(static_cast<double>(per_mb * p.grad_accum_steps() + opt) / eff)));
}

StreamChain compute_stream_chain(const sim::StepGraph& g, const hardware::CostModel& cost) {
  // The engine runs the compute stream in issue order, a task no faster than its solo time (rates
  // <= 1) and never before its inputs and the task before it on its stream have ended. So between
  // the starts of two consecutive compute tasks a and b lies at least the longest path from a to b
  // through those constraints, and the step at least the sum of these gaps along the stream (a
  // path of the graph). Each gap counts only paths through tasks of a's layer, both ends in one
  // layer (a transformer's layers repeat, so a layer's gaps are the same in every layer; outside
  // the layers the embedding and head side), else a's solo time: a bound either way (fewer paths).
  // Tasks outside a middle micro-batch (step_start, once_per_step) are left out with their edges.
  const std::size_t n = g.size();
  constexpr std::uint32_t kNone = ~0u;
  std::unique_ptr<sim::CostTable> own;
  sim::CostTable& table = sim::kept_cost_table(cost, g.plan.stack, own);
  std::vector<std::int64_t> d(n, -1);  // solo time (the engine's: latency + transfer); -1 left out
  std::vector<std::uint32_t> next_on_stream(n, kNone), chain;
  std::vector<std::uint32_t> last(g.streams.size(), kNone);
  for (std::size_t i = 0; i < n; ++i) {
    const sim::Task& t = g.tasks[i];
    if (t.once_per_step || t.step_start) continue;
    const sim::TaskCost& c = table[table.index(t)];
    d[i] = c.first_ps + c.second_ps;
    if (last[t.stream] != kNone) next_on_stream[last[t.stream]] = static_cast<std::uint32_t>(i);
    last[t.stream] = static_cast<std::uint32_t>(i);
    if (g.on_compute(i)) chain.push_back(static_cast<std::uint32_t>(i));
  }
  StreamChain out;
  for (const std::uint32_t i : chain) {
    const double solo = static_cast<double>(d[i]);
    const sim::Task& t = g.tasks[i];
    out.solo_ps += solo;
    if (t.layer >= 0) out.layer_solo_ps += solo;
    else (t.op == sim::Op::embedding ? out.embedding_solo_ps : out.head_solo_ps) += solo;
  }
  std::vector<std::int64_t> dist(n, -1);  // longest path from a's start to each task's start; -1 none
  for (std::size_t k = 0; k < chain.size(); ++k) {
    const std::uint32_t a = chain[k];
    const int layer = g.tasks[a].layer;
    std::int64_t gap = d[a];
    if (k + 1 < chain.size() && g.tasks[chain[k + 1]].layer == layer) {
      // tasks are in issue order and data edges run forward (an edge to an earlier task is left
      // out: a bound without it), so the paths from a to b run through a..b in index order
      const std::uint32_t b = chain[k + 1];
      auto on_path = [&](std::uint32_t v) { return v > a && v <= b && d[v] >= 0 && g.tasks[v].layer == layer; };
      dist[a] = 0;
      for (std::uint32_t j = a; j < b; ++j) {
        if (dist[j] < 0) continue;
        const std::int64_t end = dist[j] + d[j];
        for (auto v : boost::make_iterator_range(g.successors(j)))
          if (on_path(static_cast<std::uint32_t>(v))) dist[v] = std::max(dist[v], end);
        if (const std::uint32_t v = next_on_stream[j]; v != kNone && on_path(v)) dist[v] = std::max(dist[v], end);
      }
      gap = std::max(gap, dist[b]);
      std::fill(dist.begin() + a, dist.begin() + b + 1, std::int64_t{-1});
    }
    (layer >= 0 ? out.layer_ps : out.rest_ps) += static_cast<double>(gap);
  }
  return out;
}

namespace {

/// The knob tp_channels among `st`'s where it applies to `q` and is searched at more than one
/// value, else null.
const sim::Knob* searched_channels(const sim::Strategy& st, const sim::Plan& q) {
  for (const sim::Knob& k : st.knobs)
    if (k.key == "tp_channels") return k.searched.size() > 1 && k.applies(q) ? &k : nullptr;
  return nullptr;
}

/// `g` (built with tp_channels 0, NCCL's choice) as the builder makes it with `channels`: the
/// channels are the SMs of every collective of the TP communicator that no strategy put on SMs of
/// its own or on copy engines (Builder::add; the tp_overlap of the strategies that have the knob
/// sets nothing else from it). False where the graph has no single "tp" group.
bool with_tp_channels(sim::StepGraph& g, int channels) {
  std::optional<sim::GroupId> tp;
  for (std::size_t i = 0; i < g.groups.size(); ++i)
    if (g.groups[i].name == "tp") {
      if (tp) return false;
      tp = static_cast<sim::GroupId>(i);
    }
  if (!tp) return false;
  g.plan.tp_channels = channels;
  for (auto& t : g.tasks)
    if (t.is_collective() && t.group == tp && t.comm_sms < 0) t.comm_sms = static_cast<std::int16_t>(channels);
  return true;
}

}  // namespace

sim::Plan Evaluator::class_plan(const sim::Plan& p, const sim::Strategy* st) const {
  sim::Plan q = p;
  q.strategy = st;
  q.dp = 1;
  q.zero = 0;
  q.global_batch = q.micro_batch;
  q.recompute_method = sim::RecomputeMethod::uniform;  // every layer recomputed (full): the per-layer increment
  q.recompute_layers = 1;
  q.pp = 1;  // one micro-batch's tasks do not depend on the pipeline: its graph of the whole model
  q.vp = 1;
  q.schedule = sim::PipelineSchedule::one_f_one_b;
  q.pipeline_layers.clear();
  q.p2p_overlap = false;
  return q;
}

Evaluator::ClassBound Evaluator::built_class_bound(const sim::Plan& p) const {
  const sim::Strategy* st = nullptr;
  class_key(p, false, st);
  // One graph of one layer: every layer's tasks are the same (the builder emits each layer alike;
  // tests/tuner check that a graph of 2 layers adds exactly the 1-layer graph's layer tasks), so
  // a layer adds what the tasks of layer 0 cost, and the rest is the embedding and head side.
  sim::ModelSpec m = model_;
  m.layers = 1;
  const sim::Plan q = class_plan(p, st);
  return bound_of_graph(sim::build_step_graph(m, cluster_, q), q);
}

Evaluator::ClassBound Evaluator::class_bound(const sim::Plan& p) const {
  // the class: everything that shapes one micro-batch's tasks (not dp, global batch, ZeRO or
  // bucket size); a strategy whose neutral graph has the default strategy's tasks shares that class
  const sim::Strategy* st = nullptr;
  const ClassKey key = class_key(p, false, st);
  BoundShard& shard = bounds_[class_hash(key) % kShards];
  {
    std::shared_lock lock(shard.mu);
    if (auto it = shard.bounds.find(key); it != shard.bounds.end()) return it->second;
  }
  auto keep = [&](const ClassKey& k, const ClassBound& b) {
    BoundShard& sh = bounds_[class_hash(k) % kShards];
    std::unique_lock lock(sh.mu);
    sh.bounds.emplace(k, b);
  };
  graphs_built_.fetch_add(1, std::memory_order_relaxed);
  const sim::Knob* channels = searched_channels(*st, p);
  auto searched = [&](int v) { return std::find(channels->searched.begin(), channels->searched.end(), v) != channels->searched.end(); };
  if (!channels || !searched(channels->neutral) || !searched(p.tp_channels)) {
    const ClassBound b = built_class_bound(p);
    keep(key, b);
    return b;
  }
  // A class of a searched channel count: the graph at NCCL's choice (the knob's neutral value),
  // and every searched count's class bounded from it (with_tp_channels: the same graph with the TP
  // collectives on those SMs) - pricing a graph costs a tenth of building it, and a sibling the
  // search never asks for is a few microseconds lost. tests/tuner check the bounds equal those of
  // the siblings' own graphs (built_class_bound).
  sim::ModelSpec m = model_;
  m.layers = 1;
  sim::Plan p0 = p;
  p0.tp_channels = channels->neutral;
  const sim::Plan q0 = class_plan(p0, st);
  const sim::StepGraph g0 = sim::build_step_graph(m, cluster_, q0);
  ClassBound asked;
  for (const int v : channels->searched) {
    sim::Plan pv = p;  // the sibling, keyed as class_bound(pv) would key it
    pv.tp_channels = v;
    const sim::Strategy* sv = nullptr;
    const ClassKey kv = class_key(pv, false, sv);
    ClassBound bv;
    if (v == channels->neutral) {
      bv = bound_of_graph(g0, q0);
    } else {
      sim::StepGraph gv = g0;
      if (!with_tp_channels(gv, v)) {
        bv = built_class_bound(pv);  // no single TP group to put on other SMs: its own graph
        graphs_built_.fetch_add(1, std::memory_order_relaxed);
      } else {
        bv = bound_of_graph(gv, gv.plan);
      }
    }
    if (v == p.tp_channels) asked = bv;
    keep(kv, bv);
  }
  return asked;
}

Evaluator::ClassBound Evaluator::bound_of_graph(const sim::StepGraph& g, const sim::Plan& p) const {
  const std::int64_t launch = cluster_.host.launch_for(p.stack).ps;
  ClassBound b;
  double h = 0, hl = 0;
  for (const auto& t : g.tasks) {
    if (t.once_per_step || t.step_start) continue;
    const double launch_ps = static_cast<double>(launch * t.launches);
    h += launch_ps;
    if (t.layer >= 0) hl += launch_ps;
  }
  const double L = model_.layers;
  // the compute stream's solo times priced once, with its gaps
  const StreamChain chain = compute_stream_chain(g, cost_);
  const double c = chain.solo_ps, cl = chain.layer_solo_ps;
  b.emb_ps = chain.embedding_solo_ps;
  b.head_ps = chain.head_solo_ps;
  b.chain_ps = chain.rest_ps + L * chain.layer_ps;
  b.layer_chain_ps = chain.layer_ps;
  b.compute_ps = c + (L - 1) * cl;
  b.host_ps = h + (L - 1) * hl;
  b.layer_compute_ps = cl;
  b.layer_host_ps = hl;
  b.layer_ps = std::max(cl, chain.layer_ps);  // pipelined plans: a layer's gaps on its stage's compute stream
  b.host_layer_ps = hl;
  return b;
}

Duration Evaluator::compute_lower_bound(const sim::Plan& p) const {
  if (p.pp > 1) {
    ClassBound b = class_bound(p);
    if (p.recompute == sim::Recompute::full && p.recompute_method == sim::RecomputeMethod::block) {
      // block recompute re-runs the first k layers of each model chunk: per layer, the class
      // without recompute plus the recompute increment times the smallest recomputed fraction of
      // any chunk (a bound for every rank)
      sim::Plan none = p;
      none.recompute = sim::Recompute::none;
      none.recompute_layers = 1;
      none.recompute_method = sim::RecomputeMethod::uniform;
      const ClassBound n = class_bound(none);
      double f = 1.0;
      for (const auto& v : sim::virtual_stage_layers(model_, p))
        f = std::min(f, static_cast<double>(sim::recomputed_layers(p, v.size())) / v.size());
      b.layer_ps = n.layer_ps + f * (b.layer_ps - n.layer_ps);
      b.host_layer_ps = n.host_layer_ps + f * (b.host_layer_ps - n.host_layer_ps);
    }
    return pipeline_lower_bound(p, b);
  }
  ClassBound b = class_bound(p);
  const int rc = sim::recomputed_layers(p, model_.layers);
  if (p.recompute == sim::Recompute::full && rc < model_.layers) {
    // block: the layers beyond rc are not recomputed - the class without recompute plus the
    // per-layer increment of recompute for rc layers
    sim::Plan none = p;
    none.recompute = sim::Recompute::none;
    none.recompute_layers = 1;
    none.recompute_method = sim::RecomputeMethod::uniform;
    const ClassBound n = class_bound(none);
    b.compute_ps = n.compute_ps + rc * (b.layer_compute_ps - n.layer_compute_ps);
    b.host_ps = n.host_ps + rc * (b.layer_host_ps - n.layer_host_ps);
    b.chain_ps = n.chain_ps + rc * (b.layer_chain_ps - n.layer_chain_ps);
  }
  b.compute_ps = std::max(b.compute_ps, b.chain_ps);  // the compute stream's gaps (at least its solo time)
  const double opt = static_cast<double>(sim::solo_time(cost_, hardware::OptimizerOp{.params = optimizer_params(model_, p)}, p.stack).ps);
  const double mb = std::max(b.compute_ps, b.host_ps);
  const double total = (p.grad_accum_steps() - 1) * mb + std::max(b.compute_ps + opt, b.host_ps);
  // floor, and never below the closed-form GEMM bound (both are bounds; take the tighter)
  return std::max(Duration::from_ps(static_cast<std::int64_t>(std::floor(total * (1 - 1e-12)))), gemm_lower_bound(p));
}

sim::StepReport Evaluator::simulate(const sim::Plan& p) const {
  if (p.pp > 1) return sim::simulate_plan(model_, cluster_, p, cost_).report;
  sim::StepGraph g = sim::build_step_graph(model_, cluster_, p);
  return sim::Engine(cost_).simulate(g);
}

sim::SimulatedPlan Evaluator::simulate_kept(const sim::Plan& p) const {
  return sim::simulate_plan(model_, cluster_, p, cost_, {.timeline = true});
}

Estimate Evaluator::estimate(const sim::Plan& p) const {
  if (p.pp > 1) return pipeline_estimate(p);
  const int rc = sim::recomputed_layers(p, model_.layers);
  Estimate e;
  if (p.recompute == sim::Recompute::full && (rc < model_.layers || p.recompute_layers > 1) && model_.layers > short_layers_ + 1) {
    // full recompute of rc layers: simulated with every layer recomputed (chunks of one layer) and
    // with none; each recomputed layer adds the difference per layer
    sim::Plan all = p, none = p;
    all.recompute_method = sim::RecomputeMethod::uniform;
    all.recompute_layers = 1;
    none.recompute = sim::Recompute::none;
    none.recompute_method = sim::RecomputeMethod::uniform;
    none.recompute_layers = 1;
    const Estimate a = estimate_uniform(all);
    if (rc == model_.layers) {
      e = a;
    } else {
      e = estimate_uniform(none);
      const double f = static_cast<double>(rc) / model_.layers;
      auto mix = [f](Duration n, Duration r) { return Duration::from_ps(std::llround(static_cast<double>(n.ps) + f * static_cast<double>(r.ps - n.ps))); };
      e.step_time = mix(e.step_time, a.step_time);
      e.compute = mix(e.compute, a.compute);
      e.exposed_comm = mix(e.exposed_comm, a.exposed_comm);
      e.idle = mix(e.idle, a.idle);
      for (std::size_t s = 0; s < e.streams.size() && s < a.streams.size(); ++s) e.streams[s].busy = mix(e.streams[s].busy, a.streams[s].busy);
    }
    e.lower_bound = compute_lower_bound(p);
    e.step_time = std::max(e.step_time, e.lower_bound);
    e.memory = sim::estimate_memory(model_, cluster_, p);
    e.mfu = e.model_flops / (e.step_time.s() * p.gpus() * cluster_.gpu.peak_flops(p.dtype));
    e.tokens_per_s = static_cast<double>(p.global_batch) * static_cast<double>(p.seq_len) / e.step_time.s();
    return e;
  }
  return estimate_uniform(p);
}

Estimate Evaluator::estimate_uniform(const sim::Plan& p) const {
  Estimate e;
  e.lower_bound = compute_lower_bound(p);
  const int L = model_.layers;
  int L2 = short_layers_ + 1;
  sim::StepReport r1, r2;
  if (L <= L2) {
    r2 = simulate(p);
    r1 = r2;
  } else {
    const sim::Engine engine(cost_, {.memory = false});  // the memory is the closed form's (below)
    auto with_layers = [&](int layers) {
      sim::ModelSpec m = model_;
      m.layers = layers;
      return engine.simulate(sim::build_step_graph(m, cluster_, p));
    };
    r1 = with_layers(short_layers_);
    r2 = with_layers(L2);
    // ZeRO-3 gathers each layer's parameters beside the layer before (prefetch), and the gathers'
    // backlog takes a few layers to settle: walk on one layer at a time until the per-layer
    // increment stops growing (within 0.5 %), at most to kMaxShortLayers layers. gpt3-175b tp1 dp128
    // on 16 DGX-H200: the increment is 66.4, 70.8, 73.4, 73.5 ms from 1 -> 2 layers on; extrapolated
    // from 1 and 2 layers the step came out 11 % fast, with the walk 0.45 % (tests/tuner)
    constexpr int kMaxShortLayers = 8;
    while (p.zero >= 3 && L2 + 1 < L && L2 < kMaxShortLayers) {
      sim::StepReport r3 = with_layers(L2 + 1);
      const double before = static_cast<double>((r2.step_time - r1.step_time).ps);
      const double now = static_cast<double>((r3.step_time - r2.step_time).ps);
      r1 = std::move(r2);
      r2 = std::move(r3);
      ++L2;
      if (std::abs(now - before) <= 0.005 * std::abs(now)) break;
    }
    e.extrapolated = true;
  }
  const double k = e.extrapolated ? static_cast<double>(L - L2) : 0.0;  // layers added beyond L2
  auto lin = [k](double a, double b) { return b + k * (b - a); };
  auto dur = [&](Duration a, Duration b) { return Duration::from_ps(std::llround(std::max(0.0, lin(static_cast<double>(a.ps), static_cast<double>(b.ps))))); };
  e.step_time = std::max(dur(r1.step_time, r2.step_time), e.lower_bound);
  e.compute = dur(r1.compute, r2.compute);
  for (std::size_t s = 0; s < r2.streams.size(); ++s) {
    e.streams.push_back(r2.streams[s]);
    e.streams.back().busy = dur(r1.streams[s].busy, r2.streams[s].busy);
  }
  e.exposed_comm = dur(r1.exposed_comm, r2.exposed_comm);
  e.idle = dur(r1.idle, r2.idle);
  e.model_flops = lin(r1.model_flops, r2.model_flops);
  e.memory = sim::estimate_memory(model_, cluster_, p);
  e.mfu = e.model_flops / (e.step_time.s() * p.gpus() * cluster_.gpu.peak_flops(p.dtype));
  e.tokens_per_s = static_cast<double>(p.global_batch) * static_cast<double>(p.seq_len) / e.step_time.s();
  return e;
}

}  // namespace tuner
