// Benchmark (not a test): plans per second of tuner::search.
// Workloads (each run --repeat times, best wall time kept):
//   1. gpt3-175b on 16 dgx-h100 nodes, wide space (>= 10,000 plans): the target workload.
//      Without ZeRO no plan fits (tp <= 32 needs >= 98 GB of weights, gradients and Adam state per
//      GPU; tp 64 / 128 do not divide 96 heads); the space searches ZeRO 0-3, recompute and the
//      attention kernel too (issue 12), so plans with ZeRO are bounded, screened and simulated.
//   2. the same space on 16 dgx-h200 nodes (141 GB).
//   3. the default `slicetune tune` (gpt3-13b, one dgx-h100).
//   bench_tune [--threads T] [--repeat N] [--only default|wide]
// After the table: the wall seconds of each search phase (tuner::SearchResult::phases) of the best run.
#include <fmt/format.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "hardware/cost_model.hpp"
#include "common/memory_reuse.hpp"
#include "tuner/search.hpp"

namespace {

std::vector<std::string> phases;  // one line per workload, printed after the table

tuner::SearchSpace wide_space() {
  tuner::SearchSpace s;
  s.knob_values["row_slices"] = {1, 2, 4, 8, 16};
  s.knob_values["col_slices"] = {1, 2, 4, 8};
  s.dp_bucket_mb = {25, 50, 100, 200};
  return s;
}

void bench(const std::string& label, const std::string& model, const std::string& cluster, int nodes, const tuner::SearchSpace& space,
           int threads, int repeat) {
  const auto m = sim::load_model(model);
  auto c = hardware::load_cluster(cluster);
  c.nodes = nodes;
  auto cost = hardware::make_analytic_cost_model(c, space.stack);
  tuner::SearchOptions o;
  o.threads = threads;
  tuner::SearchResult best;
  for (int i = 0; i < repeat; ++i) {
    auto r = tuner::search(m, c, *cost, space, o);
    if (i == 0 || r.seconds < best.seconds) best = std::move(r);
  }
  const auto& r = best;
  fmt::print("{:<34} {:>8} {:>10} {:>8} {:>9} {:>6} {:>9.3f} {:>10.0f} {:>11.0f}  {}\n", label, r.considered, r.infeasible, r.pruned,
             r.screened, r.simulated_full, r.seconds, r.plans_per_second(), r.screened_per_second(),
             r.top.empty() ? std::string("no feasible plan") : sim::describe(r.top[0].plan));
  phases.push_back(fmt::format("{:<34} {:>10.1f} {:>8.1f} {:>8.1f} {:>8.1f} {:>8.1f} {:>12} {:>8}", label, 1e3 * r.phases.enumerate, 1e3 * r.phases.memory,
                               1e3 * r.phases.bound, 1e3 * r.phases.screen, 1e3 * r.phases.whole, r.full_bounds, r.bound_classes));
}

}  // namespace

int main(int argc, char** argv) {
  common::keep_freed_memory();
  common::use_huge_pages();  // as tune and whatif do
  int threads = 0, repeat = 3;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--threads") threads = std::atoi(argv[i + 1]);
    else if (k == "--repeat") repeat = std::max(1, std::atoi(argv[i + 1]));
    else if (k == "--only" && (std::string(argv[i + 1]) == "default" || std::string(argv[i + 1]) == "wide")) only = argv[i + 1];
    else {
      fmt::print(stderr, "usage: bench_tune [--threads T] [--repeat N] [--only default|wide]\n");
      return 2;
    }
  }
  fmt::print("bench_tune: tuner::search, {} thread(s) (0 = all cores), best of {}\n", threads, repeat);
  fmt::print("{:<34} {:>8} {:>10} {:>8} {:>9} {:>6} {:>9} {:>10} {:>11}  {}\n", "workload", "plans", "infeasible", "pruned", "screened",
             "whole", "wall (s)", "plans/s", "screened/s", "best plan");
  if (only != "default") {
    bench("gpt3-175b 16x dgx-h100 (wide)", "gpt3-175b", "dgx-h100", 16, wide_space(), threads, repeat);
    bench("gpt3-175b 16x dgx-h200 (wide)", "gpt3-175b", "dgx-h200", 16, wide_space(), threads, repeat);
  }
  if (only != "wide") bench("gpt3-13b 1x dgx-h100 (default)", "gpt3-13b", "dgx-h100", 1, tuner::SearchSpace{}, threads, repeat);
  fmt::print("\nphases of the best run (wall ms) and the full lower bounds computed (of the classes' graphs built):\n{:<34} {:>10} {:>8} {:>8} {:>8} {:>8} {:>12} {:>8}\n",
             "workload", "enumerate", "memory", "bound", "screen", "whole", "full bounds", "classes");
  for (const auto& l : phases) fmt::print("{}\n", l);
  return 0;
}
