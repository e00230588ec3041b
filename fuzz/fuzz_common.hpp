// defines: fuzz::text (the input as a string), fuzz::simulate_small (build and simulate a plan when
//          its graph is small, so that the fuzzers reach the builder and the engine), fuzz::guard
//
// The property every target checks: bad input ends in common::ConfigError (a one-line error for
// the user), never in a crash, a sanitizer report, a hang or another exception type.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/config_error.hpp"
#include "hardware/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/plan_limits.hpp"
#include "sim/step_graph.hpp"

namespace fuzz {

inline std::string text(const std::uint8_t* data, std::size_t size) { return std::string(reinterpret_cast<const char*>(data), size); }

/// Builds and simulates `p` when its graph has at most `max_tasks` tasks (fuzzing speed).
inline void simulate_small(const sim::ModelSpec& m, const hardware::ClusterSpec& c, const sim::Plan& p, const hardware::CostModel& cost,
                           std::int64_t max_tasks = 4000) {
  if (sim::max_tasks(m, p) > max_tasks) return;
  const sim::StepGraph g = sim::build_step_graph(m, c, p);
  sim::Engine engine(cost, {.timeline = true});
  (void)engine.simulate(g);
}

/// Runs `f`; a common::ConfigError is the expected outcome of bad input.
template <class F>
void guard(F&& f) {
  try {
    f();
  } catch (const common::ConfigError&) {
  }
}

}  // namespace fuzz
