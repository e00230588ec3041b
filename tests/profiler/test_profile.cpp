// Tests of the profile file (hardware/profile) and the profiled cost model (hardware/profiled_cost_model).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "common/config_reader.hpp"
#include "common/embedded_configs.hpp"
#include "hardware/profile.hpp"
#include "hardware/interference.hpp"
#include "hardware/profiled_cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/model.hpp"
#include "sim/plan.hpp"
#include "sim/step_graph.hpp"
#include "sim/strategy.hpp"

using namespace hardware;
using namespace common;

namespace {

// A small machine: 1 TFLOP/s, 100 GB/s memory, 2 ranks; no interference so engine sums are plain.
const char* kClusterYaml = R"(name: test-cpu
gpu:
  name: test
  arch: cpu
  peak_tflops: {fp32: 1, bf16: 1, fp16: 1, fp8: 1}
  hbm_gb_per_s: 100
  hbm_gb: 16
  sms: 1
  gemm_efficiency: 1
  memory_efficiency: 1
  gemm_tile_overhead_us: 0
  kernel_latency_us: 1
node: {gpus: 2, nvlink_gb_per_s: 10, nvlink_links: 1, nvswitch: true, nvls: false}
network: {nics_per_node: 1, nic_gbit_per_s: 80, latency_us: 2, topology: fat_tree, oversubscription: 1}
host:
  launch_us: {eager: 3, cpp: 3, cuda_graphs: 3}
  op_overhead_us: {eager: 0, cpp: 0, cuda_graphs: 0}
  kernel_efficiency: {eager: 1, cpp: 1, cuda_graphs: 1}
  attention: flash
interference: {sm_contention: false, hbm_amplification: 0, sm_comm_slowdown: 0}
nccl: {call_overhead_us: 0, nvls_efficiency: 1, nvls_latency_us: 1}
)";

ClusterSpec load_cluster_text() { return parse_cluster(kClusterYaml, "test-cluster.yaml"); }

/// A profile whose GEMM time follows a closed form on a grid m, n, k in {16, 64, 256}:
/// us = f(m, n, k) = 0.01 * (m n k)^0.5 (a power law, which log-linear interpolation reproduces exactly).
Profile power_law_profile(int tile_m = 1, int tile_n = 1) {
  Profile p;
  p.info = {.backend = "cpu", .device = "test", .host = "h", .date = "2026-01-01T00:00:00Z", .ranks = 2, .quick = true,
            .command = "slicetune profile --quick", .libraries = {{"openblas", "0.3.21"}}};
  p.cluster_node = common::parse_yaml(kClusterYaml, "test");
  p.cluster = cluster_from_node(p.cluster_node, "test");
  p.gemm_tile_m = tile_m;
  p.gemm_tile_n = tile_n;
  p.grid_m = p.grid_n = p.grid_k = {16, 64, 256};
  p.runs_as = {{DType::bf16, DType::fp32}};
  for (auto m : p.grid_m)
    for (auto n : p.grid_n)
      for (auto k : p.grid_k)
        p.gemm.push_back({.dtype = DType::fp32, .m = m, .n = n, .k = k, .us = 0.01 * std::sqrt(double(m) * n * k)});
  p.elementwise = {{.kind = "stream", .backward = false, .elements = 1000, .us = 2},
                   {.kind = "stream", .backward = false, .elements = 100000, .us = 50}};
  p.collectives = {{.kind = CollectiveKind::all_reduce, .ranks = 2, .nodes = 1, .bytes = 1024, .us = 4},
                   {.kind = CollectiveKind::all_reduce, .ranks = 2, .nodes = 1, .bytes = 4096, .us = 16}};
  p.optimizer = {{.params = 1000, .us = 10}, {.params = 1000000, .us = 10000}};
  return p;
}

