// Engine tests on hand-built graphs; each expected value is derived in the comment above it.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "common/config_error.hpp"
#include "fake_cost_model.hpp"
#include "sim/engine.hpp"

using hardware::CollectiveKind;
using hardware::CollectiveOp;
using common::Duration;
using hardware::GemmOp;
using sim::Task;

namespace {

Task gemm_us(int us, std::int64_t hbm_bytes = 0) {
  Task t;
  t.kind = GemmOp{.m = us, .n = hbm_bytes, .k = 1};
  t.stream = test::kCompute;
  return t;
}
Task coll(std::int64_t bytes, sim::StreamId s, int nodes = 1, sim::GroupId g = test::kTpGroup) {
  Task t;
  t.kind = CollectiveOp{.kind = CollectiveKind::all_reduce, .bytes = bytes, .ranks = 8, .nodes = nodes};
  t.stream = s;
  t.group = g;
  return t;
}
sim::Plan one_gpu_plan() {
  sim::Plan p;
  p.tp = 8;  // MFU divides by plan.gpus(); irrelevant to the timings tested here
  return p;
}
double us(Duration d) { return d.us(); }

}  // namespace

TEST_CASE("a chain on one stream takes the sum of its tasks") {
  // 100 + 200 + 300 us, no launch cost: 600 us.
  auto g = test::assemble({gemm_us(100), gemm_us(200), gemm_us(300)}, {{0, 1}, {1, 2}}, one_gpu_plan());
  test::FakeCostModel cost;
  auto r = sim::Engine(cost, {.timeline = true}).simulate(g);
  CHECK(us(r.step_time) == doctest::Approx(600.0));
  CHECK(us(r.timelines[0].timing[2].start) == doctest::Approx(300.0));
  CHECK(us(r.compute) == doctest::Approx(600.0));
}

TEST_CASE("tasks on one stream run in issue order even without edges") {
  // Stream semantics: the second task waits for the first although no edge joins them: 50 + 70 us.
  auto g = test::assemble({gemm_us(50), gemm_us(70)}, {}, one_gpu_plan());
  test::FakeCostModel cost;
  auto r = sim::Engine(cost, {.timeline = true}).simulate(g);
  CHECK(us(r.timelines[0].timing[1].start) == doctest::Approx(50.0));
  CHECK(us(r.step_time) == doctest::Approx(120.0));
}

TEST_CASE("the host issue cost delays kernels: a launch-bound step") {
  // 10 tasks of 1 us, each issued 12 us after the previous (eager stack): task k can start at
  // 12 (k + 1) us, so the last (k = 9) runs from 120 to 121 us.
  auto cl = test::fake_cluster();
  cl.host.stacks[static_cast<int>(hardware::Stack::eager)].launch = Duration::from_us(12);
  test::FakeCostModel cost(cl);
  std::vector<Task> tasks;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges;
  for (int i = 0; i < 10; ++i) {
    tasks.push_back(gemm_us(1));
    if (i) edges.emplace_back(i - 1, i);
  }
  auto g = test::assemble(tasks, edges, one_gpu_plan());
  auto r = sim::Engine(cost).simulate(g);
  CHECK(us(r.step_time) == doctest::Approx(121.0));
  CHECK(us(r.idle) == doctest::Approx(111.0));  // 121 us minus 10 us of compute
}

TEST_CASE("the stack's kernel efficiency and per-task overhead price compute, not collectives") {
  // Eager with kernel_efficiency 0.5 and op_overhead 3 us: a 100 us GEMM takes 100 / 0.5 + 3 =
  // 203 us; the 8 MB AllReduce after it keeps its NCCL price (whatever the fake model says alone).
  // The same graph on cuda_graphs (efficiency 1, no overhead) takes 100 us + the collective.
  auto cl = test::fake_cluster();
  cl.host.kernel_efficiency[static_cast<int>(hardware::Stack::eager)] = 0.5;
  cl.host.stacks[static_cast<int>(hardware::Stack::eager)].op_overhead = Duration::from_us(3);
  test::FakeCostModel cost(cl);
  auto plan = one_gpu_plan();
  const Task ar = coll(8 << 20, test::kTpComm);
  const double ar_us = us(sim::solo_time(cost, ar.kind, hardware::Stack::eager));
  auto g = test::assemble({gemm_us(100), ar}, {{0, 1}}, plan);
  auto r = sim::Engine(cost, {.timeline = true}).simulate(g);
  CHECK(us(r.timelines[0].timing[0].end) == doctest::Approx(203.0));
  CHECK(us(r.step_time) == doctest::Approx(203.0 + ar_us));
  CHECK(us(sim::solo_time(cost, gemm_us(100).kind, hardware::Stack::eager)) == doctest::Approx(203.0));
  plan.stack = hardware::Stack::cuda_graphs;
  cl.host.stacks[static_cast<int>(hardware::Stack::cuda_graphs)].launch = Duration::from_ps(0);
  test::FakeCostModel cost2(cl);
  auto g2 = test::assemble({gemm_us(100), ar}, {{0, 1}}, plan);
  CHECK(us(sim::Engine(cost2).simulate(g2).step_time) == doctest::Approx(100.0 + ar_us));
}

