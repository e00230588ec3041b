#include "tuner/compare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "common/table.hpp"
#include "sim/pipeline_schedule.hpp"
#include "sim/pipeline_step.hpp"
#include "sim/report_json.hpp"
#include "sim/strategy.hpp"
#include "tuner/report.hpp"

namespace tuner {

double tp_bytes_per_gpu(const Evaluator& ev, const sim::Plan& p) {
  // Every micro-batch issues the same collectives: a pipelined step is built with pp micro-batches
  // (the fewest both schedules accept) and its per-micro-batch part scaled to the plan's; an
  // unpipelined graph is one micro-batch, repeated grad_accum_steps times, the once-per-step tasks once.
  // And the bytes are linear in the layers a stage holds (each layer issues the same collectives;
  // sequence parallelism's norm-gradient all-reduce grows with the layers): the graphs are built
  // with one and with two layers per virtual stage, and each stage's bytes taken at its layers.
  const int m = p.grad_accum_steps();
  sim::Plan q = p;
  double scale = m;
  if (p.pp > 1 && m > p.pp) {
    q.global_batch = p.pp * p.micro_batch * p.dp;
    scale = static_cast<double>(m) / p.pp;
  } else if (p.pp > 1) {
    scale = 1;
  }
  const auto layers = sim::virtual_stage_layers(ev.model(), p);
  auto bytes_of = [&](const sim::ModelSpec& model) {
    std::vector<double> per_stage(static_cast<std::size_t>(p.pp), 0.0);
    for (const auto& g : sim::build_stage_graphs(model, ev.cluster(), q)) {
      double once = 0, each = 0;
      for (const auto& t : g.tasks) {
        if (!t.is_collective() || !t.group) continue;
        // the tensor-parallel groups: 1D's tp, a 2D / 2.5D grid's rows and columns, row<i> / col<i> of domino's slice i (not depth: that is data parallelism)
        const std::string& name = g.groups[*t.group].name;
        if (!name.starts_with("tp") && !name.starts_with("row") && !name.starts_with("col")) continue;
        const double b = ev.cost().collective(std::get<hardware::CollectiveOp>(t.kind)).sent_bytes;
        // unpipelined: once-per-step tasks run once; pipelined: tasks of no micro-batch (micro -1) do
        const bool per_step = g.micro_batches > 1 ? t.micro < 0 : t.once_per_step;
        (per_step ? once : each) += b;
      }
      per_stage[static_cast<std::size_t>(sim::pipeline_position(q, g.rank).stage)] = once + scale * each;
    }
    return per_stage;
  };
  const int V = p.virtual_stages();
  if (std::any_of(layers.begin(), layers.end(), [](const sim::LayerRange& r) { return r.size() == 0; }) || ev.model().layers <= 2 * V) {
    const auto whole = bytes_of(ev.model());
    return *std::max_element(whole.begin(), whole.end());
  }
  sim::ModelSpec one = ev.model(), two = ev.model();
  one.layers = V;
  two.layers = 2 * V;
  q.pipeline_layers.clear();
  const auto b1 = bytes_of(one), b2 = bytes_of(two);
  double most = 0;
  for (int s = 0; s < p.pp; ++s) {
    int held = 0;  // the stage's layers in the plan (vp in the first graph, 2 vp in the second)
    for (int c = 0; c < p.vp; ++c) held += layers[static_cast<std::size_t>(c * p.pp + s)].size();
    const auto i = static_cast<std::size_t>(s);
    most = std::max(most, b1[i] + (b2[i] - b1[i]) * (held - p.vp) / p.vp);
  }
  return most;
}

std::vector<StrategyRow> compare_strategies(const SearchResult& r, const Evaluator& ev, int threads) {
  std::vector<StrategyRow> rows;
  for (const sim::Strategy* s : r.strategies) {
    StrategyRow row{.strategy = s};
    for (const auto& b : r.per_strategy)
      if (b.plan.strategy == s && !b.plan.grid_tp()) row.best = &b;
    for (const auto& w : r.without_plan)
      if (w.strategy == s) row.refused = &w;
    rows.push_back(row);
  }
  for (const auto& b : r.per_strategy)
    if (b.plan.grid_tp()) rows.push_back({.strategy = b.plan.strategy, .layout = b.plan.tp_layout, .best = &b});
  parallel_for(rows.size(), threads, [&](std::size_t i) {
    if (rows[i].best) rows[i].tp_bytes = tp_bytes_per_gpu(ev, rows[i].best->plan);
  });
  // fastest first; ties and strategies without a plan keep registry order
  std::stable_sort(rows.begin(), rows.end(), [](const StrategyRow& a, const StrategyRow& b) {
    if (!a.best || !b.best) return a.best && !b.best;
    return a.best->report.step_time < b.best->report.step_time;
  });
  return rows;
}

namespace {

/// "num_splits 2, num_sm 32": the strategy's own knobs that apply to its plan; "-" without any.
std::string knobs_of(const sim::Plan& p) {
  std::string s;
  for (const sim::Knob& k : p.strategy->knobs)
    if (k.applies(p)) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", k.key, k.format(k.get(p)));
  return s.empty() ? "-" : s;
}

const RankedPlan* baseline_of(const SearchResult& r) { return r.baseline ? &*r.baseline : nullptr; }

}  // namespace

std::string row_name(const StrategyRow& row) {
  if (row.layout == sim::TpLayout::one_d) return std::string(row.strategy->name);
  // a grid's best plan with domino's row slices is a row of its own: whether slicing helps the grid
  return fmt::format("{} summa{}", sim::to_string(row.layout), row.strategy->baseline ? "" : fmt::format(" {}", row.strategy->name));
}

std::string strategy_table(const std::vector<StrategyRow>& rows, const SearchResult& r) {
  common::Table t({"strategy", "best plan", "step time", "exposed comm", "TP comm", "memory", "knobs", "speedup"},
                  {"", "", "ms", "ms", "GB/GPU", "GB/GPU", "", "x baseline"});
  const RankedPlan* base = baseline_of(r);
  std::string refused;
  for (const auto& row : rows) {
    if (!row.best) {
      t.row({std::string(row.strategy->name), "no feasible plan", "-", "-", "-", "-", "-", "-"});
      if (row.refused)
        refused += fmt::format("{}: no feasible plan, {} plans refused, most of them as: {}\n", row.strategy->name, row.refused->plans,
                               row.refused->message);
      continue;
    }
    const auto& rep = row.best->report;
    t.row({row_name(row), plan_label(row.best->plan), fmt::format("{:.2f}", rep.step_time.ms()),
           fmt::format("{:.2f}", rep.exposed_comm.ms()), fmt::format("{:.2f}", row.tp_bytes / 1e9),
           fmt::format("{:.1f}", rep.memory.total() / 1e9), knobs_of(row.best->plan),
           base ? fmt::format("{:.3f}", base->report.step_time.s() / rep.step_time.s()) : std::string("-")});
  }
  return t.str() + refused;
}

std::string strategy_verdict(const std::vector<StrategyRow>& rows, const SearchResult& r) {
  if (rows.empty() || !rows.front().best) return "no strategy has a feasible plan";
  const StrategyRow& w = rows.front();
  const auto& wr = w.best->report;
  // strategies whose best plan takes exactly as long are named as ties (domino 1x1 at tp 1 builds
  // Megatron-LM's tasks); the lead is explained against the next strategy that differs
  std::size_t k = 1;
  std::string tied;
  for (; k < rows.size() && rows[k].best && rows[k].best->report.step_time == wr.step_time; ++k)
    tied += fmt::format("{}{}", tied.empty() ? "" : ", ", row_name(rows[k]));
  std::string head = fmt::format("{} wins{}", row_name(w), tied.empty() ? "" : fmt::format(", tied with {} (the same step time)", tied));
  const RankedPlan* base = baseline_of(r);
  if (w.strategy->baseline && w.layout == sim::TpLayout::one_d) head += ": no overlap strategy beats Megatron-LM without overlap here";
  else if (base) head += fmt::format(" ({:.3f}x Megatron-LM without overlap)", base->report.step_time.s() / wr.step_time.s());
  if (k >= rows.size() || !rows[k].best) return head + (k > 1 ? "; no other strategy has a feasible plan" : ": no other strategy has a feasible plan");
  const StrategyRow& u = rows[k];
  const auto& ur = u.best->report;
  // The step is compute (a compute stream busy) + exposed communication + idle: the winner's lead
  // over the runner-up split into those parts, the largest gain named first
  struct Part {
    const char* name;
    double w, u;  // ms
  };
  std::array<Part, 3> parts{{{"exposed communication", wr.exposed_comm.ms(), ur.exposed_comm.ms()},
                             {"compute", wr.compute.ms(), ur.compute.ms()},
                             {"idle", wr.idle.ms(), ur.idle.ms()}}};
  std::stable_sort(parts.begin(), parts.end(), [](const Part& a, const Part& b) { return a.u - a.w > b.u - b.w; });
  std::string rest;
  for (std::size_t i = 1; i < parts.size(); ++i) rest += fmt::format(", {} {:+.2f} ms", parts[i].name, parts[i].w - parts[i].u);
  return fmt::format("{}; {:.2f} ms per step ahead of {}: the largest gain is {}, {:.2f} vs {:.2f} ms ({:+.2f} ms){}", head,
                     ur.step_time.ms() - wr.step_time.ms(), row_name(u), parts[0].name, parts[0].w, parts[0].u, parts[0].w - parts[0].u,
                     rest);
}

nlohmann::json strategies_json(const std::vector<StrategyRow>& rows, const SearchResult& r) {
  const RankedPlan* base = baseline_of(r);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& row : rows) {
    nlohmann::json j = {{"strategy", row.strategy->name}, {"tp_layout", sim::to_string(row.layout)}, {"name", row_name(row)}};
    if (!row.best) {
      j["best"] = nullptr;
      if (row.refused) j["refused"] = {{"plans", row.refused->plans}, {"message", row.refused->message}};
      out.push_back(std::move(j));
      continue;
    }
    const auto& rep = row.best->report;
    nlohmann::json knobs = nlohmann::json::object();
    for (const sim::Knob& k : row.best->plan.strategy->knobs)
      if (k.applies(row.best->plan)) knobs[std::string(k.key)] = k.choices.empty() ? nlohmann::json(k.get(row.best->plan)) : nlohmann::json(k.format(k.get(row.best->plan)));
    j["best"] = {{"plan", sim::plan_json(row.best->plan)},
                 {"describe", plan_label(row.best->plan)},
                 {"step_time_ms", rep.step_time.ms()},
                 {"compute_ms", rep.compute.ms()},
                 {"exposed_comm_ms", rep.exposed_comm.ms()},
                 {"idle_ms", rep.idle.ms()},
                 {"tp_comm_gb_per_gpu", row.tp_bytes / 1e9},
                 {"memory_gb", rep.memory.total() / 1e9},
                 {"knobs", knobs},
                 {"speedup", base ? nlohmann::json(base->report.step_time.s() / rep.step_time.s()) : nlohmann::json(nullptr)}};
    out.push_back(std::move(j));
  }
  return {{"rows", out}, {"verdict", strategy_verdict(rows, r)}};
}

}  // namespace tuner
