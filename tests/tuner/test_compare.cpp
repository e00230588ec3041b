// tuner/compare: the best plan of each strategy side by side - the TP volume per GPU derived by hand
// on the fake cost model, the table's rows and the verdict's arithmetic on reports set by hand, and
// on a real search that every strategy searched has its best plan, the same with and without pruning.
#include <doctest/doctest.h>

#include "hardware/cost_model.hpp"
#include "sim/strategy.hpp"
#include "sim/target.hpp"
#include "tests/sim/fake_cost_model.hpp"
#include "tuner/compare.hpp"

namespace {

sim::Plan tiny_plan(const std::string& yaml, const hardware::ClusterSpec& c) {
  return sim::resolve_plan(sim::load_model("tiny"), c, sim::parse_plan_input(yaml, "p"), "p");
}

tuner::RankedPlan ranked(const sim::Plan& p, double step_ms, double compute_ms, double exposed_ms, double idle_ms, std::size_t index) {
  tuner::RankedPlan r;
  r.index = index;
  r.plan = p;
  r.report.step_time = common::Duration::from_us(step_ms * 1e3);
  r.report.compute = common::Duration::from_us(compute_ms * 1e3);
  r.report.exposed_comm = common::Duration::from_us(exposed_ms * 1e3);
  r.report.idle = common::Duration::from_us(idle_ms * 1e3);
  r.report.memory.capacity = 80e9;
  return r;
}

}  // namespace

TEST_CASE("TP communication per GPU: every TP collective of the step, derived by hand on the fake cost model") {
  // tiny (2 layers, h 64, bf16), tp 2 without SP, micro-batch 1 x 32 tokens. The fake prices a
  // collective's sent bytes as its op's bytes. Per micro-batch: the embedding's AllReduce, four per
  // layer (attention and MLP, forward and backward) and the LM head's input gradient, each T x h x 2
  // = 4096 bytes, plus the loss statistics (T x 3 fp32 = 384 bytes): 10 x 4096 + 384 = 41,344.
  auto c = test::fake_cluster();
  c.node.gpus_per_node = 2;
  const test::FakeCostModel cost(c);
  const auto model = sim::load_model("tiny");
  const tuner::Evaluator ev(model, c, cost);
  // two micro-batches (global batch 2, dp 1): the graph's one micro-batch counted twice
  CHECK(tuner::tp_bytes_per_gpu(ev, tiny_plan("tp: 2\nglobal_batch: 2\n", c)) == doctest::Approx(2 * 41344.0));
  // tp 1 (dp 2): no TP group traffic at all
  CHECK(tuner::tp_bytes_per_gpu(ev, tiny_plan("tp: 1\nglobal_batch: 2\n", c)) == 0.0);
  auto c4 = c;
  c4.node.gpus_per_node = 4;
  const test::FakeCostModel cost4(c4);
  const tuner::Evaluator ev4(model, c4, cost4);
  // pipelined, pp 2 with 8 micro-batches (built with 2, scaled by 4): the last stage sends most -
  // layer 1's four collectives, the loss statistics and the LM head's input gradient: 5 x 4096 + 384
  // = 20,864 per micro-batch (the first stage: the embedding's and layer 0's, 5 x 4096 = 20,480)
  CHECK(tuner::tp_bytes_per_gpu(ev4, tiny_plan("tp: 2\npp: 2\nglobal_batch: 8\n", c4)) == doctest::Approx(8 * 20864.0));
}

