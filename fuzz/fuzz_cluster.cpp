// Fuzz target: cluster files (hardware::parse_cluster), then tiny simulated on the cluster.
#include "fuzz/fuzz_common.hpp"
#include "hardware/cluster.hpp"
#include "sim/model.hpp"
#include "sim/strategy.hpp"
#include "sim/plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const sim::ModelSpec model = sim::load_model("tiny");
  fuzz::guard([&] {
    hardware::ClusterSpec c = hardware::parse_cluster(fuzz::text(data, size), "fuzz-cluster.yaml");
    sim::PlanInput in;
    in.tp = c.node.gpus_per_node % 2 == 0 ? 2 : 1;
    in.micro_batch = 2;
    in.strategy = &sim::strategy_domino();
    in.dtype = common::DType::fp32;
    const sim::Plan p = sim::resolve_plan(model, c, in, "fuzz-plan");
    const auto cost = hardware::make_analytic_cost_model(c, p.stack);
    fuzz::simulate_small(model, c, p, *cost);
  });
  return 0;
}
