// The CUDA backend's StepGraph -> launch list translation (host-only: runs without a GPU).
#include <doctest/doctest.h>

#ifdef SLICETUNE_HAVE_CUDA_BACKEND
#include <map>
#include <set>

#include "executor/cuda/attention_layout.hpp"
#include "executor/cuda/launch_plan.hpp"
#include "common/config_reader.hpp"
#include "sim/strategy.hpp"

namespace {

using executor::cuda::LaunchKind;
using executor::cuda::LaunchPlan;

struct Built {
  sim::ModelSpec model;
  hardware::ClusterSpec cluster;
  sim::Plan plan;
  sim::StepGraph graph;
};

/// A single node with exactly tp x dp GPUs (the shape `mpirun -np tp*dp` gives the executor).
Built build(const std::string& model, sim::PlanInput in) {
  Built b;
  b.model = sim::load_model(model);
  b.cluster = hardware::load_cluster("dgx-h200");
  b.cluster.nodes = 1;
  b.cluster.node.gpus_per_node = in.tp.value_or(1) * in.dp.value_or(1);
  b.plan = sim::resolve_plan(b.model, b.cluster, in);
  b.graph = sim::build_step_graph(b.model, b.cluster, b.plan);
  return b;
}

sim::PlanInput plan(int tp, int dp, int mb, const sim::Strategy* s, int rows = 1, int cols = 1, bool sp = false) {
  sim::PlanInput in;
  in.tp = tp;
  in.dp = dp;
  in.micro_batch = mb;
  in.global_batch = mb * dp;
  in.strategy = s;
  in.row_slices = rows;
  in.col_slices = cols;
  in.sequence_parallel = sp;
  in.dtype = common::DType::bf16;
  return in;
}

/// Distinct (producer, consumer) edges whose tasks sit on different streams.
std::set<std::pair<std::size_t, std::size_t>> cross_stream_edges(const sim::StepGraph& g) {
  std::set<std::pair<std::size_t, std::size_t>> e;
  for (std::size_t u = 0; u < g.size(); ++u)
    for (auto v : boost::make_iterator_range(g.successors(u)))
      if (g.tasks[u].stream != g.tasks[v].stream) e.insert({u, static_cast<std::size_t>(v)});
  return e;
}

/// The checks every plan must pass; returns the number of waits.
std::size_t check_events(const sim::StepGraph& g, const LaunchPlan& p) {
  REQUIRE(p.launches.size() == g.size());
  // event -> the one launch that records it
  std::map<std::uint32_t, std::size_t> recorder;
  for (std::size_t i = 0; i < p.launches.size(); ++i)
    if (p.launches[i].record) {
      CHECK(recorder.count(*p.launches[i].record) == 0);  // recorded by exactly one launch
      recorder[*p.launches[i].record] = i;
    }
  CHECK(recorder.size() == p.events);
  const auto edges = cross_stream_edges(g);
  std::size_t waits = 0;
  std::set<std::pair<std::size_t, std::size_t>> covered;
  for (std::size_t v = 0; v < p.launches.size(); ++v) {
    for (auto ev : p.launches[v].waits) {
      ++waits;
      REQUIRE(recorder.count(ev) == 1);
      const std::size_t u = recorder[ev];
      CHECK(u < v);                                    // no launch waits on an event recorded later
      CHECK(edges.count({u, v}) == 1);                 // the wait is a cross-stream edge of the graph
      CHECK(g.tasks[u].stream != g.tasks[v].stream);
      covered.insert({u, v});
    }
  }
  CHECK(covered == edges);  // every cross-stream edge has its wait ...
  CHECK(waits == edges.size());  // ... exactly one
  CHECK(p.cross_stream_edges == edges.size());
  return waits;
}

}  // namespace

TEST_CASE("tp = 1, dp = 1: one stream, so no events at all") {
  // Expected 0 events and 0 waits: with one rank there are no collectives, every task is on the
  // compute stream, and an in-order stream needs no events.
  auto b = build("tiny", plan(1, 1, 2, &sim::strategy_none()));
  const auto p = executor::cuda::plan_launches(b.graph);
  CHECK(p.events == 0);
  CHECK(check_events(b.graph, p) == 0);
  for (const auto& l : p.launches) CHECK(b.graph.streams[l.stream].kind == sim::StreamKind::compute);
}

