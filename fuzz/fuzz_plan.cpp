// Fuzz target: plan files (sim::parse_plan_input), resolved for tiny on 2 nodes of cpu-host, built and simulated.
#include "fuzz/fuzz_common.hpp"
#include "hardware/cluster.hpp"
#include "sim/model.hpp"
#include "sim/plan.hpp"

#include <array>
#include <memory>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const sim::ModelSpec model = sim::load_model("tiny");
  static const hardware::ClusterSpec cluster = [] {
    auto c = hardware::load_cluster("cpu-host");
    hardware::set_nodes(c, 2, "fuzz");
    return c;
  }();
  static const auto costs = [] {  // one per stack: the plan file may name any
    std::array<std::unique_ptr<hardware::CostModel>, hardware::kStacks> out;
    for (hardware::Stack s : hardware::kAllStacks) out[static_cast<int>(s)] = hardware::make_analytic_cost_model(cluster, s);
    return out;
  }();
  fuzz::guard([&] {
    const sim::PlanInput in = sim::parse_plan_input(fuzz::text(data, size), "fuzz-plan.yaml");
    const sim::Plan p = sim::resolve_plan(model, cluster, in, "fuzz-plan.yaml");
    (void)sim::plan_to_yaml(p);
    fuzz::simulate_small(model, cluster, p, *costs[static_cast<int>(p.stack)], 20000);
  });
  return 0;
}