double gemm_us(const CostModel& c, std::int64_t m, std::int64_t n, std::int64_t k, DType t = DType::fp32) {
  return c.gemm({.m = m, .n = n, .k = k, .dtype = t}).time.us();
}

}  // namespace

TEST_CASE("a profile survives format -> parse -> format byte for byte") {
  // Expected: identical text, since numbers are written in their shortest round-trip form and the
  // cluster mapping is re-emitted verbatim.
  Profile p = power_law_profile();
  p.interference = InterferenceMeasurement{.gemm = {.dtype = DType::fp32, .m = 256, .n = 256, .k = 256, .us = 5611},
                                           .collective = {.kind = CollectiveKind::all_reduce, .ranks = 2, .nodes = 1, .bytes = 4194304, .us = 100},
                                           .gemm_beside_us = 6216,
                                           .collective_beside_us = 125};
  p.host = HostMeasurement{.launch_us = 0.1579, .method = "a \"quoted\" method"};
  p.attention = {{.dtype = DType::fp32, .backward = true, .batch = 1, .heads = 2, .s = 32, .head_dim = 16, .us = 12.5}};
  const std::string text = format_profile(p);
  const Profile back = parse_profile(text, "mem.yaml");
  CHECK(format_profile(back) == text);
  CHECK(back.host->method == "a \"quoted\" method");
  CHECK(back.cluster.node.gpus_per_node == 2);
}

TEST_CASE("a profile whose cluster lists fused ops (host.stacks of dgx-h100) writes and reads back") {
  // `slicetune profile --backend cuda` starts from the embedded cluster of the GPU's generation
  // (profiler/cuda_profiler.cpp), whose stacks carry lists such as `fused: [gelu]` and `fused: []`.
  // Expected: every stack's fused set and attention kernel after format -> parse equal those of
  // the cluster file read directly (the first run on an H200 failed here: lists were written as "").
  const auto text = common::resolve_config("clusters", "dgx-h100").text;
  const ClusterSpec direct = parse_cluster(text, "dgx-h100.yaml");
  Profile p = power_law_profile();
  p.cluster_node = common::parse_yaml(text, "test");
  p.cluster = cluster_from_node(p.cluster_node, "profile: cluster");
  const Profile back = parse_profile(format_profile(p), "mem.yaml");
  int stacks_with_fused_ops = 0;
  for (Stack s : kAllStacks) {
    const auto i = static_cast<int>(s);
    CAPTURE(i);
    CHECK(back.cluster.host.stacks[i].fused == direct.host.stacks[i].fused);
    CHECK(back.cluster.host.stacks[i].attention == direct.host.stacks[i].attention);
    stacks_with_fused_ops += direct.host.stacks[i].fused != 0;
  }
  CHECK(stacks_with_fused_ops >= 1);  // dgx-h100.yaml: megatron-core fuses gelu, cuda_graphs residual
}

TEST_CASE("every committed profile under configs/profiles loads and writes back identically") {
  // Expected: load -> save gives the identical file (the issue's round-trip criterion), for the real
  // profiles measured on machines, not only for synthetic ones.
  int seen = 0;
  for (const auto& c : embedded_configs()) {
    if (std::string(c.key).rfind("profiles/", 0) != 0) continue;
    ++seen;
    const Profile p = parse_profile(c.text, c.key);
    CHECK_MESSAGE(format_profile(p) == std::string(c.text), c.key);
  }
  CHECK(seen >= 1);
}

TEST_CASE("the file is written atomically and reads back from disk") {
  const auto path = (std::filesystem::temp_directory_path() / "slicetune_test_profile.yaml").string();
  const Profile p = power_law_profile();
  write_profile(path, p);
  CHECK(format_profile(load_profile(path)) == format_profile(p));
  std::filesystem::remove(path);
}

