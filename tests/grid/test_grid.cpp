// 2D and 2.5D tensor parallelism (SUMMA grids, sim/builder_grid.cpp): the plan keys and their
// one-line errors, the step graph's collectives per group against the SUMMA formulas, the memory
// model, the tuner's grid plans, and the direction of the Tesseract paper's weak-scaling result.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <string>

#include "common/config_error.hpp"
#include "hardware/cost_model.hpp"
#include "hardware/profiled_cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/memory.hpp"
#include "sim/strategy.hpp"
#include "sim/target.hpp"
#include "tuner/space.hpp"

namespace {

sim::PlanInput grid(sim::TpLayout layout, int q, int d, int mb, std::int64_t seq = 1024) {
  sim::PlanInput p;
  p.tp_layout = layout;
  p.tp_q = q;
  if (layout == sim::TpLayout::two_five_d) p.tp_d = d;
  p.micro_batch = mb;
  p.seq_len = seq;
  return p;
}

sim::Target target(const std::string& model, const sim::PlanInput& p, const std::string& cluster, int nodes) {
  sim::TargetInput in{.model = model, .cluster = cluster, .nodes = nodes};
  in.flags = p;
  return sim::resolve_target(in);
}

/// The message resolve_target throws for `p`, or "" when it resolves.
std::string error_of(const std::string& model, const sim::PlanInput& p, const std::string& cluster, int nodes) {
  try {
    target(model, p, cluster, nodes);
  } catch (const common::ConfigError& e) {
    return e.what();
  }
  return "";
}

struct Comm {
  int count = 0;
  double bytes = 0;
};

/// Collectives of layer `layer` (phase fwd or not), by group name and collective kind.
std::map<std::pair<std::string, hardware::CollectiveKind>, Comm> layer_comm(const sim::StepGraph& g, int layer, bool forward) {
  std::map<std::pair<std::string, hardware::CollectiveKind>, Comm> out;
  for (const auto& t : g.tasks) {
    const auto* c = std::get_if<hardware::CollectiveOp>(&t.kind);
    if (!c || t.layer != layer || (t.phase == sim::Phase::fwd) != forward) continue;
    auto& e = out[{g.groups[*t.group].name, c->kind}];
    ++e.count;
    e.bytes += static_cast<double>(c->bytes);
  }
  return out;
}

}  // namespace

TEST_CASE("grid plans: tp from the grid, YAML round trip, describe") {
  const auto t = target("gpt3-2.7b", grid(sim::TpLayout::two_five_d, 2, 2, 8), "dgx-a100", 1);
  CHECK(t.plan.tp == 8);  // q^2 x d = 2^2 x 2
  CHECK(t.plan.dp == 1);
  CHECK(sim::describe(t.plan) == "tp2.5d[2,2,2] dp1 mb8 summa");
  const auto back = sim::resolve_plan(t.model, t.cluster, sim::parse_plan_input(sim::plan_to_yaml(t.plan), "yaml"));
  CHECK(back == t.plan);
  // 2D from tp alone: q = sqrt(tp)
  sim::PlanInput p;
  p.tp_layout = sim::TpLayout::two_d;
  p.tp = 4;
  p.micro_batch = 4;
  const auto t2 = target("gpt3-2.7b", p, "dgx-a100", 1);
  CHECK(t2.plan.tp_q == 2);
  CHECK(t2.plan.dp == 2);
}

