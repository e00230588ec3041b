// defines: validate::Kernel, MeasuredTrace, parse_kineto_trace, read_nsys_sqlite, kernel_class,
//          TraceComparison, compare_trace, trace_comparison_table, trace_comparison_json
//          (a real GPU run's kernels - PyTorch profiler or Nsight Systems - against the prediction)
#pragma once
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "hardware/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/target.hpp"

namespace validate {

/// @brief One GPU kernel of a measured run (times in microseconds on the trace's clock).
struct Kernel {
  std::string name;
  double start_us = 0, end_us = 0;
  int device = 0;
  long long stream = 0;
};

/// @brief The kernels of one device and the step ranges the run annotated.
struct MeasuredTrace {
  std::string source, format;  ///< format: "kineto" or "nsys-sqlite"
  std::vector<Kernel> kernels;  ///< sorted by start
  std::vector<std::pair<double, double>> steps;  ///< ProfilerStep#N ranges (GPU side when the trace has them)
};

/// @brief A PyTorch profiler Chrome trace (Kineto JSON: traceEvents with cat "kernel", args.device /
/// args.stream, and "ProfilerStep#N" gpu_user_annotation / user_annotation ranges). Kernels of
/// `device` only. Throws common::ConfigError naming `source` on anything malformed.
MeasuredTrace parse_kineto_trace(const std::string& json_text, const std::string& source, int device = 0);
/// @brief An Nsight Systems export (`nsys export --type sqlite`): CUPTI_ACTIVITY_KIND_KERNEL joined
/// with StringIds (demangledName), NVTX_EVENTS ranges named "ProfilerStep#N" as steps. Kernels of `device`.
MeasuredTrace read_nsys_sqlite(const std::string& path, int device = 0);
/// @brief The same from `nsys export --type json` is not read yet; this says so for a .json that is not Kineto.

/// @brief A kernel's class by its name, in task_class's terms: "GEMM", "attention", "element-wise",
/// "optimizer", or the NCCL collective ("AllReduce", "AllGather", "ReduceScatter", "SendRecv").
std::string kernel_class(const std::string& name);
/// @brief The NCCL algorithm in a kernel name ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL" -> "ring"), if any.
std::optional<std::string> nccl_algo(const std::string& name);

struct ClassComparison {
  std::string name;
  int tasks = 0, kernels = 0;                 ///< per step: predicted tasks, measured kernels
  double predicted_ms = 0, measured_ms = 0;   ///< per step (mean over the measured steps)
  bool matched_one_to_one = false;            ///< as many kernels as tasks per step: mapped in order
  double error() const { return measured_ms > 0 ? (predicted_ms - measured_ms) / measured_ms : 0.0; }
};
struct CollectiveExposure {
  std::string name;  ///< "AllReduce", ...
  double predicted_ms = 0, predicted_exposed_ms = 0, measured_ms = 0, measured_exposed_ms = 0;  ///< per step
  std::string predicted_algo, measured_algo;
};
struct TraceComparison {
  double predicted_step_ms = 0;
  std::vector<double> measured_step_ms;
  std::vector<ClassComparison> classes;
  std::vector<CollectiveExposure> collectives;
  std::vector<std::string> fallbacks;  ///< what the run did differently from the plan, silently
  double measured_mean_step_ms() const;
};

/// @brief Predicts `t` with `cost` and compares it with the measured kernels per class and per step,
/// exposed communication per collective, and names silent fallbacks (overlap planned but the
/// collectives serialized; another NCCL algorithm than predicted).
TraceComparison compare_trace(const sim::Target& t, const MeasuredTrace& m, const hardware::CostModel& cost);
std::string trace_comparison_table(const TraceComparison& c);
nlohmann::json trace_comparison_json(const TraceComparison& c);

}  // namespace validate
