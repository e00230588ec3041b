#include "tuner/report.hpp"

#include <fmt/format.h>

#include <optional>

#include "sim/prediction_range.hpp"
#include "sim/report_json.hpp"
#include "common/table.hpp"

namespace tuner {

std::string plan_label(const sim::Plan& p) {
  std::string s = sim::describe(p);
  if (p.dp * p.tp_d > 1) s += fmt::format(" b{:g}", p.dp_bucket_mb);  // a 2.5D grid reduces gradients over its depth too
  return s;
}

namespace {

std::string ms(Duration d) { return fmt::format("{:.2f}", d.ms()); }

sim::PredictionRange range_of(const RankedPlan& p, const hardware::ClusterSpec& c) { return sim::prediction_range(p.plan, c, p.report.step_time); }

nlohmann::json ranked_json(const RankedPlan& p, const RankedPlan* base) {
  const auto& r = p.report;
  nlohmann::json j = {{"plan", sim::plan_json(p.plan)},
                      {"describe", plan_label(p.plan)},
                      {"step_time_ms", r.step_time.ms()},
                      {"estimated_step_time_ms", p.estimate.step_time.ms()},
                      {"lower_bound_ms", p.estimate.lower_bound.ms()},
                      {"tokens_per_s", r.tokens_per_s},
                      {"mfu", r.mfu},
                      {"compute_ms", r.compute.ms()},
                      {"exposed_comm_ms", r.exposed_comm.ms()},
                      {"idle_ms", r.idle.ms()},
                      {"memory_gb", r.memory.total() / 1e9},
                      {"activations_gb", r.memory.activations / 1e9},
                      {"memory", sim::memory_json(r.memory)}};
  sim::add_stream_times(j, r);
  if (base) j["speedup"] = base->report.step_time.s() / r.step_time.s();
  return j;
}

}  // namespace

std::string ranking_table(const SearchResult& r, const hardware::ClusterSpec& c, bool ranges) {
  std::vector<std::string> header{"rank", "plan", "step time"}, units{"", "", "ms"};
  if (ranges) {
    header.push_back("range");
    units.push_back("ms");
  }
  for (const char* h : {"tokens/s", "MFU", "exposed comm", "memory", "speedup"}) header.emplace_back(h);
  for (const char* u : {"", "%", "ms", "GB", "x baseline"}) units.emplace_back(u);
  common::Table t(header, units);
  const RankedPlan* base = r.baseline ? &*r.baseline : nullptr;
  auto row = [&](const std::string& rank, const RankedPlan& p) {
    const auto& s = p.report;
    std::vector<std::string> cells{rank, plan_label(p.plan), ms(s.step_time)};
    if (ranges) {
      const auto g = range_of(p, c);
      cells.push_back(fmt::format("{:.0f} .. {:.0f}", g.low.ms(), g.high.ms()));
    }
    for (auto& x : {fmt::format("{:.0f}", s.tokens_per_s), fmt::format("{:.1f}", 100 * s.mfu), ms(s.exposed_comm),
                    fmt::format("{:.1f}", s.memory.total() / 1e9), base ? fmt::format("{:.3f}", base->report.step_time.s() / s.step_time.s()) : std::string("-")})
      cells.push_back(x);
    t.row(cells);
  };
  for (std::size_t i = 0; i < r.top.size(); ++i) row(fmt::format("{}", i + 1), r.top[i]);
  if (base) row("baseline", *base);
  return t.str();
}

std::vector<const RankedPlan*> indistinguishable_from_best(const SearchResult& r, const hardware::ClusterSpec& c) {
  std::vector<const RankedPlan*> out;
  if (r.top.empty()) return out;
  const auto best = range_of(r.top.front(), c);
  for (std::size_t i = 1; i < r.top.size(); ++i)
    if (sim::overlaps(best, range_of(r.top[i], c))) out.push_back(&r.top[i]);
  if (r.baseline && r.baseline->index != r.top.front().index && sim::overlaps(best, range_of(*r.baseline, c))) out.push_back(&*r.baseline);
  return out;
}

std::string refusal_table(const SearchResult& r) {
  common::Table t({"refused", "plans", "example", "why"}, {"", "", "", ""});
  for (const auto& f : r.refusals) t.row({std::string(sim::to_string(f.reason)), fmt::format("{}", f.count), plan_label(f.example), f.message});
  return t.str();
}

std::string explain_table(const std::vector<std::pair<std::string, LayerBreakdown>>& plans) {
  std::vector<std::string> header{"per step"}, units{""};
  for (const auto& [name, b] : plans) {
    header.push_back(name);
    units.push_back("ms");
  }
  common::Table t(header, units);
  // per-micro-batch figures times the micro-batches of a step, so plans with different
  // micro-batch sizes compare per step
  auto add = [&](const std::string& label, auto get, bool scale = true) {
    std::vector<std::string> row{label};
    for (const auto& [name, b] : plans) row.push_back(fmt::format("{:.1f}", get(b).ms() * (scale ? b.per_step : 1)));
    t.row(row);
  };
  bool pipelined = false;
  for (const auto& [name, b] : plans) pipelined |= b.plan.pp > 1;
  add("per layer: compute (mean of layers)", [](const LayerBreakdown& b) { return b.mean_layer().compute; });
  add("per layer: exposed communication", [](const LayerBreakdown& b) { return b.mean_layer().exposed_comm; });
  add("per layer: sliced-GEMM efficiency lost", [](const LayerBreakdown& b) { return b.mean_layer().gemm_lost; });
  add("per layer: compute slowed by overlapping comm", [](const LayerBreakdown& b) { return b.mean_layer().interference; });
  add("first layer: exposed communication", [](const LayerBreakdown& b) { return b.layers.size() > 1 ? b.layers[1].exposed_comm : Duration{}; });
  add("last layer: exposed communication", [](const LayerBreakdown& b) { return b.layers.back().exposed_comm; });
  add("outside layers: compute", [](const LayerBreakdown& b) { return b.layers[0].compute; });
  add("outside layers: exposed communication", [](const LayerBreakdown& b) { return b.layers[0].exposed_comm; });
  add("once per step: optimizer compute", [](const LayerBreakdown& b) { return b.once.compute; }, false);
  add("once per step: exposed DP communication", [](const LayerBreakdown& b) { return b.once.exposed_comm; }, false);
  if (pipelined) {
    add("pipeline: bubble (stage idle, mean of stages)", [](const LayerBreakdown& b) { return b.bubble; }, false);
    add("pipeline: exposed transfers (mean of stages)", [](const LayerBreakdown& b) { return b.pipe_exposed; }, false);
  }
  add("whole step", [](const LayerBreakdown& b) { return b.step_time; }, false);
  return t.str();
}

nlohmann::json search_json(const SearchResult& r, const hardware::ClusterSpec& c, bool ranges) {
  const RankedPlan* base = r.baseline ? &*r.baseline : nullptr;
  nlohmann::json j;
  j["cluster"] = c.name;
  j["nodes"] = c.nodes;
  j["gpus"] = c.total_gpus();
  j["top"] = nlohmann::json::array();
  std::optional<sim::PredictionRange> best;
  if (ranges && !r.top.empty()) best = range_of(r.top.front(), c);
  auto with_range = [&](nlohmann::json x, const RankedPlan& p) {
    if (!best) return x;
    const auto g = range_of(p, c);
    x["step_time_range_ms"] = {g.low.ms(), g.high.ms()};
    x["within_best_range"] = sim::overlaps(*best, g);
    return x;
  };
  for (const auto& p : r.top) j["top"].push_back(with_range(ranked_json(p, base), p));
  j["baseline"] = base ? with_range(ranked_json(*base, base), *base) : nlohmann::json(nullptr);
  j["speedup"] = base && !r.top.empty() ? base->report.step_time.s() / r.top[0].report.step_time.s() : 0.0;
  nlohmann::json refused = nlohmann::json::array();
  for (const auto& f : r.refusals)
    refused.push_back({{"reason", sim::to_string(f.reason)}, {"plans", f.count}, {"example", plan_label(f.example)}, {"message", f.message}});
  j["search"] = {{"considered", r.considered},
                 {"infeasible", r.infeasible},
                 {"dominated", r.dominated},
                 {"pruned", r.pruned},
                 {"screened", r.screened},
                 {"simulated_full", r.simulated_full},
                 {"seconds", r.seconds},
                 {"threads", r.threads},
                 {"processes", r.processes},
                 {"plans_per_s", r.plans_per_second()},
                 {"screened_per_s", r.screened_per_second()},
                 {"max_screen_error", r.max_screen_error},
                 {"refused", refused}};
  return j;
}

nlohmann::json explain_json(const std::vector<std::pair<std::string, LayerBreakdown>>& plans) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [name, b] : plans) {
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& l : b.layers)
      layers.push_back({{"layer", l.layer}, {"compute_ms", l.compute.ms()}, {"exposed_comm_ms", l.exposed_comm.ms()}, {"gemm_lost_ms", l.gemm_lost.ms()}, {"interference_ms", l.interference.ms()}});
    nlohmann::json row = {{"name", name}, {"plan", plan_label(b.plan)}, {"step_time_ms", b.step_time.ms()}, {"micro_batches", b.plan.grad_accum_steps()},
                          {"once_per_step", {{"compute_ms", b.once.compute.ms()}, {"exposed_comm_ms", b.once.exposed_comm.ms()}}},
                          {"layers_per_micro_batch", layers}};
    if (b.plan.pp > 1) {
      row.erase("layers_per_micro_batch");
      row["layers_simulated"] = layers;  // every micro-batch simulated; x per_step gives the step
      row["per_step"] = b.per_step;
      row["pipeline"] = {{"bubble_ms", b.bubble.ms()}, {"exposed_transfers_ms", b.pipe_exposed.ms()}};
    }
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace tuner