TEST_CASE("grid plans: bad input gets one-line errors naming the key") {
  using L = sim::TpLayout;
  sim::PlanInput p = grid(L::two_d, 2, 1, 4);
  p.tp_q.reset();
  p.tp = 8;  // not a square
  CHECK(error_of("gpt3-2.7b", p, "dgx-a100", 1).find("tp_layout 2d needs tp = q^2 (a square), got tp=8") != std::string::npos);
  p = grid(L::two_five_d, 2, 4, 8);
  p.tp = 8;  // 2^2 x 4 = 16
  CHECK(error_of("gpt3-2.7b", p, "dgx-a100", 1).find("tp=8 is not tp_q^2 x tp_d = 2^2 x 4 = 16") != std::string::npos);
  // 4^2 x 4 = 64 GPUs on one 8-GPU node
  CHECK(error_of("gpt3-2.7b", grid(L::two_five_d, 4, 4, 16), "dgx-a100", 1).find("do not divide the cluster's 8 GPUs") != std::string::npos);
  // q = 3 (9 GPUs of 72): hidden 2560 = 2^9 x 5 is not divisible by 3
  CHECK(error_of("gpt3-2.7b", grid(L::two_d, 3, 1, 9), "dgx-a100", 9).find("hidden=2560 is not divisible by tp_q=3") != std::string::npos);
  // q = 16 (256 GPUs): gpt3-13b's hidden 5120 divides, its 40 heads do not
  CHECK(error_of("gpt3-13b", grid(L::two_d, 16, 1, 16), "dgx-a100", 32).find("heads=40 is not divisible by tp_q=16") != std::string::npos);
  // [2,2,2]: the grid's rows and depth split the micro-batch into 4
  CHECK(error_of("gpt3-2.7b", grid(L::two_five_d, 2, 2, 2), "dgx-a100", 1).find("micro_batch=2 is not divisible by tp_q x tp_d = 2 x 2") !=
        std::string::npos);
  p = grid(L::two_d, 2, 1, 4);
  p.strategy = &sim::strategy_te_pipelined();
  CHECK(error_of("gpt3-2.7b", p, "dgx-a100", 1).find("strategy te-pipelined decomposes Megatron-LM's 1D collectives") != std::string::npos);
  p = grid(L::one_d, 2, 1, 4);
  p.tp_q = 2;
  CHECK(error_of("gpt3-2.7b", p, "dgx-a100", 1).find("tp_q=2 needs tp_layout 2d | 2.5d") != std::string::npos);
  for (const auto& e : {error_of("gpt3-2.7b", grid(L::two_five_d, 2, 2, 2), "dgx-a100", 1)}) CHECK(e.find('\n') == std::string::npos);
}

TEST_CASE("SUMMA collectives per layer match the formulas") {
  // gpt3-2.7b (h 2560, ffn 10240, 3h QKV), seq 1024, micro-batch 16, bf16, on 2.5D [2,2,2]:
  // a rank holds T = 16 / (q d) x 1024 = 4096 tokens and h/q = 1280 columns.
  const int q = 2, d = 2, mb = 16;
  const auto t = target("gpt3-2.7b", grid(sim::TpLayout::two_five_d, q, d, mb), "dgx-a100", 1);
  const auto g = sim::build_step_graph(t.model, t.cluster, t.plan);
  const double e = 2, T = mb / (q * d) * 1024.0, h = 2560, F = 10240, Q = 3 * h;
  const auto fwd = layer_comm(g, 3, true), bwd = layer_comm(g, 3, false);
  using K = hardware::CollectiveKind;
  // forward: each of the 4 linears broadcasts its input block [T, in/q] along the row and its weight
  // block [in/q, out/q] along the column once per SUMMA step (q steps); inputs: norm1 [T, h/q],
  // attention output [T, h/q], norm2 [T, h/q], activation [T, ffn/q]
  CHECK(fwd.at({"row", K::broadcast}).count == 4 * q);
  CHECK(fwd.at({"row", K::broadcast}).bytes == doctest::Approx(q * e * T * (3 * h + F) / q));
  CHECK(fwd.at({"col", K::broadcast}).count == 4 * q);
  CHECK(fwd.at({"col", K::broadcast}).bytes == doctest::Approx(q * e * (h * Q + h * h + h * F + F * h) / (q * q)));
  // the two norms' statistics: sum and sum of squares, one fp32 per token each, along the row
  CHECK(fwd.at({"row", K::all_reduce}).count == 4);
  CHECK(fwd.at({"row", K::all_reduce}).bytes == doctest::Approx(4 * T * 4));
  // backward of each linear: dX = dY W^T (q column broadcasts of W, q row reduces of [T, in/q]) and
  // dW = X^T dY (q row broadcasts of X, q column reduces of [in/q, out/q])
  CHECK(bwd.at({"col", K::broadcast}).count == 4 * q);
  CHECK(bwd.at({"row", K::reduce}).count == 4 * q);
  CHECK(bwd.at({"row", K::reduce}).bytes == doctest::Approx(fwd.at({"row", K::broadcast}).bytes));
  CHECK(bwd.at({"row", K::broadcast}).bytes == doctest::Approx(fwd.at({"row", K::broadcast}).bytes));
  CHECK(bwd.at({"col", K::reduce}).bytes == doctest::Approx(fwd.at({"col", K::broadcast}).bytes));
  CHECK(bwd.at({"row", K::all_reduce}).count == 2);  // the norms' backward sums, [T, 2] fp32 each
  // every collective is on a grid group; the 1D tp group carries nothing
  for (const auto& task : g.tasks)
    if (task.is_collective()) CHECK(g.groups[*task.group].name != "tp");
  // the weight gradients' sum over depth x dp: one group of d x dp = 2 ranks
  const auto dg = g.group_id("depth_dp");
  REQUIRE(dg);
  CHECK(g.groups[*dg].size == 2);
  // groups on the links they cross: 8 GPUs per node hold the whole [2,2,2] grid
  CHECK(g.groups[*g.group_id("row")].nodes == 1);
  CHECK(g.groups[*g.group_id("col")].nodes == 1);
}

