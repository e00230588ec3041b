// slicetune tune: search plans (tp, dp, micro-batch, SP, strategy, slices, buckets) for the fastest step.
#include <fmt/format.h>

#include <iostream>
#include <tuple>

#include "bridge/export.hpp"
#include "cli/search_flags.hpp"
#include "cli/search_processes.hpp"
#include "sim/prediction_range.hpp"
#include "common/atomic_write.hpp"
#include "common/config_reader.hpp"
#include "common/memory_reuse.hpp"
#include "hardware/cost_model.hpp"
#include "tuner/compare.hpp"
#include "tuner/report.hpp"
#include "sim/report_json.hpp"
#include "tuner/pricing_cache.hpp"
#include "tuner/savers.hpp"

namespace {

struct TuneFlags : cli::SearchFlags {
  long long top = 5;
  std::string out, export_framework;
  bool json = false, exhaustive = false, no_explain = false;
};

void tune(const TuneFlags& f, const cli::SearchProcesses& procs) {
  auto [model, cluster, space] = cli::search_setup(f);
  cli::int_flag("--top", f.top, 1, 10000);
  if (procs.prints()) common::check_output_path(f.out, "--out");

  auto cost = f.target.cost_model(cluster, space.stack);
  // prediction ranges: the out-of-sample bands are of analytic predictions on GPUs
  const bool ranges = cost->describe() == "analytic" && cluster.gpu.arch != hardware::GpuArch::cpu;
  tuner::SearchOptions opt{.threads = static_cast<int>(f.threads),
                           .top_k = static_cast<int>(f.top),
                           .prune = !f.exhaustive,
                           .extra_full = 3,
                           .progress = {},
                           .distribution = procs.distribution(),
                           // the explained plans are finalists: their timelines come from the search
                           .keep_simulations = !f.no_explain && f.export_framework.empty() && procs.prints()};
  // The evaluator's caches (every GEMM and attention shape priced, the class graphs' bounds) serve
  // the search and then the tables below, and are left to the process's exit rather than freed:
  // freeing them took ~0.6 ms of a ~35 ms `tune` (common::keep_until_exit, docs/benchmarks.md)
  const auto& priced = common::keep_until_exit(std::make_unique<tuner::PricingCache>(*cost));
  const auto& ev = common::keep_until_exit(std::make_unique<tuner::Evaluator>(model, cluster, priced));
  opt.evaluator = &ev;
  // the memory savers' table simulates the recommended plan with each saver varied whole: asked of
  // the search for the plan its screening found fastest, so that those simulations share the
  // finalists' wait (tuner::explain_savers below finds them in `known`; were the recommendation
  // another plan, it simulates that one's variants itself)
  if (opt.keep_simulations)
    opt.also_simulate = [&ev](const sim::Plan& p) { return tuner::saver_simulations(ev.model(), ev.cluster(), p); };
  bool shown = false;
  if (procs.prints())
    opt.progress = [&shown](const tuner::Progress& p) {
      if (p.seconds < 1.0) return;
      shown = true;
      fmt::print(stderr, "\rslicetune tune: {}/{} feasible plans decided, {:.1f} s", p.done, p.total, p.seconds);
    };
  const tuner::SearchResult r = tuner::search(model, cluster, *cost, space, opt);
  if (shown) fmt::print(stderr, "\n");
  if (!procs.prints()) {  // under mpirun: rank 0 prints and writes what every process found
    if (r.top.empty()) throw common::ConfigError("tune", "", "no feasible plan");  // printed by rank 0
    return;
  }
  if (r.top.empty()) {
    if (f.json) {
      auto j = tuner::search_json(r, cluster, ranges);
      j["schema_version"] = cli::kJsonSchemaVersion;
      std::cout << j.dump(2) << "\n";
    }
    else fmt::print("{}", tuner::refusal_table(r));
    throw common::ConfigError("tune", "", fmt::format("no feasible plan for {} on {} x {} ({} plans refused; see the table above)",
                                                        model.name, cluster.nodes, cluster.name, r.infeasible));
  }
  const tuner::RankedPlan& best = r.top.front();
  if (!f.out.empty())
    common::write_file_atomically(
        f.out, sim::plan_to_yaml(best.plan, fmt::format("slicetune tune: best plan for {} on {} x {}: {:.2f} ms per step, {:.0f} tokens/s",
                                                        model.name, cluster.nodes, cluster.name, best.report.step_time.ms(),
                                                        best.report.tokens_per_s)));
  if (!f.export_framework.empty()) {
    const auto fw = bridge::parse_framework(f.export_framework, "--export");
    fmt::print(stderr, "slicetune tune: best plan {} ({:.2f} ms per step); exporting for {}\n", tuner::plan_label(best.plan),
               best.report.step_time.ms(), bridge::to_string(fw));
    std::cout << bridge::export_plan(fw, {.model = model, .cluster = cluster, .plan = best.plan,
                                          .headline = fmt::format("slicetune tune: best plan for {} on {} x {}: {} — predicted {:.2f} ms per step, {:.0f} tokens/s",
                                                                  model.name, cluster.nodes, cluster.name, tuner::plan_label(best.plan),
                                                                  best.report.step_time.ms(), best.report.tokens_per_s)});
    return;
  }
  std::vector<std::pair<std::string, tuner::LayerBreakdown>> why;
  std::vector<tuner::SaverRow> savers;
  std::vector<tuner::StrategyRow> by_strategy;
  if (!f.no_explain) {
    // the search simulated its finalists whole: a saver variant that is one of them is not simulated again
    std::vector<std::pair<const sim::Plan*, common::Duration>> known;
    for (const auto& q : r.top) known.emplace_back(&q.plan, q.report.step_time);
    for (const auto& q : r.per_strategy) known.emplace_back(&q.plan, q.report.step_time);
    if (r.baseline) known.emplace_back(&r.baseline->plan, r.baseline->report.step_time);
    for (const auto& [q, step] : r.also_simulated) known.emplace_back(&q, step);
    // the plans explained: the best, the runner-up (the best plan with another layout - tp,
    // micro-batch, SP, strategy, slices - not just another bucket size or row axis), the baseline;
    // explained from the search's timelines of them (keep_simulations above)
    std::vector<std::pair<std::string, const tuner::RankedPlan*>> explained{{"best", &best}};
    auto layout = [](const sim::Plan& q) {
      return std::tuple(q.tp, q.pp, q.vp, q.micro_batch, q.sequence_parallel, q.strategy, q.row_slices, q.col_slices);
    };
    for (std::size_t i = 1; i < r.top.size(); ++i)
      if (layout(r.top[i].plan) != layout(best.plan) || i + 1 == r.top.size()) {
        explained.emplace_back("runner-up", &r.top[i]);
        break;
      }
    if (r.baseline && r.baseline->index != best.index) explained.emplace_back("baseline", &*r.baseline);
    why.resize(explained.size());
    // Three tables, independent of each other, as jobs on the threads in one wait: the memory
    // savers (their simulations came with the search's, above: memory estimates only, unless the
    // recommendation is not the plan the screening found fastest), the strategy comparison
    // (~0.3 ms) and each plan's explanation (~0.3 ms each) (docs/benchmarks.md, 2026-12-07). The
    // savers keep the other threads where there are more than two.
    const int threads = tuner::thread_count(static_cast<int>(f.threads));
    tuner::parallel_for(2 + explained.size(), threads, [&](std::size_t job) {
      if (job == 0) {
        savers = tuner::explain_savers(ev, best.plan, std::max(1, threads - 1), known);
      } else if (job == 1) {
        by_strategy = tuner::compare_strategies(r, ev, 1);  // the search's own simulations; builds graphs for the TP volume only
      } else {
        const tuner::RankedPlan& q = *explained[job - 2].second;
        why[job - 2] = {explained[job - 2].first, tuner::explain_plan(ev, q.plan, q.simulated.get())};
      }
    });
  }
  if (f.json) {
    auto j = tuner::search_json(r, cluster, ranges);
    j["schema_version"] = cli::kJsonSchemaVersion;
    j["model"] = model.name;
    j["cost_model"] = cost->describe();
    j["best_plan_yaml"] = sim::plan_to_yaml(best.plan);
    if (!f.out.empty()) j["out"] = f.out;
    if (!why.empty()) j["explain"] = tuner::explain_json(why);
    if (!by_strategy.empty()) j["strategies"] = tuner::strategies_json(by_strategy, r);
    if (!savers.empty()) j["memory_savers"] = tuner::savers_json(savers);
    j["best_memory"] = sim::memory_json(best.report.memory);
    std::cout << j.dump(2) << "\n";
    return;
  }
  const auto& p = best.plan;
  fmt::print("slicetune tune: {} on {} ({} node{} x {} GPUs), global batch {} x {} tokens, {}, stack {}, {} cost model\n", model.name,
             cluster.name, cluster.nodes, cluster.nodes > 1 ? "s" : "", cluster.node.gpus_per_node, p.global_batch, p.seq_len,
             common::to_string(p.dtype), hardware::to_string(p.stack), cost->describe());
  fmt::print("searched {} plans in {:.2f} s on {} thread{}{} ({:.0f} plans/s): {} refused, {} skipped (a memory saver where the "
             "plan fits without it), {} pruned by lower bound, {} screened (reduced-layer simulation), {} simulated whole (max "
             "screening error {:.2g} %)\n\n",
             r.considered, r.seconds, r.threads, r.threads > 1 ? "s" : "",
             r.processes > 1 ? fmt::format(" x {} processes", r.processes) : std::string(), r.plans_per_second(), r.infeasible,
             r.dominated, r.pruned,
             r.screened, r.simulated_full, 100 * r.max_screen_error);
  fmt::print("{}\n", tuner::ranking_table(r, cluster, ranges));
  if (r.baseline)
    fmt::print("recommended: {} — {:.3f}x the best plan without overlap ({})\n", tuner::plan_label(p),
               r.baseline->report.step_time.s() / best.report.step_time.s(), tuner::plan_label(r.baseline->plan));
  if (ranges) {
    const auto same = tuner::indistinguishable_from_best(r, cluster);
    const auto band = sim::prediction_range(p, cluster, best.report.step_time).band;
    if (same.empty()) {
      fmt::print("no other plan listed is within the recommended plan's range ({} error {:+.0f} .. {:+.0f} %)\n", band->kind, 100 * band->low,
                 100 * band->high);
    } else {
      std::string names;
      for (const auto* q : same) names += (names.empty() ? "" : ", ") + (q == &*r.baseline ? "the baseline" : tuner::plan_label(q->plan));
      fmt::print("indistinguishable within the model's error (ranges overlap, {} error {:+.0f} .. {:+.0f} %): the recommended plan and {}\n",
                 band->kind, 100 * band->low, 100 * band->high, names);
    }
  }
  if (!f.out.empty()) fmt::print("wrote {} (slicetune simulate --plan {})\n", f.out, f.out);
  if (!r.refusals.empty()) fmt::print("\n{}", tuner::refusal_table(r));
  if (!by_strategy.empty())
    fmt::print("\nthe best plan of each strategy (simulated whole by the search):\n{}{}\n", tuner::strategy_table(by_strategy, r),
               tuner::strategy_verdict(by_strategy, r));
  bool pipelined = false;
  for (const auto& [name, b] : why) pipelined |= b.plan.pp > 1;
  if (!why.empty())
    fmt::print("\nwhy it wins (simulated timeline of the last micro-batch x micro-batches per step{}):\n{}",
               pipelined ? "; pipelined plans: every stage's timeline of the whole step" : "", tuner::explain_table(why));
  if (!savers.empty())
    fmt::print("\nwhat its memory savers cost and save (the recommended plan with each one varied alone, simulated whole):\n{}",
               tuner::savers_table(savers));
  if (!f.no_explain) fmt::print("\nmemory of the recommended plan:\n{}", sim::memory_table(best.plan, best.report.memory));
}

void run_tune(const TuneFlags& f) {
  const cli::SearchProcesses procs;  // mpirun -np N: the screening is split over N processes
  procs.guard([&] { tune(f, procs); });
}

const bool registered = cli::register_command(20, "tune", "search slicing/overlap plans for the fastest training step (default: gpt3-13b on one dgx-h100; " "under mpirun -np N the screening is split over N processes)", [](CLI::App* cmd) {
  auto f = std::make_shared<TuneFlags>();
  cli::add_search_flags(cmd, *f);
  cmd->footer(cli::kRangeHelp);
  cmd->add_option("--top", f->top, "plans in the table")->capture_default_str();
  cmd->add_option("--out", f->out, "write the best plan as YAML (for simulate --plan)");
  cmd->add_flag("--exhaustive", f->exhaustive, "screen every feasible plan (no lower-bound pruning)");
  cmd->add_flag("--no-explain", f->no_explain, "skip the per-layer explanation");
  cmd->add_flag("--json", f->json, "print one JSON object instead of the tables");
  cmd->add_option("--export", f->export_framework,
                  "print the best plan as a launch script for megatron | deepspeed-domino | nemo instead of the tables");
  cmd->callback([f] { run_tune(*f); });
});

}  // namespace
