// defines: executor::RunOptions, RunResult, Overlap, train (the interpreter: drives a Backend
//          through a StepGraph for real training steps and measures them), measured_timing
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "executor/backend.hpp"
#include "sim/engine.hpp"

namespace executor {

struct RunOptions {
  int steps = 20;   ///< training steps, warm-up included
  int warmup = 2;   ///< first steps left out of the step-time statistics
  TrainingOptions training;
  /// Called on rank 0 after each step (step index, step ms, loss): progress on stderr.
  std::function<void(int, double, double)> on_step;
  /// The interpreter's own exchanges (step barrier, reductions, gathers) that make no progress for
  /// this long throw FaultError naming the ranks waited on; 0 disables. The backend has its own.
  double watchdog_s = 20;
};

/// @brief How much of the TP communication stream's busy time ran beside compute.
struct Overlap {
  double comm_busy_ms = 0;    ///< union of tp_comm task intervals
  double overlapped_ms = 0;   ///< ... that intersects the union of compute task intervals
  double fraction() const { return comm_busy_ms > 0 ? overlapped_ms / comm_busy_ms : 0.0; }
};

/// @brief What `train` measured. Step times are the slowest rank's; timelines are those of the
/// median step (the last micro-batch, offset within the step, as the simulator reports them).
struct RunResult {
  std::vector<double> step_times_ms;  ///< every step, warm-up included
  std::vector<double> loss;           ///< mean cross-entropy of every step (global batch)
  int warmup = 0;
  double step_time_ms = 0;            ///< median after warm-up
  double step_time_min_ms = 0, step_time_max_ms = 0, step_time_stdev_ms = 0;
  double tokens_per_s = 0;            ///< global-batch tokens / median step time
  int median_step = 0;                ///< the step whose timelines are kept
  std::vector<std::vector<TaskClock>> timelines;  ///< [world rank][task], rank 0 only (others empty)
  std::vector<double> task_median_us;  ///< rank 0: per task, median duration over measured steps (-1: not run)
  Overlap overlap;                     ///< rank 0, median step
  /// Every weight gradient of the first step before the optimizer consumed it, as full
  /// (unsharded) weights keyed by tensor name: only when asked (RunOptions dump), rank 0.
  std::vector<std::pair<std::string, std::vector<float>>> first_step_grads;
};

/// @brief Runs `options.steps` training steps of `graph` (this rank's) on `backend`. Collective
/// over MPI_COMM_WORLD: every rank calls it with its own graph. `capture_grads`: fill
/// RunResult::first_step_grads (the optimizer of step 0 is then run after the capture).
RunResult train(const sim::StepGraph& graph, Backend& backend, const RunOptions& options, bool capture_grads = false);

/// @brief Overlap of tp_comm with compute in one timeline.
Overlap measure_overlap(const sim::StepGraph& graph, const std::vector<TaskClock>& timeline);

/// @brief A measured timeline as the simulator's TaskTiming (for sim::ChromeTrace); tasks not run
/// get start = end = 0.
std::vector<sim::TaskTiming> to_task_timing(const std::vector<TaskClock>& timeline);

}  // namespace executor