TEST_CASE("SUMMA overlap: the next step's broadcasts are issued before the current GEMM") {
  const auto t = target("gpt3-2.7b", grid(sim::TpLayout::two_d, 2, 1, 4), "dgx-a100", 1);
  const auto g = sim::build_step_graph(t.model, t.cluster, t.plan);
  // layer 0's QKV forward in issue order (its broadcasts are the layer's first, tagged attn_comm as
  // the builder tags a block's collectives): bcast(0) row, col, bcast(1) row, col, GEMM(0), GEMM(1)
  std::vector<std::string> order;
  for (const auto& task : g.tasks) {
    if (task.layer != 0 || task.phase != sim::Phase::fwd || order.size() == 6) continue;
    const auto* c = std::get_if<hardware::CollectiveOp>(&task.kind);
    if (c && c->kind == hardware::CollectiveKind::broadcast) order.push_back(g.groups[*task.group].name + std::to_string(task.chunk));
    if (task.op == sim::Op::qkv && !c) order.push_back("gemm" + std::to_string(task.chunk));
  }
  CHECK(order == std::vector<std::string>{"row0", "col0", "row1", "col1", "gemm0", "gemm1"});
}

TEST_CASE("grid placement: rows inside a node first, or columns (tp_grid_order)") {
  // 2D [8,8] on 8 nodes of 8 GPUs: a grid row is 8 adjacent ranks (one node); a column strides by 8
  // (one rank per node: 8 nodes). tp_grid_order col swaps them.
  for (auto order : {sim::TpGridOrder::row, sim::TpGridOrder::col}) {
    auto p = grid(sim::TpLayout::two_d, 8, 1, 64);
    p.tp_grid_order = order;
    const auto t = target("gpt3-2.7b", p, "tesseract-a100", 8);
    sim::ModelSpec m = t.model;
    m.layers = 1;
    const auto g = sim::build_step_graph(m, t.cluster, t.plan);
    const bool rows = order == sim::TpGridOrder::row;
    CHECK(g.groups[*g.group_id("row")].nodes == (rows ? 1 : 8));
    CHECK(g.groups[*g.group_id("col")].nodes == (rows ? 8 : 1));
  }
  // 2.5D [4,4,4]: a row (4 adjacent) in one node, a column (stride 4) over 2 nodes, depth x dp
  // (stride 16) over 4
  const auto t = target("gpt3-2.7b", grid(sim::TpLayout::two_five_d, 4, 4, 64), "tesseract-a100", 8);
  sim::ModelSpec m = t.model;
  m.layers = 1;
  const auto g = sim::build_step_graph(m, t.cluster, t.plan);
  CHECK(g.groups[*g.group_id("row")].nodes == 1);
  CHECK(g.groups[*g.group_id("col")].nodes == 2);
  CHECK(g.groups[*g.group_id("depth_dp")].nodes == 4);
}

