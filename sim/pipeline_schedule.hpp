// defines: sim::PipelinePass, pipeline_order (the exact order in which a pipeline rank runs the
//          forward and backward passes of a step's micro-batches, as Megatron-LM schedules them),
//          LayerRange, virtual_stage_layers (the layers of each virtual stage), PipelinePosition,
//          pipeline_position, peak_in_flight
//
// Pipeline rank r holds model chunks c = 0..vp-1; chunk c is virtual stage v = c x pp + r (Megatron-LM's
// placement: with vp = 2 and pp = 4, rank 0 holds virtual stages 0 and 4). Activations go from
// virtual stage v to v + 1: from rank r to r + 1, and from the last rank back to rank 0 between
// chunks. Nothing here is a formula for the bubble: the schedules are orders of passes, and the
// engine times them (sim/engine.hpp) - the bubble is what it finds.
#pragma once
#include <span>
#include <vector>

#include "sim/model.hpp"
#include "sim/plan.hpp"

namespace sim {

/// @brief One forward or backward pass of one micro-batch through one model chunk of a rank.
struct PipelinePass {
  bool forward = true;
  int micro = 0;  ///< micro-batch of the step, 0..m-1
  int chunk = 0;  ///< model chunk of the rank, 0..vp-1
  bool operator==(const PipelinePass&) const = default;
};

/// @brief The passes pipeline rank `rank` (0..pp-1) runs in one step of `micro_batches` micro-batches,
/// in order (2 x micro_batches x vp of them).
///
/// 1F1B (vp = 1; PipeDream-Flush, Megatron-LM's forward_backward_pipelining_without_interleaving):
/// warm-up of w = min(pp - rank - 1, m) forwards, then one forward and one backward in turn until the
/// forwards are done, then the remaining backwards (cool-down); micro-batches in order.
///
/// Interleaved (vp >= 2; Narayanan et al. 2021, Megatron-LM's forward_backward_pipelining_with_
/// interleaving with its default microbatch_group_size_per_vp_stage = pp): forward k runs micro-batch
/// and chunk table[k], where the table takes the micro-batches in groups of pp and runs each group
/// through chunk 0, then chunk 1, ...; backward k runs table[k]'s micro-batch through chunk
/// vp - 1 - table[k].chunk. Warm-up of w = min(m vp, 2 (pp - rank - 1) + (vp - 1) pp) forwards, then
/// forward w + k and backward k in turn, then the remaining backwards. Needs m a multiple of pp
/// (check_plan refuses other counts).
std::vector<PipelinePass> pipeline_order(PipelineSchedule schedule, int pp, int vp, int micro_batches, int rank);

/// @brief Layers [first, end) of the model.
struct LayerRange {
  int first = 0, end = 0;
  int size() const { return end - first; }
};

/// @brief The layers of every virtual stage v = 0..pp x vp - 1: the plan's pipeline_layers, or an
/// even split. The plan must have passed check_plan.
std::vector<LayerRange> virtual_stage_layers(const ModelSpec& m, const Plan& p);
/// @brief The same into `out` (resized; its buffer reused by callers that ask plan after plan).
void virtual_stage_layers(const ModelSpec& m, const Plan& p, std::vector<LayerRange>& out);

/// @brief Where a world rank sits: Megatron-LM's order, tensor-parallel rank fastest, then the
/// data-parallel rank, then the pipeline stage (world rank = t + tp x (d + dp x s)), so a TP group
/// is adjacent ranks (inside a node) and the ranks of a stage are contiguous.
struct PipelinePosition {
  int tp_rank = 0, dp_rank = 0, stage = 0;
  /// The rank's place within its stage, t + tp x d: the ranks of one lane on every stage form one pipeline.
  int lane = 0;
};
PipelinePosition pipeline_position(const Plan& p, int world_rank);
/// @brief World rank of (tp rank, dp rank, stage).
int world_rank_of(const Plan& p, int tp_rank, int dp_rank, int stage);

/// @brief The forward passes a rank holds whose backward has not run yet, per chunk, at every moment
/// no other moment holds at least as many of every chunk (the candidates for the peak of any
/// per-chunk weights), in order of appearance. Read off the order, not a formula: 1F1B has one,
/// min(pp - rank, m) passes of chunk 0.
std::vector<std::vector<int>> in_flight_frontier(const std::vector<PipelinePass>& order, int vp);
/// @brief The frontier's vector whose activations weigh most when a pass of chunk c holds
/// chunk_bytes[c] from its forward to its backward (the first on ties).
std::vector<int> peak_in_flight(const std::vector<std::vector<int>>& frontier, std::span<const double> chunk_bytes);

}  // namespace sim
