// defines: tuner::ranking_table, refusal_table, explain_table, search_json, explain_json
//          (what tune prints and its --json mirror)
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "tuner/explain.hpp"
#include "tuner/search.hpp"

namespace tuner {

/// @brief sim::describe plus the DP bucket size where there is a DP reduction: "tp4 dp2 mb2 domino 2x1 b25".
std::string plan_label(const sim::Plan& p);

/// @brief Top-K plans and the baseline: plan, step time (and, with `ranges`, its prediction range),
/// tokens/s, MFU, exposed communication, memory, speedup over the baseline.
std::string ranking_table(const SearchResult& r, const hardware::ClusterSpec& c, bool ranges = false);

/// @brief The plans (ranked ones and the baseline) whose prediction range overlaps the best plan's:
/// indistinguishable from it within the model's error (sim::prediction_range).
std::vector<const RankedPlan*> indistinguishable_from_best(const SearchResult& r, const hardware::ClusterSpec& c);
/// @brief Refused plans by reason, with one example each.
std::string refusal_table(const SearchResult& r);
/// @brief The chosen plan against the runner-up and the baseline, per layer.
std::string explain_table(const std::vector<std::pair<std::string, LayerBreakdown>>& plans);

/// With `ranges`: each plan's step_time_range_ms and within_best_range (overlaps the best plan's range).
nlohmann::json search_json(const SearchResult& r, const hardware::ClusterSpec& c, bool ranges = false);
nlohmann::json explain_json(const std::vector<std::pair<std::string, LayerBreakdown>>& plans);

}  // namespace tuner
