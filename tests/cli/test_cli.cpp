// The slicetune binary as a user runs it: outputs, exit codes, one-line errors.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace {

struct Result {
  int code;
  std::string out, err;
};

Result run(const std::string& args) {
  const std::string err_file = "cli_test_stderr.txt";
  const std::string cmd = std::string(SLICETUNE_BINARY) + " " + args + " 2>" + err_file;
  Result r{};
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_file);
  std::stringstream ss;
  ss << e.rdbuf();
  r.err = ss.str();
  return r;
}

int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

TEST_CASE("simulate prints a step time; domino 2 row slices prints a lower one") {
  const std::string base = "simulate --model gpt3-13b --cluster dgx-h100 --tp 8 --micro-batch 16 --seq-len 1024 --json";
  const auto m = run(base);
  REQUIRE(m.code == 0);
  const auto d = run(base + " --strategy domino --row-slices 2");
  REQUIRE(d.code == 0);
  const auto jm = nlohmann::json::parse(m.out);
  const auto jd = nlohmann::json::parse(d.out);
  for (const char* key : {"step_time_ms", "compute_ms", "tp_comm_ms", "dp_comm_ms", "exposed_comm_ms", "mfu", "tokens_per_s",
                          "memory_gb", "model_flops", "plan"})
    CHECK(jm.contains(key));
  CHECK(jd["step_time_ms"].get<double>() < jm["step_time_ms"].get<double>());
  CHECK(jd["plan"]["strategy"] == "domino");
  CHECK(jd["plan"]["row_slices"] == 2);
  // same model FLOPs whatever the slicing
  CHECK(jd["model_flops"].get<double>() == doctest::Approx(jm["model_flops"].get<double>()));
}

TEST_CASE("the trace shows TP collectives on their own track overlapping compute") {
  const auto r = run("simulate --model gpt3-13b --cluster dgx-h100 --tp 8 --micro-batch 16 --seq-len 1024 --strategy domino "
                     "--row-slices 2 --trace cli_trace.json");
  REQUIRE(r.code == 0);
  std::ifstream in("cli_trace.json");
  const auto j = nlohmann::json::parse(in);
  std::vector<std::pair<double, double>> compute, comm;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const double ts = e["ts"], dur = e["dur"];
    (e["tid"] == 0 ? compute : comm).emplace_back(ts, ts + dur);
    if (e["tid"] == 1) CHECK(e["name"].get<std::string>().find("comm") != std::string::npos);
  }
  REQUIRE(!comm.empty());
  // time during which a TP collective and a compute task run at once
  double overlap = 0, comm_total = 0;
  for (const auto& c : comm) {
    comm_total += c.second - c.first;
    for (const auto& k : compute) overlap += std::max(0.0, std::min(c.second, k.second) - std::max(c.first, k.first));
  }
  CHECK(overlap > 0.8 * comm_total);
}

TEST_CASE("simulate --save-graph writes a graph that --graph simulates to the same JSON") {
  // The graph carries model, plan and cluster name: simulating it again needs no other flag and
  // prints the same report, field for field.
  const std::string plan = "--model gpt3-2.7b --cluster dgx-h100 --tp 4 --micro-batch 4 --seq-len 512 --strategy domino --row-slices 2 --json";
  const auto a = run("simulate " + plan + " --save-graph cli_graph.json");
  REQUIRE(a.code == 0);
  const auto b = run("simulate --graph cli_graph.json --json");
  REQUIRE(b.code == 0);
  auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  CHECK(ja == jb);
  // a plan flag beside --graph is refused: the plan comes from the file
  const auto c = run("simulate --graph cli_graph.json --tp 8");
  CHECK(c.code != 0);
  CHECK(c.err.find("--tp: the model and plan come from the --graph file") != std::string::npos);
}

TEST_CASE("simulate --save-graph of a pipelined plan writes every stage; --graph simulates them to the same JSON") {
  // The file holds one graph per stage with every micro-batch, so --graph simulates the whole step:
  // the same report, field for field, as --all-micro-batches on the plan itself.
  const std::string plan = "--model gpt3-2.7b --cluster dgx-h100 --tp 4 --pp 2 --global-batch 8 --seq-len 512 --json";
  const auto a = run("simulate " + plan + " --all-micro-batches --save-graph cli_pp_graph.json");
  REQUIRE(a.code == 0);
  const auto b = run("simulate --graph cli_pp_graph.json --json");
  REQUIRE(b.code == 0);
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  CHECK(ja["pipeline"]["stages"].size() == 2);
  CHECK(ja == jb);
}

