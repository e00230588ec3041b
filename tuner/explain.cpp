#include "tuner/explain.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "sim/pipeline_step.hpp"
#include "sim/step_graph.hpp"
#include "sim/strategy.hpp"

namespace tuner {

LayerCost LayerBreakdown::mean_layer() const {
  LayerCost m;
  m.layer = -2;
  const auto n = static_cast<std::int64_t>(layers.size()) - 1;
  if (n <= 0) return m;
  for (std::size_t i = 1; i < layers.size(); ++i) {
    m.compute += layers[i].compute;
    m.exposed_comm += layers[i].exposed_comm;
    m.gemm_lost += layers[i].gemm_lost;
    m.interference += layers[i].interference;
  }
  m.interference = Duration::from_ps(m.interference.ps / n);
  m.compute = Duration::from_ps(m.compute.ps / n);
  m.exposed_comm = Duration::from_ps(m.exposed_comm.ps / n);
  m.gemm_lost = Duration::from_ps(m.gemm_lost.ps / n);
  return m;
}

namespace {

/// Solo GEMM time per layer slot ([0] outside layers).
std::vector<std::int64_t> gemm_time_per_layer(const sim::StepGraph& g, const hardware::CostModel& cost, int layers) {
  std::vector<std::int64_t> out(layers + 1, 0);
  for (const auto& t : g.tasks) {
    if (t.once_per_step) continue;
    if (std::holds_alternative<hardware::GemmOp>(t.kind)) out[t.layer + 1] += sim::solo_time(cost, t, g.plan.stack).ps;
  }
  return out;
}

}  // namespace

LayerBreakdown explain_plan(const Evaluator& ev, const sim::Plan& p, const sim::SimulatedPlan* simulated) {
  const int L = ev.model().layers;
  std::optional<sim::SimulatedPlan> own;
  std::vector<sim::StepGraph> rebuilt;
  if (simulated && simulated->graphs.empty()) rebuilt = sim::build_stage_graphs(ev.model(), ev.cluster(), simulated->graphs_plan(p));
  const sim::SimulatedPlan& sp = simulated ? *simulated : own.emplace(ev.simulate_kept(p));
  const std::vector<sim::StepGraph>& graphs = rebuilt.empty() ? sp.graphs : rebuilt;
  if (sp.report.timelines.size() != graphs.size()) throw std::invalid_argument("tuner::explain_plan: the simulation given has no timelines");
  for (std::size_t s = 0; s < graphs.size(); ++s)
    if (sp.report.timelines[s].timing.size() != graphs[s].size())
      throw std::invalid_argument("tuner::explain_plan: the simulation given is not of this plan (task counts differ)");
  const sim::StepReport& r = sp.report;
  LayerBreakdown b;
  b.plan = p;
  b.step_time = r.step_time;
  b.per_step = p.pp > 1 ? static_cast<double>(p.grad_accum_steps()) / graphs[0].micro_batches : p.grad_accum_steps();
  b.layers.resize(L + 1);
  for (int l = -1; l < L; ++l) b.layers[l + 1].layer = l;
  const int stages = static_cast<int>(graphs.size());
  for (int st = 0; st < stages; ++st) {
    const sim::StepGraph& g = graphs[static_cast<std::size_t>(st)];
    const auto& tl = r.timelines.at(static_cast<std::size_t>(st)).timing;
    LayerCost once;
    // compute intervals are disjoint and in issue order (one in-order compute stream)
    std::vector<std::pair<std::int64_t, std::int64_t>> busy;
    for (std::size_t i = 0; i < g.size(); ++i) {
      const auto& t = g.tasks[i];
      if (!g.on_compute(i)) continue;
      if (tl[i].end <= tl[i].start) continue;
      busy.emplace_back(tl[i].start.ps, tl[i].end.ps);
      auto& slot = t.once_per_step ? once : b.layers[t.layer + 1];
      slot.compute += tl[i].end - tl[i].start;
      slot.interference += tl[i].end - tl[i].start - sim::solo_time(ev.cost(), t, g.plan.stack);
    }
    std::sort(busy.begin(), busy.end());
    // exposed: the part of each collective not covered by compute; overlapping collectives are
    // counted once (the later-starting one only for the part beyond the earlier one's end)
    std::vector<std::size_t> comm;
    for (std::size_t i = 0; i < g.size(); ++i)
      if (!g.on_compute(i) && tl[i].end > tl[i].start) comm.push_back(i);
    std::sort(comm.begin(), comm.end(), [&](std::size_t a, std::size_t c) { return tl[a].start != tl[c].start ? tl[a].start < tl[c].start : a < c; });
    std::int64_t covered_to = 0;
    Duration pipe;
    for (std::size_t i : comm) {
      std::int64_t s = std::max(tl[i].start.ps, covered_to), e = tl[i].end.ps;
      if (e <= s) continue;
      covered_to = e;
      std::int64_t exposed = e - s;
      auto it = std::lower_bound(busy.begin(), busy.end(), std::make_pair(s, std::int64_t{0}));
      if (it != busy.begin()) --it;
      for (; it != busy.end() && it->first < e; ++it) exposed -= std::max<std::int64_t>(0, std::min(e, it->second) - std::max(s, it->first));
      const auto& t = g.tasks[i];
      if (t.op == sim::Op::pipe) pipe += Duration::from_ps(exposed);
      else (t.once_per_step ? once : b.layers[t.layer + 1]).exposed_comm += Duration::from_ps(exposed);
    }
    // once per step: the stage where each is largest (every stage steps its own optimizer)
    b.once.compute = std::max(b.once.compute, once.compute);
    b.once.exposed_comm = std::max(b.once.exposed_comm, once.exposed_comm);
    b.once.interference = std::max(b.once.interference, once.interference);
    b.pipe_exposed += Duration::from_ps(static_cast<std::int64_t>(std::llround(static_cast<double>(pipe.ps) * b.per_step / stages)));
    if (p.pp > 1) b.bubble += Duration::from_ps(r.ranks.at(static_cast<std::size_t>(st)).idle.ps / stages);
  }
  // GEMM efficiency lost to slicing
  sim::Plan whole = p;
  whole.row_slices = 1;
  whole.col_slices = 1;
  whole.row_axis = sim::RowAxis::batch;
  if (p.sequence_parallel && p.tp > 1 && p.strategy->tp_overlap(p).any()) {
    // token chunks and peer steps (te-pipelined, async-tp): the same GEMMs whole are Megatron-LM's
    whole.strategy = &sim::default_strategy();
    for (const sim::Knob* k : sim::plan_knobs()) k->set(whole, k->neutral);
  }
  if (p.pp > 1) whole.global_batch = graphs[0].micro_batches * p.micro_batch * p.dp;  // the micro-batches simulated
  std::vector<std::int64_t> sliced(L + 1, 0), unsliced(L + 1, 0);
  for (const auto& g : graphs) {
    const auto s = gemm_time_per_layer(g, ev.cost(), L);
    for (int l = 0; l <= L; ++l) sliced[l] += s[l];
  }
  for (const auto& g : sim::build_stage_graphs(ev.model(), ev.cluster(), whole)) {
    const auto s = gemm_time_per_layer(g, ev.cost(), L);
    for (int l = 0; l <= L; ++l) unsliced[l] += s[l];
  }
  for (int l = 0; l <= L; ++l) b.layers[l].gemm_lost = Duration::from_ps(sliced[l] - unsliced[l]);
  return b;
}

}  // namespace tuner