TEST_CASE("a profile of another version is refused with a clear message") {
  std::string text = format_profile(power_law_profile());
  text.replace(text.find("version: 1"), 10, "version: 2");
  try {
    parse_profile(text, "old.yaml");
    FAIL("version 2 was accepted");
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("old.yaml: version") == 0);
    CHECK(msg.find("version 2") != std::string::npos);
    CHECK(msg.find("reads version 1") != std::string::npos);
  }
  CHECK_THROWS_AS(parse_profile("name: dgx-h100\n", "cluster.yaml"), ConfigError);  // not a profile at all
}

TEST_CASE("a grid point left out is refused") {
  Profile p = power_law_profile();
  p.gemm.pop_back();
  CHECK_THROWS_WITH_AS(parse_profile(format_profile(p), "holes.yaml"), doctest::Contains("is not measured"), ConfigError);
}

TEST_CASE("GEMM interpolation: exact at measured points, log-linear between, tile-padded") {
  std::ostringstream notes;
  auto c = make_profiled_cost_model(load_cluster_text(), power_law_profile(), &notes);
  // At grid points the measured time comes back (to the picosecond rounding of Duration).
  CHECK(gemm_us(*c, 64, 64, 64) == doctest::Approx(0.01 * std::sqrt(64.0 * 64 * 64)).epsilon(1e-9));
  CHECK(gemm_us(*c, 16, 256, 64) == doctest::Approx(0.01 * std::sqrt(16.0 * 256 * 64)).epsilon(1e-9));
  // Between grid points: throughput 2mnk/us = 200 (mnk)^0.5 is a power law, so log-linear interpolation
  // reproduces it exactly: us(32, 100, 200) = 0.01 * sqrt(32*100*200).
  CHECK(gemm_us(*c, 32, 100, 200) == doctest::Approx(0.01 * std::sqrt(32.0 * 100 * 200)).epsilon(1e-6));
  // Monotone in every size between measured points.
  double prev = 0;
  for (std::int64_t m = 16; m <= 256; m += 8) {
    const double t = gemm_us(*c, m, 64, 64);
    CHECK(t > prev);
    prev = t;
  }
  // bf16 runs as fp32 on this backend: the same time.
  CHECK(gemm_us(*c, 64, 64, 64, DType::bf16) == gemm_us(*c, 64, 64, 64));
  CHECK(notes.str().empty());

  // Tile 16 x 16: m = 17 pads to 32 and costs what the padded problem costs at the throughput
  // interpolated at 17: us = 2*32*64*64 / (200 * sqrt(17*64*64)).
  auto tiled = make_profiled_cost_model(load_cluster_text(), power_law_profile(16, 16), &notes);
  CHECK(gemm_us(*tiled, 17, 64, 64) == doctest::Approx(2.0 * 32 * 64 * 64 / (200.0 * std::sqrt(17.0 * 64 * 64))).epsilon(1e-6));
  CHECK(gemm_us(*tiled, 17, 64, 64) > gemm_us(*tiled, 16, 64, 64) * 1.5);  // a step at the tile boundary
}

TEST_CASE("outside the measured range the analytic model is used, and said once") {
  std::ostringstream notes;
  const ClusterSpec cl = load_cluster_text();
  auto c = make_profiled_cost_model(cl, power_law_profile(), &notes);
  auto analytic = make_analytic_cost_model(c->cluster(), Stack::cpp);
  // Expected: exactly the analytic model's price for a shape below the grid (m = 8 < 16) ...
  CHECK(c->gemm({.m = 8, .n = 64, .k = 64}).time == analytic->gemm({.m = 8, .n = 64, .k = 64}).time);
  CHECK(c->gemm({.m = 4096, .n = 64, .k = 64}).time == analytic->gemm({.m = 4096, .n = 64, .k = 64}).time);
  // ... and one note line for the two GEMM fallbacks.
  const std::string s = notes.str();
  CHECK(s.find("GEMM") != std::string::npos);
  CHECK(std::count(s.begin(), s.end(), '\n') == 1);
}

