// defines: executor::run_json (the --json of `slicetune run`), MeasuredRun, parse_run_json,
//          task_class, ClassRow, Validation, compare, validation_json, validation_table
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "executor/run.hpp"
#include "sim/target.hpp"

namespace executor {

/// @brief step_time_ms (median after warm-up), step_time_{min,max,stdev}_ms, step_times_ms, loss,
/// tokens_per_s, overlap, plan, and `tasks`: rank 0's measured timeline of the median step (one
/// row per graph task: name, class, stream, start_us, end_us, median_us over measured steps).
nlohmann::json run_json(const sim::Target& t, const sim::StepGraph& g, const RunResult& r, const std::string& backend, int ranks);

/// @brief What validate needs back from a run's JSON.
struct MeasuredRun {
  double step_time_ms = 0;
  int ranks = 1;
  std::vector<std::string> task_names;
  std::vector<double> task_median_us;  ///< -1: not run
  std::vector<TaskClock> timeline;     ///< rank 0, median step
};
/// @brief Reads `slicetune run --json` output; throws hardware::ConfigError naming `source` and
/// the missing or malformed key.
MeasuredRun parse_run_json(const std::string& text, const std::string& source);

/// @brief "GEMM", "attention", "element-wise", "optimizer", or the collective with its group:
/// "AllReduce (tp)", "AllGather (tp)", "ReduceScatter (tp)", "AllReduce (dp)".
std::string task_class(const sim::Task& t);

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
/// @brief Predicted (simulator timeline) vs measured (per-task medians) per task class.
Validation compare(const sim::StepGraph& g, const std::vector<sim::TaskTiming>& predicted, double predicted_step_ms,
                   const std::vector<double>& measured_task_us, double measured_step_ms);
nlohmann::json validation_json(const sim::Target& t, const Validation& v, const std::string& cost_model, const std::string& measured_from);
std::string validation_table(const Validation& v);

}  // namespace executor
