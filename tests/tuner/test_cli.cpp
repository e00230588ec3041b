// The tune and whatif commands end to end (the slicetune binary).
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/tuner/cli_run.hpp"

namespace {

using tuner_test::Run;
Run run(const std::string& args) { return tuner_test::run_slicetune(args, false); }

std::string tmp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("slicetune-test-" + std::to_string(::getpid()) + "-" + name)).string();
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("tune --out writes a plan that simulate accepts, with the same step time") {
  // The tuner ranks by whole-model simulation, so simulate --plan of the written plan must print
  // the same step time as the tuner's best row.
  const std::string plan = tmp("plan.yaml");
  // The default recommendation must fit with the fragmentation reserve (issue 12): its memory
  // breakdown's total within what the cluster lets a plan use.
  const auto t = run("tune --json --top 2 --no-explain --out " + plan);
  REQUIRE(t.rc == 0);
  const auto j = nlohmann::json::parse(t.out);
  REQUIRE(j["top"].size() == 2);
  CHECK(j["baseline"]["plan"]["strategy"] == "none");
  CHECK(j["speedup"].get<double>() >= 1.0);
  CHECK(j["best_memory"]["fits"].get<bool>());
  CHECK(j["best_memory"]["total_gb"].get<double>() <= j["best_memory"]["usable_gb"].get<double>());
  CHECK(j["best_memory"]["usable_gb"].get<double>() == doctest::Approx(76.0));  // 80 GB less 5 %
  const auto s = run("simulate --json --plan " + plan);
  REQUIRE(s.rc == 0);
  const auto k = nlohmann::json::parse(s.out);
  CHECK(k["step_time_ms"].get<double>() == doctest::Approx(j["top"][0]["step_time_ms"].get<double>()).epsilon(1e-12));
  std::filesystem::remove(plan);
}

TEST_CASE("tune on the default model compares the best plan of each strategy and says which wins") {
  const auto t = run("tune");
  REQUIRE(t.rc == 0);
  const auto at = t.out.find("the best plan of each strategy");
  REQUIRE(at != std::string::npos);
  // one row per strategy searched, each with a plan (on one DGX-H100 every strategy has one)
  std::istringstream rows(t.out.substr(at));
  std::string line;
  std::getline(rows, line);  // the title
  std::getline(rows, line);  // header
  std::getline(rows, line);  // units
  // six strategies, then the two SUMMA grids (searched by default, slower here: last)
  std::vector<std::string> names;
  for (int i = 0; i < 8 && std::getline(rows, line); ++i) {
    names.push_back(line.substr(0, line.find(' ')));
    CHECK(line.find("no feasible plan") == std::string::npos);
    if (i >= 6) CHECK(line.find(" summa ") != std::string::npos);
  }
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"2.5d", "2d", "async-tp", "domino", "fused", "none", "te-bulk", "te-pipelined"});
  std::getline(rows, line);  // the verdict: the winner is the recommended plan's strategy
  const auto j = nlohmann::json::parse(run("tune --json").out);
  const std::string winner = j["top"][0]["plan"]["strategy"];
  CHECK(line.rfind(winner + " wins", 0) == 0);
  CHECK(line.find("the largest gain is") != std::string::npos);
  CHECK(j["strategies"]["verdict"] == line);
  REQUIRE(j["strategies"]["rows"].size() == 8);
  CHECK(j["strategies"]["rows"][7]["name"] == "2.5d summa");
  CHECK(j["strategies"]["rows"][0]["best"]["describe"] == j["top"][0]["describe"]);
}

TEST_CASE("bad input: one-line errors and exit code 2") {
  CHECK(run("tune --top 0").rc == 2);
  CHECK(run("tune --global-batch -4").rc == 2);
  CHECK(run("whatif --sweep bogus_key=1,2").rc == 2);
  CHECK(run("whatif --sweep nic_gbit_per_s=100,abc").rc == 2);
  CHECK(run("whatif --sweep nic_gbit_per_s=100 --plot chart.pdf").rc == 2);
}

TEST_CASE("whatif: a table, a CSV with one row per point, and a chart") {
  // Two NIC speeds for gpt3-2.7b on two DGX-H100 nodes: 2 points -> a header and 2 CSV rows.
  const std::string csv = tmp("w.csv");
  const auto w = run("whatif --model gpt3-2.7b --nodes 2 --global-batch 32 --sweep nic_gbit_per_s=100,400 --csv " + csv);
  REQUIRE(w.rc == 0);
  CHECK(w.out.find("nic_gbit_per_s") != std::string::npos);
  const std::string text = slurp(csv);
  CHECK(std::count(text.begin(), text.end(), '\n') == 3);
  CHECK(text.rfind("nic_gbit_per_s,baseline_step_ms,", 0) == 0);
  if (std::system("command -v gnuplot >/dev/null 2>&1") == 0) {
    const std::string png2 = tmp("w2.png");
    const auto p = run("whatif --model gpt3-2.7b --nodes 2 --global-batch 32 --sweep nic_gbit_per_s=100,400 --plot " + png2);
    REQUIRE(p.rc == 0);
    const std::string img = slurp(png2);
    REQUIRE(img.size() > 8);
    CHECK(img.substr(1, 3) == "PNG");  // PNG signature: \x89 P N G
    std::filesystem::remove(png2);
  }
  std::filesystem::remove(csv);
}
