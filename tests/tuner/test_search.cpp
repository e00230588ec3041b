// tuner::search: a hand-worked optimum, refusals with reasons, determinism across thread counts.
#include <doctest/doctest.h>

#include <condition_variable>
#include <map>
#include <span>
#include <mutex>
#include <thread>

#include "common/config_error.hpp"
#include "hardware/cost_model.hpp"
#include "tests/tuner/toy.hpp"
#include "sim/memory.hpp"
#include "tuner/pricing_cache.hpp"
#include "tuner/savers.hpp"
#include "tuner/search.hpp"
#include "sim/strategy.hpp"

namespace {

tuner::SearchSpace toy_space() {
  tuner::SearchSpace s;
  s.tp = {1};
  s.strategies = {&sim::strategy_none(), &sim::strategy_domino()};  // the counts below are theirs
  s.micro_batch = {1, 2, 4, 8};
  s.knob_values["row_slices"] = {1, 2, 4};
  s.knob_values["col_slices"] = {1, 2};
  s.dp_bucket_mb = {25};
  s.global_batch = 8;
  // memory savers held at one setting: no ZeRO (one GPU), no recompute, flash attention
  s.zero = {0};
  s.recompute = {sim::Recompute::none};
  s.attention = {hardware::AttentionKernel::flash};
  s.block_recompute = false;
  return s;
}

/// Two searches of one space give the same result: the same counts, the same screening error and
/// the same ranking (each plan's index and whole-simulation step time, to the picosecond).
void check_same_result(const tuner::SearchResult& a, const tuner::SearchResult& b) {
  CHECK(a.considered == b.considered);
  CHECK(a.infeasible == b.infeasible);
  CHECK(a.dominated == b.dominated);
  CHECK(a.pruned == b.pruned);
  CHECK(a.screened == b.screened);
  CHECK(a.max_screen_error == b.max_screen_error);
  REQUIRE(a.top.size() == b.top.size());
  for (std::size_t i = 0; i < a.top.size(); ++i) {
    CHECK(a.top[i].index == b.top[i].index);
    CHECK(a.top[i].report.step_time == b.top[i].report.step_time);
  }
}

}  // namespace

TEST_CASE("one GPU, toy model: the optimum worked out by hand") {
  // Space: tp 1 on one GPU, global batch 8, micro-batch {1,2,4,8}, none or domino with row slices
  // {1,2,4} (batch or sequence axis) and column chunks {1,2}.
  // Memory (hand-derived in test_memory_bounds): 62,014,464 B static + 33,856 B per token of a
  // micro-batch of 128-token sequences, plus the largest temporary, the loss's fp32 logits and
  // their gradient (8 B x 1024 vocabulary per token): mb 4 needs 62.01 + 17.33 + 4.19 = 83.5 MB,
  // mb 8 needs 62.01 + 34.67 + 8.39 = 105.1 MB. With 88 MB per GPU (toy::cluster: no CUDA
  // context, no reserve) every mb-8 plan is refused for memory.
  // Time: every kernel of this model takes a few us (one wave of tiles) while eager PyTorch
  // issues one op per 12 us, so the step is launch-bound: step ~ 12 us x ops per step. Ops per
  // step = micro-batches x ops per micro-batch; row slices and column chunks only multiply ops
  // (one GPU: nothing to overlap). So the optimum is the largest micro-batch that fits, 4
  // (2 micro-batches), unsliced. At tp 1 there are no TP collectives, so Megatron and domino 1x1
  // build the same graph and tie exactly; the tie goes to enumeration order: strategy none.
  const auto m = toy::model();
  const auto c = toy::cluster(1, 88e6);
  auto cost = hardware::make_analytic_cost_model(c, hardware::Stack::eager);
  tuner::SearchOptions o;
  o.threads = 2;
  o.top_k = 3;
  const auto r = tuner::search(m, c, *cost, toy_space(), o);
  REQUIRE(r.top.size() == 3);
  const auto& best = r.top[0].plan;
  CHECK(best.micro_batch == 4);
  CHECK(best.strategy == &sim::strategy_none());
  CHECK(best.row_slices == 1);
  CHECK(best.col_slices == 1);
  CHECK(r.top[1].plan.strategy == &sim::strategy_domino());
  CHECK(r.top[1].plan.micro_batch == 4);
  CHECK(r.top[1].plan.row_slices == 1);
  CHECK(r.top[1].plan.col_slices == 1);
  CHECK(r.top[1].report.step_time == r.top[0].report.step_time);
  REQUIRE(r.baseline);
  CHECK(r.baseline->index == r.top[0].index);
  // refused: the 22 plans at mb 8 (memory) minus those refused earlier for divisibility (none
  // here: 8 sequences and 128 positions divide by 1, 2, 4), plus row slices not dividing the
  // micro-batch on the batch axis: mb 1 with rs 2, 4 (x 2 column chunks) = 4, mb 2 with rs 4 (x2) = 2.
  // Plans per micro-batch: none 1 + domino rs 1 (cs 1, 2) 2 + rs {2,4} x axis {batch, sequence} x cs {1,2} 8 = 11.
  CHECK(r.considered == 44);
  std::size_t mem = 0, rows = 0;
  for (const auto& f : r.refusals) {
    if (f.reason == sim::Infeasibility::memory) mem = f.count;
    if (f.reason == sim::Infeasibility::row_slices_batch) rows = f.count;
  }
  CHECK(mem == 11);
  CHECK(rows == 6);
  CHECK(r.infeasible == 17);
  CHECK(r.pruned + r.screened == 44 - 17);
}