TEST_CASE("element-wise, optimizer and collective tables interpolate log-linearly in size") {
  std::ostringstream notes;
  auto c = make_profiled_cost_model(load_cluster_text(), power_law_profile(), &notes);
  // stream rows: 1000 elements 2 us, 100000 elements 50 us; at 10000 (halfway in log) the geometric mean sqrt(2*50) = 10 us.
  CHECK(c->elementwise({.kind = ElementwiseKind::gelu, .elements = 10000, .bytes = 40000}).time.us() == doctest::Approx(10.0).epsilon(1e-6));
  // optimizer: 1000 -> 10 us, 1e6 -> 1e4 us: linear in params, so 31623 params -> 316.23 us.
  CHECK(c->optimizer({.params = 31623}).time.us() == doctest::Approx(316.23).epsilon(1e-4));
  // AllReduce of 2048 bytes in fp32 (between 1 KB at 4 us and 4 KB at 16 us): sqrt(4*16) = 8 us.
  auto ar = c->collective({.kind = CollectiveKind::all_reduce, .bytes = 2048, .ranks = 2, .nodes = 1, .dtype = DType::fp32});
  CHECK(ar.total().us() == doctest::Approx(8.0).epsilon(1e-6));
  // A bf16 AllReduce of 1024 bytes moves 2048 bytes as fp32 on this backend: also 8 us.
  auto ar16 = c->collective({.kind = CollectiveKind::all_reduce, .bytes = 1024, .ranks = 2, .nodes = 1, .dtype = DType::bf16});
  CHECK(ar16.total().us() == doctest::Approx(8.0).epsilon(1e-6));
  CHECK(notes.str().empty());
}

TEST_CASE("the profile's host and interference measurements replace the cluster's") {
  Profile p = power_law_profile();
  p.host = HostMeasurement{.launch_us = 0.25, .method = "test"};
  auto c = make_profiled_cost_model(load_cluster_text(), p);
  // CPU backend: every stack issues through the same loop, so all three take the measured 0.25 us.
  for (Stack s : {Stack::eager, Stack::cpp, Stack::cuda_graphs}) CHECK(c->cluster().host.launch_for(s).us() == doctest::Approx(0.25));

  // Interference: GEMM 100 us alone; AllReduce 100 us alone, 125 us beside the GEMM: the engine's
  // rates_beside must give the collective 100/125 = 0.8 of its speed beside that GEMM
  // (sm_comm_slowdown solved for it). The GEMM beside the collective: a slowdown above 0.5 means the
  // communication thread time-shares the rank's core (the collective holds the rank's one "SM":
  // seconds_on_fewer_sms gives the GEMM's compute-bound share twice its time); hbm_amplification is
  // solved for whatever the measured slowdown asks beyond that. A hand-off of 7 us is added to every
  // collective's latency.
  auto measured = [&](double gemm_beside_us) {
    p.interference = InterferenceMeasurement{.gemm = {.dtype = DType::fp32, .m = 64, .n = 64, .k = 64, .us = 100},
                                             .collective = {.kind = CollectiveKind::all_reduce, .ranks = 2, .nodes = 1, .bytes = 4096, .us = 100},
                                             .gemm_beside_us = gemm_beside_us,
                                             .collective_beside_us = 125};
    p.host->collective_handoff_us = 7;
    p.host->handoff_method = "test";
    return make_profiled_cost_model(load_cluster_text(), p);
  };
  auto rates = [](const CostModel& m) {
    const auto& cl = m.cluster();
    const double usable = cl.gpu.hbm_bytes_per_s * cl.gpu.memory_efficiency, gemm_bytes = 3.0 * 64 * 64 * 4;
    const double u = gemm_bytes / 100e-6 / usable;
    const auto base = make_analytic_cost_model(cl, Stack::cpp);
    const auto cc = base->collective({.kind = CollectiveKind::all_reduce, .bytes = 4096, .ranks = 2, .nodes = 1, .dtype = DType::fp32});
    const KernelLoad k{.seconds = 100e-6, .seconds_on_fewer = seconds_on_fewer_sms(100e-6, u, cl.gpu.sm_count, cl.gpu.sm_count), .hbm_bytes = gemm_bytes};
    const CommLoad cm{.seconds = 100e-6, .wire_bytes_per_s = cc.sent_bytes / 100e-6, .sms = cl.gpu.sm_count};
    return rates_beside(cl.interference, usable, k, cm);
  };
  // 200 us beside (slowdown 1.0): the time-shared core gives it: the GEMM's compute-bound share
  // (1 - its HBM share alone, 0.5 % here) twice as long: 2 - 0.005, within 1 %
  auto d = measured(200);
  CHECK(d->cluster().interference.sm_contention);
  CHECK(rates(*d).comm == doctest::Approx(0.8));
  CHECK(1.0 / rates(*d).compute == doctest::Approx(2.0).epsilon(0.01));
  // 300 us beside (slowdown 2.0): beyond the time-shared core's 2x only HBM could slow the GEMM, and a
  // 4 KB all-reduce moves too few bytes to contend for it: the solve stops at the top of the
  // amplification range (10) and the model stays at 2x - it under-predicts such a measurement rather
  // than invent a mechanism.
  {
    const auto e = measured(300);
    CHECK(e->cluster().interference.hbm_amplification == doctest::Approx(10.0).epsilon(1e-6));
    CHECK(1.0 / rates(*e).compute == doctest::Approx(2.0).epsilon(0.01));
  }
  const auto ar = d->collective({.kind = CollectiveKind::all_reduce, .bytes = 2048, .ranks = 2, .nodes = 1, .dtype = DType::fp32});
  CHECK(ar.sms == d->cluster().gpu.sm_count);
  CHECK(ar.total().us() == doctest::Approx(8.0 + 7.0).epsilon(1e-6));  // sqrt(4 x 16) + hand-off
}

