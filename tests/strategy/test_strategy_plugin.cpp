// A strategy added from one file outside sim/ (strategy_serial.cpp) plus its registry line: it
// parses, prints, resolves, is refused with its own reason, builds and simulates - and the
// simulation gives what its schedule implies, derived below by hand.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <functional>

#include "common/config_reader.hpp"
#include "sim/engine.hpp"
#include "sim/report_json.hpp"
#include "sim/strategy.hpp"
#include "sim/target.hpp"
#include "tests/sim/fake_cost_model.hpp"
#include "tests/strategy/plans.hpp"

namespace test {
const sim::Strategy& strategy_serial();
}

namespace {

using test::resolve, test::error_of;

/// The registry line.
const bool registered = (sim::register_strategy(test::strategy_serial()), true);

}  // namespace

TEST_CASE("a registered strategy is parsed, printed and checked from its table") {
  REQUIRE(registered);
  auto c = test::fake_cluster();
  c.nodes = 1;
  c.node.gpus_per_node = 2;
  const sim::Plan p = resolve("tp: 2\nstrategy: serial\n", c);
  CHECK(p.strategy == &test::strategy_serial());
  CHECK(sim::describe(p) == "tp2 dp1 mb1 serial");
  // the YAML it prints reads back to the same plan; knobs it does not have stay neutral
  CHECK(sim::plan_to_yaml(p).find("strategy: serial\ntp_channels: 0\nrow_slices: 1\nrow_axis: batch\ncol_slices: 1\n") != std::string::npos);
  CHECK(resolve(sim::plan_to_yaml(p), c) == p);
  CHECK(sim::plan_json(p)["strategy"] == "serial");
  // its validity check, with its own one-line reason
  CHECK(
      error_of([&] { resolve("tp: 2\nstrategy: serial\nsequence_parallel: true\n", c); }) ==
      "plan.yaml: strategy: strategy serial: sequence parallelism needs its AllGather / ReduceScatter on a communication stream");
  // another strategy's knob is refused, naming who has it
  CHECK(error_of([&] { resolve("tp: 2\nstrategy: serial\nrow_slices: 2\n", c); }) ==
        "plan.yaml: strategy: row_slices=2 needs strategy domino (strategy serial has no row_slices)");
  // the names a plan may give now include it
  CHECK(error_of([] { sim::parse_plan_input("strategy: fast\n", "p.yaml"); }) ==
        "p.yaml: strategy: expected one of none | domino | te-pipelined | async-tp | te-bulk | fused | serial, got 'fast'");
}

TEST_CASE("the serial strategy overlaps nothing: its step is the sum of its tasks' solo times") {
  // tiny (2 layers, h 64), tp 2, dp 1, micro-batch 2, on the fake cost model (GEMM m x n x k takes
  // m us, element-wise `elements` us, a collective 1 ns per byte on NVLink; no launch cost, no
  // interference; tests/sim/fake_cost_model.hpp).
  auto c = test::fake_cluster();
  c.nodes = 1;
  c.node.gpus_per_node = 2;
  const test::FakeCostModel cost(c);
  const auto model = sim::load_model("tiny");
  const sim::Plan serial = resolve("tp: 2\nmicro_batch: 2\nstrategy: serial\n", c);
  const sim::Plan none = resolve("tp: 2\nmicro_batch: 2\nstrategy: none\n", c);
  const sim::Plan domino = resolve("tp: 2\nmicro_batch: 2\nstrategy: domino\nrow_slices: 2\n", c);
  const auto gs = sim::build_step_graph(model, c, serial);
  const auto gn = sim::build_step_graph(model, c, none);

  // Same tasks as Megatron-LM (its schedule), every one on the compute stream.
  REQUIRE(gs.size() == gn.size());
  std::size_t collectives = 0;
  double solo_us = 0;
  for (std::size_t i = 0; i < gs.size(); ++i) {
    CHECK(gs.tasks[i].op == gn.tasks[i].op);
    CHECK(gs.stream_of(i).name == "compute");
    collectives += gs.tasks[i].is_collective();
    solo_us += sim::solo_time(cost, gs.tasks[i].kind, serial.stack).us();
  }
  // tp 2, no SP: per layer 2 forward AllReduces and 2 input-gradient ones; the vocab-parallel
  // embedding (1), loss statistics (1) and LM-head input gradient (1): 4 x 2 + 3 = 11.
  CHECK(collectives == 11);

  // One in-order stream with no launch cost runs its tasks back to back: step = sum of solo times.
  const auto rs = sim::Engine(cost).simulate(gs);
  CHECK(rs.step_time.us() == doctest::Approx(solo_us).epsilon(1e-9));
  CHECK(rs.exposed_comm.us() == doctest::Approx(0.0));  // no communication stream is ever busy
  CHECK(rs.compute.us() == doctest::Approx(solo_us).epsilon(1e-9));

  // Megatron-LM at dp 1 overlaps nothing either: each collective's consumer waits for it, and the
  // weight-gradient GEMM after an input-gradient collective waits by the strategy's edge; so its
  // step is the same sum, with the collectives counted as exposed communication instead.
  const auto rn = sim::Engine(cost).simulate(gn);
  CHECK(rn.step_time.us() == doctest::Approx(solo_us).epsilon(1e-9));
  CHECK(rn.exposed_comm.us() == doctest::Approx(rn.busy("tp_comm").us()).epsilon(1e-9));

  // Domino's two row slices hide collectives behind the other slice's compute: part of its TP
  // communication is no longer exposed (the fake model prices a GEMM by its first dimension, so
  // its sliced step is not shorter: the weight-gradient GEMMs do not shrink with the slice).
  const auto rd = sim::Engine(cost).simulate(sim::build_step_graph(model, c, domino));
  CHECK(rd.exposed_comm < rd.busy("tp_comm"));
}
