// slicetune simulate: one plan (or a saved step graph) through the step graph and the engine.
#include <fmt/format.h>

#include <charconv>
#include <fstream>
#include <iostream>

#include "bridge/export.hpp"
#include "cli/command.hpp"
#include "common/atomic_write.hpp"
#include "hardware/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/graph_json.hpp"
#include "sim/pipeline_step.hpp"
#include "sim/report_json.hpp"
#include "sim/strategy.hpp"
#include "sim/trace.hpp"

namespace {

struct SimulateFlags {
  cli::TargetFlags target;
  bool json = false, all_micro_batches = false;
  std::string trace, dot, dot_layers, save_graph, graph, export_framework;
};

/// "3" or "0-1": the layers --dot draws.
std::pair<int, int> parse_layer_range(const std::string& text, int layers) {
  auto number = [&](std::string_view s, int& out) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size();
  };
  const auto dash = text.find('-');
  int a = 0, b = 0;
  const bool ok = dash == std::string::npos ? number(text, a) && number(text, b)
                                            : number(std::string_view(text).substr(0, dash), a) && number(std::string_view(text).substr(dash + 1), b);
  if (!ok || a < 0 || b < a || b >= layers)
    cli::bad_flag("--dot-layers", fmt::format("expected a layer or FIRST-LAST within 0-{} (e.g. 0-1), got '{}'", layers - 1, text));
  return {a, b};
}

/// The target of a saved graph (or of a pipelined step's stage graphs): its model and plan, on its
/// cluster unless --cluster / --nodes say otherwise.
sim::Target graph_target(const SimulateFlags& f, std::vector<sim::StepGraph>& graphs) {
  const auto& cmd = *f.target.cmd;
  for (const char* flag : {"--plan", "--model", "--tp", "--tp-layout", "--tp-q", "--tp-d", "--tp-grid-order", "--dp", "--pp", "--vp", "--schedule", "--pipeline-layers", "--p2p-overlap", "--micro-batch",
                           "--global-batch", "--seq-len", "--dtype", "--sequence-parallel", "--strategy", "--dp-bucket-mb", "--stack",
                           "--megatron-args", "--megatron-args-file", "--deepspeed-config", "--recompute", "--recompute-method",
                           "--recompute-layers", "--zero", "--overlap-grad-reduce", "--overlap-param-gather", "--attention"})
    if (cmd.count(flag)) cli::bad_flag(flag, "the model and plan come from the --graph file; drop this flag");
  for (const sim::Knob* k : sim::plan_knobs())
    if (cmd.count(std::string(k->flag))) cli::bad_flag(std::string(k->flag), "the plan comes from the --graph file; drop this flag");
  const auto j = sim::read_graph_file(f.graph);
  const auto [name, nodes] = sim::saved_cluster(j, f.graph);
  sim::TargetInput in = f.target.input();
  sim::Target t;
  t.cluster = in.cluster_spec ? *in.cluster_spec : hardware::load_cluster(cmd.count("--cluster") ? f.target.cluster : name);
  // range-checked (nodes and nodes x GPUs per node) before anything is sized by it
  if (in.nodes) hardware::set_nodes(t.cluster, *in.nodes, "--nodes");
  else hardware::set_nodes(t.cluster, nodes, f.graph + ": nodes");
  graphs = sim::load_graphs(j, f.graph, t.cluster);
  t.model = graphs[0].model;
  t.plan = graphs[0].plan;
  t.plan_source = f.graph;
  return t;
}

