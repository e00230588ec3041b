// Benchmark (not a test): step graphs built and simulated per second, one thread.
// Default workload: gpt3-13b on one dgx-h100, tp 8, micro-batch 16, seq 1024, domino 4 x 2.
//   bench_simulate [--seconds S | --iterations N] [--model M] [--cluster C] [--row-slices R] [--col-slices C]
//                  [--event-by-event 1]   (EngineOptions::fast_forward off: every event simulated)
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "hardware/cost_model.hpp"
#include "common/memory_reuse.hpp"
#include "sim/engine.hpp"
#include "sim/target.hpp"
#include "sim/strategy.hpp"

int main(int argc, char** argv) {
  common::keep_freed_memory();
  double seconds = 3.0;
  long max_iterations = -1;  // --iterations N: a fixed count (for instruction counting under callgrind)
  sim::TargetInput in{.model = "gpt3-13b", .cluster = "dgx-h100"};
  in.flags.tp = 8;
  in.flags.micro_batch = 16;
  in.flags.seq_len = 1024;
  in.flags.strategy = &sim::strategy_domino();
  in.flags.row_slices = 4;
  in.flags.col_slices = 2;
  sim::EngineOptions options;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--seconds") seconds = std::atof(argv[i + 1]);
    else if (k == "--iterations") max_iterations = std::atol(argv[i + 1]);
    else if (k == "--model") in.model = argv[i + 1];
    else if (k == "--cluster") in.cluster = argv[i + 1];
    else if (k == "--row-slices") in.flags.row_slices = std::atoi(argv[i + 1]);
    else if (k == "--col-slices") in.flags.col_slices = std::atoi(argv[i + 1]);
    else if (k == "--event-by-event") options.fast_forward = std::atoi(argv[i + 1]) == 0;
    else {
      fmt::print(stderr, "usage: bench_simulate [--seconds S | --iterations N] [--model M] [--cluster C] [--row-slices R] [--col-slices C] [--event-by-event 1]\n");
      return 2;
    }
  }
  const sim::Target t = sim::resolve_target(in);
  auto cost = hardware::make_analytic_cost_model(t.cluster, t.plan.stack);
  sim::Engine engine(*cost, options);
  using clock = std::chrono::steady_clock;
  // warm-up
  const sim::StepReport first = engine.simulate(sim::build_step_graph(t.model, t.cluster, t.plan));
  double sink = first.step_time.ms();
  std::size_t n = 0, tasks = 0;
  double build_s = 0, sim_s = 0;
  const auto t0 = clock::now();
  while (max_iterations >= 0 ? static_cast<long>(n) < max_iterations
                            : std::chrono::duration<double>(clock::now() - t0).count() < seconds) {
    const auto a = clock::now();
    sim::StepGraph g = sim::build_step_graph(t.model, t.cluster, t.plan);
    const auto b = clock::now();
    sink += engine.simulate(g).step_time.ms();
    const auto c = clock::now();
    build_s += std::chrono::duration<double>(b - a).count();
    sim_s += std::chrono::duration<double>(c - b).count();
    tasks = g.size();
    ++n;
  }
  const double total = build_s + sim_s;
  fmt::print("bench_simulate: {} on {}, {} ({} tasks per graph){}\n", t.model.name, t.cluster.name, sim::describe(t.plan), tasks,
             options.fast_forward ? "" : ", every event simulated");
  fmt::print("{:>12} {:>14} {:>14} {:>16} {:>10} {:>10}\n", "iterations", "build (us)", "simulate (us)", "graphs/s (1 core)", "events",
             "repeated");
  fmt::print("{:>12} {:>14.1f} {:>14.1f} {:>16.0f} {:>10} {:>10}\n", n, 1e6 * build_s / n, 1e6 * sim_s / n, n / total, first.events,
             first.repeated_events);
  return sink > 0 ? 0 : 1;
}