TEST_CASE("infeasible plans are counted by reason, with an example and a message") {
  // gpt3-13b on one DGX-H100, tp {1, 8}, micro-batch {1, 2}, none or domino with row slices
  // {1, 2, 4} on the batch axis, one bucket size, global batch 16: 2 tp x 2 mb x 4 = 16 plans.
  // tp 1: weights + grads + Adam = 18 B x 12.85 B params = 231 GB > 76 GB usable, so every plan there that
  // passes the divisibility checks is refused for memory: mb 1: none, domino 1 (2); mb 2: none,
  // domino 1, domino 2 (3) -> 5. Row slices not dividing the micro-batch: mb 1 with rs 2, 4 and
  // mb 2 with rs 4, at both tp -> 6. tp 8: 29 GB static + at most 2 sequences of activations: fits.
  const auto m = sim::load_model("gpt3-13b");
  const auto c = hardware::load_cluster("dgx-h100");
  auto cost = hardware::make_analytic_cost_model(c, hardware::Stack::eager);
  tuner::SearchSpace s;
  s.tp = {1, 8};
  s.pp = {1};  // no pipelining: the counts below are of the tp x mb x strategy space
  s.micro_batch = {1, 2};
  s.sequence_parallel = {false};
  s.strategies = {&sim::strategy_none(), &sim::strategy_domino()};
  s.knob_values["row_slices"] = {1, 2, 4};
  s.knob_values["row_axis"] = {static_cast<int>(sim::RowAxis::batch)};
  s.knob_values["col_slices"] = {1};
  s.knob_values["tp_channels"] = {0};  // NCCL's choice: the counts below do not cross channel budgets
  s.tp_layouts = {sim::TpLayout::one_d};  // nor grids (tp 8 = 2^2 x 2 would add 2.5D plans)
  s.dp_bucket_mb = {25};
  s.global_batch = 16;
  // memory savers at their defaults: no ZeRO, no recompute, the cluster's (unfused) attention
  s.zero = {0};
  s.recompute = {sim::Recompute::none};
  s.attention = {hardware::AttentionKernel::unfused};
  s.block_recompute = false;
  tuner::SearchOptions o;
  o.threads = 2;
  o.top_k = 2;
  const auto r = tuner::search(m, c, *cost, s, o);
  CHECK(r.considered == 16);
  CHECK(r.infeasible == 11);
  REQUIRE(r.refusals.size() == 2);
  CHECK(r.refusals[0].reason == sim::Infeasibility::row_slices_batch);
  CHECK(r.refusals[0].count == 6);
  CHECK(r.refusals[0].message == "micro_batch=1 is not divisible by row_slices=2 (row_axis batch)");
  CHECK(r.refusals[1].reason == sim::Infeasibility::memory);
  CHECK(r.refusals[1].count == 5);
  CHECK(r.refusals[1].example.tp == 1);
  CHECK(r.refusals[1].message.find("231.") != std::string::npos);
  CHECK(r.pruned + r.screened == 5);
  REQUIRE_FALSE(r.top.empty());
  CHECK(r.top[0].plan.tp == 8);
}

