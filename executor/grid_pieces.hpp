// defines: executor::GridPieces (what each task of a 2D / 2.5D grid plan computes beyond its op and
//          phase: SUMMA steps, their broadcast and reduce roots, the norms' row statistics)
//
// The simulator's grid graph (sim/builder_grid.cpp) names every SUMMA step, broadcast and reduce
// as a task; both backends read here how to run them (rank at grid row i, column j, depth k holds
// T tokens of row block (k, i) and hidden block j; a weight [in, out] as block (i, j) - executor/
// init.hpp, weight_layout):
//  - linear y = x W, step s (Task::chunk s): the row broadcasts x from column s (its input block s),
//    the column broadcasts W from row s (block (s, j)); the GEMM accumulates a . b into y (sets it
//    at s = 0). The LM head reads its [vocab/q, h/q] block as the transpose of W^T's block: a . b^T.
//  - backward, input gradient, step s: the column broadcasts W's block (s, j); the GEMM writes
//    c = dy . b^T (the head: dy . b); the row reduces c to column s, which sets its dx block s.
//  - backward, weight gradient, step s: the row broadcasts x's block s; the GEMM writes
//    e = b^T . dy (the head: dy^T . b); the column reduces e to row s, which adds it to its dW.
//    Broadcast and reduce roots are therefore rank s of the row / column communicator, whose
//    ranks are ordered by column / row.
//  - norms: the forward's two row all-reduces (Task::chunk 0, 1) sum x, then the squared
//    deviations from the mean the first gave (RMSNorm: the squares); the norm kernel reads that
//    [T, 2] statistics tensor. The backward's row all-reduce sums dxhat and dxhat . xhat from the
//    norm backward's operands and the forward's statistics (tensors the graph does not list as its
//    operands: the forward statistics of the same norm, the backward sums of the collective just
//    before the norm backward - both written earlier on this rank).
// Host-only, header-only (both backends' libraries include it).
#pragma once
#include <cstdint>
#include <map>
#include <stdexcept>
#include <tuple>
#include <variant>
#include <vector>

#include "sim/step_graph.hpp"

namespace executor {

struct GridPieces {
  static constexpr sim::TensorId kNone = ~sim::TensorId{0};
  enum class Kind : std::uint8_t {
    none,
    broadcast,       ///< from rank Task::chunk of the row / column communicator (input -> output)
    reduce_set,      ///< dgrad partials: the sum onto rank Task::chunk, which sets outputs[1]
    reduce_add,      ///< wgrad partials: the sum onto rank Task::chunk, which adds it to outputs[1]
    norm_stats_fwd,  ///< a norm's row statistics: chunk 0 the sum of x, chunk 1 the squared deviations
    norm_stats_bwd,  ///< a norm backward's row sums of dxhat and dxhat . xhat
    summa_fwd,       ///< y (+)= a . b (the head: a . b^T); sets at step 0
    summa_dgrad,     ///< c = dy . b^T (the head: dy . b)
    summa_wgrad,     ///< e = a^T . dy (the head: dy^T . a); inputs {a, dy}
    norm_fwd,        ///< the norm kernel with the row statistics
    norm_bwd,        ///< the norm backward with the forward statistics and the backward sums
  };
  std::vector<Kind> kind;                 ///< per task
  std::vector<sim::TensorId> fwd_stats;   ///< norm_bwd, norm_stats_bwd: the forward's [T, 2] statistics
  std::vector<sim::TensorId> bwd_sums;    ///< norm_bwd: the backward's all-reduced [T, 2] sums
  std::vector<std::uint32_t> norm_task;   ///< norm_stats_bwd: the norm backward whose operands it reads

  explicit GridPieces(const sim::StepGraph& g)
      : kind(g.size(), Kind::none), fwd_stats(g.size(), kNone), bwd_sums(g.size(), kNone), norm_task(g.size(), 0) {
    if (!g.plan.grid_tp()) return;
    using hardware::CollectiveKind;
    using sim::Op;
    using sim::Phase;
    const auto row = g.group_id("row");
    auto is_norm = [](Op o) { return o == Op::norm1 || o == Op::norm2 || o == Op::final_norm; };
    // the forward statistics of each norm, by (op, layer, micro-batch, slice, model chunk)
    std::map<std::tuple<Op, int, int, int, int>, sim::TensorId> stats_of;
    std::int64_t pending = -1;  // the last norm_stats_bwd, which the next norm backward reads
    for (std::uint32_t t = 0; t < g.size(); ++t) {
      const auto& task = g.tasks[t];
      const auto in = g.inputs(t);
      const auto key = std::make_tuple(task.op, int{task.layer}, int{task.micro}, int{task.slice}, int{task.model_chunk});
      if (const auto* c = std::get_if<hardware::CollectiveOp>(&task.kind)) {
        if (c->kind == CollectiveKind::broadcast) kind[t] = Kind::broadcast;
        else if (c->kind == CollectiveKind::reduce) kind[t] = task.phase == Phase::bwd_wgrad ? Kind::reduce_add : Kind::reduce_set;
        else if (c->kind == CollectiveKind::all_reduce && task.group && task.group == row && task.op != Op::loss_comm) {
          if (task.phase == Phase::fwd) kind[t] = Kind::norm_stats_fwd;
          else {
            kind[t] = Kind::norm_stats_bwd;
            pending = t;
          }
        }
      } else if (std::holds_alternative<hardware::GemmOp>(task.kind)) {
        kind[t] = task.phase == Phase::fwd ? Kind::summa_fwd : task.phase == Phase::bwd_dgrad ? Kind::summa_dgrad : Kind::summa_wgrad;
      } else if (is_norm(task.op) && std::holds_alternative<hardware::ElementwiseOp>(task.kind)) {
        if (task.phase == Phase::fwd) {
          kind[t] = Kind::norm_fwd;
          stats_of[key] = in[2];
        } else {
          kind[t] = Kind::norm_bwd;
          const auto it = stats_of.find(key);
          if (it == stats_of.end() || pending < 0 || g.inputs(static_cast<std::uint32_t>(pending))[0] != in[0])
            throw std::logic_error("grid: norm backward " + g.task_name(t) + " without its forward statistics or row sums");
          fwd_stats[t] = it->second;
          bwd_sums[t] = g.outputs(static_cast<std::uint32_t>(pending))[0];
          fwd_stats[static_cast<std::size_t>(pending)] = it->second;
          norm_task[static_cast<std::size_t>(pending)] = t;
          pending = -1;
        }
      }
    }
  }
};

}  // namespace executor