TEST_CASE("grid groups contain their rank: Plan::grid_coord, the executor's communicators and the graph's groups agree") {
  // Every rank's row group starts at (its row, column 0) and its column group at (row 0, its
  // column), in both orders (row: tp rank = col + q row + q^2 depth; col: row + q col + q^2 depth).
  // The column order's groups once started at the wrong coordinate (a group without its own rank).
  for (auto order : {sim::TpGridOrder::row, sim::TpGridOrder::col}) {
    auto p = grid(sim::TpLayout::two_five_d, 2, 2, 4);
    p.tp_grid_order = order;
    const auto t = target("gpt3-2.7b", p, "dgx-h100", 1);
    sim::ModelSpec m = t.model;
    m.layers = 1;
    for (int rank = 0; rank < 8; ++rank) {
      CAPTURE(rank);
      const auto at = t.plan.grid_coord(rank);
      const bool rows = order == sim::TpGridOrder::row;
      CHECK(rank == (rows ? at.col + 2 * at.row : at.row + 2 * at.col) + 4 * at.depth);
      const auto g = sim::build_step_graph(m, t.cluster, t.plan, rank);
      const int row0 = (rows ? 2 * at.row : at.row) + 4 * at.depth, col0 = (rows ? at.col : 2 * at.col) + 4 * at.depth;
      CHECK(g.groups[*g.group_id("row")].instance == row0);
      CHECK(g.groups[*g.group_id("col")].instance == col0);
    }
  }
}

TEST_CASE("grid memory: weights / q^2 per rank, activations b s h / P as in 1D, graph and closed form agree") {
  // gpt3-2.7b, bf16: a layer's weights 12 h^2 (QKV 3h^2, out-proj h^2, FC1 and FC2 4h^2 each) and four
  // LayerNorm vectors of h; every matrix is cut into q x q blocks, every vector into q pieces
  // (Colossal-AI's Linear2p5D [in/q, out/q], LayerNorm2p5D h/q); embedding [vocab/q, h/q], learned
  // positions [seq, h/q], the final norm 2 vectors of h/q; tied head
  const int q = 2, d = 2;
  const auto t = target("gpt3-2.7b", grid(sim::TpLayout::two_five_d, q, d, 16), "dgx-a100", 1);
  const double h = 2560, L = 32, V = 51200, S = 1024;
  const double params = L * (12 * h * h / (q * q) + 4 * h / q) + V * h / (q * q) + S * h / q + 2 * h / q;
  const auto mem = sim::estimate_memory(t.model, t.cluster, t.plan);
  CHECK(mem.weights == doctest::Approx(2 * params));
  CHECK(mem.gradients == doctest::Approx(4 * params));
  CHECK(mem.optimizer == doctest::Approx(12 * params));
  // the graph's saved activations are what the closed form says
  const auto g = sim::build_step_graph(t.model, t.cluster, t.plan);
  CHECK(sim::saved_activation_bytes(g) == doctest::Approx(mem.activations).epsilon(1e-9));
  // on P = 64 GPUs at one micro-batch, 2.5D [4,4,4] and 2D [8,8] keep the same activations per rank:
  // T/(q d) tokens x h/q columns is b s h / P either way (and heads/q x T/(q d) attention rows)
  const auto t2 = target("gpt3-2.7b", grid(sim::TpLayout::two_d, 8, 1, 64), "tesseract-a100", 8);
  const auto t25 = target("gpt3-2.7b", grid(sim::TpLayout::two_five_d, 4, 4, 64), "tesseract-a100", 8);
  const auto m2 = sim::estimate_memory(t2.model, t2.cluster, t2.plan), m25 = sim::estimate_memory(t25.model, t25.cluster, t25.plan);
  CHECK(m25.activations == doctest::Approx(m2.activations));
  // ... while 2.5D keeps q^2 = 16 instead of 64 blocks of the weights: 4x the weights per rank (but
  // the norm vectors and position table, cut only by q, 2x)
  CHECK(m25.weights / m2.weights == doctest::Approx(4.0).epsilon(0.01));
}

