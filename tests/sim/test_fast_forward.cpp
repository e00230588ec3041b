// Steady layers (EngineOptions::fast_forward): once a run reaches a layer in the state it reached
// the layer before in, the engine repeats that layer's events instead of simulating them. Expected:
// every figure of the report and every task's start and end the same, to the picosecond, as
// simulating every event (the engine is deterministic and reads only differences of integer times,
// so the repeated layers are the events it would have computed), on whole-model graphs of every
// strategy, slicing, recompute mode, ZeRO stage, with and without sequence parallelism, on one and
// two nodes; and the repetition does happen (repeated_events > 0) where the model's layers reach a
// steady state, so the test cannot pass by never repeating. A pipeline (several simulated ranks:
// its stages) is simulated event by event: repeated_events == 0.
#include <doctest/doctest.h>

#include <string>

#include "hardware/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/pipeline_step.hpp"
#include "sim/target.hpp"
#include "tests/sim/same_report.hpp"

namespace {

sim::Target target(const std::string& model, int nodes, const std::string& plan_yaml) {
  sim::TargetInput in{.model = model, .cluster = "dgx-h100", .nodes = nodes};
  in.flags = sim::parse_plan_input(plan_yaml, "test");
  return sim::resolve_target(in);
}

struct Case {
  std::string model;
  int nodes;
  std::string plan;
  bool repeats;  // whether some layers are repeated (one simulated rank, layers that settle)
};

}  // namespace

TEST_CASE("steady layers are repeated, not simulated: the same report, task times included, as simulating every event") {
  const Case cases[] = {
      // the default tune's recommendation and its neighbours (gpt3-13b, 40 layers, on one DGX-H100)
      {"gpt3-13b", 1, "tp: 2\ndp: 4\nmicro_batch: 4\nsequence_parallel: true\nstrategy: async-tp\nzero: 2\nattention: flash\ndp_bucket_mb: 100\n", true},
      {"gpt3-13b", 1, "tp: 2\ndp: 4\nmicro_batch: 4\nsequence_parallel: true\nstrategy: te-pipelined\nzero: 2\nattention: flash\n", true},
      {"gpt3-13b", 1, "tp: 2\ndp: 4\nmicro_batch: 4\nstrategy: domino\nrow_slices: 1\ncol_slices: 2\nzero: 2\nattention: flash\n", true},
      {"gpt3-13b", 1, "tp: 2\ndp: 4\nmicro_batch: 4\nsequence_parallel: true\nstrategy: te-bulk\nzero: 2\nattention: flash\n", true},
      {"gpt3-13b", 1, "tp: 2\ndp: 4\nmicro_batch: 4\nsequence_parallel: true\nstrategy: fused\nzero: 2\nattention: flash\n", true},
      {"gpt3-13b", 1, "tp: 2\ndp: 4\nmicro_batch: 4\nzero: 2\nattention: flash\n", true},
      // recompute (selective, full), ZeRO-1 and ZeRO-3 (the first micro-batch gathers: three runs)
      {"gpt3-13b", 1, "tp: 2\ndp: 4\nmicro_batch: 4\nsequence_parallel: true\nstrategy: async-tp\nzero: 2\nrecompute: selective\n", true},
      {"gpt3-13b", 1, "tp: 4\ndp: 2\nmicro_batch: 2\nrecompute: full\nzero: 1\n", true},
      {"gpt3-13b", 1, "tp: 1\ndp: 8\nmicro_batch: 1\nzero: 3\nattention: flash\n", true},
      // domino's row slices on both axes, column chunks; no DP (dp 1: only the optimizer once per step)
      {"gpt3-13b", 1, "tp: 8\nmicro_batch: 8\nglobal_batch: 32\nstrategy: domino\nrow_slices: 4\nrow_axis: sequence\ncol_slices: 2\n", true},
      {"gpt3-13b", 1, "tp: 8\nmicro_batch: 4\nglobal_batch: 16\nstrategy: domino\nrow_slices: 2\ncol_slices: 1\nsequence_parallel: true\n", true},
      // two nodes: TP inside a node, DP over InfiniBand with buckets
      {"gpt3-13b", 2, "tp: 8\ndp: 2\nmicro_batch: 2\nglobal_batch: 32\nsequence_parallel: true\nstrategy: async-tp\ndp_bucket_mb: 25\n", true},
      // one micro-batch per step: one run
      {"gpt3-2.7b", 1, "tp: 2\ndp: 4\nmicro_batch: 2\nglobal_batch: 8\n", true},
      // a SUMMA grid whose positions are alike by symmetry: one simulated graph
      {"gpt3-2.7b", 1, "tp_layout: 2d\ntp_q: 2\ndp: 2\nmicro_batch: 2\nglobal_batch: 16\n", true},
      // a pipeline: several simulated ranks (its stages), simulated event by event
      {"gpt3-2.7b", 1, "tp: 2\ndp: 2\npp: 2\nmicro_batch: 1\nglobal_batch: 8\n", false},
  };
  const auto c = hardware::load_cluster("dgx-h100");
  for (const Case& k : cases)
    for (bool timeline : {false, true}) {
      CAPTURE(k.model);
      CAPTURE(k.plan);
      CAPTURE(timeline);
      const auto t = target(k.model, k.nodes, k.plan);
      const auto cost = hardware::make_analytic_cost_model(t.cluster, hardware::Stack::eager);
      const auto fast = sim::simulate_plan(t.model, t.cluster, t.plan, *cost, {.timeline = timeline});
      const auto slow = sim::simulate_plan(t.model, t.cluster, t.plan, *cost, {.timeline = timeline, .fast_forward = false});
      tests::check_same_report(fast.report, slow.report);
      CHECK(fast.report.shared_events == slow.report.shared_events);
      CHECK(slow.report.repeated_events == 0);
      CHECK((fast.report.repeated_events > 0) == k.repeats);
      CHECK(fast.report.repeated_events < fast.report.events);
      MESSAGE(k.model << " " << t.plan.tp << "x" << t.plan.dp << ": " << fast.report.repeated_events << " of " << fast.report.events
                      << " events repeated");
    }
}
