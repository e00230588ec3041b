#include "sim/step_graph.hpp"

#include <fmt/format.h>

#include <ostream>
#include <stdexcept>

namespace sim {

std::string_view to_string(Stream s) {
  switch (s) {
    case Stream::compute: return "compute";
    case Stream::tp_comm: return "tp_comm";
    case Stream::dp_comm: return "dp_comm";
  }
  return "?";
}

std::string_view to_string(Phase p) {
  switch (p) {
    case Phase::fwd: return "fwd";
    case Phase::bwd_dgrad: return "bwd-dgrad";
    case Phase::bwd_wgrad: return "bwd-wgrad";
    case Phase::dp_reduce: return "dp";
    case Phase::optimizer: return "optimizer";
  }
  return "?";
}

std::string_view to_string(Op o) {
  switch (o) {
    case Op::embedding: return "embedding";
    case Op::norm1: return "norm1";
    case Op::qkv: return "qkv";
    case Op::attention: return "attention";
    case Op::out_proj: return "out_proj";
    case Op::attn_comm: return "attn_comm";
    case Op::residual1: return "residual1";
    case Op::norm2: return "norm2";
    case Op::fc1: return "fc1";
    case Op::activation: return "activation";
    case Op::fc2: return "fc2";
    case Op::mlp_comm: return "mlp_comm";
    case Op::residual2: return "residual2";
    case Op::final_norm: return "final_norm";
    case Op::lm_head: return "lm_head";
    case Op::loss_comm: return "loss_comm";
    case Op::loss: return "loss";
    case Op::embed_comm: return "embed_comm";
    case Op::dp_reduce: return "dp_reduce";
    case Op::optimizer: return "optimizer";
  }
  return "?";
}

double Task::flops() const {
  if (const auto* g = std::get_if<hardware::GemmOp>(&kind)) return g->flops();
  if (const auto* a = std::get_if<hardware::AttentionOp>(&kind)) return a->flops();
  return 0.0;
}

std::string TensorInfo::name() const {
  static constexpr const char* roles[] = {"in", "", "d", "W", "dW"};
  std::string s = layer >= 0 ? fmt::format("L{}.", layer) : std::string();
  s += roles[static_cast<int>(role)];
  if (role == TensorRole::activation && backward) s += "d";
  s += to_string(op);
  if (variant) s += fmt::format("#{}", variant);
  if (slice >= 0) s += fmt::format("[s{}]", slice);
  if (chunk >= 0) s += fmt::format("[c{}]", chunk);
  return s;
}

std::string StepGraph::task_name(std::size_t i) const {
  const auto& t = tasks[i];
  std::string s = t.layer >= 0 ? fmt::format("L{} ", t.layer) : std::string();
  s += fmt::format("{} {}", to_string(t.phase), to_string(t.op));
  if (const auto* c = std::get_if<hardware::CollectiveOp>(&t.kind)) s += fmt::format(" {}", hardware::to_string(c->kind));
  if (t.slice >= 0) s += fmt::format(" s{}", t.slice);
  if (t.chunk >= 0) s += fmt::format(" c{}", t.chunk);
  return s;
}

double StepGraph::micro_batch_flops() const {
  double f = 0;
  for (const auto& t : tasks)
    if (!t.once_per_step) f += t.flops();
  return f;
}

void StepGraph::write_dot(std::ostream& os) const {
  os << "digraph step {\n  rankdir=TB;\n  node [shape=box, fontsize=9];\n";
  static constexpr const char* colors[] = {"lightblue", "orange", "palegreen"};
  for (std::size_t i = 0; i < tasks.size(); ++i)
    os << fmt::format("  t{} [label=\"{}\", style=filled, fillcolor={}];\n", i, task_name(i),
                      colors[static_cast<int>(tasks[i].stream)]);
  for (std::size_t i = 0; i < tasks.size(); ++i)
    for (auto v : boost::make_iterator_range(successors(i))) os << fmt::format("  t{} -> t{};\n", i, v);
  os << "}\n";
}

StepGraph StepGraph::assemble(std::vector<Task> tasks, const std::vector<std::pair<std::uint32_t, std::uint32_t>>& edges,
                              const Plan& plan) {
  StepGraph g;
  g.tasks = std::move(tasks);
  g.plan = plan;
  for (const auto& [from, to] : edges)
    if (from >= to || to >= g.tasks.size())
      throw std::invalid_argument(fmt::format("StepGraph::assemble: edge {} -> {} must go forward in issue order", from, to));
  g.graph = Graph(boost::edges_are_unsorted_multi_pass, edges.begin(), edges.end(), g.tasks.size());
  g.in_degree.assign(g.tasks.size(), 0);
  for (const auto& e : edges) ++g.in_degree[e.second];
  return g;
}

std::string task_class(const Task& t) {
  if (auto* c = std::get_if<hardware::CollectiveOp>(&t.kind)) {
    const char* name = c->kind == hardware::CollectiveKind::all_reduce       ? "AllReduce"
                       : c->kind == hardware::CollectiveKind::all_gather     ? "AllGather"
                       : c->kind == hardware::CollectiveKind::reduce_scatter ? "ReduceScatter"
                                                                             : "collective";
    return fmt::format("{} ({})", name, t.group == CommGroup::dp ? "dp" : "tp");
  }
  if (std::holds_alternative<hardware::GemmOp>(t.kind)) return "GEMM";
  if (std::holds_alternative<hardware::AttentionOp>(t.kind)) return "attention";
  if (std::holds_alternative<hardware::OptimizerOp>(t.kind)) return "optimizer";
  return "element-wise";
}

}  // namespace sim
