// defines: validate::simulate_plan, megatron_plan, domino_plan, domino_13b, DominoSpeedup,
//          DominoFigures, read_domino_figures, domino_speedup, domino_example_ms (the step-level
//          calibration rows: plans as the published runs ran them)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hardware/cluster.hpp"
#include "sim/engine.hpp"
#include "sim/model.hpp"
#include "sim/pipeline_step.hpp"
#include "sim/plan.hpp"

namespace validate {

/// @brief One simulated step of `in` (resolved for `m` on `c`) with the analytic cost model.
sim::StepReport simulate_plan(const sim::ModelSpec& m, const hardware::ClusterSpec& c, const sim::PlanInput& in);

/// @brief Megatron-LM tensor parallelism as the Domino paper's baseline runs it: tp, dp 1, one
/// micro-batch per step, fp16, the eager stack.
sim::PlanInput megatron_plan(int tp, int micro_batch, std::int64_t seq);
/// @brief The same plan as DeepSpeed-Domino runs it: 2 row slices on the batch axis, the cuda_graphs
/// stack (its blog: CUDA graphs, multiple streams, torch.compile).
sim::PlanInput domino_plan(sim::PlanInput megatron);

/// @brief GPT-3 13B as DeepSpeed-Domino's released example runs it (DeepSpeedExamples
/// training/DeepSpeed-Domino/pretrain_gpt3_13b.sh: 64 attention heads of 80, not GPT-3's 40 of 128).
sim::ModelSpec domino_13b();

/// @brief The micro-batch assumed for the four Domino speedups and the TP-share figures (the
/// released example's).
inline constexpr int kDominoMicroBatchSize = 16;

struct DominoSpeedup {
  std::string size;  ///< "6.7B", "13B"
  std::int64_t seq = 0;
  double measured = 0;
};
/// @brief domino-h100.md: the four speedups, the example's iteration time, the TP shares.
struct DominoFigures {
  std::vector<DominoSpeedup> speedups;
  double example_lo_ms = 0, example_hi_ms = 0, example_ms = 0;
  std::vector<double> tp_share_pct;  ///< 1, 2, 4 nodes
};
DominoFigures read_domino_figures(const std::string& calibration_dir);

struct SpeedupPrediction {
  double megatron_ms = 0, domino_ms = 0, speedup = 0;
};
/// @brief Megatron and Domino step times for one published speedup row on `h100`.
SpeedupPrediction domino_speedup(const hardware::ClusterSpec& h100, const DominoSpeedup& row);
/// @brief One row of a100-megatron-1node-2and4gpu.csv (Megatron-DeepSpeed on one A100 node).
struct A100Row {
  int gpus = 0, global_batch = 0, micro_batch = 0, heads = 0, layers = 0, tp = 1, dp = 1, pp = 1;
  std::int64_t hidden = 0, seq_len = 0;
  double measured_ms = 0;
  std::string label;  ///< "4 GPUs h2048 L24 gb16 mb2 tp4 dp1 pp1"
};
std::vector<A100Row> read_a100_rows(const std::string& calibration_dir);
/// @brief The row's predicted iteration time on `a100` (its GPUs of one node; pp must be 1).
sim::StepReport predict_a100(const hardware::ClusterSpec& a100, const A100Row& row);
/// @brief A row with pp > 1 as Megatron-DeepSpeed runs it: its 1F1B schedule with blocking
/// point-to-point transfers, the layers split evenly (pp must divide them), simulated as `simulate` does.
struct PipelinedPrediction {
  sim::ModelSpec model;
  sim::Plan plan;
  sim::SimulatedPlan simulated;
};
PipelinedPrediction predict_a100_pipelined(const hardware::ClusterSpec& a100, const A100Row& row);

/// @brief The released example's Domino iteration time (GPT-3 13B, seq 1024, micro-batch 16, TP 8).
double domino_example_ms(const hardware::ClusterSpec& h100);

}  // namespace validate
