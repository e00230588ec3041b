// defines: tuner::SearchSpace (the plan axes the tuner enumerates), default_global_batch,
//          enumerate_plans, enumerate_plan_blocks, searched_strategies
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "hardware/cluster.hpp"
#include "sim/model.hpp"
#include "sim/plan.hpp"

namespace tuner {

/// @brief The axes of the search. Empty lists mean "derived from the model and cluster" (see
/// enumerate_plans). The enumeration order (tp, pp, vp, micro_batch, sequence_parallel, strategy,
/// the strategy's knobs in the order it declares them, attention kernel, ZeRO stage, recompute,
/// dp_bucket_mb) is the final tie-break between equal plans.
struct SearchSpace {
  std::vector<int> tp;                 ///< empty: every divisor of the cluster's GPU count
  /// Tensor-parallel layouts. 1D plans are enumerated as the axes below say; 2D / 2.5D plans
  /// (docs/tensor-parallel-2d.md) for every tp = q^2 (2d) or q^2 x d with d >= 2 (2.5d), q >= 2, with
  /// what the SUMMA layers run with: pp 1, no sequence parallelism, strategy none, ZeRO 0, no
  /// recompute; both grid orders where a q x q layer spans nodes. Default all three (the grids add
  /// a few hundred plans at most); `tune --tp-layouts 1d` leaves the grids out.
  std::vector<sim::TpLayout> tp_layouts{sim::TpLayout::one_d, sim::TpLayout::two_d, sim::TpLayout::two_five_d};
  /// Pipeline stages; empty: every divisor of GPUs / tp up to the layer count (check_plan refuses
  /// those that do not divide the layers). dp = GPUs / (tp x pp).
  std::vector<int> pp;
  /// Model chunks per pipeline rank at pp > 1: 1 runs 1F1B, more the interleaved schedule (with
  /// Megatron-LM's default overlap of its transfers); check_plan refuses those that do not divide the layers.
  std::vector<int> vp{1, 2, 4};
  std::vector<int> micro_batch;        ///< empty: powers of two up to min(max_micro_batch, global_batch / dp)
  int max_micro_batch = 64;
  std::vector<bool> sequence_parallel{false, true};
  /// Empty: every registered strategy with Strategy::searched (sim/strategy.hpp), in registry order.
  std::vector<const sim::Strategy*> strategies;
  /// Values to try per knob key ("row_slices": {1, 2, 4, 8}); a knob not listed takes the values
  /// its strategy declares (Knob::searched).
  std::map<std::string, std::vector<int>, std::less<>> knob_values;
  std::vector<double> dp_bucket_mb{25.0, 100.0};
  /// Attention kernels; empty: the stack's (host.stacks.<stack>.attention) and flash, or unfused
  /// when the stack's is flash (sim::attention_choices).
  std::vector<hardware::AttentionKernel> attention;
  /// ZeRO stages, tried at dp > 1 (stage 0 otherwise); with pp > 1 check_plan refuses stages 2 and
  /// 3 (counted as refused, with the reason).
  std::vector<int> zero{0, 1, 2, 3};
  /// Recompute modes; full as uniform over single layers (Megatron-LM's usual
  /// --recompute-method uniform --recompute-num-layers 1).
  std::vector<sim::Recompute> recompute{sim::Recompute::none, sim::Recompute::selective, sim::Recompute::full};
  /// Also try full recompute of only as many layers as the plan needs to fit (block method with the
  /// fewest layers: the tuner's search adds it where no recompute does not fit and full does).
  bool block_recompute = true;
  int global_batch = 0;      ///< sequences per step; 0: default_global_batch
  std::int64_t seq_len = 0;  ///< 0: the model's
  common::DType dtype = common::DType::bf16;
  hardware::Stack stack = hardware::Stack::eager;
};

/// @brief The strategies `s` searches: SearchSpace::strategies, or every registered one with
/// Strategy::searched, in registry order.
std::vector<const sim::Strategy*> searched_strategies(const SearchSpace& s);

/// @brief 8 sequences per GPU (one DGX-H100: 64 sequences of 2048 tokens = 131k tokens per step).
int default_global_batch(const hardware::ClusterSpec& c);

/// @brief Every plan of the space, in enumeration order, not yet checked for feasibility.
/// Redundant combinations are not generated: sequence parallelism at tp 1, a knob where it does
/// not apply (Knob::applies: a row axis at one row slice) beyond its first value, bucket sizes at
/// dp 1 (no gradient reduction) and under ZeRO-3 (its buckets are the layers: sim/zero_emit.cpp),
/// vp > 1 without pipelining. Knobs of other strategies stay neutral.
std::vector<sim::Plan> enumerate_plans(const sim::ModelSpec& m, const hardware::ClusterSpec& c, const SearchSpace& s);
/// @brief The same plans in the same order, each handed to `visit` instead of stored (the search
/// keeps only the feasible ones: most of a large space is refused by its shapes).
void enumerate_plans(const sim::ModelSpec& m, const hardware::ClusterSpec& c, const SearchSpace& s,
                     const std::function<void(const sim::Plan&)>& visit);
/// @brief The same plans in the same order, in blocks: the plans of one block differ only in their
/// memory savers (ZeRO stage, recompute) and the bucket size, and no plan outside the block equals
/// one inside once those are reset (so a search can decide which savers a plan needs block by
/// block, without keeping the space). A block is valid only during the call.
using PlanBlockVisitor = std::function<void(std::span<const sim::Plan>)>;
/// @brief What one plan of a block sets of its memory savers (the fields a block's plans differ in):
/// its ZeRO stage, recompute mode (uniform over single layers) and bucket size.
struct BlockSavers {
  int zero = 0;
  sim::Recompute recompute = sim::Recompute::none;
  double dp_bucket_mb = 25.0;
  /// `p` with these savers (recompute method uniform, one layer per chunk)
  void apply(sim::Plan& p) const {
    p.zero = zero;
    p.recompute = recompute;
    p.recompute_method = sim::RecomputeMethod::uniform;
    p.recompute_layers = 1;
    p.dp_bucket_mb = dp_bucket_mb;
  }
  bool operator==(const BlockSavers&) const = default;
};
/// @brief A block without its plans made: `head` is its first plan, and plan j is `head` with
/// savers[j] applied (savers[0] gives `head` itself). Both are valid only during the call. The
/// search reads most blocks this way: a plan is made only where it is kept or shown.
using PlanBlockHeadVisitor = std::function<void(const sim::Plan& head, std::span<const BlockSavers> savers)>;
void enumerate_plan_blocks(const sim::ModelSpec& m, const hardware::ClusterSpec& c, const SearchSpace& s, const PlanBlockVisitor& visit);
/// @brief The space in parts, for enumerating them apart (on several threads): one part per 1D
/// (tp, pp, vp), in enumeration order, then one for the 2D / 2.5D grids; enumerate_plan_blocks of
/// parts 0, 1, ... in turn is enumerate_plan_blocks of the whole space.
std::size_t plan_space_parts(const sim::ModelSpec& m, const hardware::ClusterSpec& c, const SearchSpace& s);
void enumerate_plan_blocks(const sim::ModelSpec& m, const hardware::ClusterSpec& c, const SearchSpace& s, std::size_t part,
                           const PlanBlockVisitor& visit);
/// @brief Part `part`'s blocks in the same order, each as its head and savers (PlanBlockHeadVisitor).
void enumerate_plan_block_heads(const sim::ModelSpec& m, const hardware::ClusterSpec& c, const SearchSpace& s, std::size_t part,
                                const PlanBlockHeadVisitor& visit);

}  // namespace tuner
