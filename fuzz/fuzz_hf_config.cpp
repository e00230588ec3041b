// Fuzz target: Hugging Face config.json files (sim::parse_hf_config, what --model config.json
// reads); a default plan of the imported model on one DGX-H100 resolved, built and simulated when small.
#include "fuzz/fuzz_common.hpp"
#include "hardware/cluster.hpp"
#include "sim/hf_config.hpp"
#include "sim/plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const hardware::ClusterSpec cluster = hardware::load_cluster("dgx-h100");
  static const auto cost = hardware::make_analytic_cost_model(cluster, hardware::Stack::eager);  // the default plan's stack
  fuzz::guard([&] {
    const sim::HfImport imp = sim::parse_hf_config(fuzz::text(data, size), "fuzz-config.json", "fuzz");
    (void)imp.model.params(imp.model.seq_len);
    sim::PlanInput in;
    in.tp = 8;
    in.seq_len = 128;
    const sim::Plan p = sim::resolve_plan(imp.model, cluster, in, "fuzz-plan");
    fuzz::simulate_small(imp.model, cluster, p, *cost);
  });
  return 0;
}
