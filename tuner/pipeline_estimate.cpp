// The tuner's side of pipeline parallelism: the screening estimate of a pipelined plan (its pass
// times measured on a one-micro-batch step of a reduced model, replayed in the schedule's order over
// the plan's micro-batches) and the lower bound that orders the search.
#include "tuner/pipeline_estimate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "sim/memory.hpp"
#include "sim/pipeline_schedule.hpp"
#include "sim/pipeline_step.hpp"
#include "sim/strategy.hpp"
#include "tuner/evaluate.hpp"

namespace tuner {

std::vector<double> replay_schedule(sim::PipelineSchedule schedule, int pp, int vp, int m, const PassTimes& t, bool blocking) {
  const int V = pp * vp;
  const auto M = static_cast<std::size_t>(m);
  std::vector<std::vector<sim::PipelinePass>> order(static_cast<std::size_t>(pp));
  for (int r = 0; r < pp; ++r) order[static_cast<std::size_t>(r)] = sim::pipeline_order(schedule, pp, vp, m, r);
  constexpr double kUnknown = -1;
  std::vector<double> fend(static_cast<std::size_t>(V) * M, kUnknown), bend(static_cast<std::size_t>(V) * M, kUnknown);
  std::vector<std::size_t> next(static_cast<std::size_t>(pp), 0);
  std::vector<double> free_at(static_cast<std::size_t>(pp), 0.0);
  std::size_t left = 0;
  for (const auto& o : order) left += o.size();
  while (left > 0) {
    std::size_t progressed = 0;
    for (int r = 0; r < pp; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      const auto& o = order[ri];
      for (; next[ri] < o.size(); ++next[ri]) {
        const auto& pass = o[next[ri]];
        const int v = pass.chunk * pp + r;
        const auto at = static_cast<std::size_t>(v) * M + static_cast<std::size_t>(pass.micro);
        const auto vi = static_cast<std::size_t>(v);
        double ready = 0;
        if (pass.forward) {
          if (v > 0) {
            const double prev = fend[at - M];
            if (prev == kUnknown) break;
            ready = prev + t.send_fwd[vi - 1];
          }
        } else if (v == V - 1) {
          ready = fend[at];
        } else {
          const double prev = bend[at + M];
          if (prev == kUnknown) break;
          ready = prev + t.send_bwd[vi + 1];
        }
        const double f = pass.micro == 0 && !t.fwd_first.empty() ? t.fwd_first[vi] : t.fwd[vi];
        const double end = std::max(free_at[ri], ready) + (pass.forward ? f : t.bwd[vi]);
        (pass.forward ? fend : bend)[at] = end;
        const bool sends = pass.forward ? v < V - 1 : v > 0;
        free_at[ri] = end + (blocking && sends ? (pass.forward ? t.send_fwd[vi] : t.send_bwd[vi]) : 0.0);
        ++progressed;
      }
    }
    if (progressed == 0) throw std::logic_error("replay_schedule: the schedule's passes wait on each other (no pass can run)");
    left -= progressed;
  }
  std::vector<double> out(static_cast<std::size_t>(pp));
  for (int r = 0; r < pp; ++r) out[static_cast<std::size_t>(r)] = free_at[static_cast<std::size_t>(r)] + t.tail[static_cast<std::size_t>(r)];
  return out;
}

namespace {

/// What a two-micro-batch pipelined step shows of each virtual stage (its steady passes: the last
/// micro-batch's forward, the first's backward; and the first's forward apart), and of rank 0's streams.
struct OneMicroBatch {
  PassTimes times;
  double compute_mb = 0, compute_once = 0, exposed_mb = 0;  ///< rank 0: compute busy per micro-batch / once per step; comm-only time inside its passes
  std::vector<sim::StreamTime> streams_mb, streams_once;    ///< rank 0's streams: busy per micro-batch / once per step
  double model_flops = 0;                                   ///< of one micro-batch, every rank
};

OneMicroBatch measure(const sim::ModelSpec& model, const hardware::ClusterSpec& cluster, const sim::Plan& p, const hardware::CostModel& cost) {
  const int pp = p.pp, vp = p.vp, V = pp * vp;
  const int last_micro = p.grad_accum_steps() - 1;
  const auto graphs = sim::build_stage_graphs(model, cluster, p);
  const auto r = sim::simulate_stages(sim::Engine(cost, {.timeline = true, .memory = false}), graphs);  // memory: the closed form's
  OneMicroBatch o;
  auto& t = o.times;
  t.fwd.assign(static_cast<std::size_t>(V), 0.0);
  t.bwd = t.send_fwd = t.send_bwd = t.fwd_first = t.fwd;
  t.tail.assign(static_cast<std::size_t>(pp), 0.0);
  o.model_flops = r.model_flops / p.grad_accum_steps();
  for (int s = 0; s < pp; ++s) {
    const sim::StepGraph& g = graphs[static_cast<std::size_t>(s)];
    const auto& tl = r.timelines.at(static_cast<std::size_t>(s)).timing;
    // per chunk and direction: the window of the pass's own tasks (not its transfers)
    std::vector<double> lo(static_cast<std::size_t>(2 * vp), 1e300), hi(static_cast<std::size_t>(2 * vp), -1e300);
    double last_bwd = 0, end = 0;
    std::vector<double> comp_in(static_cast<std::size_t>(2 * vp), 0.0);
    std::vector<double> lo_first(static_cast<std::size_t>(vp), 1e300), hi_first(static_cast<std::size_t>(vp), -1e300);  // micro-batch 0's forward per chunk
    if (s == 0) {
      o.streams_mb.resize(g.streams.size());
      o.streams_once.resize(g.streams.size());
      for (std::size_t k = 0; k < g.streams.size(); ++k) {
        o.streams_mb[k] = o.streams_once[k] = {.name = g.streams[k].name, .kind = g.streams[k].kind, .busy = {}};
      }
    }
    for (std::size_t i = 0; i < g.size(); ++i) {
      const auto& task = g.tasks[i];
      const double a = static_cast<double>(tl[i].start.ps), b = static_cast<double>(tl[i].end.ps);
      end = std::max(end, b);
      // the first micro-batch's passes: the data-parallel reduction runs during the last one's backward
      const bool first_micro = task.micro <= 0;
      // once per step: the DP reduction and optimizer, and ZeRO-1's parameter gathers at its start
      const bool once = task.once_per_step || task.step_start;
      if (s == 0 && (once || first_micro)) (once ? o.streams_once : o.streams_mb)[task.stream].busy += tl[i].end - tl[i].start;
      if (s == 0 && g.on_compute(i) && (once || first_micro)) (once ? o.compute_once : o.compute_mb) += b - a;
      const bool fwd = task.phase == sim::Phase::fwd;
      if (!task.once_per_step && task.model_chunk >= 0 && !fwd && task.op != sim::Op::pipe && g.on_compute(i)) last_bwd = std::max(last_bwd, b);
      if (task.once_per_step || task.model_chunk < 0) continue;
      // forward: the last micro-batch's pass is the steady one (the first's shares the GPU with
      // ZeRO's step-start parameter gathers: kept apart as fwd_first); backward: the first's
      const bool steady = fwd ? task.micro == last_micro : first_micro;
      const int v = task.model_chunk * pp + s;
      if (task.op == sim::Op::pipe) {
        if (steady && !g.inputs(i).empty()) (fwd ? t.send_fwd : t.send_bwd)[static_cast<std::size_t>(v)] = b - a;
        continue;
      }
      if (fwd && first_micro) {
        const auto c = static_cast<std::size_t>(task.model_chunk);
        lo_first[c] = std::min(lo_first[c], a);
        hi_first[c] = std::max(hi_first[c], b);
      }
      if (!steady) continue;
      const auto k = static_cast<std::size_t>(2 * task.model_chunk + (fwd ? 0 : 1));
      lo[k] = std::min(lo[k], a);
      hi[k] = std::max(hi[k], b);
      if (g.on_compute(i)) comp_in[k] += b - a;
    }
    for (int c = 0; c < vp; ++c) {
      const auto ci = static_cast<std::size_t>(c);
      t.fwd_first[static_cast<std::size_t>(c * pp + s)] = hi_first[ci] > lo_first[ci] ? hi_first[ci] - lo_first[ci] : 0.0;
    }
    for (int c = 0; c < vp; ++c) {
      const auto v = static_cast<std::size_t>(c * pp + s);
      for (int d = 0; d < 2; ++d) {
        const auto k = static_cast<std::size_t>(2 * c + d);
        const double w = hi[k] > lo[k] ? hi[k] - lo[k] : 0.0;
        (d == 0 ? t.fwd : t.bwd)[v] = w;
        if (s == 0) o.exposed_mb += std::max(0.0, w - comp_in[k]);
      }
    }
    t.tail[static_cast<std::size_t>(s)] = std::max(0.0, end - last_bwd);
  }
  return o;
}

}  // namespace

Estimate Evaluator::pipeline_estimate(const sim::Plan& p) const {
  // Two micro-batches through the pipeline of a model cut to L1 and to L2 layers per virtual stage:
  // every pass and transfer time of the first (whose backward, unlike the last's, does not share the
  // GPU with the data-parallel reduction, as none but the last of the plan's m do), linear in the
  // layers a virtual stage holds, is extrapolated to the plan's split; the plan's m micro-batches
  // are then replayed in the schedule's order.
  Estimate e;
  e.lower_bound = compute_lower_bound(p);
  const int V = p.virtual_stages(), m = p.grad_accum_steps();
  const int L1 = short_layers_, L2 = short_layers_ + 1;
  sim::Plan q = p;
  q.global_batch = std::min(2, m) * p.micro_batch * p.dp;  // two micro-batches per pipeline (one if the plan has one)
  q.pipeline_layers.clear();
  sim::ModelSpec m1 = model_, m2 = model_;
  m1.layers = L1 * V;
  m2.layers = L2 * V;
  const OneMicroBatch a = measure(m1, cluster_, q, cost_), b = measure(m2, cluster_, q, cost_);
  const auto layers = sim::virtual_stage_layers(model_, p);
  // x at n layers per virtual stage from x at L1 and L2
  auto at = [&](double x1, double x2, double n) { return std::max(0.0, x2 + (n - L2) * (x2 - x1)); };
  const double mean_layers = static_cast<double>(model_.layers) / V;
  PassTimes t;
  auto per_v = [&](const std::vector<double>& x1, const std::vector<double>& x2) {
    std::vector<double> out(x1.size());
    for (std::size_t v = 0; v < x1.size(); ++v) out[v] = at(x1[v], x2[v], layers[v].size());
    return out;
  };
  t.fwd = per_v(a.times.fwd, b.times.fwd);
  t.fwd_first = per_v(a.times.fwd_first, b.times.fwd_first);
  t.bwd = per_v(a.times.bwd, b.times.bwd);
  t.send_fwd = per_v(a.times.send_fwd, b.times.send_fwd);
  t.send_bwd = per_v(a.times.send_bwd, b.times.send_bwd);
  t.tail.resize(a.times.tail.size());
  for (std::size_t r = 0; r < t.tail.size(); ++r) {
    double n = 0;  // the layers rank r holds, per chunk on average
    for (int c = 0; c < p.vp; ++c) n += layers[static_cast<std::size_t>(c * p.pp) + r].size();
    t.tail[r] = at(a.times.tail[r], b.times.tail[r], n / p.vp);
  }
  const auto ends = replay_schedule(p.schedule, p.pp, p.vp, m, t, !p.p2p_overlap);
  const double step = *std::max_element(ends.begin(), ends.end());
  const double rank0_layers = [&] {
    double n = 0;
    for (int c = 0; c < p.vp; ++c) n += layers[static_cast<std::size_t>(c * p.pp)].size();
    return n / p.vp;
  }();
  auto dur = [](double ps) { return Duration::from_ps(std::llround(std::max(0.0, ps))); };
  e.step_time = std::max(dur(step), e.lower_bound);
  const double compute = m * at(a.compute_mb, b.compute_mb, rank0_layers) + at(a.compute_once, b.compute_once, rank0_layers);
  e.compute = dur(std::min(compute, static_cast<double>(e.step_time.ps)));
  for (std::size_t s = 0; s < b.streams_mb.size(); ++s) {
    e.streams.push_back(b.streams_mb[s]);
    e.streams.back().busy = dur(m * at(static_cast<double>(a.streams_mb[s].busy.ps), static_cast<double>(b.streams_mb[s].busy.ps), rank0_layers) +
                                at(static_cast<double>(a.streams_once[s].busy.ps), static_cast<double>(b.streams_once[s].busy.ps), rank0_layers));
  }
  const double rest = static_cast<double>(e.step_time.ps - e.compute.ps);
  const double exposed = m * at(a.exposed_mb, b.exposed_mb, rank0_layers) + std::max(0.0, t.tail[0] - at(a.compute_once, b.compute_once, rank0_layers));
  e.exposed_comm = dur(std::min(rest, exposed));
  e.idle = dur(rest - static_cast<double>(e.exposed_comm.ps));
  e.model_flops = m * at(a.model_flops, b.model_flops, mean_layers);
  e.memory = sim::estimate_memory(model_, cluster_, p);
  e.extrapolated = true;
  e.mfu = e.model_flops / (e.step_time.s() * p.gpus() * cluster_.gpu.peak_flops(p.dtype));
  e.tokens_per_s = static_cast<double>(p.global_batch) * static_cast<double>(p.seq_len) / e.step_time.s();
  return e;
}

double Evaluator::pipeline_work_bound(const sim::Plan& p, const ClassBound& b, bool optimizer) const {
  thread_local std::vector<sim::LayerRange> vs;  // reused: the cheap bound of every pipelined candidate comes here
  sim::virtual_stage_layers(model_, p, vs);
  const int V = p.virtual_stages();
  auto C = [&](int v) {  // a virtual stage's solo compute per micro-batch, forward and backward
    return b.layer_ps * vs[static_cast<std::size_t>(v)].size() + (v == 0 ? b.emb_ps : 0.0) + (v == V - 1 ? b.head_ps : 0.0);
  };
  const double m = p.grad_accum_steps();
  auto optimizer_of = [&](int r) {
    return optimizer ? static_cast<double>(sim::solo_time(cost_, hardware::OptimizerOp{.params = stage_optimizer_params(model_, p, r)}, p.stack).ps)
                     : 0.0;
  };
  const double opt0 = optimizer_of(0);
  // Row slices go from stage to stage one by one (Builder::transfer per slice): the next stage
  // starts on the first slice while this one computes the second, so the way through the stages
  // below costs only one slice's share: a batch slice's is 1 / row_slices; sequence slices differ
  // (causal attention: the first attends to fewer keys), so none is counted for them.
  const double share = p.row_slices <= 1 ? 1.0 : p.row_axis == sim::RowAxis::batch ? 1.0 / p.row_slices : 0.0;
  double best = 0, below = 0;  // below: sum of C_v (times share) over the virtual stages v < r (chunk 0 of ranks 0..r-1)
  for (int r = 0; r < p.pp; ++r) {
    double W = 0, layers = 0;
    for (int c = 0; c < p.vp; ++c) {
      W += C(c * p.pp + r);
      layers += vs[static_cast<std::size_t>(c * p.pp + r)].size();
    }
    // rank r's own optimizer runs beside the last gradient's way back through the ranks below; the
    // step ends after that way and rank 0's optimizer (its last pass is the last one back)
    best = std::max({best, below + m * W + opt0, m * W + optimizer_of(r), m * b.host_layer_ps * layers});
    below += share * C(r);
  }
  return best;
}

Duration Evaluator::pipeline_lower_bound(const sim::Plan& p, const ClassBound& b) const {
  const double best = pipeline_work_bound(p, b, true);
  return std::max(Duration::from_ps(static_cast<std::int64_t>(std::floor(best * (1 - 1e-12)))), gemm_lower_bound(p));
}

}  // namespace tuner