TEST_CASE("two streams overlap: a collective hides behind independent compute") {
  // A (100 us) -> C (collective, 50,000 B at 1 B/ns = 50 us) -> D; B (100 us) after A on compute; D after B and C.
  // No interference: A [0,100], C [100,150] beside B [100,200], D [200,300]; nothing exposed.
  auto tasks = std::vector<Task>{gemm_us(100), coll(50'000, test::kTpComm), gemm_us(100), gemm_us(100)};
  auto g = test::assemble(tasks, {{0, 1}, {1, 3}, {2, 3}}, one_gpu_plan());
  test::FakeCostModel cost;
  auto r = sim::Engine(cost, {.timeline = true}).simulate(g);
  CHECK(us(r.step_time) == doctest::Approx(300.0));
  CHECK(us(r.exposed_comm) == doctest::Approx(0.0));
  CHECK(us(r.busy("tp_comm")) == doctest::Approx(50.0));
  CHECK(us(r.timelines[0].timing[1].start) == doctest::Approx(100.0));

  SUBCASE("without the independent compute the collective is exposed") {
    // A -> C -> D only: 100 + 50 + 100 = 250 us with 50 us exposed.
    auto g2 = test::assemble({gemm_us(100), coll(50'000, test::kTpComm), gemm_us(100)}, {{0, 1}, {1, 2}}, one_gpu_plan());
    auto r2 = sim::Engine(cost).simulate(g2);
    CHECK(us(r2.step_time) == doctest::Approx(250.0));
    CHECK(us(r2.exposed_comm) == doctest::Approx(50.0));
  }
}

TEST_CASE("compute is slowed by a concurrent collective (SM contention)") {
  // Same graph as above with B an element-wise kernel (100 us, no HBM traffic) and SM contention on:
  // the collective's CTAs hold 10 of 100 SMs, so B's SM-bound share (all of it) runs on 90 SMs,
  // 100 / 90 as long, rate 0.9 (hardware::rates_beside, seconds_on_fewer_sms). In [100, 150] B does
  // 45 us of work; the remaining 55 us run alone: B ends at 205 us and D at 305 us. The collective is
  // not slowed (sm_comm_slowdown 0 here).
  auto elementwise_us = [](int us, std::int64_t bytes) {
    Task t;
    t.kind = hardware::ElementwiseOp{.elements = us, .bytes = static_cast<double>(bytes)};
    t.stream = test::kCompute;
    return t;
  };
  auto cl = test::fake_cluster();
  cl.gpu.memory_efficiency = 1.0;
  cl.interference.sm_contention = true;
  test::FakeCostModel cost(cl);
  auto tasks = std::vector<Task>{gemm_us(100), coll(50'000, test::kTpComm), elementwise_us(100, 0), gemm_us(100)};
  auto g = test::assemble(tasks, {{0, 1}, {1, 3}, {2, 3}}, one_gpu_plan());
  auto r = sim::Engine(cost, {.timeline = true}).simulate(g);
  CHECK(us(r.timelines[0].timing[2].end) == doctest::Approx(150.0 + (100.0 - 50.0 * 0.9)).epsilon(1e-6));
  CHECK(us(r.step_time) == doctest::Approx(250.0 + (100.0 - 50.0 * 0.9)).epsilon(1e-6));

  SUBCASE("a memory-bound kernel is slowed by the collective's HBM traffic instead") {
    // B streams 100e6 bytes in 100 us through a 1 TB/s HBM: all of it, so the SMs do not matter. The
    // collective sends 1 byte/ns = 1 GB/s; with amplification 500 it asks 500 GB/s of HBM, half of it:
    // max-min gives it all it asks and B the other 500 of the 1000 GB/s it asks: rate 0.5 while C runs.
    // 50 x 0.5 = 25 us of work done by 150, then 75 us alone: B ends at 225 us.
    auto cl2 = cl;
    cl2.interference.sm_contention = false;
    cl2.interference.hbm_amplification = 500;
    test::FakeCostModel cost2(cl2);
    auto tasks2 = std::vector<Task>{gemm_us(100), coll(50'000, test::kTpComm), elementwise_us(100, 100'000'000), gemm_us(100)};
    auto g2 = test::assemble(tasks2, {{0, 1}, {1, 3}, {2, 3}}, one_gpu_plan());
    auto r2 = sim::Engine(cost2, {.timeline = true}).simulate(g2);
    CHECK(us(r2.timelines[0].timing[2].end) == doctest::Approx(150.0 + 100.0 - 50.0 * 0.5).epsilon(1e-6));
  }
}

TEST_CASE("two collectives sharing one link each get half of it") {
  // Two collectives of 100,000 B on different streams (TP and DP), each alone would take 100 us at the
  // full 1 B/ns NVLink. Sharing max-min fairly, each moves at 0.5 B/ns: both end at 200 us.
  auto g = test::assemble({coll(100'000, test::kTpComm), coll(100'000, test::kDpComm, 1, test::kDpGroup)}, {},
                                    one_gpu_plan());
  test::FakeCostModel cost;
  auto r = sim::Engine(cost, {.timeline = true}).simulate(g);
  CHECK(us(r.timelines[0].timing[0].end) == doctest::Approx(200.0));
  CHECK(us(r.timelines[0].timing[1].end) == doctest::Approx(200.0));

  SUBCASE("collectives on different links do not slow each other") {
    // The DP collective crosses nodes (NIC only): each keeps its own link, both end at 100 us.
    auto g2 = test::assemble({coll(100'000, test::kTpComm), coll(100'000, test::kDpComm, 2, test::kDpGroup)}, {},
                                       one_gpu_plan());
    auto r2 = sim::Engine(cost, {.timeline = true}).simulate(g2);
    CHECK(us(r2.timelines[0].timing[0].end) == doctest::Approx(100.0));
    CHECK(us(r2.timelines[0].timing[1].end) == doctest::Approx(100.0));
  }
  SUBCASE("when one finishes the other gets the whole link") {
    // 50,000 B and 100,000 B: both at half speed until the small one is done at 100 us (50,000 B each moved),
    // then the big one has 50,000 B left at full speed: ends at 150 us.
    auto g3 = test::assemble({coll(50'000, test::kTpComm), coll(100'000, test::kDpComm, 1, test::kDpGroup)}, {},
                                       one_gpu_plan());
    auto r3 = sim::Engine(cost, {.timeline = true}).simulate(g3);
    CHECK(us(r3.timelines[0].timing[0].end) == doctest::Approx(100.0));
    CHECK(us(r3.timelines[0].timing[1].end) == doctest::Approx(150.0));
  }
}

TEST_CASE("collective latency stage uses no bandwidth") {
  // With latency on, an 8-rank collective waits (8 - 1) = 7 us before moving its 10,000 B in 10 us: 17 us.
  test::FakeCostModel cost(test::fake_cluster(), true);
  auto g = test::assemble({coll(10'000, test::kTpComm)}, {}, one_gpu_plan());
  CHECK(us(sim::Engine(cost).simulate(g).step_time) == doctest::Approx(17.0));
}

TEST_CASE("ranks with different graphs meet at their collectives") {
  // Rank 0: 100 us of compute then a TP collective (10,000 B = 10 us); rank 1: 300 us then the same
  // collective. Both belong to one TP group, so the collective starts at 300 us on both: rank 0 ends at 310.
  auto r0 = test::assemble({gemm_us(100), coll(10'000, test::kTpComm)}, {{0, 1}}, one_gpu_plan());
  auto r1 = test::assemble({gemm_us(300), coll(10'000, test::kTpComm)}, {{0, 1}}, one_gpu_plan());
  r0.rank = 0;
  r1.rank = 1;
  r1.groups = test::groups(0, 1);  // same TP group, different DP groups
  test::FakeCostModel cost;
  const sim::StepGraph* ranks[] = {&r0, &r1};
  auto r = sim::Engine(cost, {.timeline = true}).simulate(ranks);
  REQUIRE(r.timelines.size() == 2);
  CHECK(us(r.timelines[0].timing[1].start) == doctest::Approx(300.0));
  CHECK(us(r.timelines[0].timing[1].end) == doctest::Approx(310.0));
  CHECK(us(r.step_time) == doctest::Approx(310.0));

  SUBCASE("ranks of different TP groups do not wait for each other") {
    r1.groups = test::groups(1, 1);
    auto rr = sim::Engine(cost, {.timeline = true}).simulate(ranks);
    CHECK(us(rr.timelines[0].timing[1].end) == doctest::Approx(110.0));
  }
}

TEST_CASE("gradient accumulation repeats the micro-batch and reduces once") {
  // Micro-batch: one 100 us GEMM. Once per step: a DP collective (50 us) and an optimizer (20 us) after it.
  // Four micro-batches: 3 x 100 + (100 + 50 + 20) = 470 us.
  std::vector<Task> tasks{gemm_us(100), coll(50'000, test::kDpComm, 1, test::kDpGroup), gemm_us(20)};
  tasks[1].once_per_step = true;
  tasks[2].once_per_step = true;
  auto plan = one_gpu_plan();
  plan.global_batch = 4;
  plan.micro_batch = 1;
  plan.dp = 1;
  auto g = test::assemble(tasks, {{0, 1}, {1, 2}}, plan);
  test::FakeCostModel cost;
  auto r = sim::Engine(cost).simulate(g);
  CHECK(us(r.step_time) == doctest::Approx(470.0));
  CHECK(us(r.micro_batch_time) == doctest::Approx(100.0));
}

TEST_CASE("two pipeline roles with different work meet at a send/recv") {
  // Two distinct rank graphs (pipeline stages 0 and 1), each with its own streams, joined by a
  // point-to-point transfer: a send_recv on the two-rank group "pp" (instance 0) with sequence
  // number 0 on both sides. Fake cost model: GEMM m x n x k takes m us; a transfer of B bytes
  // takes B ns on the NVLink port (1 byte/ns); no launch cost, no interference.
  //   stage 0: GEMM 100 us -> send 50,000 B (pp stream); GEMM 30 us on compute, independent of the send
  //   stage 1: GEMM 20 us -> recv 50,000 B (pp stream) -> GEMM 60 us
  // Derivation: stage 1 reaches its recv at 20 us but the pair starts when both sides have
  // reached it, at 100 us; it moves 50,000 B in 50 us, ending at 150 us on both sides. Stage 0's
  // second GEMM runs 100-130 us beside the send. Stage 1's last GEMM runs 150-210 us.
  // Step = the slower stage = 210 us; stage 0's timeline is the report's.
  const std::vector<sim::StreamSpec> s0{{.name = "compute", .kind = sim::StreamKind::compute},
                                        {.name = "pp_comm", .kind = sim::StreamKind::comm}};
  std::vector<sim::StreamSpec> s1 = s0;
  s1.push_back({.name = "dp_comm", .kind = sim::StreamKind::comm});
  const sim::GroupSpec pp{.name = "pp", .size = 2, .nodes = 1, .instance = 0};
  auto p2p = [](std::int64_t bytes) {
    Task t;
    t.kind = CollectiveOp{.kind = CollectiveKind::send_recv, .bytes = bytes, .ranks = 2, .nodes = 1};
    t.stream = 1;  // pp_comm
    t.group = 0;   // pp
    return t;
  };
  auto stage0 = sim::StepGraph::assemble({gemm_us(100), p2p(50'000), gemm_us(30)}, {{0, 1}, {0, 2}}, one_gpu_plan(), s0, {pp});
  auto stage1 = sim::StepGraph::assemble({gemm_us(20), p2p(50'000), gemm_us(60)}, {{0, 1}, {1, 2}}, one_gpu_plan(), s1, {pp});
  stage1.rank = 1;
  test::FakeCostModel cost;
  const sim::StepGraph* roles[] = {&stage0, &stage1};
  auto r = sim::Engine(cost, {.timeline = true}).simulate(roles);
  REQUIRE(r.timelines.size() == 2);
  CHECK(us(r.timelines[1].timing[1].start) == doctest::Approx(100.0));  // the recv waited for the send
  CHECK(us(r.timelines[0].timing[1].end) == doctest::Approx(150.0));
  CHECK(us(r.timelines[0].timing[2].end) == doctest::Approx(130.0));
  CHECK(us(r.timelines[1].timing[2].end) == doctest::Approx(210.0));
  CHECK(us(r.step_time) == doctest::Approx(210.0));
  CHECK(us(r.busy("pp_comm")) == doctest::Approx(50.0));  // stage 0's pipeline stream

  SUBCASE("the transfer is one flow: traffic on the receiver's link slows both sides") {
    // Stage 1 also all-reduces 50,000 B over its own DP group (no other member simulated) from
    // the moment its first GEMM ends; stage 0's first GEMM is 20 us too, so send, recv and the
    // AllReduce all start at 20 us. On stage 1's NVLink port (1 byte/ns) the transfer and the
    // AllReduce get half each: both move 50,000 B in 100 us, ending at 120 us - on stage 0 as well,
    // because the transfer is one variable over both stages' links. Stage 1's last GEMM runs
    // 120-180 us; stage 0's second GEMM (30 us) runs 20-50 us. Step = 180 us.
    Task ar = coll(50'000, 2, 1, 1);  // dp_comm, group dp
    auto a0 = sim::StepGraph::assemble({gemm_us(20), p2p(50'000), gemm_us(30)}, {{0, 1}, {0, 2}}, one_gpu_plan(), s0, {pp});
    auto a1 = sim::StepGraph::assemble({gemm_us(20), p2p(50'000), ar, gemm_us(60)}, {{0, 1}, {0, 2}, {1, 3}}, one_gpu_plan(), s1,
                                       {pp, {.name = "dp", .size = 8, .nodes = 1, .instance = 7}});
    a1.rank = 1;
    const sim::StepGraph* both[] = {&a0, &a1};
    auto rr = sim::Engine(cost, {.timeline = true}).simulate(both);
    CHECK(us(rr.timelines[0].timing[1].end) == doctest::Approx(120.0));
    CHECK(us(rr.timelines[1].timing[1].end) == doctest::Approx(120.0));
    CHECK(us(rr.timelines[1].timing[2].end) == doctest::Approx(120.0));
    CHECK(us(rr.timelines[1].timing[3].end) == doctest::Approx(180.0));
    CHECK(us(rr.step_time) == doctest::Approx(180.0));
  }
}

namespace {

/// A resource model as the fidelity work would add one: here every collective in its transfer stage
/// moves at half speed (say, half of its channels' SMs taken away).
class HalfSpeedTransfers final : public sim::EngineModel {
 public:
  void update_rates(sim::EngineView& view) override {
    for (auto& a : view.activities)
      if (a.stage == sim::Stage::transfer) a.rate *= 0.5;
  }
};

}  // namespace

TEST_CASE("a resource model added through EngineOptions sets the rates of what runs") {
  // A (100 us) -> C (collective, 50,000 B: 50 us alone) -> D (100 us), nothing to overlap with.
  // The default models leave C at full speed: 100 + 50 + 100 = 250 us. With a model that halves
  // every transfer after them, C takes 100 us: 300 us.
  auto g = test::assemble({gemm_us(100), coll(50'000, test::kTpComm), gemm_us(100)}, {{0, 1}, {1, 2}}, one_gpu_plan());
  test::FakeCostModel cost;
  CHECK(us(sim::Engine(cost).simulate(g).step_time) == doctest::Approx(250.0));
  sim::EngineOptions o;
  o.models.push_back([](const hardware::CostModel&) { return std::make_unique<HalfSpeedTransfers>(); });
  CHECK(us(sim::Engine(cost, o).simulate(g).step_time) == doctest::Approx(300.0));
}

namespace {

/// A resource model that all but stops transfers (a rate of 1e-300, or exactly 0): what a model
/// with a bug, or a cluster file with a near-zero bandwidth in a model's formula, may produce.
class StalledTransfers final : public sim::EngineModel {
 public:
  explicit StalledTransfers(double rate) : rate_(rate) {}
  void update_rates(sim::EngineView& view) override {
    for (auto& a : view.activities)
      if (a.stage == sim::Stage::transfer) a.rate = rate_;
  }

 private:
  double rate_;
};

}  // namespace

TEST_CASE("a rate that would push simulated time past int64 is an error, not undefined behaviour") {
  // 50 us of transfer at rate 1e-300 is 5e307 ps: before, the engine cast that double to int64
  // (undefined; UBSan: float-cast-overflow) and went on with a garbage or negative finish time.
  // At rate 0 the time is infinite. Both end in the simulated-time range error (common/checked.hpp).
  auto g = test::assemble({gemm_us(100), coll(50'000, test::kTpComm), gemm_us(100)}, {{0, 1}, {1, 2}}, one_gpu_plan());
  test::FakeCostModel cost;
  for (double rate : {1e-300, 0.0}) {
    CAPTURE(rate);
    sim::EngineOptions o;
    o.models.push_back([rate](const hardware::CostModel&) { return std::make_unique<StalledTransfers>(rate); });
    try {
      (void)sim::Engine(cost, o).simulate(g);
      FAIL("no error");
    } catch (const common::ConfigError& e) {
      CHECK(std::string(e.what()).find("simulated time: a priced duration of") == 0);
    }
  }
}
