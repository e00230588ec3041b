// Fuzz target: profile files (hardware::parse_profile), written back, and tiny priced from the profile.
#include <sstream>

#include "fuzz/fuzz_common.hpp"
#include "hardware/profile.hpp"
#include "hardware/profiled_cost_model.hpp"
#include "sim/model.hpp"
#include "sim/plan.hpp"
#include "sim/strategy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const sim::ModelSpec model = sim::load_model("tiny");
  fuzz::guard([&] {
    hardware::Profile prof = hardware::parse_profile(fuzz::text(data, size), "fuzz-profile.yaml");
    (void)hardware::format_profile(prof);
    const hardware::ClusterSpec c = prof.cluster;
    sim::PlanInput in;
    in.tp = c.node.gpus_per_node % 2 == 0 ? 2 : 1;
    in.micro_batch = 2;
    in.strategy = &sim::strategy_domino();
    in.dtype = common::DType::fp32;
    const sim::Plan p = sim::resolve_plan(model, c, in, "fuzz-plan");
    std::ostringstream notes;  // "outside the measured range" notes: not stderr, thousands of times a second
    const auto cost = hardware::make_profiled_cost_model(c, std::move(prof), &notes, p.stack);
    fuzz::simulate_small(model, c, p, *cost);
  });
  return 0;
}
