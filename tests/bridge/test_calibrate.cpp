// slicetune calibrate --nccl-tests: the H100 NCCL constants from nccl-tests output (issue 16).
#include <doctest/doctest.h>

#include "bridge/calibrate.hpp"
#include "cli_run.hpp"
#include "common/config_reader.hpp"

namespace {
std::vector<bridge::NcclTestsRun> h100_runs() {
  std::vector<bridge::NcclTestsRun> runs;
  const std::string dir = std::string(SLICETUNE_SOURCE_DIR) + "/tests/fixtures/nccl-tests/";
  for (const char* f : {"h100-all_reduce_perf-2gpu-ring.txt", "h100-all_reduce_perf-4gpu-ring.txt", "h100-all_reduce_perf-5gpu-nvls.txt",
                        "h100-all_reduce_perf-6gpu-nvls.txt", "h100-all_reduce_perf-7gpu-nvls.txt", "h100-all_reduce_perf-8gpu-nvls.txt",
                        "h100-all_reduce_perf-8gpu-ring.txt"})
    runs.push_back(bridge::parse_nccl_tests(common::read_text_file(dir + f), dir + f));
  return runs;
}
}  // namespace

TEST_CASE("nccl-tests text output is read: collective, GPUs, nodes, forced algorithm, rows") {
  const auto runs = h100_runs();
  const auto& r8 = runs[5];
  CHECK(r8.kind == hardware::CollectiveKind::all_reduce);
  CHECK(r8.ranks == 8);
  CHECK(r8.nodes == 1);
  CHECK(r8.device == "NVIDIA H100 80GB HBM3");
  CHECK_FALSE(r8.forced_algo);
  REQUIRE(r8.rows.size() == 9);
  // the 8 GiB row: busbw 478.9 GB/s (data/calibration/nccl-allreduce-busbw.csv), time = 8589934592 B / (478.9 / 1.75) GB/s
  CHECK(r8.rows.back().bytes == 8589934592LL);
  CHECK(r8.rows.back().busbw_GBps == doctest::Approx(478.9));
  CHECK(r8.rows.back().time_us == doctest::Approx(31389.40));
  REQUIRE(runs[6].forced_algo);  // "NCCL_ALGO set by environment to Ring"
  CHECK(*runs[6].forced_algo == hardware::CollectiveAlgo::ring);
  CHECK_THROWS_WITH_AS(bridge::parse_nccl_tests("hello\n", "x.txt"), "x.txt: not nccl-tests output (no \"# nThread ... nGpus ...\" header line)",
                       common::ConfigError);
  CHECK_THROWS_WITH_AS(bridge::parse_nccl_tests("# nThread 1 nGpus 2\n#  Rank  0 Group  0 Pid 1 on h device 0 [0x1] G\n# Collective test starting: all_reduce_perf\n"
                                                "        1024   256   float   sum   -1   25.6   0.04\n",
                                                "y.txt"),
                       "y.txt: line 4: expected 13 columns (size count type redop root, then time algbw busbw #wrong out-of-place and in-place), got 7",
                       common::ConfigError);
}

TEST_CASE("calibrate reproduces dgx-h100's fitted NCCL constants within 5 %") {
  // dgx-h100.yaml's nccl section was fitted (slicetune accuracy --fit, validate/fit.cpp) to these measurements:
  // call_overhead_us to the 1 KB all-reduce, nvls_efficiency and nvls_latency_us to the 8-GPU NVLS busbw curve (log
  // error). calibrate fits them again from the nccl-tests files made of the same rows
  // (tests/fixtures/nccl-tests/make_fixtures.py); the expected values are the cluster file's own.
  const hardware::ClusterSpec h100 = hardware::load_cluster("dgx-h100");
  const auto cal = bridge::calibrate_nccl(h100, h100_runs());
  CHECK(cal.overhead_rows == 1);  // the 1 KB row: the only one whose modelled transfer is < 10 % of its time
  // the one-node rows the collective model prices as NVLS: 64 MB .. 8 GB on 8 GPUs (6 in the fixture) and the 8 GB
  // rows on 5, 6 and 7 GPUs (below 64 MB the model picks ring LL / LL128)
  CHECK(cal.nvls_rows == 9);
  CHECK(cal.after.call_overhead_us == doctest::Approx(h100.nccl.call_overhead_us).epsilon(0.05));
  CHECK(cal.after.nvls_efficiency == doctest::Approx(h100.nccl.nvls_efficiency).epsilon(0.05));
  CHECK(cal.after.nvls_latency_us == doctest::Approx(h100.nccl.nvls_latency_us).epsilon(0.05));
  // the forced-ring rows inform none of the three constants
  for (const auto& r : cal.rows)
    if (r.source.find("ring") != std::string::npos) CHECK(r.used_for.empty());
}

TEST_CASE("calibrate --out writes a cluster file that loads with the fitted constants") {
  const auto out = std::filesystem::temp_directory_path() / ("slicetune-calibrated-" + std::to_string(::getpid()) + ".yaml");
  const CliRun r = run_cli("calibrate --cluster dgx-h100 --nccl-tests tests/fixtures/nccl-tests/h100-all_reduce_perf-8gpu-nvls.txt "
                           "tests/fixtures/nccl-tests/h100-all_reduce_perf-5gpu-nvls.txt --out '" + out.string() + "' --json");
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("schema_version") == 1);
  const hardware::ClusterSpec c = hardware::load_cluster(out.string());
  std::filesystem::remove(out);
  CHECK(c.nccl.nvls_efficiency == doctest::Approx(j.at("after").at("nvls_efficiency").get<double>()).epsilon(1e-3));
  CHECK(c.nccl.call_overhead_us == doctest::Approx(j.at("after").at("call_overhead_us").get<double>()).epsilon(1e-3));
  CHECK(c.gpu.name == "H100-SXM5-80GB");  // the rest of the file is unchanged
  CHECK(run_cli("calibrate --nccl-tests README.md").rc == 2);
}
