// defines: tuner::LayerBreakdown, explain_plan (why a plan wins: per-layer compute, exposed
//          communication and sliced-GEMM efficiency lost)
#pragma once
#include <vector>

#include "tuner/evaluate.hpp"

namespace tuner {

/// @brief One layer of one micro-batch (the last of the step, the one the engine records).
/// Layer -1 is everything outside the transformer layers (embedding, LM head, loss, DP, optimizer).
struct LayerCost {
  int layer = -1;
  Duration compute;       ///< compute-stream busy time of the layer's tasks (interference included)
  Duration exposed_comm;  ///< the layer's collectives while the compute stream is idle
  Duration gemm_lost;     ///< its GEMMs' solo time minus that of the same GEMMs unsliced (tile/wave quantization, launches)
  Duration interference;  ///< compute minus the solo time of its kernels: slowed by collectives running beside them
};

struct LayerBreakdown {
  sim::Plan plan;
  Duration step_time;
  std::vector<LayerCost> layers;  ///< [0] is layer -1 (outside layers), then layers 0..L-1; once-per-step tasks excluded
  LayerCost once;                 ///< once per step: DP gradient reduction and optimizer (pipelined: the stage where each is largest)
  /// What `layers` are multiplied by to give a step: the micro-batches of a step (they are the last
  /// micro-batch's) or, pipelined, m / the micro-batches simulated (they hold every simulated micro-batch).
  double per_step = 1;
  Duration bubble;        ///< pipelined: a stage's idle time in the step (no stream busy), mean of stages
  Duration pipe_exposed;  ///< pipelined: its point-to-point transfers while its compute is idle, per step, mean of stages
  /// Mean over the transformer layers.
  LayerCost mean_layer() const;
};

/// @brief Simulates `p` whole with a timeline and attributes time to layers. GEMM efficiency lost
/// compares each layer's GEMM solo times with those of the same plan with one row slice and one
/// column chunk. Pipelined plans: every stage's timeline (sim::simulate_plan; a long step from the
/// 3 pp micro-batches simulated, scaled), the bubble and the exposed transfers.
/// `simulated`: that simulation of `p` with its timelines if the caller has it (the search's,
/// SearchOptions::keep_simulations; without graphs they are rebuilt); null: simulated here.
LayerBreakdown explain_plan(const Evaluator& ev, const sim::Plan& p, const sim::SimulatedPlan* simulated = nullptr);

}  // namespace tuner