TEST_CASE("every cross-stream edge yields one record + wait, in issue order (tp 2, dp 2, domino)") {
  for (auto in : {plan(2, 2, 4, &sim::strategy_none()), plan(2, 2, 4, &sim::strategy_domino(), 2, 1),
                  plan(2, 2, 4, &sim::strategy_domino(), 1, 2), plan(2, 2, 4, &sim::strategy_domino(), 2, 2),
                  plan(2, 1, 4, &sim::strategy_domino(), 2, 2, true)}) {
    for (const char* model : {"tiny", "tiny-llama"}) {
      auto b = build(model, in);
      CAPTURE(model);
      CAPTURE(sim::describe(b.plan));
      const auto p = executor::cuda::plan_launches(b.graph);
      // Every collective is a cross-stream producer and consumer: at least 2 waits per collective.
      std::size_t collectives = 0;
      for (const auto& t : b.graph.tasks) collectives += t.is_collective();
      CHECK(collectives > 0);
      CHECK(check_events(b.graph, p) >= 2 * collectives);
    }
  }
}

TEST_CASE("collectives land on the communication streams, kernels on the compute stream") {
  auto b = build("tiny-llama", plan(2, 2, 4, &sim::strategy_domino(), 2, 2));
  const auto p = executor::cuda::plan_launches(b.graph);
  int tp = 0, dp = 0;
  for (std::size_t i = 0; i < p.launches.size(); ++i) {
    const auto& l = p.launches[i];
    const auto& t = b.graph.tasks[i];
    const bool coll = l.kind == LaunchKind::all_reduce || l.kind == LaunchKind::all_gather || l.kind == LaunchKind::reduce_scatter;
    CHECK(coll == t.is_collective());
    const auto& stream = b.graph.streams[l.stream].name;
    if (!coll) CHECK(stream == "compute");
    else if (b.graph.groups[*t.group].name == "tp") { CHECK(stream == "tp_comm"); ++tp; }
    else { CHECK(stream == "dp_comm"); CHECK(l.once_per_step); ++dp; }
  }
  // tp: per micro-batch and row slice, embedding (1) + 2 col chunks x 2 blocks x 2 layers fwd (8)
  // + loss stats (1) + LM-head dgrad (1) + 2 blocks x 2 layers dgrad (4) = 15; 2 slices -> 30.
  CHECK(tp == 30);
  CHECK(dp >= 1);
}

TEST_CASE("tensor slots: bytes as TensorInfo says, aligned, disjoint") {
  auto b = build("tiny-llama", plan(2, 1, 4, &sim::strategy_domino(), 2, 2, true));
  const auto p = executor::cuda::plan_launches(b.graph);
  REQUIRE(p.tensors.size() == b.graph.tensors.size());
  std::uint64_t end = 0;
  for (std::size_t i = 0; i < p.tensors.size(); ++i) {
    // expected: rows x cols x dtype bytes, the size the simulator prices
    CHECK(static_cast<double>(p.tensors[i].bytes) == b.graph.tensors[i].bytes());
    CHECK(p.tensors[i].offset % 256 == 0);
    CHECK(p.tensors[i].offset >= end);  // in order, no overlap
    end = p.tensors[i].offset + p.tensors[i].bytes;
  }
  CHECK(p.arena_bytes >= end);
  CHECK(p.arena_bytes < end + 256 * p.tensors.size());
}

TEST_CASE("GEMM calls: column chunks of the row-parallel weights and transposes") {
  // tiny: h = 64, ffn = 256; tp 2, 2 column chunks: out_proj/fc2 chunk c writes output columns
  // [32 c, 32 c + 32) of W (h/tp x h, resp. ffn/tp x h): element offset 32 c into B, ldb = 64.
  auto b = build("tiny", plan(2, 1, 2, &sim::strategy_domino(), 1, 2));
  const auto p = executor::cuda::plan_launches(b.graph);
  int chunks = 0, wgrads = 0;
  for (std::size_t i = 0; i < p.launches.size(); ++i) {
    const auto& t = b.graph.tasks[i];
    const auto& l = p.launches[i];
    if (l.kind != LaunchKind::gemm) continue;
    REQUIRE(l.gemm);
    const auto& g = *l.gemm;
    if (t.phase == sim::Phase::fwd && (t.op == sim::Op::out_proj || t.op == sim::Op::fc2)) {
      CHECK(g.n == 32);
      CHECK(g.ldb == 64);
      CHECK(g.b_offset == 32 * t.chunk);
      CHECK(g.k == (t.op == sim::Op::out_proj ? 32 : 128));
      ++chunks;
    }
    if (t.phase == sim::Phase::bwd_wgrad) {
      CHECK(g.accumulate);  // weight gradients accumulate (+=) across slices and micro-batches
      CHECK(g.trans_a);
      CHECK(b.graph.tensors[g.c].dtype == common::DType::fp32);
      ++wgrads;
    } else {
      CHECK_FALSE(g.accumulate);
    }
    if (t.op == sim::Op::lm_head && t.phase != sim::Phase::fwd) CHECK(g.cast_a);  // fp32 dlogits x bf16
  }
  CHECK(chunks == 2 * 2 * 2);  // 2 layers x (out_proj, fc2) x 2 chunks
  CHECK(wgrads == 2 * 4 + 1);  // 4 weight GEMMs per layer + the (tied) LM head
}

