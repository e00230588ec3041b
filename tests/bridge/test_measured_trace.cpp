// validate --measured with a PyTorch profiler (Kineto) trace and an Nsight Systems SQLite export (issue 16).
#include <doctest/doctest.h>

#include "cli_run.hpp"
#include "common/config_reader.hpp"
#include "hardware/cost_model.hpp"
#include "validate/measured_trace.hpp"

namespace {
const std::string kDir = std::string(SLICETUNE_SOURCE_DIR) + "/tests/fixtures/traces/";
const std::string kPlan = "--model tiny --cluster dgx-h100 --tp 4 --micro-batch 2 --strategy domino --row-slices 2";

double error_of(const nlohmann::json& j, const std::string& cls) {
  for (const auto& r : j.at("classes"))
    if (r.at("class") == cls) return r.at("error").get<double>();
  FAIL("no class " << cls);
  return 0;
}
}  // namespace

TEST_CASE("kernel names map to the task classes") {
  CHECK(validate::kernel_class("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas") == "GEMM");
  CHECK(validate::kernel_class("nvjet_tst_128x256_64x4_2x1_v_bz_coopB_TNN") == "GEMM");
  CHECK(validate::kernel_class("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)") == "ReduceScatter");
  CHECK(validate::kernel_class("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4> >(Flash_fwd_params)") == "attention");
  CHECK(validate::kernel_class("void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float> >(long)") == "optimizer");
  CHECK(validate::kernel_class("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>(int)") == "element-wise");
  CHECK(validate::nccl_algo("ncclDevKernel_AllReduce_Sum_bf16_NVLS_SIMPLE(ncclDevComm*)") == "nvls");
  CHECK(validate::nccl_algo("ncclKernel_AllReduce_RING_LL_Sum_bfloat16(ncclWorkElem)") == "ring");
}

TEST_CASE("a Kineto trace goes through validate --measured with per-class and per-step results") {
  const CliRun r = run_cli("validate " + kPlan + " --measured tests/fixtures/traces/tiny-domino-kineto.json --json");
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("schema_version") == 1);
  CHECK(j.at("format") == "kineto");
  CHECK(j.at("measured_step_ms").size() == 2);  // two ProfilerStep#N ranges
  // The fixture stretches each class's predicted kernel times (tests/fixtures/traces/make_traces.py), so the error
  // of each class is known: (predicted - measured) / measured = 1 / factor - 1
  CHECK(error_of(j, "GEMM") == doctest::Approx(1 / 1.15 - 1).epsilon(0.01));
  CHECK(error_of(j, "attention") == doctest::Approx(1 / 1.3 - 1).epsilon(0.01));
  CHECK(error_of(j, "element-wise") == doctest::Approx(1 / 1.5 - 1).epsilon(0.01));
  CHECK(error_of(j, "AllReduce") == doctest::Approx(1 / 1.2 - 1).epsilon(0.01));
  for (const auto& c : j.at("classes"))
    if (c.at("class") == "GEMM") CHECK(c.at("mapped_one_to_one") == true);  // one cuBLAS kernel per GEMM task, matched in order
  CHECK(j.at("collectives").at(0).at("measured_algo") == "ring");
  CHECK(j.at("fallbacks").empty());
}

TEST_CASE("an Nsight Systems SQLite export goes through validate --measured; the serialized run is a silent fallback") {
  const CliRun r = run_cli("validate " + kPlan + " --measured tests/fixtures/traces/tiny-domino-nsys.sqlite --json");
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("format") == "nsys-sqlite");
  CHECK(j.at("measured_step_ms").size() == 2);  // two NVTX ProfilerStep#N ranges
  CHECK(error_of(j, "GEMM") == doctest::Approx(1 / 1.15 - 1).epsilon(0.01));
  // every kernel on one stream: the collectives were fully exposed and the fallback is said
  const auto& ar = j.at("collectives").at(0);
  CHECK(ar.at("measured_exposed_ms").get<double>() == doctest::Approx(ar.at("measured_ms").get<double>()));
  REQUIRE(j.at("fallbacks").size() == 1);
  CHECK(j.at("fallbacks").at(0) == "every kernel ran on one CUDA stream: no collective could overlap compute");
}

