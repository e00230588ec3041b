// defines: sim::Engine (discrete-event simulation of step graphs), StepReport, StreamTime,
//          RankTimeline, TaskTiming, EngineOptions
#pragma once
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hardware/cost_model.hpp"
#include "sim/cost_table.hpp"
#include "sim/engine_model.hpp"
#include "sim/memory.hpp"
#include "sim/step_graph.hpp"

namespace sim {

using common::Duration;

struct TaskTiming {
  Duration start, end;
};

/// @brief The timeline of one simulated rank: timing[i] for task i of its graph during the last
/// micro-batch of the step (the one that also reduces gradients and steps the optimizer),
/// offset so that times are within the whole step.
struct RankTimeline {
  const StepGraph* graph = nullptr;
  std::vector<TaskTiming> timing;
};

/// @brief How long one stream of the reported rank was busy during the step.
struct StreamTime {
  std::string name;  ///< StreamSpec::name ("tp_comm")
  StreamKind kind = StreamKind::compute;
  Duration busy;
};

/// @brief How one simulated graph (a pipeline stage, a grid position) spent the step.
struct RankBusy {
  int rank = 0;                     ///< StepGraph::rank of the graph
  Duration compute;                 ///< a compute stream busy
  Duration exposed_comm;            ///< a communication stream busy while no compute stream is
  Duration idle;                    ///< nothing busy: waiting for other ranks (the pipeline bubble), launch-bound
  std::vector<StreamTime> streams;  ///< each stream's busy time
  MemoryEstimate memory;            ///< estimate_memory of its graph
  /// Fraction of the step its compute streams were not busy: (step - compute) / step.
  double compute_idle_fraction(Duration step) const { return step.ps > 0 ? 1.0 - compute.s() / step.s() : 0.0; }
};

/// @brief What one simulated training step costs. Busy times are those of the first graph given.
struct StepReport {
  Duration step_time;               ///< whole step: (accum - 1) micro-batches + the last + optimizer
  Duration micro_batch_time;        ///< one micro-batch without the DP reduction and optimizer
  Duration compute;                 ///< a compute stream busy
  std::vector<StreamTime> streams;  ///< each stream's busy time, in the graph's stream order
  Duration exposed_comm;            ///< a communication stream runs while no compute stream does
  Duration idle;                    ///< no stream busy: launch-bound or waiting
  double model_flops = 0;           ///< whole step, all GPUs
  double mfu = 0;
  double tokens_per_s = 0;
  std::size_t tasks = 0;   ///< tasks in the first rank's graph
  std::size_t events = 0;  ///< engine events processed (all runs)
  /// Of `events`, those the last micro-batch's run took over from the run before it instead of
  /// simulating them again (EngineOptions::share_runs).
  std::size_t shared_events = 0;
  /// Of `events`, those a run repeated from the layer before instead of simulating them one by
  /// one (EngineOptions::fast_forward).
  std::size_t repeated_events = 0;
  MemoryEstimate memory;             ///< the first graph's; with several graphs, the one that needs most (the worst stage)
  std::vector<RankBusy> ranks;       ///< every graph given, in order (ranks[0] repeats the figures above)
  std::vector<RankTimeline> timelines;  ///< filled when EngineOptions::timeline

  /// Busy time of the stream named `name` ("tp_comm"); zero if the graph has no such stream.
  Duration busy(std::string_view name) const;
  /// Summed busy time of the first graph's streams whose names start with `prefix` ("pp_").
  Duration busy_prefix(std::string_view prefix) const;
};

struct EngineOptions {
  bool timeline = false;  ///< record per-task start/end (for traces and per-task validation)
  /// The micro-batch runs of one step (first, middle, last) simulate what they share once: the
  /// last goes on from the run before it where their tasks part. The same report either way, to
  /// the picosecond (tests/sim check it); false simulates each run from the start.
  bool share_runs = true;
  /// Steady layers: once a run reaches a layer in the state it reached the layer before in (the
  /// same running set and work left, every stream one layer on or still waiting, the same waits)
  /// and the graph repeats over the layers ahead, their events are repeated, Δ later each, rather
  /// than simulated. The same report either way, to the picosecond (tests/sim check it); one
  /// simulated rank without host syncs only (not pipelines or grids); false simulates every event.
  bool fast_forward = true;
  /// Each graph's memory (estimate_memory of the graph: StepReport::memory, RankBusy::memory); false
  /// leaves them empty, for a caller that takes memory from the closed form (the tuner's
  /// reduced-layer estimates: a tenth of a short graph's simulation).
  bool memory = true;
  /// The resource models, in the order the engine applies them (sim/engine_model.hpp).
  std::vector<ModelFactory> models = default_models();
};

/// @brief Discrete-event simulation of one training step. Streams are in-order queues; edges
/// across streams are events; the host issues tasks in graph order at the stack's launch cost;
/// the resource models set the rates of what runs concurrently (by default: collectives share
/// link bandwidth max-min fairly; compute and communication slow each other). Deterministic:
/// events ordered by (time, sequence) with integer time, so the same input gives the same output
/// bit for bit. Thread-safe: const, shares nothing between calls.
class Engine {
 public:
  explicit Engine(const hardware::CostModel& cost, EngineOptions options = {}) : cost_(cost), options_(std::move(options)) {}

  /// One graph standing for all ranks identical to it by symmetry. A graph of one micro-batch
  /// (StepGraph::micro_batches 1) is run twice: once without the once-per-step tasks, standing for
  /// the first grad_accum_steps - 1 micro-batches, and once with them; a pipeline stage's graph,
  /// which holds the whole step, once.
  StepReport simulate(const StepGraph& graph) const;
  /// Several ranks with different graphs (roles: pipeline stages, grid positions), simulated
  /// together. A collective starts on all simulated members of its group (same name and
  /// instance) together, when each has reached the task with that sequence number, and moves as
  /// one flow over all of their links; a point-to-point transfer is such a collective on a group of
  /// two. Report figures are those of ranks[0]'s timeline; the step ends when the slowest rank
  /// ends; model FLOPs count each graph `represents` times.
  StepReport simulate(std::span<const StepGraph* const> ranks) const;

  const hardware::CostModel& cost_model() const { return cost_; }

 private:
  const hardware::CostModel& cost_;
  EngineOptions options_;
};

}  // namespace sim
