// tuner::explain_plan from the search's own simulations (SearchOptions::keep_simulations): the
// search's result is the one it gives without keeping them, and each explained plan's breakdown is
// the one explain_plan gets by simulating the plan again - field by field, exactly (the same
// engine, graph and prices: nothing may differ).
#include <doctest/doctest.h>

#include <stdexcept>

#include "hardware/cost_model.hpp"
#include "sim/strategy.hpp"
#include "tuner/explain.hpp"
#include "tuner/pricing_cache.hpp"
#include "tuner/search.hpp"

namespace {

void check_same(const tuner::LayerCost& a, const tuner::LayerCost& b) {
  CHECK(a.layer == b.layer);
  CHECK(a.compute == b.compute);
  CHECK(a.exposed_comm == b.exposed_comm);
  CHECK(a.gemm_lost == b.gemm_lost);
  CHECK(a.interference == b.interference);
}

void check_same(const tuner::LayerBreakdown& a, const tuner::LayerBreakdown& b) {
  CHECK(a.plan == b.plan);
  CHECK(a.step_time == b.step_time);
  CHECK(a.per_step == b.per_step);
  CHECK(a.bubble == b.bubble);
  CHECK(a.pipe_exposed == b.pipe_exposed);
  check_same(a.once, b.once);
  REQUIRE(a.layers.size() == b.layers.size());
  for (std::size_t l = 0; l < a.layers.size(); ++l) check_same(a.layers[l], b.layers[l]);
}

}  // namespace

TEST_CASE("explain_plan from the search's kept simulations: the same breakdown as simulating again, the same search result") {
  // gpt3-13b on one DGX-H100 with pipelines of 1 and 2 stages (global batch 64: a pp 2 plan has
  // more micro-batches than it simulates, so its kept simulation is the extrapolated one's longer run)
  const auto m = sim::load_model("gpt3-13b");
  const auto c = hardware::load_cluster("dgx-h100");
  const auto base = hardware::make_analytic_cost_model(c, hardware::Stack::eager);
  const tuner::PricingCache cost(*base);
  tuner::SearchSpace s;
  s.pp = {1, 2};
  s.micro_batch = {1, 2};
  s.strategies = {&sim::strategy_none(), &sim::strategy_domino()};
  tuner::SearchOptions plain;
  plain.threads = 2;
  plain.top_k = 50;  // every finalist ranked: the best pp 2 plan is one (the search keeps each pp's best)
  tuner::SearchOptions kept = plain;
  kept.keep_simulations = true;
  const auto a = tuner::search(m, c, cost, s, plain);
  const auto b = tuner::search(m, c, cost, s, kept);
  REQUIRE(a.top.size() == b.top.size());
  REQUIRE_FALSE(b.top.empty());
  CHECK(a.simulated_full == b.simulated_full);
  const tuner::Evaluator ev(m, c, cost);
  std::vector<const tuner::RankedPlan*> finalists;
  for (std::size_t i = 0; i < b.top.size(); ++i) {
    CHECK(a.top[i].index == b.top[i].index);
    CHECK(a.top[i].report.step_time == b.top[i].report.step_time);
    CHECK(a.top[i].report.exposed_comm == b.top[i].report.exposed_comm);
    CHECK(a.top[i].simulated == nullptr);  // not kept unless asked
    REQUIRE(b.top[i].simulated != nullptr);
    CHECK(b.top[i].simulated->report.step_time == b.top[i].report.step_time);
    CHECK(b.top[i].report.timelines.empty());  // kept once, in `simulated`
    CHECK(b.top[i].simulated->graphs.empty());   // rebuilt by explain_plan: not kept for every finalist
    finalists.push_back(&b.top[i]);
  }
  REQUIRE(b.baseline);
  REQUIRE(b.baseline->simulated != nullptr);
  finalists.push_back(&*b.baseline);
  for (const auto& q : b.per_strategy) CHECK(q.simulated != nullptr);
  bool pipelined = false;
  for (const auto& q : b.top) pipelined |= q.plan.pp > 1;
  CHECK(pipelined);  // a pp 2 plan among the finalists: the pipelined breakdown is compared too
  for (const auto* q : finalists) {
    CAPTURE(sim::describe(q->plan));
    check_same(tuner::explain_plan(ev, q->plan, q->simulated.get()), tuner::explain_plan(ev, q->plan));
  }
  // with its graphs (a simulation of explain's own): the same as rebuilt
  const sim::SimulatedPlan whole = ev.simulate_kept(b.top[0].plan);
  REQUIRE_FALSE(whole.graphs.empty());
  check_same(tuner::explain_plan(ev, b.top[0].plan, &whole), tuner::explain_plan(ev, b.top[0].plan, b.top[0].simulated.get()));
  // a simulation without timelines, or of another plan's tasks, cannot be explained: refused, not
  // read out of range
  sim::SimulatedPlan bare = *b.top[0].simulated;
  bare.report.timelines.clear();
  CHECK_THROWS_WITH_AS(tuner::explain_plan(ev, b.top[0].plan, &bare), doctest::Contains("no timelines"), std::invalid_argument);
  auto shorter = m;
  shorter.layers = 20;  // gpt3-13b with half its 40 layers: the rebuilt graphs have fewer tasks
  const tuner::Evaluator ev20(shorter, c, cost);
  CHECK_THROWS_WITH_AS(tuner::explain_plan(ev20, b.top[0].plan, b.top[0].simulated.get()), doctest::Contains("task counts differ"),
                       std::invalid_argument);
}
