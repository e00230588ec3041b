// executor::TpPieces: which tasks of te-pipelined's, async-tp's and fused's graphs are pieces of a
// decomposed TP site, and the row blocks each rank's pieces touch (host-only: no MPI run).
#ifdef SLICETUNE_HAVE_EXECUTOR  // built only with MPI and OpenBLAS
#include <doctest/doctest.h>

#include <map>
#include <set>

#include "executor/tp_pieces.hpp"
#include "sim/strategy.hpp"

namespace {

using Kind = executor::TpPieces::Kind;

/// tiny (2 layers) on one node of tp GPUs, sequence parallel, micro-batch 4 (128 tokens).
sim::StepGraph graph(int tp, const sim::Strategy& s, int num_splits = 4, const char* cluster_name = "dgx-h200") {
  const auto model = sim::load_model("tiny");
  auto cluster = hardware::load_cluster(cluster_name);
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
  if (cluster.gpu.arch == hardware::GpuArch::cpu) in.dtype = common::DType::fp32;
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
  // fused: the same AllGather sites; 4 GEMM + ReduceScatter sites (out-proj, FC2 forward; QKV, FC1
  // input gradients) of tp peer steps and a reduction - on Hopper (dgx-h200) with the local rows'
  // pull as an exchange of its own (tp per site), on the CPU cluster tp - 1 (the push form)
  for (int tp : {2, 4}) {
    CAPTURE(tp);
    for (const char* cl : {"dgx-h200", "cpu-host"}) {
      CAPTURE(cl);
      const auto fused = count(executor::TpPieces(graph(tp, sim::strategy_fused(), 4, cl)));
      CHECK(fused.at(Kind::ag_gemm) == 2 * 4 * tp);
      CHECK(fused.at(Kind::ag_exchange) == 2 * 4 * (tp - 1));
      CHECK(fused.at(Kind::ag_wgrad) == 2 * 2);
      CHECK(fused.at(Kind::rs_peer_gemm) == 2 * 4 * tp);
      CHECK(fused.at(Kind::rs_peer_exchange) == 2 * 4 * (std::string(cl) == "cpu-host" ? tp - 1 : tp));
      CHECK(fused.at(Kind::rs_peer_sum) == 2 * 4);
      CHECK(fused.size() == 6);
    }
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
    for (const sim::Strategy* s : {&sim::strategy_te_pipelined(), &sim::strategy_async_tp(), &sim::strategy_fused()}) {
      const auto g = graph(tp, *s);
      const P p(g);
      for (std::uint32_t t = 0; t < g.size(); ++t) {
        if (p.kind[t] != Kind::ag_exchange && p.kind[t] != Kind::rs_peer_exchange) continue;
        CAPTURE(g.task_name(t));
        for (int r = 0; r < tp; ++r) {
          const auto [to, from] = p.exchange_peers(g, t, r);
          CHECK(p.exchange_peers(g, t, to).second == r);
          CHECK(p.exchange_peers(g, t, from).first == r);
          if (p.kind[t] == Kind::rs_peer_exchange) CHECK(P::rs_peer_shard(r, p.rs_offset(g, t), tp) == to);
        }
      }
    }
  }
}
TEST_CASE("TpPieces: a fused GEMM + ReduceScatter in sub-chunks (Hopper) computes every row once, and its reduction sums them") {
  // gpt3-13b at tp 2 on DGX-H100, micro-batch 4 x 2048: T = 8192 rows, R = 4096 a rank. FC2's
  // forward GEMM (8192 x 5120 x 10240) has 64 x 20 tiles of 128 x 256, 9.7 waves on 132 SMs: 4.8
  // a peer, so 4 sub-chunks (the most) of 1024 rows, 8 chunks a site (sim/builder.cpp)
  const auto model = sim::load_model("gpt3-13b");
  const auto cluster = hardware::load_cluster("dgx-h100");
  sim::PlanInput in;
  in.tp = 2;
  in.dp = 4;
  in.micro_batch = 4;
  in.global_batch = 16;
  in.sequence_parallel = true;
  in.strategy = &sim::strategy_fused();
  const auto g = sim::build_step_graph(model, cluster, sim::resolve_plan(model, cluster, in));
  const executor::TpPieces p(g);
  using sim::Op, sim::Phase;
  for (const auto& site : {std::pair{Op::fc2, Phase::fwd}, {Op::out_proj, Phase::fwd}, {Op::qkv, Phase::bwd_dgrad}, {Op::fc1, Phase::bwd_dgrad}}) {
    const Op op = site.first;  // not structured bindings: CAPTURE and the lambdas below capture them (clang 14)
    const Phase ph = site.second;
    CAPTURE(sim::to_string(op));
    for (int r = 0; r < 2; ++r) {
      std::map<std::int64_t, int> rows;  // first input row of each chunk on rank r
      std::int64_t chunk_rows = 0;
      for (std::uint32_t t = 0; t < g.size(); ++t) {
        const auto& task = g.tasks[t];
        if (task.layer != 0 || task.recompute || task.op != op || task.phase != ph || p.kind[t] != Kind::rs_peer_gemm) continue;
        CHECK(p.subs[t] == 4);
        chunk_rows = g.tensors[g.outputs(t)[0]].rows;
        ++rows[p.rs_input_row(g, t, r)];
        // chunk (o, j) of rank r: sub-chunk j of shard (r + o) mod 2, exchanged with rank r + o
        CHECK(p.rs_input_row(g, t, r) == ((r + p.rs_offset(g, t)) % 2 * 4 + p.rs_sub(g, t)) * chunk_rows);
      }
      CHECK(chunk_rows == 1024);
      REQUIRE(rows.size() == 8);  // 8 chunks, each starting at its own row: [0, 8192) once
      std::int64_t next = 0;
      for (const auto& [row, n] : rows) {
        CHECK(row == next);
        CHECK(n == 1);
        next = row + chunk_rows;
      }
      CHECK(next == 8192);
    }
    // the reduction: 8 partials of 1024 rows into this rank's 4096, sub-chunk j from inputs j x 2 + o,
    // each written by chunk (o, j)'s transfer (Hopper: the local rows' too)
    std::map<sim::TensorId, std::uint32_t> writer;
    int sums = 0;
    for (std::uint32_t t = 0; t < g.size(); ++t) {
      for (auto id : g.outputs(t)) writer[id] = t;
      const auto& task = g.tasks[t];
      if (task.layer != 0 || task.recompute || task.op != op || task.phase != ph || p.kind[t] != Kind::rs_peer_sum) continue;
      ++sums;
      CHECK(p.subs[t] == 4);
      const auto in = g.inputs(t);
      REQUIRE(in.size() == 8);
      CHECK(g.tensors[g.outputs(t)[0]].rows == 4096);
      for (std::size_t k = 0; k < in.size(); ++k) {
        const std::uint32_t w = writer.at(in[k]);
        CHECK(p.kind[w] == Kind::rs_peer_exchange);
        CHECK(g.tasks[w].chunk == static_cast<int>(k % 2) * 4 + static_cast<int>(k / 2));
      }
    }
    CHECK(sums == 1);
  }
}
#endif
