// defines: tuner::search (enumerate -> refuse infeasible -> bound -> screen -> simulate -> rank),
//          SearchOptions, SearchResult, RankedPlan, Refusal, parallel_for, thread_count, start_threads
#pragma once
#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/pipeline_step.hpp"
#include "tuner/evaluate.hpp"
#include "tuner/space.hpp"

namespace tuner {

/// @brief `threads`, or the machine's cores where it is 0 or less: how many threads parallel_for
/// and SearchOptions::threads mean.
int thread_count(int threads);

/// @brief Runs fn(i) for i in [0, n) on `threads` threads (0: the machine's cores). Each i runs
/// exactly once; callers write results into slot i, so the outcome never depends on scheduling.
void parallel_for(std::size_t n, int threads, const std::function<void(std::size_t)>& fn);

/// @brief Starts parallel_for's threads for `threads` (0: the machine's cores) now rather than at
/// its first call, each faulting in the first `prefault` bytes of its malloc arena, the first one
/// also of the main heap (common::prefault_heap), before it waits for work - or until the first job
/// is posted, which it then joins (the pages left fault in as they are used). The slicetune program
/// calls it as `tune` and `whatif` start: the threads' start-up and the page faults the search
/// would take then overlap the command's reading of its configs (docs/benchmarks.md).
void start_threads(int threads, std::size_t prefault = 0);

/// @brief Where a search is; passed to SearchOptions::progress after each round.
struct Progress {
  std::size_t done = 0, total = 0;  ///< candidates decided (screened or pruned) of those feasible
  double seconds = 0;
};

/// @brief The processes of a job (mpirun -np N) that share one search: each screens its share of
/// every round and an all-gather gives every process every estimate, so all of them prune alike and
/// the result is the same as one process's. size 1: no sharing. The tuner knows no MPI: the caller
/// supplies the all-gather (cli/tune.cpp: MPI_Allgatherv).
struct Distribution {
  int rank = 0, size = 1;
  /// Every process's `mine`, in rank order. All processes call it the same number of times.
  std::function<std::vector<std::string>(const std::string& mine)> allgather;
};

struct SearchOptions {
  int threads = 0;        ///< 0: std::thread::hardware_concurrency()
  int top_k = 5;          ///< plans in the final table
  bool prune = true;      ///< false: screen every feasible plan (exhaustive)
  int extra_full = 3;     ///< full simulations beyond top_k, against screening error
  std::function<void(const Progress&)> progress;
  Distribution distribution;  ///< screening split over processes (the finalists are simulated by each)
  /// The finalists simulated with timelines, kept (RankedPlan::simulated), for what reads them
  /// afterwards (explain_plan) instead of simulating the same plans again.
  bool keep_simulations = false;
  /// Full lower bounds computed per job on the threads (at least 1): the candidates on top of the
  /// queue with cheap bounds, up to the first with its full bound. It changes how the bounds are
  /// split into jobs (and at most how many are computed ahead of a round), never which plans are
  /// screened nor any result (tests/tuner/test_search.cpp).
  std::size_t bound_batch = 256;
  /// The evaluator to price, bound and simulate with, built by the caller over this search's
  /// `model` and `cluster` (the same objects), `cost` or a PricingCache of it, and 1 short layer
  /// (else std::invalid_argument): its caches - prices, the class graphs' bounds - then serve what
  /// the caller computes after the search (the CLI's tables) and are freed when the caller
  /// chooses. Null: the search makes its own (over a PricingCache of `cost`) and frees it at its
  /// end. The result is the same either way (bound_classes: the class graphs this search built).
  const Evaluator* evaluator = nullptr;
  /// Plans the caller will want simulated whole once the search is over, asked for with the plan
  /// the screening estimated fastest (usually the recommendation): the search simulates them (those
  /// that are not finalists) with its finalists, on the same threads in the same wait, and returns
  /// their step times (SearchResult::also_simulated). Called once, on the calling thread; empty:
  /// nothing more is simulated. It changes no ranking, count or other result.
  std::function<std::vector<sim::Plan>(const sim::Plan& screened_best)> also_simulate;
};

/// @brief A plan that was simulated whole, with its reduced-layer estimate.
struct RankedPlan {
  std::size_t index = 0;  ///< position in enumeration order (the tie-break)
  sim::Plan plan;
  Estimate estimate;
  sim::StepReport report;
  /// SearchOptions::keep_simulations: the whole simulation `report` comes from with its timelines
  /// (report is simulated->report without them) but not its graphs (no graphs: explain_plan
  /// rebuilds them, SimulatedPlan::graphs_plan); otherwise null.
  std::shared_ptr<const sim::SimulatedPlan> simulated;
};

/// @brief Plans refused for one reason, with an example: the first such plan, or for memory the one
/// closest to fitting.
struct Refusal {
  sim::Infeasibility reason;
  std::size_t count = 0;
  sim::Plan example;
  std::string message;
};

/// @brief A strategy searched without a feasible plan: how many of its plans were refused, and
/// the message of the first plan refused for the reason that refused most of them.
struct StrategyRefusal {
  const sim::Strategy* strategy = nullptr;
  std::size_t plans = 0;
  std::string message;
};

struct SearchResult {
  std::vector<RankedPlan> top;          ///< best first by full-simulation step time (ties: enumeration order)
  std::optional<RankedPlan> baseline;   ///< the best plan of the baseline strategy (Strategy::baseline: none), full simulation
  /// The best plan of each strategy searched, fastest first, from the finalists' full simulations:
  /// the screening keeps a plan while it can beat its strategy's best estimate so far, and each
  /// strategy's best estimate is a finalist, so comparing strategies simulates nothing more. A
  /// strategy with no feasible plan is absent.
  std::vector<RankedPlan> per_strategy;
  std::vector<const sim::Strategy*> strategies;  ///< the strategies searched, in registry order
  std::vector<StrategyRefusal> without_plan;     ///< the strategies searched that have no entry in per_strategy, registry order
  std::size_t considered = 0;           ///< plans enumerated
  std::size_t infeasible = 0;           ///< refused: divisibility, shape or memory
  std::size_t dominated = 0;            ///< fit, skipped: a memory saver the same plan fits without (search's comment)
  std::size_t pruned = 0;               ///< feasible, skipped because their lower bound cannot beat the incumbents
  std::size_t screened = 0;             ///< evaluated: reduced-layer simulations, extrapolated
  std::size_t full_bounds = 0;          ///< candidates whose compute_lower_bound was computed (the others were pruned by the cheap bound)
  std::size_t bound_classes = 0;        ///< one-layer class graphs compute_lower_bound built (tp_channels siblings share one)
  std::size_t simulated_full = 0;       ///< whole-model simulations (the final ranking)
  /// SearchOptions::also_simulate's plans with their whole-simulation step times (a finalist's
  /// from its own simulation), in the order asked, each once.
  std::vector<std::pair<sim::Plan, common::Duration>> also_simulated;
  std::vector<Refusal> refusals;        ///< one per reason seen, in Infeasibility order
  int processes = 1;                    ///< options.distribution.size
  double max_screen_error = 0;          ///< max |estimate - full| / full over the fully simulated plans
  double seconds = 0;
  /// Wall seconds of each phase: enumerate + check_plan (the cheap lower bounds and the candidates'
  /// heaps included), memory + dominance, the queue's set-up before the first round (`bound`: ~0
  /// since those heaps are made in the parts), the screening rounds (with the full lower bounds they
  /// compute), whole simulations (bench_tune prints them; they sum to about `seconds`).
  struct Phases {
    double enumerate = 0, memory = 0, bound = 0, screen = 0, whole = 0;
  } phases;
  int threads = 1;