TEST_CASE("profiled simulate of the tiny model: compute busy is the sum of the tabled task costs") {
  // A profile where every measured GEMM costs 10 us (grid 1..4096, so log-linear interpolation of a
  // constant stays constant), every element-wise kernel 1 us, every optimizer call 5 us, attention 20 us.
  Profile p = power_law_profile();
  p.grid_m = p.grid_n = p.grid_k = {1, 4096};
  p.gemm.clear();
  for (auto m : p.grid_m)
    for (auto n : p.grid_n)
      for (auto k : p.grid_k) p.gemm.push_back({.dtype = DType::fp32, .m = m, .n = n, .k = k, .us = 10});
  p.elementwise = {{.kind = "stream", .backward = false, .elements = 1, .us = 1}, {.kind = "stream", .backward = false, .elements = 1 << 30, .us = 1}};
  p.optimizer = {{.params = 1, .us = 5}, {.params = 1 << 30, .us = 5}};
  for (bool bwd : {false, true})
    for (std::int64_t s : {1, 4096}) p.attention.push_back({.dtype = DType::fp32, .backward = bwd, .batch = 1, .heads = 1, .s = s, .head_dim = 16, .us = 20});
  // attention is keyed by executed FLOPs: cover the tiny model's (head_dim 16) from 1 to 4096^2 tokens
  std::ostringstream notes;
  auto cost = make_profiled_cost_model(load_cluster_text(), p, &notes);
  const sim::ModelSpec model = sim::load_model("tiny");
  sim::PlanInput in;
  in.tp = 2;
  in.dp = 1;
  in.micro_batch = 2;
  in.strategy = &sim::strategy_domino();
  in.row_slices = 2;
  const sim::Plan plan = sim::resolve_plan(model, cost->cluster(), in, "test");
  const sim::StepGraph g = sim::build_step_graph(model, cost->cluster(), plan);
  double expect_us = 0;
  for (const auto& t : g.tasks) {
    if (g.streams[t.stream].kind != sim::StreamKind::compute) continue;
    if (std::holds_alternative<GemmOp>(t.kind)) expect_us += 10 * std::get<GemmOp>(t.kind).batch;
    else if (std::holds_alternative<ElementwiseOp>(t.kind)) expect_us += 1;
    else if (std::holds_alternative<OptimizerOp>(t.kind)) expect_us += 5;
    else if (std::holds_alternative<AttentionOp>(t.kind)) expect_us += 20;
  }
  const sim::StepReport r = sim::Engine(*cost).simulate(g);
  CHECK(expect_us > 0);
  CHECK(r.compute.us() == doctest::Approx(expect_us).epsilon(1e-6));
  CHECK(r.step_time.us() >= expect_us);
}

