// defines: sim::StepGraph (the DAG of one rank's training step, with the streams and communicator
//          groups it declares), DotOptions, build_step_graph
#pragma once
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/range/iterator_range.hpp>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hardware/cluster.hpp"
#include "sim/model.hpp"
#include "sim/plan.hpp"
#include "sim/resources.hpp"
#include "sim/task.hpp"

namespace sim {

/// @brief Which tasks write_dot draws.
struct DotOptions {
  /// Draw only the tasks of transformer layers [first, last] (and the edges among them); unset:
  /// every task, including those outside the layers (embedding, head, DP reduction, optimizer).
  std::optional<std::pair<int, int>> layers;
};

/// @brief One micro-batch's forward and backward of one rank, plus the once-per-step DP gradient
/// reduction and optimizer (flagged Task::once_per_step). Vertex i is tasks[i]; vertex order is
/// host issue order (on each stream, tasks run in that order). Edges are dependencies: data
/// (read after write, write after read/write) plus ordering edges the strategy adds.
/// The graph declares its own resources: `streams` (Task::stream indexes them) and `groups`
/// (Task::group). Ranks that are not identical (pipeline stages, 2D grid positions) have graphs of
/// their own; the engine simulates them together (Engine::simulate over several graphs).
/// Move-only in practice (large); immutable once built.
struct StepGraph {
  using Graph = boost::compressed_sparse_row_graph<boost::directedS>;

  Graph graph;
  std::vector<Task> tasks;
  std::vector<TensorInfo> tensors;
  std::vector<TensorId> operands;  ///< Task::operand_begin indexes here: inputs, then outputs
  std::vector<std::uint32_t> in_degree;
  std::vector<StreamSpec> streams;
  std::vector<GroupSpec> groups;

  ModelSpec model;
  Plan plan;
  int rank = 0;        ///< the rank this graph is
  int represents = 1;  ///< ranks identical to this one by symmetry (simulated once)
  /// Micro-batches the graph issues: 1 - one micro-batch, which the engine and the executor repeat
  /// plan.grad_accum_steps() times (the last time with the once-per-step tasks); a pipeline stage's
  /// graph issues every micro-batch of the step in its schedule's order (Task::micro tags them).
  int micro_batches = 1;

  std::size_t size() const { return tasks.size(); }
  std::span<const TensorId> inputs(std::size_t t) const {
    return {operands.data() + tasks[t].operand_begin, tasks[t].n_inputs};
  }
  std::span<const TensorId> outputs(std::size_t t) const {
    return {operands.data() + tasks[t].operand_begin + tasks[t].n_inputs, tasks[t].n_outputs};
  }
  /// Successors of task t (vertex ids).
  auto successors(std::size_t t) const { return boost::adjacent_vertices(static_cast<Graph::vertex_descriptor>(t), graph); }
  /// The stream task t runs on.
  const StreamSpec& stream_of(std::size_t t) const { return streams[tasks[t].stream]; }
  /// Whether task t runs on a compute stream.
  bool on_compute(std::size_t t) const { return streams[tasks[t].stream].kind == StreamKind::compute; }
  /// Index of the stream named `name`; throws std::out_of_range if the graph has none.
  StreamId stream_id(std::string_view name) const;
  /// Index of the group named `name`, if the graph declares one.
  std::optional<GroupId> group_id(std::string_view name) const;
  /// Human-readable task name: "L3 fwd fc2 s1 c0".
  std::string task_name(std::size_t t) const;
  /// "GEMM", "attention", "element-wise", "optimizer", or the collective with its group:
  /// "AllReduce (tp)", "AllGather (tp)", "ReduceScatter (tp)", "AllReduce (dp)" - the classes
  /// validation and reports sum tasks by.
  std::string task_class(std::size_t t) const;
  /// Sum of Task::flops() over the micro-batches the graph issues (once_per_step tasks excluded).
  double micro_batch_flops() const;
  /// Whether the graph is one pipeline stage's whole step (micro_batches > 1 or plan.pp > 1).
  bool pipelined() const { return plan.pp > 1; }
  /// Writes the graph (or the layers `options` select) in Graphviz DOT, one colour per stream.
  void write_dot(std::ostream& os, const DotOptions& options = {}) const;

  /// @brief Assembles a graph from tasks (issue order) and dependency edges (from, to) with
  /// from < to, on the given streams and groups - for hand-built and loaded graphs. Throws
  /// std::invalid_argument naming the task or edge that refers to something absent.
  static StepGraph assemble(std::vector<Task> tasks, const std::vector<std::pair<std::uint32_t, std::uint32_t>>& edges,
                            const Plan& plan, std::vector<StreamSpec> streams, std::vector<GroupSpec> groups);
};

/// @brief Builds the step graph of `rank` for `plan` (resolved and feasible): the plan's strategy
/// (sim/strategy.hpp) schedules the layers with the builder's vocabulary (sim/builder.hpp).
StepGraph build_step_graph(const ModelSpec& model, const hardware::ClusterSpec& cluster, const Plan& plan, int rank = 0);

}  // namespace sim
