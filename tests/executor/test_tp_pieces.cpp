// executor::TpPieces: which tasks of te-pipelined's and async-tp's graphs are pieces of a decomposed
// TP site, and the row blocks each rank's pieces touch (host-only: no MPI run).
#ifdef SLICETUNE_HAVE_EXECUTOR  // built only with MPI and OpenBLAS
#include <doctest/doctest.h>

#include <map>
#include <set>

#include "executor/tp_pieces.hpp"
#include "sim/strategy.hpp"

namespace {

using Kind = executor::TpPieces::Kind;

/// tiny (2 layers) on one node of tp GPUs, sequence parallel, micro-batch 4 (128 tokens).
sim::StepGraph graph(int tp, const sim::Strategy& s, int num_splits = 4) {
  const auto model = sim::load_model("tiny");
  auto cluster = hardware::load_cluster("dgx-h200");
  cluster.nodes = 1;
  cluster.node.gpus_per_node = tp;
  sim::PlanInput in;
  in.tp = tp;
  in.dp = 1;
  in.micro_batch = 4;
  in.global_batch = 4;
  in.sequence_parallel = true;
  in.strategy = &s;
  if (s.knob("num_splits")) in.num_splits = num_splits;
  return sim::build_step_graph(model, cluster, sim::resolve_plan(model, cluster, in));
}

std::map<Kind, int> count(const executor::TpPieces& p) {
  std::map<Kind, int> n;
  for (auto k : p.kind)
    if (k != Kind::none) ++n[k];
  return n;
}

}  // namespace

TEST_CASE("TpPieces: the pieces of each site, counted from the builder's decomposition") {
  // per layer: 4 AllGather sites (QKV, FC1 forward; out-proj, FC2 input gradients) of tp GEMM steps
  // and tp - 1 ring exchanges, whose gathered pieces 2 weight gradients read (out-proj, FC2);
  // 2 ReduceScatter sites (out-proj, FC2 forward). tiny has 2 layers.
  for (int tp : {2, 4}) {
    CAPTURE(tp);
    const auto te = count(executor::TpPieces(graph(tp, sim::strategy_te_pipelined(), 4)));
    CHECK(te.at(Kind::ag_gemm) == 2 * 4 * tp);
    CHECK(te.at(Kind::ag_exchange) == 2 * 4 * (tp - 1));
    CHECK(te.at(Kind::ag_wgrad) == 2 * 2);
    CHECK(te.at(Kind::rs_split_gemm) == 2 * 2 * 4);  // num_splits 4 chunks per site
    CHECK(te.size() == 4);
    const auto async = count(executor::TpPieces(graph(tp, sim::strategy_async_tp())));
    CHECK(async.at(Kind::ag_gemm) == 2 * 4 * tp);
    CHECK(async.at(Kind::ag_exchange) == 2 * 4 * (tp - 1));
    CHECK(async.at(Kind::ag_wgrad) == 2 * 2);
    CHECK(async.at(Kind::rs_peer_gemm) == 2 * 2 * tp);
    CHECK(async.at(Kind::rs_peer_exchange) == 2 * 2 * (tp - 1));
    CHECK(async.at(Kind::rs_peer_sum) == 2 * 2);
    CHECK(async.size() == 6);
  }
  // strategies that do not decompose the sites have no pieces (domino's column chunks included)
  CHECK(count(executor::TpPieces(graph(2, sim::strategy_none()))).empty());
  CHECK(count(executor::TpPieces(graph(2, sim::strategy_domino()))).empty());
}

TEST_CASE("TpPieces: every rank's steps cover every shard once, and each exchange's partner expects it") {
  using P = executor::TpPieces;
  for (int tp : {2, 3, 4, 8}) {
    CAPTURE(tp);
    for (int r = 0; r < tp; ++r) {
      std::set<int> gathered, computed;
      for (int k = 0; k < tp; ++k) {
        gathered.insert(P::ag_shard(r, k, tp));
        computed.insert(P::rs_peer_shard(r, k, tp));
        // ring: what rank r holds at step k + 1 is what rank r - 1 held at step k (and forwarded)
        if (k + 1 < tp) CHECK(P::ag_shard(r, k + 1, tp) == P::ag_shard((r + tp - 1) % tp, k, tp));
      }
      CHECK(P::ag_shard(r, 0, tp) == r);  // step 0: the local shard
      CHECK(P::rs_peer_shard(r, 0, tp) == r);
      CHECK(gathered.size() == static_cast<std::size_t>(tp));
      CHECK(computed.size() == static_cast<std::size_t>(tp));
    }
  }
  // on real graphs: each exchange's receiver receives from this rank, and an async-tp peer step
  // sends the rows of the shard its receiver owns
  for (int tp : {2, 4}) {
    for (const sim::Strategy* s : {&sim::strategy_te_pipelined(), &sim::strategy_async_tp()}) {
      const auto g = graph(tp, *s);
      const P p(g);
      for (std::uint32_t t = 0; t < g.size(); ++t) {
        if (p.kind[t] != Kind::ag_exchange && p.kind[t] != Kind::rs_peer_exchange) continue;
        CAPTURE(g.task_name(t));
        for (int r = 0; r < tp; ++r) {
          const auto [to, from] = p.exchange_peers(g, t, r);
          CHECK(p.exchange_peers(g, t, to).second == r);
          CHECK(p.exchange_peers(g, t, from).first == r);
          if (p.kind[t] == Kind::rs_peer_exchange) CHECK(P::rs_peer_shard(r, g.tasks[t].chunk, tp) == to);
        }
      }
    }
  }
}
#endif