TEST_CASE("--dot-layers draws only the layers asked for") {
  // gpt3-2.7b has 32 layers; --dot-layers 1-2 keeps the tasks of layers 1 and 2 only: the same
  // count as 2/32 of the layer tasks of the whole graph (every layer has the same tasks).
  const std::string plan = "simulate --model gpt3-2.7b --cluster dgx-h100 --tp 4 --micro-batch 4 --seq-len 512";
  REQUIRE(run(plan + " --dot cli_all.dot").code == 0);
  REQUIRE(run(plan + " --dot cli_two.dot --dot-layers 1-2").code == 0);
  auto count = [](const std::string& path, const std::string& needle) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string t = ss.str();
    int n = 0;
    for (auto at = t.find(needle); at != std::string::npos; at = t.find(needle, at + 1)) ++n;
    return n;
  };
  const int all_layer_nodes = count("cli_all.dot", "[label=\"L");
  const int two = count("cli_two.dot", "[label=\"L");
  CHECK(all_layer_nodes % 32 == 0);
  CHECK(two == all_layer_nodes / 32 * 2);
  CHECK(count("cli_two.dot", "[label=\"L1 ") + count("cli_two.dot", "[label=\"L2 ") == two);
  const auto bad = run(plan + " --dot cli_bad.dot --dot-layers 5-40");
  CHECK(bad.code != 0);
  CHECK(bad.err.find("--dot-layers: expected a layer or FIRST-LAST within 0-31") != std::string::npos);
}

TEST_CASE("bad inputs give a one-line error and a non-zero exit") {
  write("bad_malformed.yaml", "name: x\nlayers: [1, 2\n");
  write("bad_unknown_key.yaml", "tp: 8\nrow_slice: 2\n");
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {"simulate --model gpt5", "gpt5: unknown model"},
      {"simulate --model bad_malformed.yaml", "bad_malformed.yaml: malformed YAML at line"},
      {"simulate --plan bad_unknown_key.yaml", "bad_unknown_key.yaml: row_slice: unknown key"},
      {"simulate --model gpt3-13b --nodes 2 --tp 16", "tp: heads=40 is not divisible by tp=16"},
      {"simulate --model gpt3-13b --tp 8 --micro-batch 2 --strategy domino --row-slices 4",
       "row_slices: micro_batch=2 is not divisible by row_slices=4"},
      {"simulate --cluster dgx-z100", "dgx-z100: unknown cluster"},
      {"simulate --tp 2 --sequence-parallel --strategy te-bulk --te-bulk-sms 300", "--te-bulk-sms: expected an integer in 0..256, got '300'"},
      {"simulate --tp 2 --sequence-parallel --strategy te-bulk --te-bulk-sms many", "--te-bulk-sms: expected an integer in 0..256, got 'many'"},
      {"simulate --tp 2 --strategy te-bulk", "strategy te-bulk: Tensor parallel communication/GEMM overlap can happen only when sequence parallelism is enabled"},
      {"simulate --tp 8 --strategy fastest", "--strategy: expected none | domino | te-pipelined | async-tp | te-bulk | fused, got 'fastest'"},
      {"whatif --sweep nodes=1,2 --profile cpu-epyc-2x", "--profile: whatif sweeps hardware parameters"},
      {"run --model tiny --profile cpu-epyc-2x", "--profile: run measures a plan"},
      // memory savers
      {"simulate --model gpt3-175b --nodes 16 --tp 8 --dp 16 --zero 4", "--zero: expected a ZeRO stage 0 | 1 | 2 | 3, got 4"},
      {"simulate --model gpt3-175b --nodes 16 --tp 8 --dp 16 --recompute full --recompute-layers 97",
       "recompute_layers: recompute_layers=97 is outside 1..96 (the model's layers)"},
      {"simulate --model gpt3-13b --tp 8 --dtype fp32 --attention flash", "attention: attention=flash needs bf16 or fp16 activations"},
      {"simulate --model gpt3-13b --tp 8 --recompute some", "--recompute: expected none | selective | full, got 'some'"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args);
    const auto r = run(c.args);
    CHECK(r.code != 0);
    CHECK(lines(r.err) == 1);
    CHECK(r.err.find(c.expect) != std::string::npos);
    CHECK(r.out.empty());
  }
}

