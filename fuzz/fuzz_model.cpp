// Fuzz target: model files (sim::parse_model), then a default plan of the model built and simulated.
#include "fuzz/fuzz_common.hpp"
#include "hardware/cluster.hpp"
#include "sim/model.hpp"
#include "sim/plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const hardware::ClusterSpec cluster = hardware::load_cluster("dgx-h100");
  static const auto cost = hardware::make_analytic_cost_model(cluster, hardware::Stack::eager);  // the default plan's stack
  fuzz::guard([&] {
    const sim::ModelSpec m = sim::parse_model(fuzz::text(data, size), "fuzz-model.yaml");
    (void)m.params(m.seq_len);
    (void)m.training_flops(8, m.seq_len);
    sim::PlanInput in;
    in.tp = 1;
    in.seq_len = std::min<std::int64_t>(m.seq_len, 4096);
    const sim::Plan p = sim::resolve_plan(m, cluster, in, "fuzz-plan");
    fuzz::simulate_small(m, cluster, p, *cost);
  });
  return 0;
}
