// Interference from mechanisms (hardware/interference), against the kernel-level measurements of
// data/calibration/interference-nvidia.md. Nothing here is derived from those rows except through
// the constants the cluster files hold (their fit inputs are named in docs/accuracy.md):
// hbm_amplification 3 (NVIDIA/nccl#1428, a source, not a fit), sm_comm_slowdown (fitted to row 8's
// NCCL overlap) and copy_engine_bandwidth (fitted to row 8's copy-engine overlap).
#include <doctest/doctest.h>

#include <cmath>
#include <optional>

#include "hardware/collective_model.hpp"
#include "hardware/cost_model.hpp"
#include "hardware/gemm_model.hpp"
#include "hardware/interference.hpp"
#include "sim/engine.hpp"
#include "sim/step_graph.hpp"
#include "validate/interference_rows.hpp"

using namespace hardware;

namespace {

double usable_hbm(const ClusterSpec& c) { return c.gpu.hbm_bytes_per_s * c.gpu.memory_efficiency; }

CommLoad comm_load(const CollectiveCost& cost) {
  return {.seconds = cost.total().s(), .wire_bytes_per_s = cost.transfer.s() > 0 ? cost.sent_bytes / cost.transfer.s() : 0.0, .sms = cost.sms};
}

// Row 8: 8x H100, fp16 GEMM m = n = k = 8192 on the default stream, NCCL all-gather of 64 MiB per
// rank (512 MiB out) issued first on a comm stream (benchmarks/distributed/bench_overlapped_matmul_allgather.py).
struct Row8 {
  ClusterSpec c = load_cluster("dgx-h100");
  GemmOp gemm{.m = 8192, .n = 8192, .k = 8192, .dtype = common::DType::fp16};
  GemmEstimate e = estimate_gemm(c.gpu, gemm);
  CollectiveCost ag = price_collective(c, CollectiveOp{.kind = CollectiveKind::all_gather, .bytes = std::int64_t{512} << 20, .ranks = 8,
                                                        .dtype = common::DType::fp16});
  KernelLoad kernel{.seconds = e.seconds, .seconds_on_fewer = gemm_seconds_on_sms(c.gpu, gemm, c.gpu.sm_count - ag.sms), .hbm_bytes = gemm.bytes()};
};

}  // namespace

TEST_CASE("row 8: 8192^3 GEMM and a 64 MiB all-gather back to back: 2.96 ms within 10 %") {
  // sequential = GEMM alone + all-gather alone (same stream): our GEMM model (748 TFLOP/s) + NCCL's ring
  const Row8 r;
  CHECK(r.ag.algo == "ring");
  const double ms = (r.e.seconds + r.ag.total().s()) * 1e3;
  CAPTURE(ms);
  CHECK(std::abs(ms / 2.96 - 1) <= 0.10);
}

TEST_CASE("row 8: overlapped with NCCL's SM kernels: 2.02 ms within 10 %") {
  // The all-gather's 24 channels take 24 SMs: the GEMM's 2048 tiles of 128x256 need 19 waves on
  // 108 SMs instead of 16 on 132; the collective beside the compute-bound GEMM loses
  // sm_comm_slowdown of its bandwidth; HBM is not the limit (3 x 371 GB/s + the GEMM's bytes < 2.85 TB/s).
  const Row8 r;
  CHECK(r.ag.sms == 24);
  CHECK(r.kernel.seconds_on_fewer / r.kernel.seconds == doctest::Approx(19.0 / 16.0).epsilon(0.02));
  const auto t = overlap(r.c.interference, usable_hbm(r.c), r.kernel, comm_load(r.ag), IssueOrder::comm_first, false, r.e.waves);
  CAPTURE(t.total_s);
  CHECK(std::abs(t.total_s * 1e3 / 2.02 - 1) <= 0.10);
  CHECK(t.total_s < r.e.seconds + r.ag.total().s());  // overlap still pays
}

