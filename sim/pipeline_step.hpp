// defines: sim::build_stage_graphs, simulate_stages, PipelineSummary, pipeline_summary (the graphs of
//          a pipelined step - one per stage - simulated together, and what the report says of them)
#pragma once
#include <vector>

#include "sim/engine.hpp"
#include "sim/step_graph.hpp"

namespace sim {

/// @brief The step graphs the engine simulates for `plan`: one per pipeline stage (the graph of the
/// stage's first rank, world_rank_of(plan, 0, 0, stage), standing for its tp x dp ranks), or the one
/// graph of rank 0 without pipelining.
std::vector<StepGraph> build_stage_graphs(const ModelSpec& model, const hardware::ClusterSpec& cluster, const Plan& plan);

/// @brief Simulates the graphs together (Engine::simulate over all of them).
StepReport simulate_stages(const Engine& engine, const std::vector<StepGraph>& graphs);

/// @brief A plan simulated, with the graphs its report's timelines point to.
struct SimulatedPlan {
  std::vector<StepGraph> graphs;  ///< one per stage (of the plan simulated last)
  StepReport report;              ///< of the plan's whole step
  /// Pipelined plans with many micro-batches: the two micro-batch counts simulated (lower, higher),
  /// the report extrapolated linearly from them to the plan's; 0, 0: simulated as it is.
  int micro_batches_lo = 0, micro_batches_hi = 0;
  bool extrapolated() const { return micro_batches_hi > 0; }
  /// The plan whose graphs were simulated last (`plan` itself, or with micro_batches_hi
  /// micro-batches): build_stage_graphs of it rebuilds `graphs` task for task.
  Plan graphs_plan(const Plan& plan) const;
};

/// @brief Simulates `plan`. A pipelined step of m micro-batches repeats its steady state once per
/// micro-batch (1F1B) or per group of pp micro-batches (interleaved) between a warm-up and a
/// cool-down that do not depend on m, so with m beyond pp + 1 (1F1B) or 2 pp (interleaved), and
/// `all_micro_batches` false, it is simulated with pp and pp + 1 (2 pp) micro-batches and every time
/// of the report extrapolated linearly to m - as the engine's one micro-batch repeated accum times
/// is for unpipelined plans. Memory, FLOPs, MFU and tokens/s are the plan's; timelines are those of
/// the longer run. tests/sim/test_pipeline.cpp compares the extrapolation with whole simulations.
SimulatedPlan simulate_plan(const ModelSpec& model, const hardware::ClusterSpec& cluster, const Plan& plan, const hardware::CostModel& cost,
                            const EngineOptions& options = {}, bool all_micro_batches = false);

/// @brief A report of `m` micro-batches from reports of `lo` < `hi` micro-batches of the same plan
/// otherwise: every time linear in the micro-batch count (step, busy times, per-rank figures).
StepReport extrapolate_micro_batches(const StepReport& at_lo, int lo, const StepReport& at_hi, int hi, int m);

/// @brief A pipelined step as the reports show it, from the simulation (nothing here is a formula).
struct PipelineStageRow {
  int stage = 0;
  int layers = 0;                   ///< transformer layers the stage holds (all its chunks)
  Duration compute, idle, exposed_comm;
  Duration pp_comm;                 ///< busy time of its point-to-point streams, summed
  double bubble = 0;                ///< compute-idle fraction of the step: 1 - compute / step
  MemoryEstimate memory;
};
struct PipelineSummary {
  std::vector<PipelineStageRow> stages;
  double mean_bubble = 0;  ///< mean over stages of PipelineStageRow::bubble
  int worst_memory_stage = 0;
};
PipelineSummary pipeline_summary(const ModelSpec& model, const Plan& plan, const StepReport& report);

}  // namespace sim
