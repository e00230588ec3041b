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
  /// 2D / 2.5D grids only: the tokens and positions of the rank's grid column (the q row blocks of
  /// its depth layer, row 0 first), which the vocab-parallel embedding looks up before its
  /// reduce-scatter along the column (the simulator leaves out the token ids' all-gather: every
  /// rank reads the step's data itself). Empty under 1D.
  std::vector<std::vector<std::int32_t>> column_tokens, column_positions;
};

/// @brief Micro-batches micro .. micro + graph.micro_batches - 1 of step `step` for DP rank
/// `dp_rank`, split into the graph's row slices. Sequences follow a seeded affine pattern
/// (next = (a * cur + b) mod vocab, with a few random restarts), so a model that learns it drives
/// the loss towards zero. On a 2D / 2.5D grid the micro-batch's sequences are split into q x d row
/// blocks, block depth x q + row to the ranks of that grid row and depth (`tp_rank` says which).
Batch make_batch(const sim::StepGraph& g, std::uint64_t seed, int step, int micro, int dp_rank, int tp_rank = 0);

/// @brief Where a rank's weight tensor sits in the full (unsharded) weight.
struct WeightLayout {
  std::int64_t full_rows = 0, full_cols = 0;
  /// 1D: every TP rank holds all of it (norms, learned positions); on a grid: every row of a grid
  /// column holds the column's block of it
  bool replicated = false;
  /// Index into the full row-major weight of local element (row, col) of TP rank `tp_rank`.
  std::int64_t (*global_index)(const sim::StepGraph&, const sim::TensorInfo&, int tp_rank, std::int64_t row,
                               std::int64_t col) = nullptr;
  /// Whether TP rank `tp_rank`'s copy is the one a gather of the full weight takes (the others
  /// hold copies of it: replicated weights, a 2.5D grid's depth layers).
  bool contributes(const sim::Plan& p, int tp_rank) const {
    if (!p.grid_tp()) return !replicated || tp_rank == 0;
    const auto at = p.grid_coord(tp_rank);
    return at.depth == 0 && (!replicated || at.row == 0);
  }
};
/// @brief Layout of weight (or weight-gradient) tensor `id`: vocab-parallel embedding / LM head
/// rows, column-parallel QKV (local [Q | K | V] of the rank's heads) and FC1 (local [gate | up]),
/// row-parallel out-proj / FC2 rows. On a 2D / 2.5D grid (row i, column j) every matrix is an
/// [in/q, out/q] block: rows of input block i, the output columns 1D TP rank j of tp = q would
/// hold; the embedding [vocab block i, hidden block j], the LM head [vocab block j, hidden block i]
/// (the SUMMA product X W^T reads it as the [h/q, vocab/q] block (i, j) of W^T), norms and
/// positions hidden block j.
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