TEST_CASE("CPU: collectives measured beside compute replace the direct table where they cover the size") {
  // Direct table: AllReduce 1 KB 4 us, 4 KB 16 us. Beside-compute table (as the executor runs it):
  // 1 KB 200 us, 4 KB 250 us; hand-off 7 us.
  Profile p = power_law_profile();
  p.collectives_beside_compute = {{.kind = CollectiveKind::all_reduce, .ranks = 2, .nodes = 1, .bytes = 1024, .us = 200},
                                  {.kind = CollectiveKind::all_reduce, .ranks = 2, .nodes = 1, .bytes = 4096, .us = 250}};
  p.host = HostMeasurement{.launch_us = 0.25, .method = "test", .collective_handoff_us = 7, .handoff_method = "test"};
  // The optional section survives format -> parse -> format byte for byte.
  const std::string text = format_profile(p);
  const Profile back = parse_profile(text, "mem.yaml");
  CHECK(format_profile(back) == text);
  REQUIRE(back.collectives_beside_compute.size() == 2);
  CHECK(back.collectives_beside_compute[1].us == 250);

  std::ostringstream notes;
  auto c = make_profiled_cost_model(load_cluster_text(), back, &notes);
  // 2048 bytes, halfway in log between 1 KB and 4 KB: sqrt(200 x 250) = 223.61 us, plus the 7 us hand-off,
  // all in the latency stage (the measurement already ran beside compute; the engine must not slow it again).
  const auto ar = c->collective({.kind = CollectiveKind::all_reduce, .bytes = 2048, .ranks = 2, .nodes = 1, .dtype = DType::fp32});
  CHECK(ar.latency.us() == doctest::Approx(std::sqrt(200.0 * 250.0) + 7.0).epsilon(1e-6));
  CHECK(ar.transfer.ps == 0);
  // busy share = direct 8 us / 223.6 us = 0.036 < 0.5: the sleeping communication thread leaves the core to compute.
  CHECK(ar.sms == 0);
  // 4 KB is the table's last row: 250 us + 7 us.
  CHECK(c->collective({.kind = CollectiveKind::all_reduce, .bytes = 4096, .ranks = 2, .nodes = 1, .dtype = DType::fp32}).total().us() ==
        doctest::Approx(257.0).epsilon(1e-6));
  // A beside-compute table as fast as the direct one (busy share 8 / 8 = 1): the collective holds the rank's core.
  Profile q = back;
  q.collectives_beside_compute = {{.kind = CollectiveKind::all_reduce, .ranks = 2, .nodes = 1, .bytes = 1024, .us = 4},
                                  {.kind = CollectiveKind::all_reduce, .ranks = 2, .nodes = 1, .bytes = 4096, .us = 16}};
  auto busy = make_profiled_cost_model(load_cluster_text(), q, &notes);
  CHECK(busy->collective({.kind = CollectiveKind::all_reduce, .bytes = 2048, .ranks = 2, .nodes = 1, .dtype = DType::fp32}).sms ==
        busy->cluster().gpu.sm_count);
  CHECK(notes.str().empty());
}