TEST_CASE("plan checks: what the CUDA backend refuses, in one line naming the key") {
  auto m = sim::load_model("tiny");
  sim::Plan p;
  p.seq_len = 32;
  CHECK_FALSE(executor::cuda::check_cuda_plan(m, p).has_value());
  p.dtype = common::DType::fp8;
  auto why = executor::cuda::check_cuda_plan(m, p);
  REQUIRE(why);
  CHECK(why->find("dtype=fp8") != std::string::npos);
  CHECK(why->find('\n') == std::string::npos);
  p.dtype = common::DType::bf16;
  p.strategy = &sim::strategy_domino();
  p.row_slices = 2;
  p.row_axis = sim::RowAxis::sequence;
  why = executor::cuda::check_cuda_plan(m, p);
  REQUIRE(why);
  CHECK(why->find("row_axis=sequence") != std::string::npos);
  p.row_axis = sim::RowAxis::batch;
  CHECK_FALSE(executor::cuda::check_cuda_plan(m, p).has_value());
  p.col_slices = 16;  // the residual kernel takes at most 8 column chunks
  why = executor::cuda::check_cuda_plan(m, p);
  REQUIRE(why);
  CHECK(why->find("col_slices=16") != std::string::npos);
  // and plan_launches refuses such a graph with a ConfigError rather than running it wrongly
  auto in = plan(1, 1, 2, &sim::strategy_domino(), 2, 1);
  in.row_axis = sim::RowAxis::sequence;
  auto b = build("tiny", in);
  CHECK_THROWS_AS(executor::cuda::plan_launches(b.graph), common::ConfigError);
}

TEST_CASE("attention scratch: sizes in closed form") {
  // batch 2, 4 heads, s = 32, d = 16, bf16: q, o = 2*4*32*16*2 B = 8192 each; k, v the same;
  // s (fp32) = 2*4*32*32*4 = 32768; p, ds (bf16) = 16384 each; dq, dk, dv (fp32) = 16384 each.
  // Total 4*8192 + 32768 + 2*16384 + 3*16384 = 147456 (all multiples of 256: no padding).
  hardware::AttentionOp a{.batch = 2, .heads = 4, .kv_heads = 2, .s_q = 32, .s_kv = 32, .head_dim = 16};
  const auto l = executor::cuda::attention_layout(a, 2);
  CHECK(l.bytes == 147456);
  CHECK(l.k - l.q == 8192);
  CHECK(l.p - l.s == 32768);
}

