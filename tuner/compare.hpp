// defines: tuner::StrategyRow, compare_strategies, tp_bytes_per_gpu, strategy_table, strategy_verdict,
//          strategies_json (the best plan of each strategy side by side, and which wins and why)
#pragma once
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "tuner/search.hpp"

namespace tuner {

/// @brief The best plan of one strategy (SearchResult::per_strategy) with what the table shows
/// beyond its report.
struct StrategyRow {
  const sim::Strategy* strategy = nullptr;
  /// 1d: the strategy's row; 2d / 2.5d: the best SUMMA grid of that layout (strategy none), a row of its own
  sim::TpLayout layout = sim::TpLayout::one_d;
  const RankedPlan* best = nullptr;  ///< into the SearchResult; null: no feasible plan of this strategy
  const StrategyRefusal* refused = nullptr;  ///< into the SearchResult (without_plan) when best is null
  double tp_bytes = 0;               ///< tp_bytes_per_gpu of its plan
};

/// @brief Bytes one GPU sends to its tensor-parallel peers in a step: every collective on a TP
/// group of the plan's step graph (recomputed ones included), as the cost model moves it
/// (CollectiveCost::sent_bytes), times the micro-batches that issue it. Pipelined plans: the stage
/// that sends most. Builds the graphs; simulates nothing.
double tp_bytes_per_gpu(const Evaluator& ev, const sim::Plan& p);

/// @brief One row per strategy searched (SearchResult::strategies), and one per 2D / 2.5D grid
/// layout with a plan, fastest first; strategies with no feasible plan last, in registry order. Nothing is simulated (the search simulated the plans);
/// the TP volumes are computed on `threads` threads (0: every core).
std::vector<StrategyRow> compare_strategies(const SearchResult& r, const Evaluator& ev, int threads = 0);

/// @brief The rows as a table: strategy, its best plan, step time, exposed communication, TP
/// communication per GPU, memory per GPU, its knobs, speedup over the baseline (Megatron-LM); then
/// a line per strategy without a feasible plan saying why its plans were refused.
/// @brief The row's name: the strategy's ("domino"), or the grid's ("2.5d summa").
std::string row_name(const StrategyRow& row);

std::string strategy_table(const std::vector<StrategyRow>& rows, const SearchResult& r);

/// @brief One line: which strategy wins (naming strategies that tie with it), by how much over
/// the next strategy that differs, and why - the part of the step (exposed communication, compute,
/// idle) where the winner gains most on it, then the other two with their signs.
std::string strategy_verdict(const std::vector<StrategyRow>& rows, const SearchResult& r);

nlohmann::json strategies_json(const std::vector<StrategyRow>& rows, const SearchResult& r);

}  // namespace tuner
