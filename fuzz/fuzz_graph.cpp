// Fuzz target: step-graph JSON files (what `simulate --graph` reads: sim::read_graph_file's strict
// parse, sim::saved_cluster, sim::load_graph against cpu-host on 2 nodes), then the graph is
// simulated (when small) and written back (sim::graph_to_json).
#include "common/strict_json.hpp"
#include "fuzz/fuzz_common.hpp"
#include "hardware/cluster.hpp"
#include "sim/graph_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const hardware::ClusterSpec cluster = [] {
    auto c = hardware::load_cluster("cpu-host");
    hardware::set_nodes(c, 2, "fuzz");
    return c;
  }();
  static const auto cost = hardware::make_analytic_cost_model(cluster, hardware::Stack::eager);  // the default plan's stack
  fuzz::guard([&] {
    const auto j = common::parse_json_strict(fuzz::text(data, size), "fuzz-graph.json", "a step graph JSON file");
    (void)sim::saved_cluster(j, "fuzz-graph.json");
    const sim::StepGraph g = sim::load_graph(j, "fuzz-graph.json", cluster);
    if (g.size() <= 20000) {
      sim::Engine engine(*cost, {.timeline = true});
      (void)engine.simulate(g);
    }
    (void)sim::graph_to_json(g, cluster).dump();
  });
  return 0;
}
