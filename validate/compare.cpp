#include "validate/compare.hpp"

#include "sim/pipeline_step.hpp"

#include <fmt/format.h>

#include <climits>
#include <cmath>
#include <map>

#include "common/config_reader.hpp"
#include "common/limits.hpp"
#include "common/strict_json.hpp"
#include "common/table.hpp"
#include "sim/report_json.hpp"

namespace validate {

MeasuredRun parse_run_json(const std::string& text, const std::string& source) {
  const nlohmann::json j = common::parse_json_strict(text, source, "a `slicetune run --json` output");
  if (!j.is_object()) throw common::ConfigError(source, "", "expected a JSON object (`slicetune run --json` output)");
  auto need = [&](const nlohmann::json& obj, const std::string& key, const std::string& path) -> const nlohmann::json& {
    if (!obj.contains(key)) throw common::ConfigError(source, path, "missing (expected `slicetune run --json` output)");
    return obj.at(key);
  };
  // a finite number in [lo, hi], naming the key
  auto number = [&](const nlohmann::json& v, const std::string& path, double lo, double hi) {
    if (!v.is_number()) throw common::ConfigError(source, path, fmt::format("expected a number, got {}", v.type_name()));
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) throw common::ConfigError(source, path, fmt::format("expected a number in [{}, {}], got {}", lo, hi, x));
    return x;
  };
  MeasuredRun m;
  m.step_time_ms = number(need(j, "step_time_ms", "step_time_ms"), "step_time_ms", 0, 1e12);
  if (!(m.step_time_ms > 0)) throw common::ConfigError(source, "step_time_ms", "expected a positive step time, got 0");
  const auto& ranks = need(j, "ranks", "ranks");
  if (!ranks.is_number_integer()) throw common::ConfigError(source, "ranks", fmt::format("expected an integer, got {}", ranks.type_name()));
  // read 64 bits wide, range-checked before narrowing
  const std::int64_t nranks = ranks.is_number_unsigned() && ranks.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)
                                  ? INT64_MAX
                                  : ranks.get<std::int64_t>();
  if (nranks < 1 || nranks > common::limits::kMaxGpus)
    throw common::ConfigError(source, "ranks", fmt::format("expected an integer in [1, {}], got {}", common::limits::kMaxGpus, ranks.dump()));
  m.ranks = static_cast<int>(nranks);
  const auto& tasks = need(j, "tasks", "tasks");
  if (!tasks.is_array()) throw common::ConfigError(source, "tasks", fmt::format("expected a list of tasks, got {}", tasks.type_name()));
  if (tasks.size() > static_cast<std::size_t>(common::limits::kMaxTasks))
    throw common::ConfigError(source, "tasks", fmt::format("{} tasks, more than the {} of any plan", tasks.size(), common::limits::kMaxTasks));
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const auto& row = tasks[i];
    const std::string at = fmt::format("tasks[{}]", i);
    if (!row.is_object()) throw common::ConfigError(source, at, fmt::format("expected an object, got {}", row.type_name()));
    const auto& name = need(row, "name", at + ".name");
    if (!name.is_string()) throw common::ConfigError(source, at + ".name", fmt::format("expected a string, got {}", name.type_name()));
    m.task_names.push_back(name.get<std::string>());
    // -1: the task did not run in the measured steps; else microseconds
    const double median = number(need(row, "median_us", at + ".median_us"), at + ".median_us", -1, 1e15);
    if (median < 0 && median != -1) throw common::ConfigError(source, at + ".median_us", fmt::format("expected microseconds >= 0 or -1, got {}", median));
    m.task_median_us.push_back(median);
    sim::TaskTiming c;
    if (row.contains("start_us")) {
      // the executor's clock is in integer ns; start_us / end_us are those ns / 1e3 (bounded: the
      // conversion to integer picoseconds is exact and in range)
      const double start = number(row.at("start_us"), at + ".start_us", 0, 1e12);
      const double end = number(need(row, "end_us", at + ".end_us"), at + ".end_us", start, 1e12);
      c.start = common::Duration::from_ns(static_cast<double>(static_cast<std::int64_t>(start * 1e3)));
      c.end = common::Duration::from_ns(static_cast<double>(static_cast<std::int64_t>(end * 1e3)));
    }
    m.timeline.push_back(c);
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
