// Link sharing (max-min) and compute/communication interference, with hand-derived answers.
#include <doctest/doctest.h>

#include "hardware/cost_model.hpp"
#include "hardware/gemm_model.hpp"
#include "hardware/interference.hpp"
#include "sim/engine.hpp"
#include "sim/maxmin.hpp"

TEST_CASE("max-min: two equal flows on one link get half each") {
  // x0 + x1 <= 1, both bounded by 1: progressive filling stops at 0.5 when the link saturates.
  sim::MaxMinSystem s;
  const int link = s.add_constraint(1.0);
  const int a = s.add_variable(1.0), b = s.add_variable(1.0);
  s.expand(link, a, 1.0);
  s.expand(link, b, 1.0);
  s.solve();
  CHECK(s.value(a) == doctest::Approx(0.5));
  CHECK(s.value(b) == doctest::Approx(0.5));
}

TEST_CASE("max-min: a flow bottlenecked elsewhere leaves the rest to the other") {
  // a crosses link1 (capacity 1) and link2 (capacity 0.25); b crosses link1 only.
  // Filling: link2 saturates at 0.25 (a frozen), then b grows to 1 - 0.25 = 0.75.
  sim::MaxMinSystem s;
  const int l1 = s.add_constraint(1.0), l2 = s.add_constraint(0.25);
  const int a = s.add_variable(10.0), b = s.add_variable(10.0);
  s.expand(l1, a, 1.0);
  s.expand(l2, a, 1.0);
  s.expand(l1, b, 1.0);
  s.solve();
  CHECK(s.value(a) == doctest::Approx(0.25));
  CHECK(s.value(b) == doctest::Approx(0.75));
}

TEST_CASE("max-min: a variable's bound caps it and frees capacity for the others") {
  // capacity 1, bounds 0.2 and 1: the first stops at 0.2, the second takes 0.8.
  sim::MaxMinSystem s;
  const int l = s.add_constraint(1.0);
  const int a = s.add_variable(0.2), b = s.add_variable(1.0);
  s.expand(l, a, 1.0);
  s.expand(l, b, 1.0);
  s.solve();
  CHECK(s.value(a) == doctest::Approx(0.2));
  CHECK(s.value(b) == doctest::Approx(0.8));
}

namespace {

using common::Duration;

/// Known costs: every GEMM 100 us compute-bound; every collective 100 us of transfer that fills
/// this GPU's NVLink port alone, holding 10 of 100 SMs.
class FixedCost final : public hardware::CostModel {
 public:
  explicit FixedCost(hardware::ClusterSpec c) : c_(std::move(c)) {}
  hardware::ComputeCost gemm(const hardware::GemmOp&) const override { return {Duration::from_us(100), 0.0}; }
  hardware::ComputeCost attention(const hardware::AttentionOp&) const override { return {Duration::from_us(100), 0.0}; }
  hardware::ComputeCost elementwise(const hardware::ElementwiseOp&) const override { return {Duration::from_us(100), 0.0}; }
  hardware::ComputeCost optimizer(const hardware::OptimizerOp&) const override { return {Duration::from_us(100), 0.0}; }
  hardware::CollectiveCost collective(const hardware::CollectiveOp& op) const override {
    hardware::CollectiveCost k;
    k.latency = Duration::from_ps(0);
    k.transfer = Duration::from_us(100);
    const double nv = link_capacity(hardware::LinkClass::nvlink) * 100e-6, nic = link_capacity(hardware::LinkClass::nic) * 100e-6;
    k.wire_bytes.assign(2, 0.0);  // nvlink, nic (CostModel::links())
    if (op.kind == hardware::CollectiveKind::reduce_scatter) {
      k.wire_bytes[1] = nic;  // crosses only the NICs, filling this GPU's share of them
    } else if (op.nodes > 1) {
      k.wire_bytes[0] = 0.5 * nv;  // hierarchical: half the port's worth on NVLink ...
      k.wire_bytes[1] = nic;       // ... and the NIC share full
    } else {
      k.wire_bytes[0] = nv;  // fills the NVLink port
    }
    k.sms = 10;
    return k;
  }
  const hardware::ClusterSpec& cluster() const override { return c_; }
  hardware::Stack stack() const override { return hardware::Stack::eager; }
  std::string describe() const override { return "fixed"; }