TEST_CASE("tuner: grid plans for each (q, d) of the TP sizes, both orders where a layer spans nodes") {
  const auto m = sim::load_model("gpt3-2.7b");
  auto c = hardware::load_cluster("tesseract-a100");
  tuner::SearchSpace s;
  s.tp = {64};
  s.micro_batch = {64};
  s.attention = {sim::default_attention(c, hardware::Stack::eager, common::DType::bf16)};  // the stack's kernel: describe() names no other
  s.dp_bucket_mb = {25.0};
  s.tp_layouts = {sim::TpLayout::two_d, sim::TpLayout::two_five_d};
  std::map<std::string, int> seen;
  for (const auto& p : tuner::enumerate_plans(m, c, s)) ++seen[sim::describe(p)];
  // 64 = 8^2 (2d; an 8 x 8 layer spans nodes: both orders), 2^2 x 16 (fits a node: one order),
  // 4^2 x 4 (16 > 8 GPUs per node: both)
  // each also with domino's 2 and 4 row slices where they split a rank's mb / (q d) sequences: 8 on
  // [8,8], 4 on [4,4,4], 2 on [2,2,16] (2 slices only)
  CHECK(seen == std::map<std::string, int>{{"tp2d[8,8] dp1 mb64 summa", 1},
                                           {"tp2d[8,8] dp1 mb64 summa domino 2", 1},
                                           {"tp2d[8,8] dp1 mb64 summa domino 4", 1},
                                           {"tp2d[8,8]c dp1 mb64 summa", 1},
                                           {"tp2d[8,8]c dp1 mb64 summa domino 2", 1},
                                           {"tp2d[8,8]c dp1 mb64 summa domino 4", 1},
                                           {"tp2.5d[2,2,16] dp1 mb64 summa", 1},
                                           {"tp2.5d[2,2,16] dp1 mb64 summa domino 2", 1},
                                           {"tp2.5d[4,4,4] dp1 mb64 summa", 1},
                                           {"tp2.5d[4,4,4] dp1 mb64 summa domino 2", 1},
                                           {"tp2.5d[4,4,4] dp1 mb64 summa domino 4", 1},
                                           {"tp2.5d[4,4,4]c dp1 mb64 summa", 1},
                                           {"tp2.5d[4,4,4]c dp1 mb64 summa domino 2", 1},
                                           {"tp2.5d[4,4,4]c dp1 mb64 summa domino 4", 1}});
  // without domino in the searched strategies, the grids are unsliced only
  s.strategies = {&sim::strategy_none()};
  std::size_t sliced = 0;
  for (const auto& p : tuner::enumerate_plans(m, c, s)) sliced += p.row_slices > 1;
  CHECK(sliced == 0);
  // the default space searches all three layouts
  CHECK(tuner::SearchSpace{}.tp_layouts == std::vector<sim::TpLayout>{sim::TpLayout::one_d, sim::TpLayout::two_d, sim::TpLayout::two_five_d});
}

