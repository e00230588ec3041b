#include "executor/report.hpp"

#include <fmt/format.h>

#include <map>

#include "hardware/config_error.hpp"
#include "sim/report_json.hpp"
#include "sim/table.hpp"

namespace executor {

std::string task_class(const sim::Task& t) {
  if (auto* c = std::get_if<hardware::CollectiveOp>(&t.kind)) {
    const char* name = c->kind == hardware::CollectiveKind::all_reduce       ? "AllReduce"
                       : c->kind == hardware::CollectiveKind::all_gather     ? "AllGather"
                       : c->kind == hardware::CollectiveKind::reduce_scatter ? "ReduceScatter"
                                                                             : "collective";
    return fmt::format("{} ({})", name, t.group == sim::CommGroup::dp ? "dp" : "tp");
  }
  if (std::holds_alternative<hardware::GemmOp>(t.kind)) return "GEMM";
  if (std::holds_alternative<hardware::AttentionOp>(t.kind)) return "attention";
  if (std::holds_alternative<hardware::OptimizerOp>(t.kind)) return "optimizer";
  return "element-wise";
}

nlohmann::json run_json(const sim::Target& t, const sim::StepGraph& g, const RunResult& r, const std::string& backend, int ranks) {
  nlohmann::json tasks = nlohmann::json::array();
  const auto& tl = r.timelines.empty() ? std::vector<TaskClock>(g.size()) : r.timelines[0];
  for (std::size_t i = 0; i < g.size(); ++i) {
    nlohmann::json row = {{"name", g.task_name(i)},
                          {"class", task_class(g.tasks[i])},
                          {"stream", sim::to_string(g.tasks[i].stream)},
                          {"median_us", i < r.task_median_us.size() ? r.task_median_us[i] : -1.0}};
    if (tl[i].start_ns >= 0) {
      row["start_us"] = tl[i].start_ns / 1e3;
      row["end_us"] = tl[i].end_ns / 1e3;
    }
    tasks.push_back(std::move(row));
  }
  return {{"backend", backend},
          {"model", t.model.name},
          {"cluster", t.cluster.name},
          {"ranks", ranks},
          {"plan", sim::plan_json(t.plan)},
          {"steps", r.step_times_ms.size()},
          {"warmup", r.warmup},
          {"step_time_ms", r.step_time_ms},
          {"step_time_min_ms", r.step_time_min_ms},
          {"step_time_max_ms", r.step_time_max_ms},
          {"step_time_stdev_ms", r.step_time_stdev_ms},
          {"step_times_ms", r.step_times_ms},
          {"loss", r.loss},
          {"tokens_per_s", r.tokens_per_s},
          {"overlap", {{"tp_comm_busy_ms", r.overlap.comm_busy_ms},
                       {"tp_comm_overlapped_ms", r.overlap.overlapped_ms},
                       {"tp_comm_overlap_fraction", r.overlap.fraction()}}},
          {"median_step", r.median_step},
          {"tasks", std::move(tasks)}};
}

MeasuredRun parse_run_json(const std::string& text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw hardware::ConfigError(source, "", fmt::format("not a `slicetune run --json` output: {}", e.what()));
  }
  auto need = [&](const char* key) -> const nlohmann::json& {
    if (!j.is_object() || !j.contains(key)) throw hardware::ConfigError(source, key, "missing (expected `slicetune run --json` output)");
    return j.at(key);
  };
  MeasuredRun m;
  try {
    m.step_time_ms = need("step_time_ms").get<double>();
    m.ranks = need("ranks").get<int>();
    for (const auto& row : need("tasks")) {
      m.task_names.push_back(row.at("name").get<std::string>());
      m.task_median_us.push_back(row.at("median_us").get<double>());
      TaskClock c;
      if (row.contains("start_us")) {
        c.start_ns = static_cast<std::int64_t>(row.at("start_us").get<double>() * 1e3);
        c.end_ns = static_cast<std::int64_t>(row.at("end_us").get<double>() * 1e3);
      }
      m.timeline.push_back(c);
    }
  } catch (const nlohmann::json::exception& e) {
    throw hardware::ConfigError(source, "tasks", fmt::format("malformed: {}", e.what()));
  }
  return m;
}

Validation compare(const sim::StepGraph& g, const std::vector<sim::TaskTiming>& predicted, double predicted_step_ms,
                   const std::vector<double>& measured_task_us, double measured_step_ms) {
  Validation v{.predicted_step_ms = predicted_step_ms, .measured_step_ms = measured_step_ms, .rows = {}};
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const bool measured = i < measured_task_us.size() && measured_task_us[i] >= 0;
    if (!measured) continue;
    const std::string cls = task_class(g.tasks[i]);
    auto [it, fresh] = index.emplace(cls, v.rows.size());
    if (fresh) v.rows.push_back({.name = cls});
    auto& row = v.rows[it->second];
    ++row.tasks;
    row.measured_ms += measured_task_us[i] / 1e3;
    if (i < predicted.size()) row.predicted_ms += (predicted[i].end - predicted[i].start).ms();
  }
  return v;
}

nlohmann::json validation_json(const sim::Target& t, const Validation& v, const std::string& cost_model, const std::string& measured_from) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : v.rows)
    rows.push_back({{"class", r.name}, {"tasks", r.tasks}, {"predicted_ms", r.predicted_ms}, {"measured_ms", r.measured_ms},
                    {"error", r.error()}});
  return {{"model", t.model.name},
          {"cluster", t.cluster.name},
          {"cost_model", cost_model},
          {"measured", measured_from},
          {"plan", sim::plan_json(t.plan)},
          {"predicted_step_ms", v.predicted_step_ms},
          {"measured_step_ms", v.measured_step_ms},
          {"step_error", v.step_error()},
          {"classes", std::move(rows)}};
}

std::string validation_table(const Validation& v) {
  sim::Table t({"", "tasks", "predicted", "measured", "error"}, {"", "", "ms", "ms", "%"});
  t.row({"step", "", fmt::format("{:.3f}", v.predicted_step_ms), fmt::format("{:.3f}", v.measured_step_ms),
         fmt::format("{:+.1f}", 100 * v.step_error())});
  for (const auto& r : v.rows)
    t.row({r.name, std::to_string(r.tasks), fmt::format("{:.3f}", r.predicted_ms), fmt::format("{:.3f}", r.measured_ms),
           fmt::format("{:+.1f}", 100 * r.error())});
  return t.str();
}

}  // namespace executor