TEST_CASE("simulate prints the per-GPU memory breakdown, line by line, and whether it fits with the reserve") {
  // The command (gpt3-175b, 16 DGX-H100, tp 8, dp 16, ZeRO-1, full recompute): every line
  // of the breakdown; the values themselves are derived by hand in tests/sim/test_memory.cpp.
  const std::string cmd = "simulate --model gpt3-175b --cluster dgx-h100 --nodes 16 --tp 8 --dp 16 --zero 1 --recompute full";
  const auto r = run(cmd);
  REQUIRE(r.code == 0);
  for (const char* line : {"weights", "gathered weights", "gradients", "optimizer state", "activations", "recomputed activations",
                           "temporary buffers", "DP buckets", "NCCL buffers", "CUDA context", "total", "fragmentation reserve", "usable"})
    CHECK(r.out.find(std::string("\n") + line + " ") != std::string::npos);
  CHECK(r.out.find("/ dp 16 (ZeRO shard)") != std::string::npos);  // optimizer state over dp
  CHECK(r.out.find("recompute full") != std::string::npos);
  const auto j = run(cmd + " --json");
  REQUIRE(j.code == 0);
  const auto mem = nlohmann::json::parse(j.out).at("memory");
  double sum = 0;
  for (const char* k : {"weights_gb", "gathered_weights_gb", "gradients_gb", "optimizer_gb", "activations_gb", "recomputed_gb",
                        "temporaries_gb", "dp_buckets_gb", "nccl_gb", "cuda_context_gb"})
    sum += mem.at(k).get<double>();
  CHECK(mem.at("total_gb").get<double>() == doctest::Approx(sum));
  // 5 % of 80 GB kept free (configs/clusters/dgx-h100.yaml memory.fragmentation_reserve)
  CHECK(mem.at("usable_gb").get<double>() == doctest::Approx(76.0));
  CHECK(mem.at("fits").get<bool>() == (sum <= 76.0));
}

TEST_CASE("list shows the embedded models and clusters") {
  const auto r = run("list --json");
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  std::vector<std::string> models, clusters;
  for (const auto& m : j["models"]) models.push_back(m["name"]);
  for (const auto& c : j["clusters"]) clusters.push_back(c["name"]);
  for (const char* m : {"gpt3-2.7b", "gpt3-6.7b", "gpt3-13b", "gpt3-30b", "gpt3-175b", "llama2-7b", "llama2-13b", "llama2-70b", "tiny"})
    CHECK(std::find(models.begin(), models.end(), m) != models.end());
  for (const char* c : {"dgx-a100", "dgx-h100", "dgx-h200", "gb200-nvl72"})
    CHECK(std::find(clusters.begin(), clusters.end(), c) != clusters.end());
  // GPT-3 175B: 175 B parameters (Brown et al. 2020) — ours, without biases, within 1 %
  for (const auto& m : j["models"])
    if (m["name"] == "gpt3-175b") CHECK(m["params"].get<double>() == doctest::Approx(175e9).epsilon(0.01));
}

TEST_CASE("simulate and tune print a range beside each predicted step time; tune says which plans it cannot tell apart") {
  // simulate --json: step_time_range_ms = [step / (1 + high), step / (1 + low)] of the one-node band
  const auto s = run("simulate --model gpt3-13b --cluster dgx-h100 --tp 8 --micro-batch 16 --seq-len 1024 --json");
  REQUIRE(s.code == 0);
  const auto js = nlohmann::json::parse(s.out);
  REQUIRE(js.contains("step_time_range_ms"));
  const double step = js["step_time_ms"], lo = js["step_time_range_ms"][0], hi = js["step_time_range_ms"][1];
  CHECK(lo < step);
  CHECK(step < hi);
  CHECK(js["step_time_range_basis"].get<std::string>().find("one node") != std::string::npos);
  // the profiled CPU model has no band: no range
  const auto p = run("simulate --model tiny --tp 2 --micro-batch 2 --profile cpu-epyc-2x --json");
  REQUIRE(p.code == 0);
  CHECK_FALSE(nlohmann::json::parse(p.out).contains("step_time_range_ms"));
  // tune: every listed plan carries its range and whether it overlaps the best plan's
  const auto t = run("tune --json --no-explain");
  REQUIRE(t.code == 0);
  const auto jt = nlohmann::json::parse(t.out);
  for (const auto& plan : jt["top"]) {
    CHECK(plan.contains("step_time_range_ms"));
    CHECK(plan.contains("within_best_range"));
  }
  CHECK(jt["top"][0]["within_best_range"] == true);  // the best plan is within its own range
  const auto text = run("tune --no-explain");
  CHECK(text.out.find("range") != std::string::npos);
  CHECK((text.out.find("indistinguishable within the model's error") != std::string::npos ||
         text.out.find("no other plan listed is within") != std::string::npos));
}

TEST_CASE("the recommendation is never slower than the baseline, even when only a baseline candidate simulates fastest") {
  // gpt3-13b on 2 DGX-H100 nodes at 100 Gbit/s per NIC: the plans screened best (by the
  // reduced-layer estimate) simulate whole at 4055 ms at best, while the best plan without overlap,
  // screened only as a baseline candidate, simulates whole at 3936 ms. Before the fix the ranking
  // left that plan out and recommended a plan 0.971x the baseline. Expected: every finalist simulated
  // whole is ranked, so the top plan's step time <= the baseline's (speedup >= 1).
  const auto r = run("whatif --model gpt3-13b --cluster dgx-h100 --nodes 2 --sweep nic_gbit_per_s=100 --json");
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto& res = j["points"][0]["result"];
  CHECK(res["top"][0]["step_time_ms"].get<double>() <= res["baseline"]["step_time_ms"].get<double>());
  CHECK(res["speedup"].get<double>() >= 1.0);
}
