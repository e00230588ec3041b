// The tuner's screening of pipelined plans: the schedule replayed with given pass times, and the
// estimate against the whole simulation.
#include <doctest/doctest.h>

#include <tuple>

#include "hardware/cost_model.hpp"
#include "sim/model.hpp"
#include "sim/pipeline_step.hpp"
#include "tuner/evaluate.hpp"
#include "tuner/pipeline_estimate.hpp"

TEST_CASE("replay of uniform passes without transfer cost: (m + pp - 1)(F + B), interleaved (vp m + pp - 1)(F + B)") {
  // Narayanan et al. 2021, eq. 1 and section 2.2.2: with every virtual stage's forward F and
  // backward B equal and free transfers, 1F1B ends after (m + pp - 1)(F + B) and the interleaved
  // schedule (F, B per chunk) after (vp m + pp - 1)(F + B). The replay is not told this.
  for (const auto& row : std::vector<std::tuple<int, int, int>>{{2, 1, 3}, {4, 1, 8}, {8, 1, 16}, {4, 2, 8}, {2, 4, 4}}) {
    // named variables, not structured bindings: CAPTURE takes them into a lambda (clang 14 refuses bindings there)
    const int pp = std::get<0>(row);
    const int vp = std::get<1>(row);
    const int m = std::get<2>(row);
    CAPTURE(pp);
    CAPTURE(vp);
    const int V = pp * vp;
    tuner::PassTimes t{.fwd = std::vector<double>(V, 4.0),
                       .bwd = std::vector<double>(V, 8.0),
                       .send_fwd = std::vector<double>(V, 0.0),
                       .send_bwd = std::vector<double>(V, 0.0),
                       .tail = std::vector<double>(pp, 0.0)};
    const auto schedule = vp > 1 ? sim::PipelineSchedule::interleaved : sim::PipelineSchedule::one_f_one_b;
    const auto ends = tuner::replay_schedule(schedule, pp, vp, m, t, false);
    double step = 0;
    for (double e : ends) step = std::max(step, e);
    CHECK(step == doctest::Approx((vp * m + pp - 1) * 12.0));
  }
}

TEST_CASE("replay with transfers: each adds to the path of the first micro-batch, blocking sends also to the sender") {
  // pp 2, m 1: F0 on rank 0, transfer, F1 and B1 on rank 1, transfer, B0 on rank 0:
  // 4 + 1 + 4 + 8 + 2 + 8 = 27 (hand derivation), plus rank 0's tail of 5.
  tuner::PassTimes t{.fwd = {4, 4}, .bwd = {8, 8}, .send_fwd = {1, 0}, .send_bwd = {0, 2}, .tail = {5, 0}};
  const auto ends = tuner::replay_schedule(sim::PipelineSchedule::one_f_one_b, 2, 1, 1, t, false);
  CHECK(ends[0] == doctest::Approx(32.0));
  CHECK(ends[1] == doctest::Approx(17.0));  // rank 1: F1 from 5 to 9, B1 to 17
  // blocking sends: rank 1 is also busy while its gradient goes back (2), rank 0 while its activation goes (1)
  const auto blocking = tuner::replay_schedule(sim::PipelineSchedule::one_f_one_b, 2, 1, 1, t, true);
  CHECK(blocking[1] == doctest::Approx(19.0));
  CHECK(blocking[0] == doctest::Approx(32.0));
}

TEST_CASE("the screening estimate of pipelined plans tracks the whole simulation") {
  // gpt3-13b on two DGX-H100, three pipelined plans: the estimate (one micro-batch through a 1- and
  // 2-layer-per-stage model, replayed) against sim::simulate_plan of the whole model. The tuner's
  // finalists are simulated whole, so the screening only has to rank; measured errors are below 3 %.
  const auto m = sim::load_model("gpt3-13b");
  auto c = hardware::load_cluster("dgx-h100");
  c.nodes = 2;
  const auto cost = hardware::make_analytic_cost_model(c, hardware::Stack::eager);  // the plans' default stack
  const tuner::Evaluator ev(m, c, *cost);
  for (const char* yaml : {"tp: 4\npp: 4\nglobal_batch: 32\nsequence_parallel: true\n", "tp: 8\npp: 2\nglobal_batch: 32\nmicro_batch: 2\n",
                           "tp: 2\npp: 4\nvp: 2\nglobal_batch: 16\nstrategy: domino\nrow_slices: 1\ncol_slices: 2\n"}) {
    CAPTURE(yaml);
    const auto p = sim::resolve_plan(m, c, sim::parse_plan_input(yaml, "test"), "test");
    const auto est = ev.estimate(p);
    const auto whole = ev.simulate(p);
    const double err = std::abs(est.step_time.s() - whole.step_time.s()) / whole.step_time.s();
    CHECK(err < 0.03);
    CHECK(est.step_time >= est.lower_bound);
    CHECK(est.lower_bound <= whole.step_time);
  }
}

TEST_CASE("ZeRO-1 pipelined plans: micro-batch 0's forward, slowed by the step-start parameter gathers, is not taken for every micro-batch's") {
  // gpt3-175b on 16 DGX-H200, the tuner's worst-screened finalists (ZeRO-1, overlapped parameter
  // gathers). The estimate once took micro-batch 0's forward, which shares the GPU with the
  // gathers of the updated parameters, as every micro-batch's: tune's finalist like the first plan
  // (with its searched bucket size) was screened +5.26 % (max_screen_error 0.0526); these plans,
  // with the default bucket: +3.57 %, +3.28 %, +0.04 %.
  // After: +1.94 %, +1.32 %, -0.74 %. Bar 2.5 % (the rest: the gathers spread past micro-batch 0).
  const auto m = sim::load_model("gpt3-175b");
  auto c = hardware::load_cluster("dgx-h200");
  c.nodes = 16;
  const auto cost = hardware::make_analytic_cost_model(c, hardware::Stack::eager);
  const tuner::Evaluator ev(m, c, *cost);
  for (const char* yaml : {"tp: 8\ndp: 8\npp: 2\nvp: 4\nmicro_batch: 4\nglobal_batch: 1024\nsequence_parallel: true\nstrategy: domino\nzero: 1\n",
                           "tp: 8\ndp: 8\npp: 2\nvp: 2\nmicro_batch: 4\nglobal_batch: 1024\nsequence_parallel: true\nstrategy: domino\ncol_slices: 2\nzero: 1\n",
                           "tp: 2\ndp: 8\npp: 8\nvp: 4\nmicro_batch: 1\nglobal_batch: 1024\nsequence_parallel: true\nzero: 1\n"}) {
    CAPTURE(yaml);
    const auto p = sim::resolve_plan(m, c, sim::parse_plan_input(yaml, "test"), "test");
    const auto est = ev.estimate(p);
    const auto whole = ev.simulate(p);
    const double err = est.step_time.s() / whole.step_time.s() - 1;
    MESSAGE("screening error " << 100 * err << " %");
    CHECK(std::abs(err) < 0.025);
  }
}
