#include "tuner/evaluate.hpp"

#include <algorithm>
#include <cmath>

#include "sim/shapes.hpp"
#include "sim/step_graph.hpp"
#include "sim/strategy.hpp"

namespace tuner {

std::int64_t rank_params(const sim::ModelSpec& m, const sim::Plan& p) { return sim::Shapes(m, p).rank_params(); }

double static_memory_bytes(const sim::ModelSpec& m, const sim::Plan& p) {
  return static_cast<double>(rank_params(m, p)) * (common::dtype_bytes(sim::activation_dtype(p.dtype)) + 4.0 + 12.0);
}

MemoryModel::PerToken MemoryModel::per_token(const sim::Plan& p) const {
  const auto key = std::make_tuple(p.tp, p.sequence_parallel, static_cast<int>(p.dtype), p.seq_len);
  {
    std::lock_guard lock(mu_);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  }
  sim::Plan q = p;
  q.micro_batch = 1;
  q.dp = 1;
  q.global_batch = 1;
  q.strategy = &sim::default_strategy();
  for (const sim::Knob* k : sim::plan_knobs()) k->set(q, k->neutral);
  sim::ModelSpec m1 = model_, m2 = model_;
  m1.layers = 1;
  m2.layers = 2;
  const double a1 = sim::estimate_memory(sim::build_step_graph(m1, cluster_, q)).activations;
  const double a2 = sim::estimate_memory(sim::build_step_graph(m2, cluster_, q)).activations;
  const double tokens = static_cast<double>(p.seq_len);
  const PerToken pt{(a2 - a1) / tokens, (2 * a1 - a2) / tokens};
  std::lock_guard lock(mu_);
  cache_.emplace(key, pt);
  return pt;
}

sim::MemoryEstimate MemoryModel::estimate(const sim::Plan& p) const {
  const double n = static_cast<double>(rank_params(model_, p));
  sim::MemoryEstimate m;
  m.weights = n * common::dtype_bytes(sim::activation_dtype(p.dtype));
  m.gradients = 4.0 * n;
  m.optimizer = 12.0 * n;
  const PerToken pt = per_token(p);
  m.activations = static_cast<double>(p.micro_batch) * static_cast<double>(p.seq_len) * (pt.layer * model_.layers + pt.rest);
  return m;
}

Duration Evaluator::gemm_lower_bound(const sim::Plan& p) const {
  const sim::Shapes sh(model_, p);
  auto ps = [&](const hardware::GemmOp& g) { return cost_.gemm(g).time.ps; };
  std::int64_t layer_ps = 0, head_ps = 0;
  for (int i = 0; i < p.row_slices; ++i) {
    std::int64_t batch = p.micro_batch, seq = p.seq_len, off = 0;
    if (p.row_axis == sim::RowAxis::batch) batch /= p.row_slices;
    else {
      seq /= p.row_slices;
      off = i * seq;
    }
    const std::int64_t T = batch * seq;
    layer_ps += cost_.attention(sh.attention(batch, seq, off, false)).time.ps + cost_.attention(sh.attention(batch, seq, off, true)).time.ps;
    sh.for_each_layer_gemm(T, p.col_slices, [&](const hardware::GemmOp& g, std::int64_t n) { layer_ps += n * ps(g); });
    sh.for_each_lm_head_gemm(T, [&](const hardware::GemmOp& g, std::int64_t n) { head_ps += n * ps(g); });
  }
  const std::int64_t per_mb = layer_ps * model_.layers + head_ps;
  const std::int64_t opt = cost_.optimizer(hardware::OptimizerOp{.params = rank_params(model_, p)}).time.ps;
  // kernels run at host.kernel_efficiency of their modelled speed on this stack (floor: a bound)
  const double eff = cluster_.host.kernel_efficiency_for(p.stack);
  return Duration::from_ps(static_cast<std::int64_t>(std::floor(static_cast<double>(per_mb * p.grad_accum_steps() + opt) / eff)));
}

Duration Evaluator::compute_lower_bound(const sim::Plan& p) const {
  // the class: everything that shapes one micro-batch's tasks (not dp, global batch or bucket size);
  // a strategy whose neutral graph has the default strategy's tasks shares that class
  const sim::Strategy* st = p.strategy;
  bool neutral = true;
  ClassKey key{{}, p.tp, p.micro_batch, p.sequence_parallel, p.seq_len, static_cast<int>(p.dtype), static_cast<int>(p.stack), {}};
  for (const sim::Knob* k : sim::plan_knobs()) {
    key.knobs.push_back(k->applies(p) ? k->get(p) : k->neutral);
    neutral &= key.knobs.back() == k->neutral;
  }
  if (neutral && st->neutral_tasks_are_default) st = &sim::default_strategy();
  key.strategy = st->name;
  ClassBound b;
  bool cached = false;
  {
    std::lock_guard lock(mu_);
    if (auto it = bounds_.find(key); it != bounds_.end()) {
      b = it->second;
      cached = true;
    }
  }
  if (!cached) {
    sim::Plan q = p;
    q.strategy = st;
    q.dp = 1;
    q.global_batch = q.micro_batch;
    const std::int64_t launch = cluster_.host.launch_for(p.stack).ps;
    double c[2] = {0, 0}, h[2] = {0, 0};
    for (int l = 1; l <= 2; ++l) {
      sim::ModelSpec m = model_;
      m.layers = l;
      const sim::StepGraph g = sim::build_step_graph(m, cluster_, q);
      for (const auto& t : g.tasks) {
        if (t.once_per_step) continue;
        h[l - 1] += static_cast<double>(launch * t.launches);
        if (g.streams[t.stream].kind == sim::StreamKind::compute)
          c[l - 1] += static_cast<double>(sim::solo_time(cost_, t.kind, p.stack).ps);
      }
    }
    const double L = model_.layers;
    b.compute_ps = c[0] + (L - 1) * (c[1] - c[0]);
    b.host_ps = h[0] + (L - 1) * (h[1] - h[0]);
    std::lock_guard lock(mu_);
    bounds_.emplace(key, b);
  }
  const double opt = static_cast<double>(sim::solo_time(cost_, hardware::OptimizerOp{.params = rank_params(model_, p)}, p.stack).ps);
  const double mb = std::max(b.compute_ps, b.host_ps);
  const double total = (p.grad_accum_steps() - 1) * mb + std::max(b.compute_ps + opt, b.host_ps);
  // floor, and never below the closed-form GEMM bound (both are bounds; take the tighter)
  return std::max(Duration::from_ps(static_cast<std::int64_t>(std::floor(total * (1 - 1e-12)))), gemm_lower_bound(p));
}

sim::StepReport Evaluator::simulate(const sim::Plan& p, bool timeline) const {
  sim::StepGraph g = sim::build_step_graph(model_, cluster_, p);
  return sim::Engine(cost_, {.timeline = timeline}).simulate(g);
}

Estimate Evaluator::estimate(const sim::Plan& p) const {
  Estimate e;
  e.lower_bound = compute_lower_bound(p);
  const int L = model_.layers, L1 = short_layers_, L2 = short_layers_ + 1;
  sim::StepReport r1, r2;
  if (L <= L2) {
    r2 = simulate(p);
    r1 = r2;
  } else {
    sim::ModelSpec m1 = model_, m2 = model_;
    m1.layers = L1;
    m2.layers = L2;
    const sim::Engine engine(cost_);
    r1 = engine.simulate(sim::build_step_graph(m1, cluster_, p));
    r2 = engine.simulate(sim::build_step_graph(m2, cluster_, p));
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
  e.memory.weights = lin(r1.memory.weights, r2.memory.weights);
  e.memory.gradients = lin(r1.memory.gradients, r2.memory.gradients);
  e.memory.optimizer = lin(r1.memory.optimizer, r2.memory.optimizer);
  e.memory.activations = lin(r1.memory.activations, r2.memory.activations);
  e.mfu = e.model_flops / (e.step_time.s() * p.gpus() * cluster_.gpu.peak_flops(p.dtype));
  e.tokens_per_s = static_cast<double>(p.global_batch) * static_cast<double>(p.seq_len) / e.step_time.s();
  return e;
}

}  // namespace tuner