TEST_CASE("row 8: overlapped with copy-engine transfers: 1.77 ms within 10 %") {
  // Copy engines use no SMs (the GEMM keeps its 132) and move the data at copy_engine_bandwidth of NCCL's.
  const Row8 r;
  const CommLoad ce{.seconds = copy_engine_seconds(r.c.interference, r.ag.latency.s(), r.ag.transfer.s()),
                    .wire_bytes_per_s = r.ag.sent_bytes / r.ag.transfer.s() * r.c.interference.copy_engine_bandwidth, .sms = 0};
  const auto t = overlap(r.c.interference, usable_hbm(r.c), r.kernel, ce, IssueOrder::comm_first, false, r.e.waves);
  CAPTURE(t.total_s);
  CHECK(std::abs(t.total_s * 1e3 / 1.77 - 1) <= 0.10);
  // and it beats NCCL's SM kernels, as measured (1.77 < 2.02)
  const auto sm = overlap(r.c.interference, usable_hbm(r.c), r.kernel, comm_load(r.ag), IssueOrder::comm_first, false, r.e.waves);
  CHECK(t.total_s < sm.total_s);
}

TEST_CASE("row 1: an A100 kernel streaming HBM beside an NCCL all-gather is 1.76x slower, within 10 %") {
  // NVIDIA/nccl#1428: GEMM 1.18 -> 2.08 ms, attention 0.18 -> 0.33 ms beside an all-gather, which the
  // maintainer puts down to HBM bandwidth. A kernel that streams all of the usable HBM (2039 GB/s x
  // 0.85) beside a ring all-gather sending 240 GB/s (12 links x 20 GB/s) that moves 3 x 240 GB/s
  // through HBM: the all-gather keeps its share (below half), the kernel gets the rest:
  // 1733 / (1733 - 720) = 1.71x.
  const auto c = load_cluster("dgx-a100");
  const auto ag = price_collective(c, CollectiveOp{.kind = CollectiveKind::all_gather, .bytes = std::int64_t{512} << 20, .ranks = 8,
                                                   .dtype = common::DType::fp16});
  const double hbm = usable_hbm(c);
  const KernelLoad streaming{.seconds = 1e-3, .seconds_on_fewer = 1e-3, .hbm_bytes = hbm * 1e-3};
  const auto r = rates_beside(c.interference, hbm, streaming, comm_load(ag));
  CHECK(1.0 / r.compute == doctest::Approx(hbm / (hbm - c.interference.hbm_amplification * ag.sent_bytes / ag.transfer.s())));
  CAPTURE(1.0 / r.compute);
  CHECK(std::abs(1.0 / r.compute / 1.76 - 1) <= 0.10);
}

TEST_CASE("issue order: with one connection a collective issued behind a GEMM waits for its last wave") {
  // CUDA_DEVICE_MAX_CONNECTIONS=1 (Megatron): kernels start in issue order; the collective's CTAs
  // find SMs only when the GEMM's last wave is placed (pytorch/pytorch#143890). With more
  // connections they take SMs as the first wave finishes.
  const Row8 r;
  const auto one = overlap(r.c.interference, usable_hbm(r.c), r.kernel, comm_load(r.ag), IssueOrder::compute_first, true, r.e.waves);
  const auto many = overlap(r.c.interference, usable_hbm(r.c), r.kernel, comm_load(r.ag), IssueOrder::compute_first, false, r.e.waves);
  CHECK(one.comm_start_s == doctest::Approx(r.e.seconds * 15.0 / 16.0));
  CHECK(many.comm_start_s == doctest::Approx(r.e.seconds / 16.0));
  CHECK(one.total_s > many.total_s);  // the collective issued behind the GEMM is not hidden
}

TEST_CASE("the aggregate at kernel level is computed over 16 workloads (reported in docs/accuracy.md, no bar yet)") {
  // arXiv 2507.03114: 18.9 % mean, 40 % max over its workloads (4x A100 / H100 / MI250 / MI210). The
  // kernel-level construct (validate/interference_rows.hpp) gives a figure to compare; the bar
  // belongs to the engine-level measure once the engine takes these mechanisms.
  const auto a = validate::predict_aggregate();
  CHECK(a.workloads == 16);
  CHECK(a.mean > 0.0);
  CHECK(a.max >= a.mean);
  CHECK(a.max < 1.0);  // no workload's kernels twice as slow
}

