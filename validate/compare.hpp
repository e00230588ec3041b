// defines: validate::MeasuredRun, parse_run_json, ClassRow, Validation, compare, validate_run,
//          validation_json, validation_table (a measured run against the simulator's prediction)
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "hardware/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/target.hpp"

namespace validate {

/// @brief What validate needs back from a run's JSON (`slicetune run --json` / `--out`).
struct MeasuredRun {
  double step_time_ms = 0;
  int ranks = 1;
  std::vector<std::string> task_names;
  std::vector<double> task_median_us;      ///< -1: not run
  std::vector<sim::TaskTiming> timeline;   ///< rank 0, median step; tasks not run: start = end = 0
};
/// @brief Reads `slicetune run --json` output; throws common::ConfigError naming `source` and
/// the missing or malformed key.
MeasuredRun parse_run_json(const std::string& text, const std::string& source);

struct ClassRow {
  std::string name;
  int tasks = 0;
  double predicted_ms = 0, measured_ms = 0;  ///< summed task durations in one step's last micro-batch
  double error() const { return measured_ms > 0 ? (predicted_ms - measured_ms) / measured_ms : 0.0; }
};
struct Validation {
  double predicted_step_ms = 0, measured_step_ms = 0;
  std::vector<ClassRow> rows;  ///< in first-appearance order of the classes in the graph
  double step_error() const { return measured_step_ms > 0 ? (predicted_step_ms - measured_step_ms) / measured_step_ms : 0.0; }
};
/// @brief Predicted (simulator timeline) vs measured (per-task medians) per task class (sim::StepGraph::task_class).
Validation compare(const sim::StepGraph& g, const std::vector<sim::TaskTiming>& predicted, double predicted_step_ms,
                   const std::vector<double>& measured_task_us, double measured_step_ms);

/// @brief A prediction of the measured run's plan, compared with the run.
struct ValidationResult {
  std::vector<sim::StepGraph> graphs;  ///< one per pipeline stage (one without pipelining): the predicted timelines point to them
  const sim::StepGraph* graph = nullptr;  ///< rank 0's: graphs[0]
  sim::StepReport predicted;  ///< with the timeline of rank 0's graph
  Validation validation;
};
/// @brief Builds rank 0's graph of `t` (with every other stage's when pipelined), checks that the run
/// measured the same tasks (one-line common::ConfigError naming `measured_source` otherwise),
/// simulates them with `cost` and compares rank 0's tasks.
ValidationResult validate_run(const sim::Target& t, const MeasuredRun& m, const hardware::CostModel& cost,
                              const std::string& measured_source);

nlohmann::json validation_json(const sim::Target& t, const Validation& v, const std::string& cost_model, const std::string& measured_from);
std::string validation_table(const Validation& v);

}  // namespace validate
