#include "sim/step_graph.hpp"

#include <fmt/format.h>

#include <cctype>
#include <ostream>
#include <stdexcept>

namespace sim {

namespace {

/// Finds the enumerator whose to_string is `s` among the first `count` values.
template <typename E>
bool parse_enum(std::string_view s, E& out, int count) {
  for (int i = 0; i < count; ++i)
    if (to_string(static_cast<E>(i)) == s) {
      out = static_cast<E>(i);
      return true;
    }
  return false;
}

}  // namespace

std::string_view to_string(StreamKind k) { return k == StreamKind::compute ? "compute" : "comm"; }

// "<X>_comm" -> "<X> communication", X upper-cased only when it is an acronym of up to 3 letters
// ("TP communication", "param communication" for ZeRO's parameter gathers)
std::string stream_label(std::string_view name) {
  constexpr std::string_view suffix = "_comm";
  if (name.size() <= suffix.size() || name.substr(name.size() - suffix.size()) != suffix) return std::string(name);
  std::string s(name.substr(0, name.size() - suffix.size()));
  if (s.size() <= 3)  // an acronym: TP, DP, PP
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s + " communication";  // param_comm (ZeRO's parameter gathers): "param communication"
}
bool parse_stream_kind(std::string_view s, StreamKind& out) { return parse_enum(s, out, 2); }

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
bool parse_phase(std::string_view s, Phase& out) { return parse_enum(s, out, 5); }

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
    case Op::pipe: return "pipe";
    case Op::param_gather: return "param_gather";
  }
  return "?";
}
bool parse_op(std::string_view s, Op& out) { return parse_enum(s, out, static_cast<int>(Op::param_gather) + 1); }

std::string_view to_string(TensorRole r) {
  switch (r) {
    case TensorRole::input: return "input";
    case TensorRole::activation: return "activation";
    case TensorRole::gradient: return "gradient";
    case TensorRole::weight: return "weight";
    case TensorRole::weight_grad: return "weight_grad";
  }
  return "?";
}
bool parse_tensor_role(std::string_view s, TensorRole& out) { return parse_enum(s, out, 5); }

std::string_view to_string(FusedPiece f) {
  switch (f) {
    case FusedPiece::none: return "none";
    case FusedPiece::gemm: return "gemm";
    case FusedPiece::ag_copy: return "ag_copy";
    case FusedPiece::ag_copy_first: return "ag_copy_first";
    case FusedPiece::rs_store: return "rs_store";
    case FusedPiece::rs_pull: return "rs_pull";
  }
  return "?";
}
bool parse_fused_piece(std::string_view s, FusedPiece& out) { return parse_enum(s, out, static_cast<int>(FusedPiece::rs_pull) + 1); }

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
  if (micro >= 0) s += fmt::format("[mb{}]", micro);
  return s;
}

StreamId StepGraph::stream_id(std::string_view name) const {
  for (std::size_t i = 0; i < streams.size(); ++i)
    if (streams[i].name == name) return static_cast<StreamId>(i);
  throw std::out_of_range(fmt::format("step graph of rank {} has no stream '{}'", rank, name));
}

std::optional<GroupId> StepGraph::group_id(std::string_view name) const {
  for (std::size_t i = 0; i < groups.size(); ++i)
    if (groups[i].name == name) return static_cast<GroupId>(i);
  return std::nullopt;
}

std::string StepGraph::task_name(std::size_t i) const {
  const auto& t = tasks[i];
  std::string s = t.micro >= 0 ? fmt::format("mb{} ", t.micro) : std::string();
  if (t.layer >= 0) s += fmt::format("L{} ", t.layer);
  s += fmt::format("{} {}", t.recompute ? std::string_view("recompute") : to_string(t.phase), to_string(t.op));
  if (const auto* c = std::get_if<hardware::CollectiveOp>(&t.kind)) s += fmt::format(" {}", hardware::to_string(c->kind));
  if (t.slice >= 0) s += fmt::format(" s{}", t.slice);
  if (t.chunk >= 0) s += fmt::format(" c{}", t.chunk);
  return s;
}