TEST_CASE("Tesseract weak scaling direction: 2.5D [4,4,4] beats 2D [8,8,1] on 64 GPUs") {
  // The paper (arXiv 2105.14500) reports 1.45x the efficiency of 2D [8,8,1] for 2.5D [4,4,4] on 64
  // GPUs. Its machine as configs/clusters/tesseract-a100.yaml assumes it; a GPT-3 13B shape, 32
  // sequences of 2048 per step (the largest power of two at which [4,4,4] fits 40 GB with the eager
  // stack's unfused attention), fp16 in PyTorch eager (Colossal-AI). What this checks is the
  // direction only; docs/tensor-parallel-2d.md reports and explains the ratio.
  auto run = [](sim::TpLayout layout, int q, int d) {
    sim::PlanInput p = grid(layout, q, d, 32, 2048);
    p.dtype = common::DType::fp16;
    const auto t = target("gpt3-13b", p, "tesseract-a100", 8);
    const auto cost = hardware::make_cost_model(t.cluster, "", t.plan.stack);
    const auto g = sim::build_step_graph(t.model, t.cluster, t.plan);
    return sim::Engine(*cost).simulate(g);
  };
  const auto r2 = run(sim::TpLayout::two_d, 8, 1);
  const auto r25 = run(sim::TpLayout::two_five_d, 4, 4);
  MESSAGE("2D [8,8,1] " << r2.step_time.ms() << " ms, 2.5D [4,4,4] " << r25.step_time.ms() << " ms, ratio "
                        << r2.step_time.ms() / r25.step_time.ms());
  CHECK(r25.step_time < r2.step_time);
  CHECK(r25.mfu > r2.mfu);
  CHECK(r25.memory.fits());  // both plans fit the 40 GB parts
  CHECK(r2.memory.fits());
}

// ---- domino's row slices on a grid ----------------------------------------------------------------------

namespace {

sim::PlanInput sliced(sim::TpLayout layout, int q, int d, int mb, int r, std::int64_t seq = 1024) {
  sim::PlanInput p = grid(layout, q, d, mb, seq);
  p.strategy = &sim::strategy_domino();
  p.row_slices = r;
  return p;
}

}  // namespace

TEST_CASE("grid row slices: describe, YAML round trip, one-line errors for what is not built") {
  using L = sim::TpLayout;
  const auto t = target("gpt3-2.7b", sliced(L::two_d, 2, 1, 8, 2), "dgx-a100", 1);
  CHECK(sim::describe(t.plan) == "tp2d[2,2] dp2 mb8 summa domino 2");
  CHECK(sim::resolve_plan(t.model, t.cluster, sim::parse_plan_input(sim::plan_to_yaml(t.plan), "yaml")) == t.plan);
  // [2,2] at micro-batch 4: a rank holds 4 / 2 = 2 sequences, which 4 slices do not split
  const std::string e = error_of("gpt3-2.7b", sliced(L::two_d, 2, 1, 4, 4), "dgx-a100", 1);
  CHECK(e.find("row_slices: row_slices=4 does not divide the 2 sequences of a grid rank (micro_batch / (tp_q x tp_d) = 4 / (2 x 1))") !=
        std::string::npos);
  // [2,2,2] at micro-batch 8: 2 sequences per rank as well
  CHECK(error_of("gpt3-2.7b", sliced(L::two_five_d, 2, 2, 8, 4), "dgx-a100", 1).find("micro_batch / (tp_q x tp_d) = 8 / (2 x 2)") !=
        std::string::npos);
  auto p = sliced(L::two_d, 2, 1, 8, 2);
  p.col_slices = 2;
  const std::string ec = error_of("gpt3-2.7b", p, "dgx-a100", 1);
  CHECK(ec.find("col_slices: col_slices=2: domino's column chunks split the 1D row-parallel GEMM") != std::string::npos);
  p = sliced(L::two_d, 2, 1, 8, 2);
  p.row_axis = sim::RowAxis::sequence;
  const std::string ea = error_of("gpt3-2.7b", p, "dgx-a100", 1);
  CHECK(ea.find("row_axis: tp_layout 2d slices rows along the batch only") != std::string::npos);
  for (const auto& msg : {e, ec, ea}) CHECK(msg.find('\n') == std::string::npos);
  // one slice is the unsliced grid's graph (domino's neutral point): the same tasks
  const auto t1 = target("gpt3-2.7b", sliced(L::two_d, 2, 1, 8, 1), "dgx-a100", 1);
  const auto t0 = target("gpt3-2.7b", grid(L::two_d, 2, 1, 8), "dgx-a100", 1);
  CHECK(sim::build_step_graph(t1.model, t1.cluster, t1.plan).tasks.size() == sim::build_step_graph(t0.model, t0.cluster, t0.plan).tasks.size());
}