TEST_CASE("malformed traces are refused naming the file") {
  CHECK_THROWS_WITH_AS(validate::parse_kineto_trace("{\"traceEvents\": 3}", "t.json"), "t.json: traceEvents: missing (expected a PyTorch profiler Chrome trace)",
                       common::ConfigError);
  CHECK_THROWS_WITH_AS(validate::parse_kineto_trace(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": "a", "dur": 1}]})", "t.json"),
                       "t.json: traceEvents[0]: an X event without numeric ts and dur", common::ConfigError);
  CHECK_THROWS_AS(validate::read_nsys_sqlite(kDir + "make_traces.py"), common::ConfigError);
}

TEST_CASE("an event whose ph, cat or name is not a string is refused naming it; a tid that is not an integer is stream 0") {
  // fuzz_kineto's finding of 2026-12-01 (fuzz/corpus/kineto/crash-ph-number.json, "ph": 4242 in a
  // real trace's 6th event): nlohmann's value("ph", "") threw a type_error, which escaped as no
  // ConfigError. Expected now: one ConfigError naming the event and the key.
  CHECK_THROWS_WITH_AS(validate::parse_kineto_trace(R"({"traceEvents": [{"ph": 4242, "ts": 0, "dur": 1}]})", "t.json"),
                       "t.json: traceEvents[0].ph: expected a string, got 4242", common::ConfigError);
  CHECK_THROWS_WITH_AS(validate::parse_kineto_trace(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": ["k"], "ts": 0, "dur": 1}]})", "t.json"),
                       "t.json: traceEvents[0].name: expected a string, got [\"k\"]", common::ConfigError);
  CHECK_THROWS_WITH_AS(validate::parse_kineto_trace(R"({"traceEvents": [{"ph": "i"}, {"ph": "X", "cat": null, "ts": 0, "dur": 1}]})", "t.json"),
                       "t.json: traceEvents[1].cat: expected a string, got null", common::ConfigError);
  // a thread named by a string (Chrome traces allow it): the kernel is read, on stream 0
  const auto m = validate::parse_kineto_trace(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "tid": "stream 7", "ts": 2, "dur": 3}]})",
                                              "t.json");
  REQUIRE(m.kernels.size() == 1);
  CHECK(m.kernels[0].stream == 0);
  CHECK(m.kernels[0].start_us == 2);
  CHECK(m.kernels[0].end_us == 5);
  // the reproducer itself (the minimised crash input) ends in the same kind of error
  const std::string repro = common::read_text_file(std::string(SLICETUNE_SOURCE_DIR) + "/fuzz/corpus/kineto/crash-ph-number.json");
  CHECK_THROWS_WITH_AS(validate::parse_kineto_trace(repro, "r.json"), "r.json: traceEvents[5].ph: expected a string, got 4242", common::ConfigError);
}

TEST_CASE("validate --measured run.json reads the run's plan from the file (no flags repeated)") {
  // A run.json as `slicetune run --out` writes it, trimmed to what validate reads: the plan is tp 2, domino 2 x 1,
  // micro-batch 2 on cpu-host; with the old behaviour (plan from flags) the graph would be tp 1 and the task count differ.
  const CliRun sim = run_cli("simulate --model tiny --cluster cpu-host --tp 2 --micro-batch 2 --dtype fp32 --stack cpp --strategy domino --json");
  REQUIRE(sim.rc == 0);
  const auto s = nlohmann::json::parse(sim.out);
  nlohmann::json tasks = nlohmann::json::array();
  for (int i = 0; i < s.at("tasks").get<int>(); ++i) tasks.push_back({{"name", "?"}, {"median_us", 1.0}});
  nlohmann::json run = {{"model", "tiny"}, {"model_ref", "tiny"}, {"cluster", "cpu-host"}, {"cluster_ref", "cpu-host"}, {"ranks", 2},
                        {"plan", s.at("plan")}, {"step_time_ms", 5.0}, {"tasks", tasks}};
  const auto path = std::filesystem::temp_directory_path() / ("slicetune-run-" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << run.dump();
  const CliRun v = run_cli("validate --measured '" + path.string() + "'");
  std::filesystem::remove(path);
  // the task count matches (the plan came from the file); the names ("?") do not, which the error names
  CHECK(v.rc == 2);
  CHECK(v.err.find("task 0 is '?'") != std::string::npos);
  CHECK(v.err.find("tasks measured but") == std::string::npos);
}