std::string StepGraph::task_class(std::size_t i) const {
  const Task& t = tasks[i];
  if (auto* c = std::get_if<hardware::CollectiveOp>(&t.kind)) {
    const char* name = c->kind == hardware::CollectiveKind::all_reduce       ? "AllReduce"
                       : c->kind == hardware::CollectiveKind::all_gather     ? "AllGather"
                       : c->kind == hardware::CollectiveKind::reduce_scatter ? "ReduceScatter"
                       : c->kind == hardware::CollectiveKind::send_recv      ? "SendRecv"
                       : c->kind == hardware::CollectiveKind::broadcast      ? "Broadcast"
                       : c->kind == hardware::CollectiveKind::reduce         ? "Reduce"
                                                                             : "collective";
    return t.group ? fmt::format("{} ({})", name, groups[*t.group].name) : std::string(name);
  }
  if (std::holds_alternative<hardware::GemmOp>(t.kind)) return "GEMM";
  if (std::holds_alternative<hardware::AttentionOp>(t.kind)) return "attention";
  if (std::holds_alternative<hardware::OptimizerOp>(t.kind)) return "optimizer";
  return "element-wise";
}

double StepGraph::micro_batch_flops() const {  // every micro-batch the graph issues
  double f = 0;
  for (const auto& t : tasks)
    if (!t.once_per_step && !t.step_start && !t.recompute) f += t.flops();
  return f;
}

void StepGraph::write_dot(std::ostream& os, const DotOptions& options) const {
  auto drawn = [&](std::size_t i) {
    return !options.layers || (tasks[i].layer >= options.layers->first && tasks[i].layer <= options.layers->second);
  };
  os << "digraph step {\n  rankdir=TB;\n  node [shape=box, fontsize=9];\n";
  static constexpr const char* colors[] = {"lightblue", "orange", "palegreen", "plum", "khaki", "lightpink", "lightgray"};
  constexpr std::size_t kColors = sizeof(colors) / sizeof(colors[0]);
  for (std::size_t i = 0; i < tasks.size(); ++i)
    if (drawn(i))
      os << fmt::format("  t{} [label=\"{}\", style=filled, fillcolor={}];\n", i, task_name(i), colors[tasks[i].stream % kColors]);
  for (std::size_t i = 0; i < tasks.size(); ++i)
    if (drawn(i))
      for (auto v : boost::make_iterator_range(successors(i)))
        if (drawn(v)) os << fmt::format("  t{} -> t{};\n", i, v);
  os << "}\n";
}

StepGraph StepGraph::assemble(std::vector<Task> tasks, const std::vector<std::pair<std::uint32_t, std::uint32_t>>& edges,
                              const Plan& plan, std::vector<StreamSpec> streams, std::vector<GroupSpec> groups) {
  StepGraph g;
  g.tasks = std::move(tasks);
  g.plan = plan;
  g.streams = std::move(streams);
  g.groups = std::move(groups);
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    const Task& t = g.tasks[i];
    if (t.stream >= g.streams.size())
      throw std::invalid_argument(fmt::format("StepGraph::assemble: task {} is on stream {}, the graph has {}", i, t.stream, g.streams.size()));
    if (t.group && *t.group >= g.groups.size())
      throw std::invalid_argument(fmt::format("StepGraph::assemble: task {} is in group {}, the graph has {}", i, *t.group, g.groups.size()));
    if (t.is_collective() && !t.group)
      throw std::invalid_argument(fmt::format("StepGraph::assemble: collective task {} names no group", i));
  }
  for (const auto& [from, to] : edges)
    if (from >= to || to >= g.tasks.size())
      throw std::invalid_argument(fmt::format("StepGraph::assemble: edge {} -> {} must go forward in issue order", from, to));
  g.graph = Graph(boost::edges_are_unsorted_multi_pass, edges.begin(), edges.end(), g.tasks.size());
  g.in_degree.assign(g.tasks.size(), 0);
  for (const auto& e : edges) ++g.in_degree[e.second];
  return g;
}

}  // namespace sim