TEST_CASE("grid row slices: each slice's SUMMA collectives on communicators of its own, weight blocks once per slice") {
  // gpt3-2.7b (h 2560, ffn 10240, 3h QKV), seq 1024, micro-batch 16 on 2.5D [2,2,2] in 2 slices: a
  // rank holds 16 / (q d) = 4 sequences, a slice 2 of them, T = 2048 tokens. Each slice runs the
  // unsliced layer's collectives (SUMMA collectives per layer match the formulas, above) at T
  // tokens: its own row broadcasts of [T, in/q] input blocks, and the whole [in/q, out/q] weight
  // blocks again along its column - the column traffic is R times the unsliced grid's.
  const int q = 2, d = 2, mb = 16, R = 2;
  const auto t = target("gpt3-2.7b", sliced(sim::TpLayout::two_five_d, q, d, mb, R), "dgx-a100", 1);
  const auto g = sim::build_step_graph(t.model, t.cluster, t.plan);
  const auto u = target("gpt3-2.7b", grid(sim::TpLayout::two_five_d, q, d, mb), "dgx-a100", 1);
  const auto gu = sim::build_step_graph(u.model, u.cluster, u.plan);
  const double e = 2, T = mb / (q * d) / R * 1024.0, h = 2560, F = 10240, Q = 3 * h;
  const auto fwd = layer_comm(g, 3, true), bwd = layer_comm(g, 3, false);
  const auto ufwd = layer_comm(gu, 3, true);
  using K = hardware::CollectiveKind;
  for (const std::string n : {"", "1"}) {
    CAPTURE(n);
    CHECK(fwd.at({"row" + n, K::broadcast}).count == 4 * q);
    CHECK(fwd.at({"row" + n, K::broadcast}).bytes == doctest::Approx(q * e * T * (3 * h + F) / q));
    CHECK(fwd.at({"col" + n, K::broadcast}).count == 4 * q);
    CHECK(fwd.at({"col" + n, K::broadcast}).bytes == doctest::Approx(q * e * (h * Q + h * h + h * F + F * h) / (q * q)));
    CHECK(fwd.at({"col" + n, K::broadcast}).bytes == doctest::Approx(ufwd.at({"col", K::broadcast}).bytes));
    CHECK(fwd.at({"row" + n, K::all_reduce}).count == 4);
    CHECK(bwd.at({"row" + n, K::reduce}).count == 4 * q);
    CHECK(bwd.at({"col" + n, K::reduce}).count == 4 * q);
    CHECK(bwd.at({"row" + n, K::all_reduce}).count == 2);
    // slice 1's groups: the same ranks (instance) and links as slice 0's, a communicator of their own
    CHECK(g.groups[*g.group_id("row" + n)].instance == g.groups[*g.group_id("row")].instance);
    CHECK(g.groups[*g.group_id("col" + n)].nodes == g.groups[*g.group_id("col")].nodes);
  }
  CHECK_FALSE(g.group_id("row2"));
  // the row traffic is the unsliced grid's, split in two
  CHECK(fwd.at({"row", K::broadcast}).bytes + fwd.at({"row1", K::broadcast}).bytes ==
        doctest::Approx(ufwd.at({"row", K::broadcast}).bytes));
  // streams: compute, tp_comm, dp_comm and a row and a column stream per slice
  int comm = 0;
  for (const auto& st : g.streams) comm += st.name.starts_with("row") || st.name.starts_with("col");
  CHECK(comm == 2 * R);
  // GEMM tasks of a layer: R x the unsliced grid's (4 linears x 3 passes x q steps each, per slice)
  auto gemms = [](const sim::StepGraph& x) {
    int n = 0;
    for (const auto& task : x.tasks) n += task.layer == 3 && std::holds_alternative<hardware::GemmOp>(task.kind);
    return n;
  };
  CHECK(gemms(gu) == 4 * 3 * q);
  CHECK(gemms(g) == R * gemms(gu));
}

