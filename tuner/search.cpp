#include "tuner/search.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include <fmt/format.h>

#include "sim/strategy.hpp"

namespace tuner {

void parallel_for(std::size_t n, int threads, const std::function<void(std::size_t)>& fn) {
  const int t = std::max(1, std::min<int>(threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())),
                                          static_cast<int>(std::max<std::size_t>(n, 1))));
  if (t == 1) {
    for (std::size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < n;) {
      if (failed.load()) return;
      try {
        fn(i);
      } catch (...) {
        if (!failed.exchange(true)) error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int k = 1; k < t; ++k) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

namespace {

constexpr std::size_t kRound = 64;

struct Candidate {
  std::size_t index;
  Duration bound;
};

}  // namespace

SearchResult search(const sim::ModelSpec& model, const hardware::ClusterSpec& cluster, const hardware::CostModel& cost,
                    const SearchSpace& space, const SearchOptions& opt) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  SearchResult res;
  res.threads = opt.threads > 0 ? opt.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const Evaluator ev(model, cluster, cost);
  const std::vector<sim::Plan> plans = enumerate_plans(model, cluster, space);
  res.considered = plans.size();
  const double capacity = cluster.gpu.hbm_capacity_bytes;

  std::array<Refusal, sim::kInfeasibilityKinds> refused{};
  // the example of a memory refusal is the plan closest to fitting (smallest need; first on ties)
  double closest = std::numeric_limits<double>::infinity();
  auto refuse = [&](std::size_t i, sim::Infeasibility r, std::string msg, double need = 0) {
    auto& f = refused[static_cast<int>(r)];
    const bool better = r == sim::Infeasibility::memory && need < closest;
    if (f.count++ == 0 || better) {
      f.reason = r;
      f.example = plans[i];
      f.message = std::move(msg);
      if (r == sim::Infeasibility::memory) closest = need;
    }
    ++res.infeasible;
  };

  // ---- feasibility (closed form) and lower bounds ----
  std::vector<Candidate> cand;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    if (auto prob = sim::check_plan(model, cluster, plans[i])) {
      refuse(i, prob->reason, prob->message);
      continue;
    }
    const double stat = static_memory_bytes(model, plans[i]);
    if (stat > capacity) {
      refuse(i, sim::Infeasibility::memory,
             fmt::format("weights, gradients and Adam state alone need {:.1f} GB per GPU at tp={} (no ZeRO, no pipeline), {} has {:.0f} GB",
                         stat / 1e9, plans[i].tp, cluster.gpu.name, capacity / 1e9),
             stat);
      continue;
    }
    cand.push_back({i, Duration{}});
  }
  // activation memory: closed form per plan after one tiny graph pair per (tp, SP) class
  const MemoryModel mem(model, cluster);
  {
    std::vector<sim::MemoryEstimate> m(cand.size());
    parallel_for(cand.size(), res.threads, [&](std::size_t c) { m[c] = mem.estimate(plans[cand[c].index]); });
    std::size_t w = 0;
    for (std::size_t c = 0; c < cand.size(); ++c) {
      const std::size_t i = cand[c].index;
      if (m[c].total() > capacity) {
        refuse(i, sim::Infeasibility::memory,
               fmt::format("needs {:.1f} GB per GPU ({:.1f} GB saved activations of a micro-batch of {}), {} has {:.0f} GB", m[c].total() / 1e9,
                           m[c].activations / 1e9, plans[i].micro_batch, cluster.gpu.name, capacity / 1e9),
               m[c].total());
        continue;
      }
      cand[w++] = cand[c];
    }
    cand.resize(w);
  }
  parallel_for(cand.size(), res.threads, [&](std::size_t c) { cand[c].bound = ev.compute_lower_bound(plans[cand[c].index]); });
  std::sort(cand.begin(), cand.end(), [](const Candidate& a, const Candidate& b) {
    return a.bound != b.bound ? a.bound < b.bound : a.index < b.index;
  });

  // ---- screening in fixed rounds with bound pruning ----
  const std::size_t keep = static_cast<std::size_t>(std::max(1, opt.top_k) + std::max(0, opt.extra_full));
  struct Screened {
    std::size_t index;
    Estimate est;
  };
  std::vector<Screened> best;       // the `keep` best estimates, sorted
  std::vector<Screened> best_none;  // the 3 best estimates of plans without overlap
  auto better = [](const Screened& a, const Screened& b) {
    return a.est.step_time != b.est.step_time ? a.est.step_time < b.est.step_time : a.index < b.index;
  };
  auto insert = [&](std::vector<Screened>& v, const Screened& s, std::size_t cap) {
    v.insert(std::upper_bound(v.begin(), v.end(), s, better), s);
    if (v.size() > cap) v.pop_back();
  };
  constexpr Duration kInf{std::numeric_limits<std::int64_t>::max()};
  std::vector<Estimate> est(kRound);
  std::vector<char> fits(kRound);
  std::size_t pos = 0;
  while (pos < cand.size()) {
    const Duration thr_all = best.size() >= keep ? best.back().est.step_time : kInf;
    const Duration thr_none = best_none.size() >= 3 ? best_none.back().est.step_time : kInf;
    std::vector<std::size_t> batch;
    while (pos < cand.size() && batch.size() < kRound) {
      const auto& c = cand[pos++];
      const bool none = plans[c.index].strategy->baseline;
      if (opt.prune && c.bound >= thr_all && (!none || c.bound >= thr_none)) {
        ++res.pruned;
        continue;
      }
      batch.push_back(c.index);
    }
    parallel_for(batch.size(), res.threads, [&](std::size_t b) { est[b] = ev.estimate(plans[batch[b]]); });
    for (std::size_t b = 0; b < batch.size(); ++b) {
      const std::size_t i = batch[b];
      ++res.screened;
      const Screened s{i, est[b]};
      insert(best, s, keep);
      if (plans[i].strategy->baseline) insert(best_none, s, 3);
    }
    if (opt.progress) opt.progress({pos, cand.size(), std::chrono::duration<double>(clock::now() - t0).count()});
  }

  // ---- whole-model simulations of the finalists ----
  std::vector<Screened> finalists = best;
  for (const auto& s : best_none)
    if (std::none_of(finalists.begin(), finalists.end(), [&](const Screened& f) { return f.index == s.index; })) finalists.push_back(s);
  std::vector<RankedPlan> full(finalists.size());
  parallel_for(finalists.size(), res.threads, [&](std::size_t f) {
    full[f] = RankedPlan{finalists[f].index, plans[finalists[f].index], finalists[f].est, ev.simulate(plans[finalists[f].index])};
  });
  res.simulated_full = full.size();
  for (const auto& r : full)
    res.max_screen_error = std::max(res.max_screen_error, std::abs(r.estimate.step_time.s() - r.report.step_time.s()) / r.report.step_time.s());
  std::sort(full.begin(), full.end(), [](const RankedPlan& a, const RankedPlan& b) {
    return a.report.step_time != b.report.step_time ? a.report.step_time < b.report.step_time : a.index < b.index;
  });
  for (const auto& r : full)
    if (r.plan.strategy->baseline) {
      res.baseline = r;
      break;
    }
  // the ranking keeps only plans screened as among the best `keep`; non-overlapping extras are for the baseline
  for (const auto& r : full) {
    if (static_cast<int>(res.top.size()) >= std::max(1, opt.top_k)) break;
    if (std::any_of(best.begin(), best.end(), [&](const Screened& s) { return s.index == r.index; })) res.top.push_back(r);
  }
  for (auto& f : refused)
    if (f.count) res.refusals.push_back(f);
  res.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return res;
}

}  // namespace tuner
