// defines: executor::run_json (the --json of `slicetune run`; validate::parse_run_json reads it back)
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "executor/run.hpp"
#include "sim/target.hpp"

namespace executor {

/// @brief step_time_ms (median after warm-up), step_time_{min,max,stdev}_ms, step_times_ms, loss,
/// tokens_per_s, overlap, plan, and `tasks`: rank 0's measured timeline of the median step (one
/// row per graph task: name, class, stream, start_us, end_us, median_us over measured steps).
nlohmann::json run_json(const sim::Target& t, const sim::StepGraph& g, const RunResult& r, const std::string& backend, int ranks);

}  // namespace executor