TEST_CASE("grid row slices: a slice's reduces overlap the other slice's GEMMs; less exposed communication where reduces were exposed") {
  // Unsliced, each SUMMA backward ends in a wait for its last reduce (Colossal-AI's op.wait()); in
  // slices only the reduces' readers wait for them, so slice 1's reduces (run first: autograd
  // order) can run while slice 0's GEMMs do. gpt3-13b, 2 DGX-H100, 2D [4,4] (a row in a node, a
  // column across both), micro-batch 32, eager: the unsliced grid exposes 1370.6 ms of communication
  // per step, 2 slices 1338.7 ms (measured when written); the sliced step is still slower (10950 ->
  // 12129 ms: half-size GEMMs, twice the launches, the weight blocks broadcast once per slice).
  auto run = [](int r) {
    sim::PlanInput p = r > 1 ? sliced(sim::TpLayout::two_d, 4, 1, 32, r, 2048) : grid(sim::TpLayout::two_d, 4, 1, 32, 2048);
    p.global_batch = 256;
    const auto t = target("gpt3-13b", p, "dgx-h100", 2);
    const auto cost = hardware::make_cost_model(t.cluster, "", t.plan.stack);
    auto g = std::make_shared<sim::StepGraph>(sim::build_step_graph(t.model, t.cluster, t.plan));
    return std::pair{g, sim::Engine(*cost, sim::EngineOptions{.timeline = true}).simulate(*g)};
  };
  // no structured bindings: clang 14 refuses them in doctest's macros
  const auto one = run(1), two = run(2);
  const sim::StepReport& r1 = one.second;
  const sim::StepReport& r2 = two.second;
  const auto& g2 = two.first;
  MESSAGE("exposed communication: 1 slice " << r1.exposed_comm.ms() << " ms, 2 slices " << r2.exposed_comm.ms() << " ms; step "
                                            << r1.step_time.ms() << " -> " << r2.step_time.ms() << " ms");
  CHECK(r1.exposed_comm.ms() > 1000);  // communication is exposed
  CHECK(r2.exposed_comm < r1.exposed_comm);
  // in the last micro-batch's timeline: some backward reduce of slice 1 overlaps a GEMM of slice 0
  const auto& tl = r2.timelines.at(0).timing;
  std::vector<std::pair<std::int64_t, std::int64_t>> gemm0;
  for (std::size_t i = 0; i < g2->tasks.size(); ++i) {
    const auto& task = g2->tasks[i];
    if (task.slice == 0 && task.phase != sim::Phase::fwd && std::holds_alternative<hardware::GemmOp>(task.kind))
      gemm0.push_back({tl[i].start.ps, tl[i].end.ps});
  }
  std::size_t overlapping = 0;
  for (std::size_t i = 0; i < g2->tasks.size(); ++i) {
    const auto* c = std::get_if<hardware::CollectiveOp>(&g2->tasks[i].kind);
    if (!c || c->kind != hardware::CollectiveKind::reduce || g2->tasks[i].slice != 1) continue;
    for (const auto& [a, b] : gemm0)
      if (tl[i].start.ps < b && a < tl[i].end.ps) {
        ++overlapping;
        break;
      }
  }
  MESSAGE(overlapping << " of slice 1's reduces overlap a GEMM of slice 0");
  CHECK(overlapping > 0);
}
