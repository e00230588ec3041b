// defines: executor::TpPieces (which piece of a strategy's decomposed tensor-parallel site each task
//          is, and which row block of the site's tensors it touches on this rank)
//
// Strategies that decompose the sequence-parallel TP collectives (sim::TpOverlap, sim/builder.cpp
// gathered_gemm / reduced_gemm) emit pieces whose rows depend on the rank; both backends read them
// from here so that they agree (R = the site's rows per rank, T = tp x R):
//  - AllGather + GEMM in tp steps (ag_peer_steps: te-pipelined's ring exchange, async-tp): step 0's
//    GEMM reads the local shard; exchange k (k = 1 .. tp-1, Task::chunk k) sends the piece of step
//    k-1 to TP rank r+1 and receives piece k from rank r-1 (a ring), so that on rank r piece k is
//    shard (r - k) mod tp. Step k's GEMM writes that shard's rows of the gathered output; the weight
//    gradient that reads the pieces (out-proj, FC2) sums each piece against the same rows of its
//    other operand.
//  - GEMM + ReduceScatter in num_splits chunks (rs_splits: te-pipelined's pipeline method): chunk k
//    (Task::chunk k) computes, for every TP rank p, rows [p R + k R/n, p R + (k+1) R/n) of the
//    input into row block p of its output (TransformerEngine's layout: each rank's shard split into
//    n sub-chunks), so that the chunk's ReduceScatter leaves rank r its local rows [k R/n, (k+1) R/n);
//    the residual then adds the n partials as row chunks.
//  - GEMM + ReduceScatter in tp peer steps (rs_peer_steps: async-tp): step c's GEMM (Task::chunk c)
//    computes the rows of shard (r + c) mod tp; exchange c sends them to TP rank r + c and receives
//    from rank r - c its rows of shard r; the local sum adds the tp partials (c = 0: the local rows).
//  - FLUX's fused kernels (TpOverlap::fused: strategy fused): an AllGather + GEMM site is the ring
//    above (its copies issued first); a GEMM + ReduceScatter site - forward out-proj and FC2, and the
//    input gradients of QKV and FC1 - is the peer steps above with each peer's rows cut into `sub`
//    sub-chunks (1 but on Hopper): chunk (o, j), Task::chunk o x sub + j, computes sub-chunk j of
//    shard (r + o) mod tp's rows, its exchange goes to TP rank r + o and comes from r - o (o = 0 on
//    Hopper: the local rows' pass through the kernel's pull, an exchange with itself), and the
//    reduction (an `accumulate` element-wise task) reads the partials in the order j x tp + o and
//    writes sub-chunk j of this rank's rows as the sum over o.
// Host-only, header-only (both backends' libraries include it).
#pragma once
#include <cstdint>
#include <utility>
#include <variant>
#include <vector>

#include "sim/step_graph.hpp"
#include "sim/strategy.hpp"

namespace executor {

struct TpPieces {
  enum class Kind : std::uint8_t {
    none,              ///< not a piece of a decomposed site
    ag_gemm,           ///< a GEMM on one AllGather step's shard: writes that shard's rows of the output
    ag_exchange,       ///< a ring step: send to TP rank r+1, receive from r-1
    ag_wgrad,          ///< a weight gradient reading the tp pieces (then the other operand, last)
    rs_split_gemm,     ///< a token chunk of TE's pipelined GEMM + ReduceScatter (rows of every rank's shard)
    rs_peer_gemm,      ///< a peer step's GEMM: the rows of shard (r + chunk) mod tp
    rs_peer_exchange,  ///< a peer step: send to TP rank r + chunk, receive from r - chunk
    rs_peer_sum,       ///< the local sum of the tp partials (of each sub-chunk: inputs j x tp + o)
  };
  std::vector<Kind> kind;  ///< per task
  /// Per task of a GEMM + ReduceScatter in peer steps (rs_peer_gemm, rs_peer_exchange, rs_peer_sum):
  /// the sub-chunks each peer's rows are cut into (1 for async-tp; FLUX's on Hopper up to
  /// sim::TpOverlap::kFusedMaxSubchunks); 1 elsewhere.
  std::vector<std::uint8_t> subs;
  int tp = 1;