void run_simulate(const SimulateFlags& f) {
  // outputs checked before any work
  common::check_output_path(f.trace, "--trace");
  common::check_output_path(f.dot, "--dot");
  common::check_output_path(f.save_graph, "--save-graph");
  if (!f.dot_layers.empty() && f.dot.empty()) cli::bad_flag("--dot-layers", "needs --dot FILE");
  sim::Target t;
  std::vector<sim::StepGraph> graphs(1);
  if (!f.graph.empty()) {
    t = graph_target(f, graphs);
  } else {
    t = f.target.resolve();
  }
  if (!f.dot_layers.empty() && f.dot.empty()) cli::bad_flag("--dot-layers", "needs --dot FILE");
  auto cost = f.target.cost_model(t.cluster, t.plan.stack);
  sim::StepReport r;
  std::string note;
  if (!f.graph.empty()) {
    r = sim::simulate_stages(sim::Engine(*cost, {.timeline = !f.trace.empty()}), graphs);
  } else {
    // a trace shows every micro-batch; otherwise a long pipelined step is extrapolated from two shorter ones
    auto sp = sim::simulate_plan(t.model, t.cluster, t.plan, *cost, {.timeline = !f.trace.empty()}, f.all_micro_batches || !f.trace.empty());
    graphs = std::move(sp.graphs);
    r = std::move(sp.report);
    if (sp.extrapolated())
      note = fmt::format("pipeline: {} and {} of the {} micro-batches simulated, the step extrapolated linearly from them (--all-micro-batches: all)\n",
                         sp.micro_batches_lo, sp.micro_batches_hi, t.plan.grad_accum_steps());
  }
  const sim::StepGraph& g = graphs[0];
  if (!f.trace.empty()) sim::ChromeTrace(cost.get()).add("predicted", r).write(f.trace);
  if (!f.dot.empty()) {
    sim::DotOptions d;
    if (!f.dot_layers.empty()) d.layers = parse_layer_range(f.dot_layers, t.model.layers);
    std::ostringstream os;
    g.write_dot(os, d);
    common::write_file_atomically(f.dot, os.str());
  }
  std::size_t saved_tasks = 0;
  if (!f.save_graph.empty()) {
    // the step's own graphs: an extrapolated pipelined step was simulated with fewer micro-batches
    const auto whole = note.empty() ? std::vector<sim::StepGraph>{} : sim::build_stage_graphs(t.model, t.cluster, t.plan);
    const auto& out = note.empty() ? graphs : whole;
    for (const auto& sg : out) saved_tasks += sg.size();
    sim::save_graphs(f.save_graph, out, t.cluster);
  }
  if (!r.memory.fits())
    fmt::print(stderr,
               "slicetune: warning: the plan needs {:.1f} GB per GPU, {:.1f} GB more than the {:.1f} GB it may use of {} ({:.0f} GB, "
               "{:g} % kept free for fragmentation)\n",
               r.memory.total() / 1e9, r.memory.over() / 1e9, r.memory.usable() / 1e9, t.cluster.gpu.name,
               t.cluster.gpu.hbm_capacity_bytes / 1e9, 100 * r.memory.reserve_fraction);
  if (!f.export_framework.empty()) {
    const auto fw = bridge::parse_framework(f.export_framework, "--export");
    std::cout << bridge::export_plan(fw, {.model = t.model, .cluster = t.cluster, .plan = t.plan,
                                          .headline = fmt::format("slicetune simulate: {} on {} x {}: {} — predicted {:.2f} ms per step, {:.0f} tokens/s",
                                                                  t.model.name, t.cluster.nodes, t.cluster.name, sim::describe(t.plan),
                                                                  r.step_time.ms(), r.tokens_per_s)});
    return;
  }
  const auto range = sim::range_for(t.plan, t.cluster, cost->describe(), r.step_time);
  if (f.json) {
    auto j = sim::report_json(t, r, cost->describe(), range);
    j["schema_version"] = cli::kJsonSchemaVersion;
    std::cout << j.dump(2) << "\n";
    return;
  }
  fmt::print("slicetune simulate: {} on {} ({} node{} x {} GPUs), {} cost model\n", t.model.name, t.cluster.name, t.cluster.nodes,
             t.cluster.nodes > 1 ? "s" : "", t.cluster.node.gpus_per_node, cost->describe());
  fmt::print("plan ({}): {}, global batch {} ({} micro-batch{}), seq {}, {}, stack {}\n\n", t.plan_source, sim::describe(t.plan),
             t.plan.global_batch, t.plan.grad_accum_steps(), t.plan.grad_accum_steps() > 1 ? "es" : "", t.plan.seq_len,
             common::to_string(t.plan.dtype), hardware::to_string(t.plan.stack));
  fmt::print("{}{}", note, note.empty() ? "" : "\n");
  fmt::print("{}", sim::report_table(t, r, range));
  if (range)
    fmt::print("\nrange: where the true step time lies if this prediction errs as the model's out-of-sample step predictions did ({}; docs/accuracy.md)\n",
               range->band->basis);
  fmt::print("\n{}", sim::memory_table(t.plan, r.memory));
  if (!f.trace.empty()) fmt::print("\ntrace: {} (open in https://ui.perfetto.dev or chrome://tracing)\n", f.trace);
  if (!f.save_graph.empty()) {
    if (t.plan.pp > 1)
      fmt::print("graph: {} ({} stage graphs, {} tasks, every micro-batch; simulate it again with --graph)\n", f.save_graph, t.plan.pp,
                 saved_tasks);
    else
      fmt::print("graph: {} ({} tasks; simulate it again with --graph)\n", f.save_graph, saved_tasks);
  }
}

const bool registered = cli::register_command(10, "simulate", "predict one training step of a plan (step graph + discrete-event engine)", [](CLI::App* cmd) {
  auto flags = std::make_shared<SimulateFlags>();
  cli::add_target_flags(cmd, flags->target);
  cmd->footer(cli::kRangeHelp);
  cmd->add_flag("--json", flags->json, "print one JSON object instead of the table");
  cmd->add_option("--trace", flags->trace, "write a Chrome-trace timeline (Perfetto) of the step");
  cmd->add_option("--dot", flags->dot, "write the step graph in Graphviz DOT (pipelined plans: stage 0's)");
  cmd->add_flag("--all-micro-batches", flags->all_micro_batches,
                "pipelined plans: simulate every micro-batch of the step (default: two shorter steps, extrapolated, when m > 3 pp)");
  cmd->add_option("--dot-layers", flags->dot_layers, "with --dot: draw only layers FIRST-LAST (e.g. 0-1) or one layer");
  cmd->add_option("--save-graph", flags->save_graph,
                  "write the step graph as JSON (tasks, tensors, streams, groups, edges; pipelined plans: one graph per stage, every micro-batch)");
  cmd->add_option("--graph", flags->graph,
                  "simulate a step graph saved with --save-graph (or edited by hand) instead of building one; its cluster unless "
                  "--cluster/--nodes");
  cmd->add_option("--export", flags->export_framework,
                  "print the plan as a launch script for megatron | deepspeed-domino | nemo (arguments, environment, what it cannot express)");
  cmd->callback([flags] { run_simulate(*flags); });
});

}  // namespace