TEST_CASE("the strategy table and verdict: rows fastest first, the winner's lead split into its parts") {
  auto c = test::fake_cluster();
  c.node.gpus_per_node = 2;
  const test::FakeCostModel cost(c);
  const auto model = sim::load_model("tiny");
  const tuner::Evaluator ev(model, c, cost);
  tuner::SearchResult r;
  r.strategies = {&sim::strategy_none(), &sim::strategy_domino(), &sim::strategy_te_pipelined(), &sim::strategy_te_bulk()};
  // step = compute + exposed communication + idle, set by hand (ms)
  const auto none = ranked(tiny_plan("tp: 2\nsequence_parallel: true\n", c), 100, 80, 15, 5, 0);
  const auto bulk = ranked(tiny_plan("tp: 2\nsequence_parallel: true\nstrategy: te-bulk\nte_bulk_sms: 8\n", c), 90, 82, 4, 4, 2);
  const auto dom = ranked(tiny_plan("tp: 2\nstrategy: domino\nrow_slices: 1\ncol_slices: 2\n", c), 96, 84, 7, 5, 1);
  r.per_strategy = {bulk, dom, none};  // fastest first, as search leaves them; te-pipelined had no feasible plan
  r.without_plan = {{.strategy = &sim::strategy_te_pipelined(), .plans = 12, .message = "strategy te-pipelined: why"}};
  r.baseline = none;
  const auto rows = tuner::compare_strategies(r, ev);
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].strategy == &sim::strategy_te_bulk());
  CHECK(rows[1].strategy == &sim::strategy_domino());
  CHECK(rows[2].strategy == &sim::strategy_none());
  CHECK(rows[3].strategy == &sim::strategy_te_pipelined());
  CHECK(rows[3].best == nullptr);
  CHECK(rows[0].tp_bytes > 0);
  // te-bulk over domino: 6 ms = exposed -3, compute -2, idle -1; the largest gain named first
  CHECK(tuner::strategy_verdict(rows, r) ==
        "te-bulk wins (1.111x Megatron-LM without overlap); 6.00 ms per step ahead of domino: the largest gain is exposed "
        "communication, 4.00 vs 7.00 ms (-3.00 ms), compute -2.00 ms, idle -1.00 ms");
  const std::string t = tuner::strategy_table(rows, r);
  CHECK(t.find("te_bulk_sms 8") != std::string::npos);
  CHECK(t.find("row_slices 1, col_slices 2") != std::string::npos);  // row_axis does not apply to one row slice
  CHECK(t.find("te-pipelined: no feasible plan, 12 plans refused, most of them as: strategy te-pipelined: why\n") != std::string::npos);
  CHECK(t.find("1.111") != std::string::npos);  // 100 / 90
  const auto j = tuner::strategies_json(rows, r);
  REQUIRE(j["rows"].size() == 4);
  CHECK(j["rows"][0]["strategy"] == "te-bulk");
  CHECK(j["rows"][0]["best"]["knobs"]["te_bulk_sms"] == 8);
  CHECK(j["rows"][0]["best"]["exposed_comm_ms"].get<double>() == doctest::Approx(4.0));
  CHECK(j["rows"][3]["best"].is_null());
  CHECK(j["rows"][3]["refused"]["plans"] == 12);
  CHECK(j["verdict"] == tuner::strategy_verdict(rows, r));
  // a winner behind on some part: the parts say so with their sign
  r.per_strategy = {dom, none};
  r.strategies = {&sim::strategy_none(), &sim::strategy_domino()};
  const auto two = tuner::compare_strategies(r, ev);
  CHECK(tuner::strategy_verdict(two, r) ==
        "domino wins (1.042x Megatron-LM without overlap); 4.00 ms per step ahead of none: the largest gain is exposed "
        "communication, 7.00 vs 15.00 ms (-8.00 ms), idle +0.00 ms, compute +4.00 ms");
  // Megatron-LM wins, tied with domino (1x1 at tp 1 builds its tasks): the lead is over the next that differs
  const auto dom_tied = ranked(tiny_plan("tp: 2\nstrategy: domino\nrow_slices: 1\ncol_slices: 1\n", c), 100, 80, 15, 5, 1);
  const auto bulk_slow = ranked(tiny_plan("tp: 2\nsequence_parallel: true\nstrategy: te-bulk\n", c), 104, 90, 10, 4, 2);
  r.per_strategy = {none, dom_tied, bulk_slow};
  r.strategies = {&sim::strategy_none(), &sim::strategy_domino(), &sim::strategy_te_bulk()};
  r.without_plan.clear();
  const auto tie = tuner::compare_strategies(r, ev);
  CHECK(tuner::strategy_verdict(tie, r) ==
        "none wins, tied with domino (the same step time): no overlap strategy beats Megatron-LM without overlap here; 4.00 ms "
        "per step ahead of te-bulk: the largest gain is compute, 80.00 vs 90.00 ms (-10.00 ms), idle +1.00 ms, exposed "
        "communication +5.00 ms");
}

TEST_CASE("a real search keeps the best plan of every strategy it searches, with and without pruning") {
  // gpt3-13b on one DGX-H100, global batch 16, micro-batches 1 and 2 (a small space): each of the
  // searched strategies has feasible plans, so each has a best plan; pruning keeps a plan while it
  // can beat its strategy's best estimate, so the exhaustive search finds the same bests.
  const auto m = sim::load_model("gpt3-13b");
  const auto c = hardware::load_cluster("dgx-h100");
  auto cost = hardware::make_analytic_cost_model(c, hardware::Stack::eager);
  tuner::SearchSpace s;
  s.global_batch = 16;
  s.micro_batch = {1, 2};
  s.tp = {2, 4};
  s.pp = {1, 2};  // pipelines of 2 at most: the exhaustive search screens every candidate (4.5 s in Release; 12.7 s with every pp)
  s.zero = {1};
  s.recompute = {sim::Recompute::none};
  s.dp_bucket_mb = {100};
  tuner::SearchOptions o;
  o.threads = 2;
  const auto a = tuner::search(m, c, *cost, s, o);
  o.prune = false;
  const auto e = tuner::search(m, c, *cost, s, o);
  CHECK(a.pruned > 0);
  REQUIRE(a.strategies.size() == 6);  // none, domino, te-pipelined, async-tp, te-bulk, fused
  // one best per strategy, and one for the 2D grid (tp 4 = 2^2; no 2.5D grid at tp 2 or 4)
  REQUIRE(a.per_strategy.size() == a.strategies.size() + 1);
  CHECK(std::count_if(a.per_strategy.begin(), a.per_strategy.end(), [](const tuner::RankedPlan& b) { return b.plan.tp_layout == sim::TpLayout::two_d; }) == 1);
  REQUIRE(e.per_strategy.size() == a.per_strategy.size());
  for (std::size_t i = 0; i < a.per_strategy.size(); ++i) {
    CAPTURE(a.per_strategy[i].plan.strategy->name);
    CHECK(a.per_strategy[i].index == e.per_strategy[i].index);
    CHECK(a.per_strategy[i].report.step_time == e.per_strategy[i].report.step_time);
    if (i) CHECK(a.per_strategy[i - 1].report.step_time <= a.per_strategy[i].report.step_time);
  }
  CHECK(a.per_strategy.front().index == a.top.front().index);  // the winner is the best plan of its strategy
  REQUIRE(a.baseline);
  for (const auto& b : a.per_strategy)
    if (b.plan.strategy->baseline && !b.plan.grid_tp()) CHECK(b.index == a.baseline->index);  // the baseline is 1D Megatron-LM
}
