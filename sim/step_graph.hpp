// defines: sim::StepGraph (the DAG of one rank's training step), build_step_graph
#pragma once
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/range/iterator_range.hpp>
#include <span>
#include <vector>

#include "hardware/cluster.hpp"
#include "sim/model.hpp"
#include "sim/plan.hpp"
#include "sim/task.hpp"

namespace sim {

/// @brief One micro-batch's forward and backward of one rank, plus the once-per-step DP gradient
/// reduction and optimizer (flagged Task::once_per_step). Vertex i is tasks[i]; vertex order is
/// host issue order (on each stream, tasks run in that order). Edges are dependencies: data
/// (read after write, write after read/write) plus ordering edges the strategy adds.
/// Move-only in practice (large); immutable once built.
struct StepGraph {
  using Graph = boost::compressed_sparse_row_graph<boost::directedS>;

  Graph graph;
  std::vector<Task> tasks;
  std::vector<TensorInfo> tensors;
  std::vector<TensorId> operands;  ///< Task::operand_begin indexes here: inputs, then outputs
  std::vector<std::uint32_t> in_degree;

  ModelSpec model;
  Plan plan;
  int rank = 0;        ///< the rank this graph is
  int represents = 1;  ///< ranks identical to this one by symmetry (simulated once)
  int tp_instance = 0, dp_instance = 0;  ///< which TP / DP group the rank belongs to (cross-rank collective matching)

  std::size_t size() const { return tasks.size(); }
  std::span<const TensorId> inputs(std::size_t t) const {
    return {operands.data() + tasks[t].operand_begin, tasks[t].n_inputs};
  }
  std::span<const TensorId> outputs(std::size_t t) const {
    return {operands.data() + tasks[t].operand_begin + tasks[t].n_inputs, tasks[t].n_outputs};
  }
  /// Successors of task t (vertex ids).
  auto successors(std::size_t t) const { return boost::adjacent_vertices(static_cast<Graph::vertex_descriptor>(t), graph); }
  /// Human-readable task name: "L3 fwd fc2 s1 c0".
  std::string task_name(std::size_t t) const;
  /// Sum of Task::flops() over one micro-batch (once_per_step tasks excluded) of this rank.
  double micro_batch_flops() const;
  /// Writes the graph in Graphviz DOT.
  void write_dot(std::ostream& os) const;

  /// @brief Assembles a graph from tasks (issue order) and dependency edges (from, to) with
  /// from < to — for hand-built graphs (tests, other ranks' graphs). Tasks carry no operands.
  static StepGraph assemble(std::vector<Task> tasks, const std::vector<std::pair<std::uint32_t, std::uint32_t>>& edges,
                            const Plan& plan);
};

/// @brief Builds the step graph of `rank` for `plan` (resolved and feasible). Strategy none is
/// Megatron-LM 1D tensor parallelism; domino slices rows and/or columns.
StepGraph build_step_graph(const ModelSpec& model, const hardware::ClusterSpec& cluster, const Plan& plan, int rank = 0);

}  // namespace sim
