// defines: sim::report_json, plan_json (the --json mirror of a StepReport), report_table
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "sim/engine.hpp"
#include "sim/target.hpp"

namespace sim {

/// @brief The plan's fields, its strategy's name and every registered knob (sim/strategy.hpp).
nlohmann::json plan_json(const Plan& p);
/// @brief Adds "<stream>_ms" (busy time) for each communication stream of the report: tp_comm_ms, dp_comm_ms.
void add_stream_times(nlohmann::json& j, const StepReport& r);
/// @brief step_time_ms, compute_ms, <comm stream>_ms (tp_comm_ms, dp_comm_ms), exposed_comm_ms, idle_ms, mfu,
/// tokens_per_s, memory_gb (+ breakdown), model_flops, tasks, plan, model, cluster, cost_model.
nlohmann::json report_json(const Target& t, const StepReport& r, const std::string& cost_model);
/// @brief The aligned human table of a StepReport (quantity, value, unit).
std::string report_table(const Target& t, const StepReport& r);

}  // namespace sim
