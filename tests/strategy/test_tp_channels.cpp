// NCCL's SM budget as a plan knob (issue 14): tp_channels, the channels (one SM each) of the
// tensor-parallel communicator under strategies none and domino. What the graph carries, what the
// fake cost model makes of it (derived by hand), what is refused, and what the tuner searches.
#include <doctest/doctest.h>

#include <functional>
#include <set>

#include "common/config_error.hpp"
#include "hardware/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/strategy.hpp"
#include "sim/target.hpp"
#include "tests/sim/fake_cost_model.hpp"
#include "tests/strategy/plans.hpp"

namespace {

using test::resolve, test::error_of;

hardware::ClusterSpec two_gpus() { return test::node_of(2); }

}  // namespace

TEST_CASE("tp_channels: every TP collective of none and domino holds that many SMs, with and without sequence parallelism") {
  const auto c = two_gpus();
  const auto model = sim::load_model("tiny");
  for (const char* yaml : {"tp: 2\nmicro_batch: 2\ntp_channels: 5\n", "tp: 2\nmicro_batch: 2\nsequence_parallel: true\ntp_channels: 5\n",
                           "tp: 2\nmicro_batch: 2\nstrategy: domino\nrow_slices: 2\ntp_channels: 5\n",
                           "tp: 2\nmicro_batch: 2\nsequence_parallel: true\nstrategy: domino\ncol_slices: 2\ntp_channels: 5\n"}) {
    const std::string plan = yaml;
    CAPTURE(plan);
    const auto g = sim::build_step_graph(model, c, resolve(plan, c));
    int tp = 0;
    for (const auto& t : g.tasks) {
      if (!t.is_collective() || !t.group || g.groups[*t.group].name != "tp") continue;
      ++tp;
      const std::string op{sim::to_string(t.op)};
      CAPTURE(op);
      CHECK(t.comm_sms == 5);
    }
    CHECK(tp > 0);
  }
  // NCCL's choice (the default): the collectives carry no SM count of their own (-1: the cost model's channels)
  const auto g = sim::build_step_graph(model, c, resolve("tp: 2\nmicro_batch: 2\nstrategy: domino\n", c));
  for (const auto& t : g.tasks)
    if (t.is_collective()) CHECK(t.comm_sms == -1);
}

TEST_CASE("derived by hand on the fake cost model: fewer channels than NCCL's stretch the TP collectives, more change nothing") {
  // Fake costs (tests/sim/fake_cost_model.hpp): a collective moves 1 byte per ns on NCCL's 10
  // channels (10 SMs), no latency, no interference. Megatron-LM (none) at dp 1 exposes every TP
  // collective: at 5 channels each moves at half speed, so the step grows by the sum of their
  // transfer times (1 ns per byte of each op); at 20 channels the links bound them: no change.
  const auto c = two_gpus();
  const test::FakeCostModel cost(c);
  const auto model = sim::load_model("tiny");
  auto step = [&](const std::string& yaml) {
    auto g = sim::build_step_graph(model, c, resolve(yaml, c));
    return std::pair(sim::Engine(cost).simulate(g).step_time.us(), std::move(g));
  };
  const auto [base, g] = step("tp: 2\nmicro_batch: 2\n");
  double tp_bytes = 0;
  for (const auto& t : g.tasks)
    if (t.is_collective() && t.group && g.groups[*t.group].name == "tp") tp_bytes += static_cast<double>(std::get<hardware::CollectiveOp>(t.kind).bytes);
  REQUIRE(tp_bytes > 0);
  CHECK(step("tp: 2\nmicro_batch: 2\ntp_channels: 5\n").first - base == doctest::Approx(tp_bytes / 1000).epsilon(1e-9));
  CHECK(step("tp: 2\nmicro_batch: 2\ntp_channels: 20\n").first == doctest::Approx(base).epsilon(1e-12));
}

TEST_CASE("tp_channels is refused where it means nothing or starves the GEMMs, and belongs to none and domino") {
  const auto c = two_gpus();
  CHECK(error_of([&] { resolve("tp: 1\ndp: 2\ntp_channels: 8\n", c); }).find("tp=1 has no tensor-parallel communicator") !=
        std::string::npos);
  auto small = c;
  small.gpu.sm_count = 64;
  CHECK(error_of([&] { resolve("tp: 2\nmicro_batch: 2\nstrategy: domino\ntp_channels: 64\n", small); }).find("tp_channels=64 leaves no SMs") !=
        std::string::npos);
  // NCCL's MAXCHANNELS is 64
  CHECK(error_of([&] { resolve("tp: 2\ntp_channels: 65\n", c); }).find("tp_channels") != std::string::npos);
  auto cpu = c;
  cpu.gpu.arch = hardware::GpuArch::cpu;
  CHECK(error_of([&] { resolve("tp: 2\ntp_channels: 8\n", cpu); }).find("no NCCL channels") != std::string::npos);
  // te-pipelined sets its SMs per chunk (num_sm): tp_channels is not its knob
  CHECK(error_of([&] { resolve("tp: 2\nsequence_parallel: true\nstrategy: te-pipelined\ntp_channels: 8\n", c); }) ==
        "plan.yaml: strategy: tp_channels=8 needs strategy none | domino (strategy te-pipelined has no tp_channels)");
  const sim::Plan p = resolve("tp: 2\nmicro_batch: 2\nstrategy: domino\nrow_slices: 2\ntp_channels: 8\n", c);
  CHECK(sim::describe(p) == "tp2 dp1 mb2 domino 2x1 ch8");
  CHECK(resolve(sim::plan_to_yaml(p), c) == p);
}

TEST_CASE("the tuner's values: domino tries 0 and 8 channels where a collective overlaps compute, none keeps NCCL's choice") {
  const auto& d = sim::strategy_domino();
  const sim::Knob* k = d.knob("tp_channels");
  REQUIRE(k != nullptr);
  CHECK(k->searched == std::vector<int>{0, 8});
  sim::Plan p;
  p.tp = 2;
  p.row_slices = 1;
  p.col_slices = 1;
  CHECK_FALSE(k->applies(p));  // domino 1x1 overlaps nothing: Megatron-LM's tasks
  p.row_slices = 2;
  CHECK(k->applies(p));
  const sim::Knob* n = sim::strategy_none().knob("tp_channels");
  REQUIRE(n != nullptr);
  CHECK(n->searched == std::vector<int>{0});  // the baseline is Megatron-LM as it runs
}