TEST_CASE("the same result for 1 and 3 threads, and pruning does not change the winner") {
  // Determinism: rounds have a fixed size and results are merged in lower-bound order, so counts,
  // ranking and times must match bit for bit. Soundness of pruning: a pruned plan's lower bound
  // is >= the incumbents' estimates, so the exhaustive search must pick the same best plan.
  const auto m = sim::load_model("gpt3-13b");
  auto c = hardware::load_cluster("dgx-h100");
  c.nodes = 2;
  auto cost = hardware::make_analytic_cost_model(c, hardware::Stack::eager);
  tuner::SearchSpace s;
  s.global_batch = 32;
  s.micro_batch = {1, 2, 4};
  tuner::SearchOptions o1;
  o1.threads = 1;
  tuner::SearchOptions o3 = o1;
  o3.threads = 3;
  // progress: called after every round of 64 candidates; the last call has done == total
  std::size_t calls = 0;
  tuner::Progress last;
  o1.progress = [&](const tuner::Progress& p) {
    ++calls;
    last = p;
  };
  const auto a = tuner::search(m, c, *cost, s, o1);
  CHECK(calls >= 1);
  CHECK(last.done == last.total);
  CHECK(last.total == a.considered - a.infeasible - a.dominated);
  const auto b = tuner::search(m, c, *cost, s, o3);
  check_same_result(a, b);
  REQUIRE(a.baseline);
  REQUIRE(b.baseline);
  CHECK(a.baseline->index == b.baseline->index);
  CHECK(a.pruned > 0);

  // soundness, on a part of the space small enough to screen every candidate (all 39,975 of the
  // whole space took 90 s in Release, most of the ASan suite's tuner time; this part's 4,750, 10 s):
  // pipelines of 1 or 2 stages (interleaved in 2 or not), micro-batches of 2, every strategy, knob
  // and saver
  tuner::SearchSpace part = s;
  part.pp = {1, 2};
  part.micro_batch = {2};
  part.vp = {1, 2};
  const auto p = tuner::search(m, c, *cost, part, o3);
  CHECK(p.pruned > 0);
  tuner::SearchOptions ex = o3;
  ex.prune = false;
  const auto e = tuner::search(m, c, *cost, part, ex);
  CHECK(e.pruned == 0);
  CHECK(e.screened == p.screened + p.pruned);
  REQUIRE_FALSE(e.top.empty());
  REQUIRE_FALSE(p.top.empty());
  CHECK(e.top[0].index == p.top[0].index);
  REQUIRE(e.baseline);
  REQUIRE(p.baseline);
  CHECK(e.baseline->index == p.baseline->index);
}

TEST_CASE("a caller's evaluator: the same result as the search's own, its caches kept for what follows, one over other inputs refused") {
  // SearchOptions::evaluator: the CLI's tables read the search's caches afterwards. The result must
  // be the one a search with its own evaluator gives (check_same_result), bound_classes counts the
  // class graphs this search built (all of them the first time, none when the caches already hold
  // them), and an evaluator over another model, cluster or cost model is refused
  const auto m = sim::load_model("gpt3-13b");
  const auto c = hardware::load_cluster("dgx-h100");
  auto cost = hardware::make_analytic_cost_model(c, hardware::Stack::eager);
  tuner::SearchOptions o;
  o.threads = 2;
  const auto own = tuner::search(m, c, *cost, tuner::SearchSpace{}, o);
  CHECK(own.bound_classes > 50);  // the default space builds 111 (docs/benchmarks.md)
  const tuner::PricingCache priced(*cost);
  const tuner::Evaluator ev(m, c, priced);
  tuner::SearchOptions given = o;
  given.evaluator = &ev;
  const auto first = tuner::search(m, c, *cost, tuner::SearchSpace{}, given);
  check_same_result(own, first);
  CHECK(first.bound_classes == own.bound_classes);
  CHECK(ev.bound_classes() == own.bound_classes);  // the caller's evaluator holds them
  const auto again = tuner::search(m, c, *cost, tuner::SearchSpace{}, given);
  check_same_result(own, again);
  CHECK(again.bound_classes == 0);  // every class graph's bound came from the kept caches
  // the evaluator straight over the cost model (no PricingCache) is accepted too
  const tuner::Evaluator plain(m, c, *cost);
  given.evaluator = &plain;
  check_same_result(own, tuner::search(m, c, *cost, tuner::SearchSpace{}, given));
  // over other inputs: another model object (even an equal one), another cluster, another cost model
  const auto m2 = m;
  const auto c2 = c;
  auto cost2 = hardware::make_analytic_cost_model(c, hardware::Stack::eager);
  const tuner::Evaluator other_model(m2, c, priced), other_cluster(m, c2, priced), other_cost(m, c, *cost2),
      three_layers(m, c, priced, 3);
  for (const tuner::Evaluator* e : {&other_model, &other_cluster, &other_cost, &three_layers}) {
    given.evaluator = e;
    CHECK_THROWS_AS(tuner::search(m, c, *cost, tuner::SearchSpace{}, given), std::invalid_argument);
  }
}