 private:
  hardware::ClusterSpec c_;
};

hardware::ClusterSpec quiet_cluster() {
  auto c = hardware::load_cluster("dgx-h100");
  c.gpu.sm_count = 100;
  for (auto& st : c.host.stacks) {
    st.launch = Duration::from_ps(0);
    st.op_overhead = Duration::from_ps(0);
  }
  return c;
}

/// A graph of independent tasks (no edges), each on its stream.
sim::StepGraph independent(std::vector<sim::Task> tasks) {
  sim::StepGraph g;
  g.tasks = std::move(tasks);
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges;
  g.graph = sim::StepGraph::Graph(boost::edges_are_unsorted_multi_pass, edges.begin(), edges.end(), g.tasks.size());
  g.in_degree.assign(g.tasks.size(), 0);
  g.plan.stack = hardware::Stack::cpp;
  g.streams = {{.name = "compute", .kind = sim::StreamKind::compute},
               {.name = "tp_comm", .kind = sim::StreamKind::comm},
               {.name = "dp_comm", .kind = sim::StreamKind::comm}};
  g.groups = {{.name = "tp", .size = 8}, {.name = "dp", .size = 8}};
  return g;
}

constexpr sim::StreamId kCompute = 0, kTpComm = 1, kDpComm = 2;

sim::Task collective_on(sim::StreamId s, hardware::CollectiveKind kind = hardware::CollectiveKind::all_reduce, int nodes = 1) {
  sim::Task t;
  t.kind = hardware::CollectiveOp{.kind = kind, .bytes = 1 << 20, .ranks = 8 * nodes, .nodes = nodes};
  t.stream = s;
  t.group = s == kTpComm ? 0 : 1;  // tp, dp
  return t;
}

}  // namespace

TEST_CASE("engine: two collectives on one NVLink port share it and both take twice as long") {
  // Each alone: 100 us at the full port. Together: half the port each, so both end at 200 us.
  const FixedCost cost(quiet_cluster());
  const auto g = independent({collective_on(kTpComm), collective_on(kDpComm)});
  const auto r = sim::Engine(cost).simulate(g);
  CHECK(r.step_time.us() == doctest::Approx(200.0).epsilon(1e-6));
}

TEST_CASE("engine: a kernel on the SMs a collective leaves, the collective slowed beside it") {
  // The interference hook applies hardware::rates_beside. A compute-bound kernel (no HBM traffic)
  // beside a collective holding 10 of 100 SMs runs on 90: 100 / 90 as long, rate 0.9. The
  // collective beside a compute-bound kernel loses sm_comm_slowdown (set to 0.45 here) x (1 - 0) of
  // its speed: rate 0.55 (it sends no bytes here, so HBM is not shared). The kernel ends at
  // 100 / 0.9 = 111.11 us, when the collective has done 111.11 x 0.55 = 61.11 us of its 100; the
  // rest runs alone: the step ends at 111.11 + 38.89 = 150 us.
  auto cl = quiet_cluster();
  cl.interference.sm_contention = true;
  cl.interference.sm_comm_slowdown = 0.45;
  const FixedCost cost(cl);
  sim::Task kernel;
  kernel.kind = hardware::ElementwiseOp{};
  const auto g = independent({kernel, collective_on(kTpComm)});
  const auto r = sim::Engine(cost).simulate(g);
  CHECK(r.step_time.us() == doctest::Approx(100.0 / 0.9 + (100.0 - 100.0 / 0.9 * 0.55)).epsilon(1e-6));
  CHECK(r.step_time.us() == doctest::Approx(150.0).epsilon(1e-6));
}

