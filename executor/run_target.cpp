#include "executor/run_target.hpp"

#include <fmt/format.h>

#include "common/config_reader.hpp"
#include "sim/strategy.hpp"

namespace executor {

sim::Target resolve_run_target(sim::TargetInput in, int world) {
  sim::Target t;
  t.model = sim::load_model(in.model);
  t.cluster = in.cluster_spec ? *in.cluster_spec : hardware::load_cluster(in.cluster);
  if (in.nodes) {
    hardware::set_nodes(t.cluster, *in.nodes, "--nodes");
  } else if (world % t.cluster.node.gpus_per_node == 0) {
    t.cluster.nodes = world / t.cluster.node.gpus_per_node;
  } else if (world < t.cluster.node.gpus_per_node) {
    t.cluster.nodes = 1;  // a partly used node: describe it as a node of `world` ranks
    t.cluster.node.gpus_per_node = world;
  }
  sim::PlanInput pi;
  t.plan_source = "flags";
  if (!in.plan_file.empty()) {
    pi = sim::load_plan_input(in.plan_file);
    t.plan_source = in.plan_file;
  }
  pi.merge(in.flags);
  // a 2D / 2.5D grid given by its side (and depth) alone: tp = q^2 x d (resolve_plan checks the rest)
  const bool grid = pi.tp_layout && *pi.tp_layout != sim::TpLayout::one_d;
  const int tp = !pi.tp && grid && pi.tp_q ? *pi.tp_q * *pi.tp_q * pi.tp_d.value_or(1) : pi.tp.value_or(1), pp = pi.pp.value_or(1);
  if (tp > 0 && world % tp != 0)
    throw common::ConfigError("--tp", "", fmt::format("tp={} does not divide the {} MPI ranks (mpirun -np)", tp, world));
  if (tp > 0 && pp > 0 && world % (tp * pp) != 0)
    throw common::ConfigError("--pp", "", fmt::format("tp x pp = {} x {} does not divide the {} MPI ranks (mpirun -np)", tp, pp, world));
  if (!pi.dp && tp > 0 && pp > 0) pi.dp = world / (tp * pp);
  if (!pi.dtype && t.cluster.gpu.arch == hardware::GpuArch::cpu) pi.dtype = common::DType::fp32;
  // The executor issues every task from C++ (no Python, no graph capture): the cpp stack, not the
  // eager one that describes Megatron-LM (host.stacks.eager).
  if (!pi.stack) pi.stack = hardware::Stack::cpp;
  if (!pi.micro_batch && !grid && pi.row_axis.value_or(sim::RowAxis::batch) == sim::RowAxis::batch) {
    // one sequence per row slice: the smallest micro-batch a batch-axis Domino plan can slice
    const sim::Strategy& st = *pi.strategy.value_or(&sim::default_strategy());
    const sim::Knob* rows = st.knob("row_slices");
    pi.micro_batch = pi.row_slices.value_or(rows ? rows->default_value : 1);
  }
  t.plan = sim::resolve_plan(t.model, t.cluster, pi, t.plan_source);
  if (!t.plan.strategy->not_executed.empty())
    throw common::ConfigError(t.plan_source, "strategy",
                              fmt::format("slicetune run cannot execute strategy {}: {}", t.plan.strategy->name, t.plan.strategy->not_executed));
  if (t.plan.grid_tp() && t.model.tied_embeddings)  // executor/init.hpp, weight_layout
    throw common::ConfigError(t.plan_source, "tp_layout",
                              fmt::format("slicetune run cannot execute tp_layout {} with tied embeddings (model {}): grid rank (i, j) holds "
                                          "the embedding's block [vocab i, hidden j] and the LM head's [vocab j, hidden i] (the graph's "
                                          "SUMMA product X W^T), so one tied weight cannot be both; use a model with tied_embeddings: false",
                                          sim::to_string(t.plan.tp_layout), t.model.name));
  // domino's row slices on a grid put each slice's collectives on row / column communicators of
  // their own (groups row<i>, col<i>: sim/builder_grid.cpp), which the backends do not create
  if (t.plan.grid_tp() && t.plan.row_slices > 1)
    throw common::ConfigError(t.plan_source, "row_slices",
                              fmt::format("slicetune run cannot execute tp_layout {} with row_slices={}: each slice's row and column "
                                          "communicators (groups row1, col1, ...) are simulated only; use row_slices: 1 on a grid",
                                          sim::to_string(t.plan.tp_layout), t.plan.row_slices));
  if (t.plan.gpus() != world)
    throw common::ConfigError("mpirun -np", "", fmt::format("the plan needs tp x dp x pp = {} x {} x {} = {} ranks, got {}", t.plan.tp,
                                                             t.plan.dp, t.plan.pp, t.plan.gpus(), world));
  return t;
}

}  // namespace executor
