// defines: sim::Engine (discrete-event simulation of step graphs), StepReport, TaskTiming,
//          MemoryEstimate, estimate_memory
#pragma once
#include <span>
#include <string>
#include <vector>

#include "hardware/cost_model.hpp"
#include "sim/step_graph.hpp"

namespace sim {

using common::Duration;

struct TaskTiming {
  Duration start, end;
};

/// @brief Bytes one GPU needs (Megatron-style mixed precision without a distributed optimizer).
struct MemoryEstimate {
  double weights = 0;      ///< low-precision weights
  double gradients = 0;    ///< fp32 main gradients
  double optimizer = 0;    ///< fp32 master weights, Adam m and v
  double activations = 0;  ///< forward tensors that backward reads, for one micro-batch in flight
  double total() const { return weights + gradients + optimizer + activations; }
};
MemoryEstimate estimate_memory(const StepGraph& g);

/// @brief What a task costs when it runs alone (collectives: latency + transfer) on the given
/// host stack: a compute kernel takes its modelled time / host.kernel_efficiency[stack] +
/// host.op_overhead_us[stack] (collectives are priced as NCCL runs them, stack-independent).
Duration solo_time(const hardware::CostModel& cost, const TaskKind& kind, hardware::Stack stack);

/// @brief A compute kernel's time on a stack, from its modelled (isolated-kernel) time.
std::int64_t stack_compute_ps(const hardware::HostSpec& host, hardware::Stack stack, std::int64_t kernel_ps);

/// @brief The timeline of one simulated rank: timing[i] for task i of its graph during the last
/// micro-batch of the step (the one that also reduces gradients and steps the optimizer),
/// offset so that times are within the whole step.
struct RankTimeline {
  const StepGraph* graph = nullptr;
  std::vector<TaskTiming> timing;
};

/// @brief What one simulated training step costs.
struct StepReport {
  Duration step_time;          ///< whole step: (accum - 1) micro-batches + the last + optimizer
  Duration micro_batch_time;   ///< one micro-batch without the DP reduction and optimizer
  Duration compute;            ///< compute stream busy
  Duration tp_comm;            ///< TP communication stream busy
  Duration dp_comm;            ///< DP communication stream busy
  Duration exposed_comm;       ///< a collective runs while the compute stream is idle
  Duration idle;               ///< neither compute nor communication: launch-bound or waiting
  double model_flops = 0;      ///< whole step, all GPUs
  double mfu = 0;
  double tokens_per_s = 0;
  std::size_t tasks = 0;       ///< tasks in one rank's graph
  std::size_t events = 0;      ///< engine events processed (all runs)
  MemoryEstimate memory;
  std::vector<RankTimeline> timelines;  ///< filled when EngineOptions::timeline
};

struct EngineOptions {
  bool timeline = false;  ///< record per-task start/end (for traces and per-task validation)
};

/// @brief Discrete-event simulation of one training step. Streams are in-order queues; edges
/// across streams are events; the host issues tasks in graph order at the stack's launch cost;
/// concurrent collectives share link bandwidth max-min fairly; compute is slowed while a collective
/// runs beside it. Deterministic: events ordered by (time, sequence) with integer time, so the same
/// input gives the same output bit for bit. Thread-safe: const, shares nothing between calls.
class Engine {
 public:
  explicit Engine(const hardware::CostModel& cost, EngineOptions options = {}) : cost_(cost), options_(options) {}

  /// One graph standing for all ranks identical to it by symmetry.
  StepReport simulate(const StepGraph& graph) const;
  /// Several ranks with different graphs (e.g. pipeline stages), simulated together: collectives of
  /// the same group instance and sequence number start together on all of them. Report figures
  /// are those of ranks[0]'s timeline; the step ends when the slowest rank ends.
  StepReport simulate(std::span<const StepGraph* const> ranks) const;

  const hardware::CostModel& cost_model() const { return cost_; }

 private:
  const hardware::CostModel& cost_;
  EngineOptions options_;
};

}  // namespace sim
