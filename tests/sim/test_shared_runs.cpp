// The engine's micro-batch runs share what they simulate alike (EngineOptions::share_runs): the last
// micro-batch's run goes on from the run before it where their tasks part. Expected: every figure
// of the report and every task's start and end the same, to the picosecond, as simulating each run
// from the start (the runs are the same event for event up to there; nothing may differ), on
// plans whose micro-batches part late (DP reductions in the backward pass, the optimizer only),
// early (ZeRO-3's gathers: three runs), on several simulated ranks (a SUMMA grid) and on a pipeline
// (one run: nothing to share).
#include <doctest/doctest.h>

#include <string>

#include "hardware/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/pipeline_step.hpp"
#include "sim/target.hpp"
#include "tests/sim/same_report.hpp"

namespace {

sim::Target target(const std::string& plan_yaml) {
  sim::TargetInput in{.model = "gpt3-2.7b", .cluster = "dgx-h100", .nodes = 1};
  in.flags = sim::parse_plan_input(plan_yaml, "test");
  auto t = sim::resolve_target(in);
  t.model.layers = 4;  // short graphs (pp 2 splits them): the test compares runs, not the model
  return t;
}

struct Case {
  std::string plan;
  bool shares;  // whether the last run takes over a part of the run before it
};

}  // namespace

TEST_CASE("the micro-batch runs of a step share their common part: the same report, task times included, as simulating each from the start") {
  const Case cases[] = {
      // 4 micro-batches, ZeRO-2's reduce-scatters in the last one's backward pass: first and last part there
      {"tp: 2\ndp: 4\nmicro_batch: 2\nglobal_batch: 32\nzero: 2\n", true},
      // DP all-reduces in buckets, sequence parallelism, async TP
      {"tp: 2\ndp: 4\nmicro_batch: 2\nglobal_batch: 16\nsequence_parallel: true\nstrategy: async-tp\ndp_bucket_mb: 25\n", true},
      // dp 1: only the optimizer is once per step
      {"tp: 8\nmicro_batch: 1\nglobal_batch: 4\nstrategy: domino\nrow_slices: 1\ncol_slices: 2\n", true},
      // ZeRO-3: the first micro-batch gathers the parameters (step_start); middle and last share
      {"tp: 1\ndp: 8\nmicro_batch: 1\nglobal_batch: 32\nzero: 3\n", true},
      // a SUMMA grid: four simulated ranks
      {"tp_layout: 2d\ntp_q: 2\ndp: 2\nmicro_batch: 2\nglobal_batch: 16\n", true},
      // one micro-batch per step, and a pipeline (its stage graphs hold the whole step): one run each
      {"tp: 2\ndp: 4\nmicro_batch: 2\nglobal_batch: 8\n", false},
      {"tp: 2\ndp: 2\npp: 2\nmicro_batch: 1\nglobal_batch: 8\n", false},
  };
  const auto c = hardware::load_cluster("dgx-h100");
  const auto cost = hardware::make_analytic_cost_model(c, hardware::Stack::eager);
  for (const Case& k : cases)
    for (bool timeline : {false, true}) {
      CAPTURE(k.plan);
      CAPTURE(timeline);
      const auto t = target(k.plan);
      const auto shared = sim::simulate_plan(t.model, t.cluster, t.plan, *cost, {.timeline = timeline});
      const auto alone = sim::simulate_plan(t.model, t.cluster, t.plan, *cost, {.timeline = timeline, .share_runs = false});
      tests::check_same_report(shared.report, alone.report);
      CHECK(alone.report.shared_events == 0);
      // shared: some events, never all of the last run's (it runs its own tasks after)
      CHECK((shared.report.shared_events > 0) == k.shares);
      CHECK(shared.report.shared_events < shared.report.events);
    }
}
