// Distributed search: `mpirun -np N slicetune tune` splits the screening over N processes and
// gathers every estimate to every process, so all of them prune alike: the same answer, counts
// included, as one process (tuner::search's contract; only timings differ).
#ifdef SLICETUNE_HAVE_EXECUTOR
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/hardening/process.hpp"

using namespace hardening;

namespace {

/// The tune JSON without what depends on the run (timings, threads, processes).
nlohmann::json without_timings(const std::string& text) {
  auto j = nlohmann::json::parse(text);
  for (const char* k : {"seconds", "plans_per_s", "screened_per_s", "threads", "processes"}) j["search"].erase(k);
  return j;
}

}  // namespace

TEST_CASE("mpirun -np 2 slicetune tune prints the same recommendation as one process") {
  // gpt3-13b on 4 dgx-h100 nodes: ~1,500 plans, several screening rounds of 64, pruning between
  // rounds (the rounds where a process's share differs are where a wrong gather would show)
  const std::vector<std::string> args{"tune", "--model", "gpt3-13b", "--nodes", "4", "--threads", "1", "--no-explain"};
  const auto one = slicetune(args, 300);
  REQUIRE(one.code == 0);
  auto mp = args;
  mp.emplace_back("--json");
  auto one_json_args = args;
  one_json_args.emplace_back("--json");
  const auto one_json = slicetune(one_json_args, 300);
  const auto two_json = run(mpirun_argv(2, mp), 300);
  INFO(two_json.err);
  REQUIRE(one_json.code == 0);
  REQUIRE(two_json.code == 0);
  const auto a = without_timings(one_json.out), b = without_timings(two_json.out);
  CHECK(a["search"]["screened"].get<int>() > 64);  // more than one round was screened
  CHECK(b == a);                                   // every plan, estimate, count and refusal
  CHECK(nlohmann::json::parse(two_json.out)["search"]["processes"] == 2);
  // the table form: the same recommendation line, printed once (rank 0)
  const auto two = run(mpirun_argv(2, args), 300);
  REQUIRE(two.code == 0);
  auto line = [](const std::string& out) {
    const auto at = out.find("recommended: ");
    return at == std::string::npos ? std::string("none") : out.substr(at, out.find('\n', at) - at);
  };
  CHECK(line(one.out) != "none");
  CHECK(line(two.out) == line(one.out));
  CHECK(two.out.find("x 2 processes") != std::string::npos);
  CHECK(two.out.find("recommended: ", two.out.find("recommended: ") + 1) == std::string::npos);
}

#endif