  double plans_per_second() const { return seconds > 0 ? static_cast<double>(considered) / seconds : 0.0; }
  double screened_per_second() const { return seconds > 0 ? static_cast<double>(screened) / seconds : 0.0; }
};

/// @brief Searches `space` for the fastest plan of `model` on `cluster`.
/// 1. enumerate; 2. refuse plans that fail sim::check_plan or do not fit the GPU's memory with its
/// fragmentation reserve (sim::estimate_memory), skip memory savers a plan fits without (more
/// recompute, a higher ZeRO stage >= 2) and add full recompute of the fewest layers that fit (block
/// method); 3. sort the rest by Evaluator::compute_lower_bound;
/// 4. in rounds of 64 (fixed, so independent of the thread count), screen candidates in parallel
/// with reduced-layer estimates, refusing those whose estimated memory exceeds the GPU's, and prune
/// every candidate whose lower bound is >= the (top_k + extra_full)-th best estimate so far (plans
/// without overlap are kept while they can still beat the third best such estimate: they give the
/// baseline; any plan while it can beat its strategy's best estimate: per_strategy); 5. simulate
/// the best top_k + extra_full estimates, the three best non-overlapping ones, the best of each
/// pipeline depth (pp) and of each strategy whole, and rank them by the full simulation.
/// Deterministic: the same
/// result, counts included, for any thread count and any options.distribution.size (timings aside).
SearchResult search(const sim::ModelSpec& model, const hardware::ClusterSpec& cluster, const hardware::CostModel& cost,
                    const SearchSpace& space, const SearchOptions& options = {});

}  // namespace tuner
