// defines: sim::report_json, plan_json (the --json mirror of a StepReport), report_table
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "sim/engine.hpp"
#include "sim/prediction_range.hpp"
#include "sim/target.hpp"

namespace sim {

/// @brief The plan's fields, its strategy's name and every registered knob (sim/strategy.hpp).
nlohmann::json plan_json(const Plan& p);
/// @brief Adds "<stream>_ms" (busy time) for each communication stream of the report: tp_comm_ms, dp_comm_ms.
void add_stream_times(nlohmann::json& j, const StepReport& r);
/// @brief step_time_ms, compute_ms, <comm stream>_ms (tp_comm_ms, dp_comm_ms), exposed_comm_ms, idle_ms, mfu,
/// tokens_per_s, memory_gb (+ breakdown), model_flops, tasks, plan, model, cluster, cost_model;
/// with a range: step_time_range_ms [low, high] and step_time_range_basis.
nlohmann::json report_json(const Target& t, const StepReport& r, const std::string& cost_model,
                           const std::optional<PredictionRange>& range = std::nullopt);
/// @brief The aligned human table of a StepReport (quantity, value, unit), the step time's range under it.
std::string report_table(const Target& t, const StepReport& r, const std::optional<PredictionRange>& range = std::nullopt);

/// @brief The range to print beside a step time predicted by `cost_model` ("analytic" on a GPU
/// cluster: the out-of-sample bands are of analytic predictions on GPUs; none otherwise).
std::optional<PredictionRange> range_for(const Plan& plan, const hardware::ClusterSpec& cluster, const std::string& cost_model, common::Duration step);

/// @brief The per-GPU memory breakdown as JSON: each line in GB (weights_gb, gathered_weights_gb,
/// gradients_gb, optimizer_gb, activations_gb, recomputed_gb, temporaries_gb, dp_buckets_gb,
/// nccl_gb, cuda_context_gb), total_gb, reserve_gb, usable_gb, capacity_gb, fits, over_gb.
nlohmann::json memory_json(const MemoryEstimate& m);
/// @brief The per-GPU memory breakdown as an aligned table (line, GB, what it is), the total against
/// what the plan may use, and whether it fits.
std::string memory_table(const Plan& p, const MemoryEstimate& m);

}  // namespace sim