TEST_CASE("memory savers map onto launches: ZeRO bucket collectives, recompute kernels, the plan's attention kernel") {
  // tiny: 2 layers, tp 1 x dp 2, 2 sequences per rank in one micro-batch. Each (ZeRO stage,
  // recompute mode, attention kernel) must translate without a refusal and with every cross-stream
  // edge waited on (check_events). Expected, from the builder (sim/builder.hpp):
  //  - every ZeRO gradient bucket reduction (Op::dp_reduce) is a bucket_reduce_scatter and every
  //    parameter gather (Op::param_gather) a param_all_gather; with ZeRO at least one of each;
  //  - recompute re-runs forward tasks in the backward: selective the attention forward of each of
  //    the 2 layers once (Megatron's core-attention recompute), full every layer's forward;
  //  - flash runs the flash kernels; unfused and unfused_compiled both the unfused kernels, which
  //    write the probabilities (the score matrix) for the backward.
  using K = hardware::AttentionKernel;
  for (int zero : {1, 3})
    for (auto rc : {sim::Recompute::none, sim::Recompute::selective, sim::Recompute::full})
      for (K att : {K::flash, K::unfused, K::unfused_compiled}) {
        auto in = plan(1, 2, 2, &sim::strategy_none());
        in.zero = zero;
        in.recompute = rc;
        in.attention = att;
        const auto b = build("tiny", in);
        INFO("zero " << zero << ", recompute " << sim::to_string(rc) << ", attention " << hardware::to_string(att));
        const auto p = executor::cuda::plan_launches(b.graph);
        check_events(b.graph, p);
        int scatters = 0, gathers = 0, recomputed = 0, recomputed_attention = 0, flash = 0, unfused = 0;
        for (std::size_t t = 0; t < b.graph.size(); ++t) {
          const auto& task = b.graph.tasks[t];
          const LaunchKind k = p.launches[t].kind;
          if (task.op == sim::Op::dp_reduce) {
            CHECK(k == LaunchKind::bucket_reduce_scatter);
            ++scatters;
          }
          if (task.op == sim::Op::param_gather) {
            CHECK(k == LaunchKind::param_all_gather);
            ++gathers;
          }
          if (task.recompute) {
            ++recomputed;
            if (task.op == sim::Op::attention) ++recomputed_attention;
          }
          if (k == LaunchKind::flash_attention_forward || k == LaunchKind::flash_attention_backward) ++flash;
          if (k == LaunchKind::attention_forward || k == LaunchKind::attention_backward) ++unfused;
        }
        CHECK(scatters >= 1);
        CHECK(gathers >= 1);
        if (rc == sim::Recompute::none) CHECK(recomputed == 0);
        if (rc == sim::Recompute::selective) {
          CHECK(recomputed_attention == 2);
          CHECK(recomputed == 2);  // the core attention alone
        }
        if (rc == sim::Recompute::full) {
          CHECK(recomputed_attention == 2);
          CHECK(recomputed > 2 * 4);  // norm, QKV, attention, out-proj, ... of each layer
        }
        // 2 layers x (forward + backward) + the recomputed forwards, all of the plan's kind
        CHECK(flash + unfused == 2 * 2 + recomputed_attention);
        CHECK((att == K::flash ? unfused : flash) == 0);
      }
}

namespace {
/// tp 2, micro-batch 4, sequence parallel, bf16 under `s` (which has no slice knobs to set).
sim::PlanInput overlap_plan(const sim::Strategy& s) {
  sim::PlanInput in;
  in.tp = 2;
  in.dp = 1;
  in.micro_batch = 4;
  in.global_batch = 4;
  in.strategy = &s;
  in.sequence_parallel = true;
  in.dtype = common::DType::bf16;
  return in;
}
}  // namespace

TEST_CASE("te-pipelined and async-tp: exchanges as grouped send/recv to TP peers, GEMM pieces at the rank's row offsets") {
  // tiny (2 layers, h 64) at tp 2, sequence parallel, micro-batch 4: 128 tokens, R = 64 rows per
  // rank; per layer 4 AllGather sites of 2 GEMM steps and 1 ring exchange (executor/tp_pieces.hpp)
  for (int rank : {0, 1}) {
    CAPTURE(rank);
    auto in = overlap_plan(sim::strategy_te_pipelined());
    in.num_splits = 4;
    in.num_sm = 16;
    auto te = build("tiny", in);
    const auto p = executor::cuda::plan_launches(te.graph, rank);
    check_events(te.graph, p);
    int exchanges = 0, chunks = 0, steps = 0;
    for (std::size_t i = 0; i < p.launches.size(); ++i) {
      const auto& l = p.launches[i];
      const auto& t = te.graph.tasks[i];
      if (l.kind == LaunchKind::tp_exchange) {
        ++exchanges;
        CHECK(l.send_to == 1 - rank);  // a ring of 2: the other rank both ways
        CHECK(l.recv_from == 1 - rank);
      }
      if (l.kind != LaunchKind::gemm || l.gemm->parts.empty()) continue;
      const auto& A = te.graph.tensors[l.gemm->a];
      const auto& C = te.graph.tensors[l.gemm->c];
      if ((t.op == sim::Op::out_proj || t.op == sim::Op::fc2) && t.phase == sim::Phase::fwd) {
        // chunk k of 4: r = 16 rows of each rank p at rows p 64 + k 16 of the input, into row block p
        ++chunks;
        REQUIRE(l.gemm->parts.size() == 2);
        CHECK(l.gemm->m == 16);
        for (int q = 0; q < 2; ++q) {
          CHECK(l.gemm->parts[q].a_offset == (q * 64 + t.chunk * 16) * A.cols);
          CHECK(l.gemm->parts[q].c_offset == q * 16 * C.cols);
        }
      } else if (t.op == sim::Op::qkv && t.phase == sim::Phase::fwd) {
        // step k holds shard (rank - k) mod 2: its 64 rows of the gathered output
        ++steps;
        REQUIRE(l.gemm->parts.size() == 1);
        CHECK(l.gemm->parts[0].c_offset == ((rank - t.chunk + 2) % 2) * 64 * C.cols);
      }
    }
    CHECK(exchanges == 2 * 4);
    CHECK(chunks == 2 * 2 * 4);
    CHECK(steps == 2 * 2);

    auto async = build("tiny", overlap_plan(sim::strategy_async_tp()));
    const auto q = executor::cuda::plan_launches(async.graph, rank);
    check_events(async.graph, q);
    int sums = 0, peer_steps = 0;
    exchanges = 0;
    for (std::size_t i = 0; i < q.launches.size(); ++i) {
      const auto& l = q.launches[i];
      const auto& t = async.graph.tasks[i];
      exchanges += l.kind == LaunchKind::tp_exchange;
      sums += l.kind == LaunchKind::partial_sum;
      if (l.kind == LaunchKind::gemm && (t.op == sim::Op::out_proj || t.op == sim::Op::fc2) && t.phase == sim::Phase::fwd) {
        // step c: the 64 rows of shard (rank + c) mod 2 of the input
        ++peer_steps;
        REQUIRE(l.gemm->parts.size() == 1);
        CHECK(l.gemm->parts[0].a_offset == ((rank + t.chunk) % 2) * 64 * async.graph.tensors[l.gemm->a].cols);
      }
    }
    CHECK(exchanges == 2 * (4 + 2));  // 4 ring sites and 2 peer sites per layer, 1 exchange each at tp 2
    CHECK(sums == 2 * 2);
    CHECK(peer_steps == 2 * 2 * 2);
  }
}