TEST_CASE("SearchOptions::also_simulate: the caller's plans simulated whole with the finalists, nothing else changed") {
  // The CLI asks the search for the memory savers' variants of the plan its screening estimated
  // fastest (tuner::saver_simulations), so that explain_savers finds them simulated instead of
  // simulating them after the search. Expected: the result of a search without the request
  // (check_same_result); the request made once, with the screening's best plan (for gpt3-13b on a
  // DGX-H100 that is also the recommendation: README's tune output); each plan asked for returned
  // once, in the order asked, with the step time Evaluator::simulate gives it - for the plan
  // itself (a finalist) its whole simulation's; and explain_savers given them as known gives the
  // rows it computes alone.
  const auto m = sim::load_model("gpt3-13b");
  const auto c = hardware::load_cluster("dgx-h100");
  auto cost = hardware::make_analytic_cost_model(c, hardware::Stack::eager);
  const tuner::PricingCache priced(*cost);
  const tuner::Evaluator ev(m, c, priced);
  tuner::SearchOptions o;
  o.threads = 2;
  o.evaluator = &ev;
  const auto plain = tuner::search(m, c, *cost, tuner::SearchSpace{}, o);
  REQUIRE(!plain.top.empty());
  int calls = 0;
  std::vector<sim::Plan> asked;
  o.also_simulate = [&](const sim::Plan& p) {
    ++calls;
    asked = tuner::saver_simulations(m, c, p);
    std::vector<sim::Plan> twice = asked;  // each returned once
    twice.insert(twice.end(), asked.begin(), asked.end());
    return twice;
  };
  const auto with = tuner::search(m, c, *cost, tuner::SearchSpace{}, o);
  check_same_result(plain, with);
  CHECK(calls == 1);
  const sim::Plan& best = with.top.front().plan;
  CHECK(asked == tuner::saver_simulations(m, c, best));  // asked with the screening's best: the recommendation here
  CHECK(asked.size() >= 5);  // recompute none/selective/full, ZeRO 0..3 at dp 4, two attention kernels, less those that cannot run
  REQUIRE(with.also_simulated.size() == asked.size());
  bool has_plan = false;
  for (std::size_t k = 0; k < asked.size(); ++k) {
    CHECK(with.also_simulated[k].first == asked[k]);
    CHECK(with.also_simulated[k].second == ev.simulate(asked[k]).step_time);
    if (asked[k] == best) {
      has_plan = true;
      CHECK(with.also_simulated[k].second == with.top.front().report.step_time);
    }
  }
  CHECK(has_plan);  // the plan's own setting of each saver is a variant
  std::vector<std::pair<const sim::Plan*, common::Duration>> known;
  for (const auto& [q, step] : with.also_simulated) known.emplace_back(&q, step);
  const auto alone = tuner::explain_savers(ev, best, 1);
  const auto from_search = tuner::explain_savers(ev, best, 1, known);
  REQUIRE(alone.size() == from_search.size());
  for (std::size_t i = 0; i < alone.size(); ++i) {
    CHECK(alone[i].setting == from_search[i].setting);
    CHECK(alone[i].step_time == from_search[i].step_time);
    CHECK(alone[i].invalid == from_search[i].invalid);
  }
}

