// The small things a user trips on (issue 16, "papercuts"), each with a test.
#include <doctest/doctest.h>

#include "cli_run.hpp"

TEST_CASE("run and validate --help state the defaults the run really uses (micro-batch, fp32 on a CPU cluster, stack cpp)") {
  for (const char* cmd : {"run", "validate"}) {
    const CliRun r = run_cli(std::string(cmd) + " --help");
    INFO(cmd << " --help:\n" << r.out);
    // executor::resolve_run_target: micro_batch = row_slices along the batch, dtype fp32 on arch cpu, stack cpp
    CHECK(r.out.find("default row_slices with domino along the batch") != std::string::npos);
    CHECK(r.out.find("default fp32 on a CPU cluster") != std::string::npos);
    CHECK(r.out.find("default cpp: the executor issues kernels from C++") != std::string::npos);
    CHECK(r.out.find("bf16 (default)") == std::string::npos);
    CHECK(r.out.find("eager (default)") == std::string::npos);
  }
  // simulate keeps the simulator's defaults
  const CliRun s = run_cli("simulate --help");
  CHECK(s.out.find("(default bf16)") != std::string::npos);
  CHECK(s.out.find("(default eager)") != std::string::npos);
}

TEST_CASE("--version prints the version and the JSON schema version") {
  const CliRun r = run_cli("--version");
  CHECK(r.rc == 0);
  CHECK(r.out.rfind("slicetune 0.2.0 (JSON schema_version 1)", 0) == 0);
}

TEST_CASE("every JSON output carries schema_version") {
  for (const char* args : {"simulate --model gpt3-2.7b --tp 8 --json", "tune --model gpt3-2.7b --top 1 --no-explain --json",
                           "collective --cluster dgx-h100 --op allreduce --gpus 8 --max-bytes 4096 --json",
                           "whatif --model gpt3-2.7b --sweep nodes=1 --json", "check --model gpt3-2.7b --tp 8 --no-environment --json",
                           "import --model meta-llama-3-8b/config.json --json"}) {
    const CliRun r = run_cli(args);
    INFO(args);
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE(j.is_object());
    CHECK(j.at("schema_version") == 1);
  }
}

TEST_CASE("MFU is a fraction in every machine-readable output (JSON and CSV); tables show it in percent") {
  const auto csv = std::filesystem::temp_directory_path() / ("slicetune-mfu-" + std::to_string(::getpid()) + ".csv");
  const CliRun w = run_cli("whatif --model gpt3-2.7b --sweep nodes=1 --csv '" + csv.string() + "' --json");
  REQUIRE(w.rc == 0);
  const auto j = nlohmann::json::parse(w.out);
  const double mfu = j.at("points").at(0).at("result").at("top").at(0).at("mfu").get<double>();
  std::ifstream in(csv);
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  std::filesystem::remove(csv);
  // column 6 (tuned_mfu) of "nodes,baseline_step_ms,baseline_tokens_per_s,tuned_step_ms,tuned_tokens_per_s,tuned_mfu,..."
  std::vector<std::string> cells;
  for (std::size_t p = 0; p <= row.size();) {
    const auto c = std::min(row.find(',', p), row.size());
    cells.push_back(row.substr(p, c - p));
    p = c + 1;
  }
  REQUIRE(cells.size() > 5);
  CHECK(header.find("tuned_mfu") != std::string::npos);
  CHECK(std::stod(cells[5]) == doctest::Approx(mfu).epsilon(1e-3));  // the JSON fraction, to 4 decimals
  CHECK(std::stod(cells[5]) < 1.0);
}

TEST_CASE("simulate --trace: categories by resource, bytes / FLOPs / shapes / NCCL algorithm in args, flow arrows across streams") {
  const auto path = std::filesystem::temp_directory_path() / ("slicetune-trace-" + std::to_string(::getpid()) + ".json");
  const CliRun r = run_cli("simulate --model tiny --cluster dgx-h100 --tp 4 --micro-batch 2 --strategy domino --trace '" + path.string() + "'");
  REQUIRE(r.rc == 0);
  std::ifstream in(path);
  const auto j = nlohmann::json::parse(in);
  std::filesystem::remove(path);
  int compute = 0, tp = 0, dp = 0, flow_s = 0, flow_f = 0;
  bool gemm_flops = false, nccl_algo = false;
  for (const auto& e : j.at("traceEvents")) {
    const std::string cat = e.value("cat", "");
    compute += cat == "compute";
    tp += cat == "tp";
    dp += cat == "dp";
    flow_s += e.value("ph", "") == "s";
    flow_f += e.value("ph", "") == "f";
    if (cat == "compute" && e.at("args").at("op") == "qkv") gemm_flops |= e.at("args").at("flops").get<double>() > 0 && e.at("args").contains("shape");
    if (cat == "tp") nccl_algo |= e.at("args").contains("algo") && e.at("args").at("bytes").get<double>() > 0;
  }
  CHECK(compute > 0);
  CHECK(tp == 22);  // tiny: 2 layers x 2 collectives x 2 slices x (fwd + bwd) + 4 embedding/LM-head + 2 loss collectives
  CHECK(dp == 1);   // one DP bucket (dp 2)
  CHECK(flow_s == flow_f);
  CHECK(flow_s > 0);
  CHECK(gemm_flops);
  CHECK(nccl_algo);
}