TEST_CASE("fused (FLUX): its copies and peer steps as grouped send/recv, the local rows' pull a device copy, the reduction per sub-chunk") {
  // tiny at tp 2 on DGX-H200 (Hopper: the GEMM + ReduceScatter pulls every tile, its own too; the
  // tiny GEMMs have under a wave, so no sub-chunks): per layer 4 AllGather sites of 1 ring copy and
  // 4 GEMM + ReduceScatter sites (out-proj, FC2 forward; QKV, FC1 input gradients) of 2 peer steps
  // (offset 1: the other rank; offset 0: this rank's own rows) and a reduction
  for (int rank : {0, 1}) {
    CAPTURE(rank);
    auto fused = build("tiny", overlap_plan(sim::strategy_fused()));
    const auto p = executor::cuda::plan_launches(fused.graph, rank);
    check_events(fused.graph, p);
    int exchanges = 0, local = 0, sums = 0, steps = 0;
    for (std::size_t i = 0; i < p.launches.size(); ++i) {
      const auto& l = p.launches[i];
      const auto& t = fused.graph.tasks[i];
      if (l.kind == LaunchKind::tp_exchange) {
        ++exchanges;
        local += l.send_to == rank && l.recv_from == rank;
        CHECK(l.send_to == l.recv_from);  // at tp 2 the peer both ways (or this rank)
      }
      if (l.kind == LaunchKind::partial_sum) {
        ++sums;
        CHECK(l.subs == 1);
      }
      const bool rs = (t.phase == sim::Phase::fwd && (t.op == sim::Op::out_proj || t.op == sim::Op::fc2)) ||
                      (t.phase == sim::Phase::bwd_dgrad && (t.op == sim::Op::qkv || t.op == sim::Op::fc1));
      if (l.kind == LaunchKind::gemm && rs) {
        // step c: the 64 rows of shard (rank + c) mod 2 of the input (c: Task::chunk, one sub-chunk)
        ++steps;
        REQUIRE(l.gemm->parts.size() == 1);
        CHECK(l.gemm->m == 64);
        CHECK(l.gemm->parts[0].a_offset == ((rank + t.chunk) % 2) * 64 * fused.graph.tensors[l.gemm->a].cols);
      }
    }
    CHECK(exchanges == 2 * (4 + 4 * 2));
    CHECK(local == 2 * 4);
    CHECK(sums == 2 * 4);
    CHECK(steps == 2 * 4 * 2);
  }
  // gpt3-13b at tp 2, micro-batch 4 x 2048 on DGX-H200: 4 sub-chunks of 1024 rows per peer (about a
  // wave of FC2's 9.7 each, sim/builder.cpp): each reduction sums 4 sub-chunks, each FC2 chunk
  // reads sub-chunk j of shard (rank + o) mod 2
  sim::PlanInput in = overlap_plan(sim::strategy_fused());
  in.micro_batch = 4;
  in.global_batch = 4;
  auto big = build("gpt3-13b", in);
  for (int rank : {0, 1}) {
    const auto p = executor::cuda::plan_launches(big.graph, rank);
    int fc2 = 0;
    for (std::size_t i = 0; i < p.launches.size(); ++i) {
      const auto& l = p.launches[i];
      const auto& t = big.graph.tasks[i];
      if (l.kind == LaunchKind::partial_sum) CHECK(l.subs == 4);
      if (l.kind != LaunchKind::gemm || t.layer != 0 || t.recompute || t.op != sim::Op::fc2 || t.phase != sim::Phase::fwd) continue;
      ++fc2;
      CHECK(l.gemm->m == 1024);
      const int o = t.chunk / 4, j = t.chunk % 4;
      CHECK(l.gemm->parts.at(0).a_offset == (((rank + o) % 2) * 4 + j) * 1024 * big.graph.tensors[l.gemm->a].cols);
    }
    CHECK(fc2 == 8);
  }
}

