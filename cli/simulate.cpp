// slicetune simulate: one plan through the step graph and the engine.
#include <fmt/format.h>

#include <fstream>
#include <iostream>

#include "cli/command.hpp"
#include "common/atomic_write.hpp"
#include "hardware/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/report_json.hpp"
#include "sim/trace.hpp"

namespace {

struct SimulateFlags {
  cli::TargetFlags target;
  bool json = false;
  std::string trace, dot;
};

void run_simulate(const SimulateFlags& f) {
  common::check_output_path(f.trace, "--trace");
  common::check_output_path(f.dot, "--dot");
  sim::Target t = sim::resolve_target(f.target.input());
  auto cost = f.target.cost_model(t.cluster);
  sim::StepGraph g = sim::build_step_graph(t.model, t.cluster, t.plan);
  sim::Engine engine(*cost, {.timeline = !f.trace.empty()});
  sim::StepReport r = engine.simulate(g);
  if (!f.trace.empty()) sim::ChromeTrace().add("predicted", r).write(f.trace);
  if (!f.dot.empty()) {
    std::ostringstream os;
    g.write_dot(os);
    common::write_file_atomically(f.dot, os.str());
  }
  if (r.memory.total() > t.cluster.gpu.hbm_capacity_bytes)
    fmt::print(stderr, "slicetune: warning: the plan needs {:.1f} GB per GPU, more than the {:.0f} GB of {}\n", r.memory.total() / 1e9,
               t.cluster.gpu.hbm_capacity_bytes / 1e9, t.cluster.gpu.name);
  if (f.json) {
    std::cout << sim::report_json(t, r, cost->describe()).dump(2) << "\n";
    return;
  }
  fmt::print("slicetune simulate: {} on {} ({} node{} x {} GPUs), {} cost model\n", t.model.name, t.cluster.name, t.cluster.nodes,
             t.cluster.nodes > 1 ? "s" : "", t.cluster.node.gpus_per_node, cost->describe());
  fmt::print("plan ({}): {}, global batch {} ({} micro-batch{}), seq {}, {}, stack {}\n\n", t.plan_source, sim::describe(t.plan),
             t.plan.global_batch, t.plan.grad_accum_steps(), t.plan.grad_accum_steps() > 1 ? "es" : "", t.plan.seq_len,
             common::to_string(t.plan.dtype), hardware::to_string(t.plan.stack));
  fmt::print("{}", sim::report_table(t, r));
  if (!f.trace.empty()) fmt::print("\ntrace: {} (open in https://ui.perfetto.dev or chrome://tracing)\n", f.trace);
}

const bool registered = cli::register_command(10, [](CLI::App& app) {
  auto flags = std::make_shared<SimulateFlags>();
  auto* cmd = app.add_subcommand("simulate", "predict one training step of a plan (step graph + discrete-event engine)");
  cli::add_target_flags(cmd, flags->target);
  cmd->add_flag("--json", flags->json, "print one JSON object instead of the table");
  cmd->add_option("--trace", flags->trace, "write a Chrome-trace timeline (Perfetto) of the step");
  cmd->add_option("--dot", flags->dot, "write the step graph in Graphviz DOT");
  cmd->callback([flags] { run_simulate(*flags); });
});

}  // namespace
