#include "validate/compare.hpp"

#include "sim/pipeline_step.hpp"

#include <fmt/format.h>

#include <map>

#include "common/config_reader.hpp"
#include "common/table.hpp"
#include "sim/report_json.hpp"

namespace validate {

MeasuredRun parse_run_json(const std::string& text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw common::ConfigError(source, "", fmt::format("not a `slicetune run --json` output: {}", e.what()));
  }
  auto need = [&](const char* key) -> const nlohmann::json& {
    if (!j.is_object() || !j.contains(key)) throw common::ConfigError(source, key, "missing (expected `slicetune run --json` output)");
    return j.at(key);
  };
  MeasuredRun m;
  try {
    m.step_time_ms = need("step_time_ms").get<double>();
    m.ranks = need("ranks").get<int>();
    for (const auto& row : need("tasks")) {
      m.task_names.push_back(row.at("name").get<std::string>());
      m.task_median_us.push_back(row.at("median_us").get<double>());
      sim::TaskTiming c;
      if (row.contains("start_us")) {
        // the executor's clock is in integer ns; start_us / end_us are those ns / 1e3
        c.start = common::Duration::from_ns(static_cast<double>(static_cast<std::int64_t>(row.at("start_us").get<double>() * 1e3)));
        c.end = common::Duration::from_ns(static_cast<double>(static_cast<std::int64_t>(row.at("end_us").get<double>() * 1e3)));
      }
      m.timeline.push_back(c);
    }
  } catch (const nlohmann::json::exception& e) {
    throw common::ConfigError(source, "tasks", fmt::format("malformed: {}", e.what()));
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
    const std::string cls = g.task_class(i);
    auto [it, fresh] = index.emplace(cls, v.rows.size());
    if (fresh) v.rows.push_back({.name = cls});
    auto& row = v.rows[it->second];
    ++row.tasks;
    row.measured_ms += measured_task_us[i] / 1e3;
    if (i < predicted.size()) row.predicted_ms += (predicted[i].end - predicted[i].start).ms();
  }
  return v;
}

ValidationResult validate_run(const sim::Target& t, const MeasuredRun& m, const hardware::CostModel& cost,
                              const std::string& measured_source) {
  ValidationResult r;
  r.graphs = sim::build_stage_graphs(t.model, t.cluster, t.plan);
  r.graph = &r.graphs[0];
  const sim::StepGraph& g = *r.graph;
  if (m.task_names.size() != g.size())
    throw common::ConfigError(measured_source, "tasks",
                              fmt::format("{} tasks measured but the plan's graph has {}: a different plan?", m.task_names.size(), g.size()));
  for (std::size_t i = 0; i < g.size(); ++i)
    if (m.task_names[i] != g.task_name(i))
      throw common::ConfigError(measured_source, "tasks",
                                fmt::format("task {} is '{}' but the plan's graph has '{}': a different plan?", i, m.task_names[i], g.task_name(i)));
  sim::Engine engine(cost, {.timeline = true});
  r.predicted = sim::simulate_stages(engine, r.graphs);
  r.validation = compare(g, r.predicted.timelines.at(0).timing, r.predicted.step_time.ms(), m.task_median_us, m.step_time_ms);
  return r;
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
  common::Table t({"", "tasks", "predicted", "measured", "error"}, {"", "", "ms", "ms", "%"});
  t.row({"step", "", fmt::format("{:.3f}", v.predicted_step_ms), fmt::format("{:.3f}", v.measured_step_ms),
         fmt::format("{:+.1f}", 100 * v.step_error())});
  for (const auto& r : v.rows)
    t.row({r.name, std::to_string(r.tasks), fmt::format("{:.3f}", r.predicted_ms), fmt::format("{:.3f}", r.measured_ms),
           fmt::format("{:+.1f}", 100 * r.error())});
  return t.str();
}

}  // namespace validate