TEST_CASE("the full bounds' batch size changes how they are split into jobs, not what is screened nor any result") {
  // Within a screening round the pruning thresholds do not change, so computing the bounds of the
  // candidates on top one at a time (bound_batch 1), 32 at a time (the size before) or up to 256 (the
  // default) screens the same plans in the same order; on the default space it also computes the
  // same bounds (in general a larger batch may compute some ahead that a later round would prune)
  const auto m = sim::load_model("gpt3-13b");
  const auto c = hardware::load_cluster("dgx-h100");
  auto cost = hardware::make_analytic_cost_model(c, hardware::Stack::eager);
  tuner::SearchOptions o;
  o.threads = 2;
  CHECK(o.bound_batch == 256);
  const auto a = tuner::search(m, c, *cost, tuner::SearchSpace{}, o);
  // the default space computes 322 of them (2,035 before the cheap bound counted the element-wise
  // kernels and the calls' overhead; docs/benchmarks.md): more than one batch of 256, so the batches matter
  CHECK(a.full_bounds > 256);
  for (std::size_t batch : {std::size_t{1}, std::size_t{32}}) {
    tuner::SearchOptions ob = o;
    ob.bound_batch = batch;
    const auto b = tuner::search(m, c, *cost, tuner::SearchSpace{}, ob);
    CHECK(a.full_bounds == b.full_bounds);
    CHECK(a.bound_classes == b.bound_classes);
    check_same_result(a, b);
  }
}

namespace {

/// N "processes" as threads of this test, meeting in an all-gather (what MPI_Allgatherv does for
/// `mpirun -np N slicetune tune`, cli/search_processes.cpp).
class Rendezvous {
 public:
  explicit Rendezvous(int n) : n_(n), parts_(static_cast<std::size_t>(n)) {}
  std::vector<std::string> allgather(int rank, const std::string& mine) {
    std::unique_lock lock(mu_);
    const std::uint64_t gen = gen_;
    parts_[static_cast<std::size_t>(rank)] = mine;
    ++calls_;
    if (++arrived_ == n_) {
      done_ = parts_;
      arrived_ = 0;
      ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return gen_ != gen; });
    }
    return done_;
  }
  int calls() const { return calls_; }

 private:
  int n_, arrived_ = 0, calls_ = 0;
  std::uint64_t gen_ = 0;
  std::vector<std::string> parts_, done_;
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace

TEST_CASE("a search split over 3 processes gives every process the one-process result") {
  // tuner::Distribution: process r screens slots r, r+3, ... of each round of 64 and the
  // all-gather hands every estimate to every process, so pruning decisions, counts, estimates
  // and the ranking must equal the one-process search exactly (timings aside).
  const auto m = sim::load_model("gpt3-13b");
  auto c = hardware::load_cluster("dgx-h100");
  c.nodes = 2;
  auto cost = hardware::make_analytic_cost_model(c, tuner::SearchSpace{}.stack);
  tuner::SearchSpace s;
  s.global_batch = 32;
  s.micro_batch = {1, 2, 4};
  tuner::SearchOptions o;
  o.threads = 1;
  const auto one = tuner::search(m, c, *cost, s, o);
  REQUIRE(one.screened > 64);  // more than one round

  constexpr int kProcs = 3;
  Rendezvous meet(kProcs);
  std::vector<tuner::SearchResult> res(kProcs);
  std::vector<std::thread> procs;
  for (int r = 0; r < kProcs; ++r)
    procs.emplace_back([&, r] {
      tuner::SearchOptions d = o;
      d.distribution = {.rank = r, .size = kProcs, .allgather = [&meet, r](const std::string& mine) { return meet.allgather(r, mine); }};
      res[static_cast<std::size_t>(r)] = tuner::search(m, c, *cost, s, d);
    });
  for (auto& t : procs) t.join();
  CHECK(meet.calls() % kProcs == 0);
  for (const auto& r : res) {
    CHECK(r.processes == kProcs);
    check_same_result(r, one);
    // the estimates travelled between the processes: each finalist's, as one process made it
    for (std::size_t i = 0; i < r.top.size(); ++i) {
      CHECK(r.top[i].estimate.step_time == one.top[i].estimate.step_time);
      CHECK(r.top[i].estimate.streams.size() == one.top[i].estimate.streams.size());
      CHECK(r.top[i].estimate.memory.total() == one.top[i].estimate.memory.total());
      CHECK(r.top[i].estimate.memory.usable() == one.top[i].estimate.memory.usable());  // capacity and reserve travel too
      CHECK(r.top[i].estimate.memory.nccl == one.top[i].estimate.memory.nccl);
    }
    REQUIRE(r.baseline);
    CHECK(r.baseline->index == one.baseline->index);
  }
}