  /// The shard AllGather step `step` holds on TP rank `rank` (ring: received from rank - 1 each step).
  static int ag_shard(int rank, int step, int tp) { return ((rank - step) % tp + tp) % tp; }
  /// The shard whose rows peer step `step`'s GEMM computes on TP rank `rank`.
  static int rs_peer_shard(int rank, int step, int tp) { return (rank + step) % tp; }
  /// A peer step's peer offset o (Task::chunk = o x subs + j).
  int rs_offset(const sim::StepGraph& g, std::uint32_t t) const { return g.tasks[t].chunk / subs[t]; }
  /// A peer step's sub-chunk j.
  int rs_sub(const sim::StepGraph& g, std::uint32_t t) const { return g.tasks[t].chunk % subs[t]; }
  /// The first row of its input a peer step's GEMM (rs_peer_gemm) computes on TP rank `rank`:
  /// sub-chunk j of shard (rank + o) mod tp's rows (each sub-chunk is the GEMM's output rows).
  std::int64_t rs_input_row(const sim::StepGraph& g, std::uint32_t t, int rank) const {
    const std::int64_t rows = g.tensors[g.outputs(t)[0]].rows;
    return (static_cast<std::int64_t>(rs_peer_shard(rank, rs_offset(g, t), tp)) * subs[t] + rs_sub(g, t)) * rows;
  }
  /// TP ranks exchange `t` sends to and receives from (the same rank: Hopper's local rows in a fused kernel).
  std::pair<int, int> exchange_peers(const sim::StepGraph& g, std::uint32_t t, int rank) const {
    const int off = kind[t] == Kind::rs_peer_exchange ? rs_offset(g, t) : 1;
    return {(rank + off) % tp, ((rank - off) % tp + tp) % tp};
  }

  explicit TpPieces(const sim::StepGraph& g) : kind(g.size(), Kind::none), subs(g.size(), 1), tp(g.plan.tp) {
    const sim::TpOverlap ov = g.plan.strategy->tp_overlap(g.plan);
    if (!ov.any() || tp == 1) return;
    const auto tp_group = g.group_id("tp");
    using sim::Op;
    auto row_parallel = [](Op o) { return o == Op::out_proj || o == Op::fc2; };
    // the task that last wrote each tensor, as of the task being classified (issue order)
    std::vector<std::int64_t> writer(g.tensors.size(), -1);
    for (std::uint32_t t = 0; t < g.size(); ++t) {
      const auto& task = g.tasks[t];
      const auto in = g.inputs(t), out = g.outputs(t);
      if (const auto* c = std::get_if<hardware::CollectiveOp>(&task.kind)) {
        // a TP send_recv fed by a GEMM pushes a peer's rows (rs); else it forwards a gathered piece (ag)
        if (c->kind == hardware::CollectiveKind::send_recv && task.group && task.group == tp_group && !in.empty()) {
          const auto w = writer[in[0]];
          const bool rs = w >= 0 && std::holds_alternative<hardware::GemmOp>(g.tasks[static_cast<std::size_t>(w)].kind);
          kind[t] = rs ? Kind::rs_peer_exchange : Kind::ag_exchange;
          if (rs) subs[t] = subs[static_cast<std::size_t>(w)];
        }
      } else if (std::holds_alternative<hardware::GemmOp>(task.kind) && !in.empty() && !out.empty()) {
        const bool column = task.op == Op::qkv || task.op == Op::fc1;
        const auto& x = g.tensors[in[0]];
        const auto& y = g.tensors[out[0]];
        if (((column && task.phase == sim::Phase::fwd) || (row_parallel(task.op) && task.phase == sim::Phase::bwd_dgrad)) &&
            x.rows < y.rows) {
          kind[t] = Kind::ag_gemm;
        } else if (row_parallel(task.op) && task.phase == sim::Phase::bwd_wgrad && in.size() > 2) {
          kind[t] = Kind::ag_wgrad;
        } else if (((row_parallel(task.op) && task.phase == sim::Phase::fwd) ||
                    (ov.fused && column && task.phase == sim::Phase::bwd_dgrad)) &&
                   y.rows < x.rows) {
          kind[t] = ov.rs_peer_steps || ov.fused ? Kind::rs_peer_gemm : Kind::rs_split_gemm;
          if (kind[t] == Kind::rs_peer_gemm) subs[t] = static_cast<std::uint8_t>(x.rows / (std::int64_t{tp} * y.rows));
        }
      } else if (const auto* e = std::get_if<hardware::ElementwiseOp>(&task.kind)) {
        // async-tp's local sum (a residual add), FLUX's reduction (accumulate: only the fused sites make one)
        if ((e->kind == hardware::ElementwiseKind::residual_add && row_parallel(task.op)) ||
            e->kind == hardware::ElementwiseKind::accumulate) {
          kind[t] = Kind::rs_peer_sum;
          subs[t] = static_cast<std::uint8_t>(g.tensors[out[0]].rows / g.tensors[in[0]].rows);
        }
      }
      for (auto id : out) writer[id] = t;
    }
  }
};

}  // namespace executor
