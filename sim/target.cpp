#include "sim/target.hpp"

#include "common/config_reader.hpp"

namespace sim {

Target resolve_target(const TargetInput& in, bool check) {
  Target t;
  t.model = load_model(in.model);
  t.cluster = in.cluster_spec ? *in.cluster_spec : hardware::load_cluster(in.cluster);
  if (in.nodes) hardware::set_nodes(t.cluster, *in.nodes, "--nodes");
  PlanInput pi;
  t.plan_source = "flags";
  if (!in.plan_file.empty()) {
    pi = load_plan_input(in.plan_file);
    t.plan_source = in.plan_file;
  }
  pi.merge(in.flags);
  t.plan = check ? resolve_plan(t.model, t.cluster, pi, t.plan_source) : fill_plan(t.model, t.cluster, pi, t.plan_source);
  return t;
}

}  // namespace sim
