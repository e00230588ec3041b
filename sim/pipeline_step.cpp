#include "sim/pipeline_step.hpp"

#include <algorithm>
#include <cmath>

#include "sim/pipeline_schedule.hpp"

namespace sim {

std::vector<StepGraph> build_stage_graphs(const ModelSpec& model, const hardware::ClusterSpec& cluster, const Plan& plan) {
  std::vector<StepGraph> out;
  out.reserve(static_cast<std::size_t>(plan.pp));
  for (int s = 0; s < plan.pp; ++s) out.push_back(build_step_graph(model, cluster, plan, world_rank_of(plan, 0, 0, s)));
  return out;
}

StepReport simulate_stages(const Engine& engine, const std::vector<StepGraph>& graphs) {
  std::vector<const StepGraph*> ptrs;
  for (const auto& g : graphs) ptrs.push_back(&g);
  return engine.simulate(ptrs);
}

namespace {

Duration lin(Duration a, Duration b, double k) {
  return Duration::from_ps(std::llround(std::max(0.0, static_cast<double>(b.ps) + k * static_cast<double>(b.ps - a.ps))));
}

std::vector<StreamTime> lin(const std::vector<StreamTime>& a, const std::vector<StreamTime>& b, double k) {
  std::vector<StreamTime> out = b;
  for (std::size_t i = 0; i < out.size() && i < a.size(); ++i) out[i].busy = lin(a[i].busy, b[i].busy, k);
  return out;
}

}  // namespace

StepReport extrapolate_micro_batches(const StepReport& a, int lo, const StepReport& b, int hi, int m) {
  const double k = static_cast<double>(m - hi) / static_cast<double>(hi - lo);
  StepReport r = b;
  r.step_time = lin(a.step_time, b.step_time, k);
  r.compute = lin(a.compute, b.compute, k);
  r.streams = lin(a.streams, b.streams, k);
  r.exposed_comm = lin(a.exposed_comm, b.exposed_comm, k);
  r.idle = lin(a.idle, b.idle, k);
  r.micro_batch_time = Duration::from_ps(r.step_time.ps / m);
  r.model_flops = b.model_flops + k * (b.model_flops - a.model_flops);
  r.events = a.events + b.events;
  for (std::size_t i = 0; i < r.ranks.size() && i < a.ranks.size(); ++i) {
    auto& x = r.ranks[i];
    const auto& y = a.ranks[i];
    x.compute = lin(y.compute, x.compute, k);
    x.exposed_comm = lin(y.exposed_comm, x.exposed_comm, k);
    x.idle = lin(y.idle, x.idle, k);
    x.streams = lin(y.streams, x.streams, k);
  }
  return r;
}

namespace {

Plan with_micro_batches(const Plan& plan, int micro_batches) {
  Plan q = plan;
  q.global_batch = micro_batches * plan.micro_batch * plan.dp;
  return q;
}

}  // namespace

Plan SimulatedPlan::graphs_plan(const Plan& plan) const { return extrapolated() ? with_micro_batches(plan, micro_batches_hi) : plan; }

SimulatedPlan simulate_plan(const ModelSpec& model, const hardware::ClusterSpec& cluster, const Plan& plan, const hardware::CostModel& cost,
                            const EngineOptions& options, bool all_micro_batches) {
  SimulatedPlan out;
  const Engine engine(cost, options);
  const int m = plan.grad_accum_steps(), lo = plan.pp, hi = plan.vp > 1 ? 2 * plan.pp : plan.pp + 1;
  if (plan.pp == 1 || all_micro_batches || m <= hi) {
    out.graphs = build_stage_graphs(model, cluster, plan);
    out.report = simulate_stages(engine, out.graphs);
    return out;
  }
  const Plan p_lo = with_micro_batches(plan, lo), p_hi = with_micro_batches(plan, hi);
  const StepReport r_lo = simulate_stages(Engine(cost, {.timeline = false, .models = options.models}), build_stage_graphs(model, cluster, p_lo));
  out.graphs = build_stage_graphs(model, cluster, p_hi);
  const StepReport r_hi = simulate_stages(engine, out.graphs);
  out.report = extrapolate_micro_batches(r_lo, lo, r_hi, hi, m);
  out.micro_batches_lo = lo;
  out.micro_batches_hi = hi;
  const double gpus = plan.gpus();
  out.report.mfu = out.report.model_flops / (out.report.step_time.s() * gpus * cluster.gpu.peak_flops(plan.dtype));
  out.report.tokens_per_s = static_cast<double>(plan.global_batch) * static_cast<double>(plan.seq_len) / out.report.step_time.s();
  return out;
}

PipelineSummary pipeline_summary(const ModelSpec& model, const Plan& plan, const StepReport& r) {
  PipelineSummary s;
  const auto layers = virtual_stage_layers(model, plan);
  double worst = -1;
  for (std::size_t i = 0; i < r.ranks.size(); ++i) {
    const RankBusy& rb = r.ranks[i];
    PipelineStageRow row;
    row.stage = pipeline_position(plan, rb.rank).stage;
    for (int c = 0; c < plan.vp; ++c) row.layers += layers[static_cast<std::size_t>(c * plan.pp + row.stage)].size();
    row.compute = rb.compute;
    row.idle = rb.idle;
    row.exposed_comm = rb.exposed_comm;
    for (const auto& st : rb.streams)
      if (st.name.starts_with("pp_")) row.pp_comm += st.busy;
    row.bubble = rb.compute_idle_fraction(r.step_time);
    row.memory = rb.memory;
    s.mean_bubble += row.bubble / static_cast<double>(r.ranks.size());
    if (row.memory.total() > worst) {
      worst = row.memory.total();
      s.worst_memory_stage = row.stage;
    }
    s.stages.push_back(row);
  }
  return s;
}

}  // namespace sim