TEST_CASE("a distributed search: a process's error reaches every process, none waits forever") {
  // an all-gather where process 1's screening "failed" (its part carries a ConfigError): every
  // process rethrows that error instead of waiting or going on with missing estimates
  const auto m = sim::load_model("gpt3-13b");
  auto c = hardware::load_cluster("dgx-h100");
  auto cost = hardware::make_analytic_cost_model(c, tuner::SearchSpace{}.stack);
  tuner::SearchOptions o;
  o.threads = 1;
  o.distribution = {.rank = 0, .size = 2, .allgather = [](const std::string& mine) {
                      return std::vector<std::string>{mine, std::string(1, '\1') + "cluster.yaml: gpu.tflops: expected a number"};
                    }};
  CHECK_THROWS_WITH_AS(tuner::search(m, c, *cost, tuner::SearchSpace{}, o), "cluster.yaml: gpu.tflops: expected a number",
                       common::ConfigError);
}

TEST_CASE("gpt3-175b on 16 DGX-H100: nothing fits without ZeRO, the search finds plans with it (no pipeline parallelism)") {
  // 128 GPUs; tp must divide 96 heads and 128 GPUs: tp <= 32. Without ZeRO a rank keeps 18 B per
  // parameter (bf16 weight, fp32 gradient, fp32 master + Adam m, v) of ~175e9 / tp: at tp 32
  // 18 x 5.48e9 = 98.7 GB > 76 GB usable (80 GB less the 5 % reserve), whatever the activations.
  const auto m = sim::load_model("gpt3-175b");
  auto c = hardware::load_cluster("dgx-h100");
  c.nodes = 16;
  auto cost = hardware::make_analytic_cost_model(c, hardware::Stack::eager);
  tuner::SearchOptions o;
  o.threads = 2;
  o.top_k = 1;
  o.extra_full = 0;
  tuner::SearchSpace plain;
  plain.pp = {1};  // the claim is about plans without pipeline parallelism
  plain.zero = {0};
  plain.micro_batch = {1};
  const auto none = tuner::search(m, c, *cost, plain, o);
  CHECK(none.top.empty());
  for (const auto& f : none.refusals)
    if (f.reason == sim::Infeasibility::memory) CHECK(f.example.tp == 32);  // the closest to fitting
  // with ZeRO (stages 1-3 searched, recompute and attention too) plans fit
  tuner::SearchSpace s;
  s.pp = {1};
  s.micro_batch = {1, 2};
  const auto r = tuner::search(m, c, *cost, s, o);
  REQUIRE_FALSE(r.top.empty());
  const auto& best = r.top[0];
  CHECK(best.plan.zero >= 1);
  CHECK(best.report.memory.fits());
  CHECK(sim::estimate_memory(m, c, best.plan).total() == doctest::Approx(best.report.memory.total()));
}

TEST_CASE("llama2-70b on 8 DGX-H200 (issue 11's command): a pipelined plan is recommended, faster whole than the best pp = 1 plan") {
  // Expected from the whole simulations (today's constants): the best pp 4 vp 4 ZeRO-1 plan, 36,264 ms,
  // against ~36,590 ms for the best pp = 1 plan (ZeRO-3), which an earlier tuner recommended when its
  // finalists were eight near-identical pp = 1 variants.
  const auto m = sim::load_model("llama2-70b");
  auto c = hardware::load_cluster("dgx-h200");
  c.nodes = 8;
  auto cost = hardware::make_analytic_cost_model(c, hardware::Stack::eager);
  tuner::SearchOptions o;
  o.threads = 2;  // top_k and extra_full as `tune` uses them (5 and 3)
  tuner::SearchSpace flat;
  flat.pp = {1};
  const auto r1 = tuner::search(m, c, *cost, flat, o);
  const auto r = tuner::search(m, c, *cost, tuner::SearchSpace{}, o);
  REQUIRE_FALSE(r1.top.empty());
  REQUIRE_FALSE(r.top.empty());
  REQUIRE(r.baseline.has_value());
  const auto& best = r.top[0];
  INFO("recommended: " << sim::describe(best.plan) << ", best pp = 1: " << sim::describe(r1.top[0].plan));
  CHECK(best.plan.pp > 1);
  // the whole simulation of the recommendation beats the best plan the pp = 1 search finds
  CHECK(best.report.step_time < r1.top[0].report.step_time);
  CHECK(best.report.step_time <= r.baseline->report.step_time);
  CHECK(best.report.memory.fits());
}

