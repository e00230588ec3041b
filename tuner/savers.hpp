// defines: tuner::SaverRow, explain_savers, savers_table, savers_json (what each memory saver of
//          a plan costs in time and saves in memory: the plan with each saver varied alone)
#pragma once
#include <span>
#include <utility>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tuner/evaluate.hpp"

namespace tuner {

/// @brief The plan with one memory saver set otherwise, simulated whole.
struct SaverRow {
  std::string setting;  ///< "recompute selective", "zero 1", "attention unfused"
  bool is_plan = false; ///< the plan's own setting
  sim::Plan plan;
  std::optional<std::string> invalid;  ///< why the variant cannot run (check_plan), if it cannot
  Duration step_time;
  sim::MemoryEstimate memory;
};

/// @brief `p` with each setting of recompute (none, selective, full over every layer, and its own
/// if it is a block), ZeRO stage (0..3, at dp > 1; with pp > 1 stages 2 and 3 are rows that say why
/// they are refused) and attention kernel varied alone; each distinct variant simulated whole
/// (sim::Engine) on `threads` threads (0: all cores) and priced by the memory model. Rows in that order.
/// `known`: plans already simulated whole (a search's finalists): a variant equal to one of them
/// takes its step time instead of a simulation of its own.
std::vector<SaverRow> explain_savers(const Evaluator& ev, const sim::Plan& p, int threads = 0,
                                     std::span<const std::pair<const sim::Plan*, common::Duration>> known = {});
/// @brief The plans explain_savers(ev, p) simulates when nothing is known: its distinct variants of
/// `p` that sim::check_plan accepts, `p` itself included (for SearchOptions::also_simulate: the
/// search simulates them with its finalists).
std::vector<sim::Plan> saver_simulations(const sim::ModelSpec& model, const hardware::ClusterSpec& cluster, const sim::Plan& p);
/// @brief The rows as a table: step time and memory, and their difference from the plan's own.
std::string savers_table(const std::vector<SaverRow>& rows);
nlohmann::json savers_json(const std::vector<SaverRow>& rows);

}  // namespace tuner
