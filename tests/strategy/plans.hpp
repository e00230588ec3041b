// Shared by the strategy tests: a plan of a model (tiny unless named) resolved from YAML on a
// cluster, the message of the ConfigError a call throws, and the fake cluster as one node of N GPUs.
#pragma once
#include <functional>
#include <string>

#include "common/config_error.hpp"
#include "sim/plan.hpp"
#include "sim/target.hpp"
#include "tests/sim/fake_cost_model.hpp"

namespace test {

inline sim::Plan resolve(const std::string& yaml, const hardware::ClusterSpec& c, const std::string& model = "tiny") {
  return sim::resolve_plan(sim::load_model(model), c, sim::parse_plan_input(yaml, "plan.yaml"), "plan.yaml");
}

/// The ConfigError's message, or "no error".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const common::ConfigError& e) {
    return e.what();
  }
  return "no error";
}

/// The fake cluster (tests/sim/fake_cost_model.hpp) with `nodes` nodes of `gpus` GPUs.
inline hardware::ClusterSpec node_of(int gpus, int nodes = 1) {
  auto c = fake_cluster();
  c.nodes = nodes;
  c.node.gpus_per_node = gpus;
  return c;
}

}  // namespace test