TEST_CASE("interference: a memory-bound kernel loses HBM bandwidth to NCCL's traffic") {
  // A kernel streaming all of the usable HBM (3350 GB/s here) beside a collective sending 100 GB/s
  // on 10 of 100 SMs, amplification 2.5: the kernel's time does not depend on SMs (all its time is
  // HBM-bound) and the collective is not slowed (the kernel is memory-bound: 1 - 0.45 x (1 - 1)).
  // HBM: the collective asks 250 GB/s, below half, so it gets all of it; the kernel gets
  // 3350 - 250 = 3100 of the 3350 GB/s it asks: rate 3100 / 3350.
  const hardware::InterferenceSpec spec{.sm_contention = true, .hbm_amplification = 2.5, .sm_comm_slowdown = 0.45};
  const double hbm = 3350e9;
  const hardware::KernelLoad k{.seconds = 1e-3, .seconds_on_fewer = hardware::seconds_on_fewer_sms(1e-3, 1.0, 100, 10), .hbm_bytes = hbm * 1e-3};
  CHECK(k.seconds_on_fewer == doctest::Approx(1e-3));
  const auto r = hardware::rates_beside(spec, hbm, k, {.seconds = 1e-3, .wire_bytes_per_s = 100e9, .sms = 10});
  CHECK(r.compute == doctest::Approx(3100.0 / 3350.0));
  CHECK(r.comm == doctest::Approx(1.0));
}

TEST_CASE("engine: a TP collective on NVLink beside a DP one on the NICs: different links, no slowdown") {
  // The DP ReduceScatter crosses the NICs of every GPU of the node; this GPU's constraint is its
  // share of them (nics x bandwidth / GPUs per node), which the symmetric ranks' traffic fills
  // exactly as this one's does. Neither flow touches the other's link: both end at 100 us.
  const FixedCost cost(quiet_cluster());
  const auto g = independent({collective_on(kTpComm), collective_on(kDpComm, hardware::CollectiveKind::reduce_scatter, 2)});
  CHECK(sim::Engine(cost).simulate(g).step_time.us() == doctest::Approx(100.0).epsilon(1e-6));
}

TEST_CASE("engine: a hierarchical collective (NVLink + NIC) beside an NVLink one splits the port") {
  // Per unit of speed the TP flow uses the whole port, the DP flow half of it (and all its NIC
  // share). Max-min: both at speed s with s (1 + 0.5) = 1 -> s = 2/3, the NIC not binding; both
  // need 100 us of solo work, so both end at 150 us.
  const FixedCost cost(quiet_cluster());
  const auto g = independent({collective_on(kTpComm), collective_on(kDpComm, hardware::CollectiveKind::all_reduce, 2)});
  CHECK(sim::Engine(cost).simulate(g).step_time.us() == doctest::Approx(150.0).epsilon(1e-6));
}

TEST_CASE("engine: issue order - with tp > 1 (one connection) a collective issued behind a multi-wave GEMM waits for its last wave") {
  // No interference here (no SM contention, no slowdown, no HBM traffic): only the start matters.
  // The GEMM takes 100 us in w waves (estimate_gemm's count on this GPU's 100 SMs); the collective,
  // issued after it, starts when the GEMM has one wave, 100 / w us, left and runs its 100 us:
  // the step ends at 100 (w - 1) / w + 100 us. Issued before the GEMM, or with tp = 1 (any number of
  // connections), it starts at once and both end at 100 us.
  auto cl = quiet_cluster();
  cl.interference.sm_contention = false;
  cl.interference.sm_comm_slowdown = 0;
  cl.interference.hbm_amplification = 0;
  const FixedCost cost(cl);
  sim::Task gemm;
  const hardware::GemmOp op{.m = 8192, .n = 8192, .k = 64, .dtype = common::DType::bf16};
  gemm.kind = op;
  const double w = hardware::estimate_gemm(cl.gpu, op).waves;
  REQUIRE(w > 1);
  auto behind = independent({gemm, collective_on(kTpComm)});
  behind.plan.tp = 8;
  CHECK(sim::Engine(cost).simulate(behind).step_time.us() == doctest::Approx(100.0 * (w - 1) / w + 100.0).epsilon(1e-6));
  auto first = independent({collective_on(kTpComm), gemm});
  first.plan.tp = 8;
  CHECK(sim::Engine(cost).simulate(first).step_time.us() == doctest::Approx(100.0).epsilon(1e-6));
  behind.plan.tp = 1;
  CHECK(sim::Engine(cost).simulate(behind).step_time.us() == doctest::Approx(100.0).epsilon(1e-6));
}