namespace {

/// Row 8 as the engine runs it: the all-gather issued first on a comm stream (task 0), the GEMM
/// behind it on the compute stream (task 1), no edge between them; `gemm_first` swaps the issue order.
sim::StepGraph row8_graph(bool gemm_first) {
  sim::Task gemm, ag;
  gemm.kind = GemmOp{.m = 8192, .n = 8192, .k = 8192, .dtype = common::DType::fp16};
  gemm.stream = 0;
  ag.kind = CollectiveOp{.kind = CollectiveKind::all_gather, .bytes = std::int64_t{512} << 20, .ranks = 8, .dtype = common::DType::fp16};
  ag.stream = 1;
  ag.group = 0;
  sim::StepGraph g;
  g.tasks = gemm_first ? std::vector<sim::Task>{gemm, ag} : std::vector<sim::Task>{ag, gemm};
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges;
  g.graph = sim::StepGraph::Graph(boost::edges_are_unsorted_multi_pass, edges.begin(), edges.end(), g.tasks.size());
  g.in_degree.assign(g.tasks.size(), 0);
  g.plan.stack = Stack::cpp;
  g.plan.tp = 8;
  g.streams = {{.name = "compute", .kind = sim::StreamKind::compute}, {.name = "tp_comm", .kind = sim::StreamKind::comm}};
  g.groups = {{.name = "tp", .size = 8}};
  return g;
}

}  // namespace

TEST_CASE("engine: row 8 overlapped with NCCL's SM kernels, 2.02 ms within 10 %, from the engine's interference hook") {
  // The engine's interference model applies rates_beside to what runs together: the same mechanisms
  // and constants as hardware::overlap above, so the engine's step (plus the host's launch of the
  // two kernels, a few us) is overlap()'s 2.02 ms within 1 %, and the measured 2.02 ms within 10 %.
  const Row8 r;
  const auto cost = make_analytic_cost_model(r.c, Stack::cpp);
  const auto step = sim::Engine(*cost).simulate(row8_graph(false)).step_time.s();
  const auto t = overlap(r.c.interference, usable_hbm(r.c), r.kernel, comm_load(r.ag), IssueOrder::comm_first, false, r.e.waves);
  CAPTURE(step);
  CHECK(std::abs(step / t.total_s - 1) <= 0.01);
  CHECK(std::abs(step * 1e3 / 2.02 - 1) <= 0.10);
}

TEST_CASE("engine: with one connection (tp > 1 before Blackwell) a collective issued behind the GEMM starts at its last wave") {
  // Megatron-LM's CUDA_DEVICE_MAX_CONNECTIONS=1: the all-gather issued behind the 16-wave GEMM
  // starts when the GEMM has one wave left, 15/16 of its 1.47 ms in; the GEMM's last wave then runs
  // beside it and the all-gather mostly after it: the step is the GEMM's 15/16 plus the overlap of the
  // rest (hardware::overlap, compute_first, one connection) within 1 %. Issued first, it starts at once.
  const Row8 r;
  CHECK(r.e.waves == 16);
  const auto cost = make_analytic_cost_model(r.c, Stack::cpp);
  sim::EngineOptions o;
  o.timeline = true;
  const auto behind = sim::Engine(*cost, o).simulate(row8_graph(true));
  const auto& tl = behind.timelines.at(0).timing;
  CHECK(tl[1].start.s() >= r.e.seconds * 15.0 / 16.0);  // the collective (task 1) waits for the last wave
  CHECK(tl[1].start.s() <= r.e.seconds * 15.0 / 16.0 + 20e-6);
  const auto t = overlap(r.c.interference, usable_hbm(r.c), r.kernel, comm_load(r.ag), IssueOrder::compute_first, true, r.e.waves);
  CHECK(std::abs(behind.step_time.s() / t.total_s - 1) <= 0.01);
  const auto first = sim::Engine(*cost, o).simulate(row8_graph(false));
  CHECK(first.timelines.at(0).timing[0].start.s() < 20e-6);  // issued first: starts at once
  CHECK(first.step_time.s() < behind.step_time.s());
}