TEST_CASE("the search's blocks: shape checks alike within a block, no plan in two blocks once its savers are reset") {
  // tuner::search checks the shapes (sim::check_plan_shapes) of one plan per enumerated block and
  // decides the memory savers block by block; both need what enumerate_plan_blocks promises.
  // Checked on the whole default space (gpt3-13b on one DGX-H100, every strategy, pipelines, grids,
  // savers): every plan's check_plan_shapes equals its block's first plan's (reason and message),
  // check_plan_shapes without messages has the same verdict and reason (and formats nothing: message
  // and key empty; a call with messages after it words them again), check_plan is
  // check_plan_shapes then check_plan_savers (reason and message), two plans of a
  // block are equal once ZeRO and recompute are reset exactly when their bucket sizes are (the
  // search groups them so), and no two blocks hold plans equal once ZeRO, recompute and the bucket
  // size are reset.
  const auto m = sim::load_model("gpt3-13b");
  const auto c = hardware::load_cluster("dgx-h100");
  const tuner::SearchSpace s;
  std::size_t plans = 0, blocks = 0, refused_by_shape = 0, mismatched = 0, split = 0, buckets_apart = 0;
  std::map<std::string, std::size_t> block_of;  // a block's plans with savers and bucket reset -> its block
  tuner::enumerate_plan_blocks(m, c, s, [&](std::span<const sim::Plan> block) {
    const auto first = sim::check_plan_shapes(m, c, block.front());
    for (const sim::Plan& p : block) {
      const auto shapes = sim::check_plan_shapes(m, c, p);
      // without messages (the search's call): the same verdict and reason, message and key empty
      const auto quiet = sim::check_plan_shapes(m, c, p, false);
      const bool same = shapes.has_value() == first.has_value() && (!shapes || (shapes->reason == first->reason && shapes->message == first->message)) &&
                        quiet.has_value() == shapes.has_value() && (!quiet || (quiet->reason == shapes->reason && quiet->message.empty() && quiet->key.empty()));
      const auto whole = sim::check_plan(m, c, p);
      const auto rest = shapes ? shapes : sim::check_plan_savers(m, c, p);
      const bool composed = whole.has_value() == rest.has_value() && (!whole || (whole->reason == rest->reason && whole->message == rest->message));
      if (!same || !composed) {
        ++mismatched;
        const std::string d = sim::describe(p);
        CAPTURE(d);
        CHECK(same);
        CHECK(composed);
      }
      sim::Plan q = p;
      q.zero = 0;
      q.recompute = sim::Recompute::none;
      // within the block, plans alike but for their savers are those with the same bucket size
      for (const sim::Plan& o : block) {
        sim::Plan r = o;
        r.zero = 0;
        r.recompute = sim::Recompute::none;
        if ((r == q) != (o.dp_bucket_mb == p.dp_bucket_mb)) ++buckets_apart;
      }
      q.dp_bucket_mb = 0;
      const auto [it, fresh] = block_of.try_emplace(sim::describe(q) + (q.attention == hardware::AttentionKernel::flash ? " flash" : " other"), blocks);
      split += !fresh && it->second != blocks;
      ++plans;
    }
    refused_by_shape += first ? block.size() : 0;
    ++blocks;
  });
  MESSAGE(plans << " plans in " << blocks << " blocks, " << refused_by_shape << " refused by their shapes");
  // SearchSpace{} on this model and cluster: 229,920 plans in 21,696 blocks, 92,832 of them refused
  // by their shapes (2026-12-03): the checks below need a space of that size to mean something
  CHECK(plans > 200000);
  CHECK(refused_by_shape > 50000);
  CHECK(mismatched == 0);
  CHECK(split == 0);
  CHECK(buckets_apart == 0);
}
