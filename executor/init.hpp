// defines: executor::TrainingOptions, Batch, make_batch (synthetic tokens with a learnable pattern),
//          WeightLayout, weight_layout, init_weight (identical weights whatever the plan)
//
// Everything here is plain host code shared by every backend: what the model's weights are at
// step 0 and what tokens each micro-batch trains on. Both are functions of (seed, global
// coordinates) only, so a tp=2 domino run and a tp=1 unsliced run start from the same model and
// see the same data.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/step_graph.hpp"

namespace executor {

/// @brief Hyper-parameters of the synthetic training run (AdamW as in GPT-3 / Megatron).
struct TrainingOptions {
  std::uint64_t seed = 1234;
  double lr = 3e-3;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;  ///< decoupled; matrices and embeddings only, not norm weights
};

/// @brief The micro-batches a graph issues (StepGraph::micro_batches: one, or a pipeline stage's
/// whole step) of one DP rank, laid out per micro-batch and row slice: tokens[k][row] with
/// k = micro-batch of the graph x row_slices + slice (Task::micro / TensorInfo::micro, 0 when
/// untagged) is the token id of row `row` of that slice's input tensor (token-major: batch-major,
/// then position), targets the next token, positions the absolute position in its sequence.
struct Batch {
  std::vector<std::vector<std::int32_t>> tokens, targets, positions;
};

/// @brief Micro-batches micro .. micro + graph.micro_batches - 1 of step `step` for DP rank
/// `dp_rank`, split into the graph's row slices. Sequences follow a seeded affine pattern
/// (next = (a * cur + b) mod vocab, with a few random restarts), so a model that learns it drives
/// the loss towards zero.
Batch make_batch(const sim::StepGraph& g, std::uint64_t seed, int step, int micro, int dp_rank);

/// @brief Where a rank's weight tensor sits in the full (unsharded) weight.
struct WeightLayout {
  std::int64_t full_rows = 0, full_cols = 0;
  bool replicated = false;  ///< every TP rank holds all of it (norms, learned positions)
  /// Index into the full row-major weight of local element (row, col) of TP rank `tp_rank`.
  std::int64_t (*global_index)(const sim::StepGraph&, const sim::TensorInfo&, int tp_rank, std::int64_t row,
                               std::int64_t col) = nullptr;
};
/// @brief Layout of weight (or weight-gradient) tensor `id`: vocab-parallel embedding / LM head
/// rows, column-parallel QKV (local [Q | K | V] of the rank's heads) and FC1 (local [gate | up]),
/// row-parallel out-proj / FC2 rows.
WeightLayout weight_layout(const sim::StepGraph& g, sim::TensorId id);

/// @brief The step-0 value of weight `id` on TP rank `tp_rank` (fp32, rows x cols): each element
/// a hash of (seed, weight identity, full-weight index) — GPT-2 init: N-like(0, 0.02), residual
/// projections (out-proj, FC2) scaled by 1/sqrt(2 L); norm scale 1, bias 0.
std::vector<float> init_weight(const sim::StepGraph& g, sim::TensorId id, int tp_rank, std::uint64_t seed);

/// @brief Whether AdamW applies weight decay to this weight (not to norm weights).
bool decays(const sim::TensorInfo& w);

/// @brief Tokens whose loss one step averages: global_batch x seq_len (the loss gradient is
/// scaled by its inverse, so DP sums and micro-batch accumulation give the mean's gradient).
std::int64_t tokens_per_step(const sim::Plan& p);

/// @brief Index into Batch::tokens / targets / positions of a tensor or task's micro-batch and slice.
inline std::size_t batch_index(const sim::StepGraph& g, int micro, int slice) {
  return static_cast<std::size_t>(std::max(0, micro) * g.plan.row_slices + std::max(0, slice));
}

}  // namespace executor