TEST_CASE("2D and 2.5D grids: SUMMA broadcasts and reduces rooted at the step, GEMMs per step, the norms' row statistics") {
  // tiny-llama (2 layers, h 64, vocab 256, untied head) on 2D [2,2] and 2.5D [2,2,2], micro-batch 4:
  // 9 SUMMA products (4 linears a layer and the LM head) of q = 2 steps (executor/grid_pieces.hpp).
  // Not run on a GPU here: this checks the translation of the simulator's grid graph.
  for (const bool deep : {false, true}) {
    CAPTURE(deep);
    sim::PlanInput in;
    in.tp_layout = deep ? sim::TpLayout::two_five_d : sim::TpLayout::two_d;
    in.tp_q = 2;
    if (deep) in.tp_d = 2;
    in.tp = deep ? 8 : 4;
    in.micro_batch = 4;
    in.global_batch = 4;
    in.dtype = common::DType::bf16;
    auto b = build("tiny-llama", in);
    const auto p = executor::cuda::plan_launches(b.graph, 0);
    check_events(b.graph, p);
    std::map<LaunchKind, int> n;
    int accumulated_steps = 0, accumulated_reduces = 0;
    for (std::size_t i = 0; i < p.launches.size(); ++i) {
      const auto& l = p.launches[i];
      const auto& t = b.graph.tasks[i];
      ++n[l.kind];
      if (l.kind == LaunchKind::broadcast || l.kind == LaunchKind::reduce) CHECK(l.root == t.chunk);  // step s: rank s of the row / column
      accumulated_reduces += l.kind == LaunchKind::reduce && l.accumulate;
      if (l.kind != LaunchKind::gemm) continue;
      CHECK(l.gemm->parts.empty());
      if (t.phase == sim::Phase::fwd) {
        accumulated_steps += l.gemm->accumulate;
        CHECK(l.gemm->accumulate == (t.chunk > 0));  // y (+)= a . b: set at step 0
        CHECK(l.gemm->trans_b == (t.op == sim::Op::lm_head));
      } else if (t.phase == sim::Phase::bwd_dgrad) {
        CHECK(l.gemm->trans_b == (t.op != sim::Op::lm_head));
        CHECK(l.gemm->cast_a == (t.op == sim::Op::lm_head));  // the head's fp32 dlogits
      } else {
        CHECK(l.gemm->trans_a);
        CHECK_FALSE(l.gemm->accumulate);  // a partial; the column reduce adds it to the gradient
      }
    }
    CHECK(n[LaunchKind::gemm] == 9 * 3 * 2);
    CHECK(accumulated_steps == 9);
    CHECK(n[LaunchKind::broadcast] == 9 * 4 * 2);
    CHECK(n[LaunchKind::reduce] == 9 * 2 * 2);
    CHECK(accumulated_reduces == 9 * 2);
    CHECK(n[LaunchKind::grid_norm_forward] == 5);  // 2 per layer and the final norm
    CHECK(n[LaunchKind::grid_norm_backward] == 5);
    CHECK(n[LaunchKind::grid_norm_stats] == 2 * 5);
    CHECK(n[LaunchKind::grid_norm_sums] == 5);
    CHECK(n[LaunchKind::norm_forward] == 0);
    CHECK(p.grid_scratch_bytes > 0);
  }
}

#endif  // SLICETUNE_HAVE_CUDA_BACKEND
