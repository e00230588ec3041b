#include "tuner/search.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include <fmt/format.h>

#include "common/config_error.hpp"
#include "common/memory_reuse.hpp"
#include "common/threads.hpp"
#include "sim/memory.hpp"
#include "tuner/pricing_cache.hpp"
#include "sim/strategy.hpp"

namespace tuner {

namespace {

/// Runs fn(i) for i in [first handed out, n) until none is left or one has thrown.
void drain(std::size_t n, const std::function<void(std::size_t)>& fn, std::atomic<std::size_t>& next, std::atomic<bool>& failed,
           std::exception_ptr& error, std::mutex& error_mu) {
  for (std::size_t i; (i = next.fetch_add(1)) < n;) {
    if (failed.load()) return;
    try {
      fn(i);
    } catch (...) {
      std::lock_guard lock(error_mu);
      if (!failed.exchange(true)) error = std::current_exception();
    }
  }
}

/// Threads kept for parallel_for: a search calls it hundreds of times (every screening round and
/// batch of bounds), and starting threads each time cost more than the short batches themselves.
/// One job at a time; a caller that finds the pool busy (another thread's search) starts threads
/// of its own, as parallel_for did before the pool.
class Pool {
 public:
  /// Never destroyed: its threads wait on it until the process ends (joining them at exit could
  /// wait on a task that is itself ending the process).
  static Pool& instance() {
    static Pool* pool = new Pool;
    return *pool;
  }
  /// Starts helpers up to `helpers` now (start_threads): each faults in the first `prefault` bytes
  /// of its arena before it waits for work, the first one started also those of the main heap.
  void start(int helpers, std::size_t prefault) {
    std::lock_guard lock(mu_);
    spawn(helpers, prefault);
  }
  /// false: busy (the caller runs the job some other way)
  bool run(std::size_t n, int helpers, const std::function<void(std::size_t)>& fn) {
    std::unique_lock lock(mu_);
    if (job_) return false;
    spawn(helpers, 0);
    Job job{.fn = &fn, .n = n, .seats = helpers};
    job_ = &job;
    ++generation_;
    posted_.store(generation_, std::memory_order_release);
    lock.unlock();
    cv_.notify_all();
    drain(n, fn, job.next, job.failed, job.error, job.error_mu);
    lock.lock();
    job.seats = 0;  // no helper joins from now on; wait for those that did
    if (job.busy.load(std::memory_order_acquire) > 0) {
      // the helpers' last items end within microseconds of this thread's as a rule: wait for them
      // awake (a condition variable's wake-up took 20-50 us a job here, as long as the short jobs
      // themselves), then asleep
      lock.unlock();
      spin_until([&] { return job.busy.load(std::memory_order_acquire) == 0; });
      lock.lock();
      done_.wait(lock, [&] { return job.busy.load(std::memory_order_acquire) == 0; });
    }
    job_ = nullptr;
    lock.unlock();
    if (job.error) std::rethrow_exception(job.error);
    return true;
  }
 private:
  struct Job {
    const std::function<void(std::size_t)>* fn = nullptr;
    std::size_t n = 0;
    int seats = 0;                ///< helpers that may still join (under mu_)
    std::atomic<int> busy{0};     ///< helpers working (joined under mu_; leave without it)
    std::atomic<std::size_t> next{0};
    std::atomic<bool> failed{false};
    std::exception_ptr error;
    std::mutex error_mu;
  };
  /// (under mu_)
  void spawn(int helpers, std::size_t prefault) {
    for (; threads_ < helpers; ++threads_)
      // started on another CPU than this thread's (common::start_detached_thread)
      common::start_detached_thread([this, prefault, first = threads_ == 0] {
        // its arena as the main heap (tune, whatif). The prefault gives way to the first job: a
        // 2 MB page took 0.1-1.2 ms to fault in here, 16 MB 0.2-7 ms of a fresh `tune` - in some
        // processes past the moment its search posted the first job (docs/benchmarks.md)
        const std::function<bool()> posted = [this] { return posted_.load(std::memory_order_acquire) != 0; };
        common::use_huge_pages_in_thread(prefault, posted);
        if (first && prefault > 0) common::prefault_heap(prefault, posted);
        work();
      });
  }
  void work() {
    std::uint64_t seen = 0;
    std::unique_lock lock(mu_);
    for (;;) {
      if (!(job_ && generation_ != seen)) {
        // A search posts its next job (a screening round, a batch of bounds) within microseconds of
        // the last one: wait for it awake a little before sleeping on the condition variable, whose
        // wake-up on this VM took 20-50 us a job (83 jobs of `slicetune tune`: 1.7-4.4 ms in all
        // before the helper joined). As OpenMP runtimes spin before blocking (GOMP_SPINCOUNT).
        lock.unlock();
        spin_until([&] { return posted_.load(std::memory_order_acquire) != seen; });
        lock.lock();
      }
      cv_.wait(lock, [&] { return job_ && generation_ != seen; });
      seen = generation_;
      Job& job = *job_;
      if (job.seats <= 0) continue;
      --job.seats;
      job.busy.fetch_add(1, std::memory_order_relaxed);
      lock.unlock();
      drain(job.n, *job.fn, job.next, job.failed, job.error, job.error_mu);
      // the last helper out wakes the caller if it went to sleep: under the lock, so that the
      // wake-up cannot fall between the caller's check and its wait. `job` may be gone after the
      // decrement (the caller's spin sees it and returns)
      const bool last = job.busy.fetch_sub(1, std::memory_order_acq_rel) == 1;
      lock.lock();
      if (last) done_.notify_all();
    }
  }
  /// Waits for `done` awake, for up to kSpin: pause instructions, the clock read and the CPU
  /// offered to other threads every 64 of them (more threads than cores); the caller checks `done`
  /// again under its lock before sleeping.
  template <class Done>
  static void spin_until(Done&& done) {
    const auto until = std::chrono::steady_clock::now() + kSpin;
    for (unsigned i = 1;; ++i) {
      if (done()) return;
      if (i % 64 == 0) {
        if (std::chrono::steady_clock::now() >= until) return;
        std::this_thread::yield();
      } else {
        cpu_relax();
      }
    }
  }
  static void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }
  static constexpr std::chrono::microseconds kSpin{200};
  std::mutex mu_;
  std::condition_variable cv_, done_;
  std::atomic<std::uint64_t> posted_{0};  ///< generation_, readable without the lock (the helpers' spin)
  int threads_ = 0;  ///< started (they never end)
  Job* job_ = nullptr;
  std::uint64_t generation_ = 0;
};

}  // namespace

int thread_count(int threads) { return threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

void start_threads(int threads, std::size_t prefault) {
  const int t = thread_count(threads);
  if (t > 1) Pool::instance().start(t - 1, prefault);
}

void parallel_for(std::size_t n, int threads, const std::function<void(std::size_t)>& fn) {
  const int t = std::max(1, std::min<int>(thread_count(threads), static_cast<int>(std::max<std::size_t>(n, 1))));
  if (t == 1) {
    for (std::size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  if (Pool::instance().run(n, t - 1, fn)) return;
  // the pool is busy: threads of this call's own
  std::atomic<std::size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mu;
  std::atomic<bool> failed{false};
  auto work = [&] { drain(n, fn, next, failed, error, error_mu); };
  std::vector<std::thread> pool;
  for (int k = 1; k < t; ++k) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

namespace {

constexpr std::size_t kRound = 64;

struct Candidate {
  std::size_t index;  ///< the tie-break (RankedPlan::index)
  std::size_t slot;   ///< where search keeps the plan
  Duration bound;
  bool full = false;  ///< bound is compute_lower_bound (else cheap_lower_bound)
  bool none = false;  ///< 1D without overlap (Megatron-LM): pruned also against the best of those
  std::uint16_t own = 0;  ///< whose best prunes it too: a 1D plan's strategy (its index), a grid's layout (strategies + layout)
};

/// A part's candidate plans, each kept as its block's head (tuner::enumerate_plan_block_heads), which
/// of the block's savers it applies and, for a block-recompute plan, its recomputed layers - made
/// again where read (the bounds and screening read a few thousand of the tens of thousands kept).
/// Kept whole (160 B a plan), the default `tune`'s 29,476 candidates took 4.7 MB of fresh pages
/// and a copy each; so ~8 B a plan and a head per block with candidates (docs/benchmarks.md).
class PlanStore {
 public:
  /// the block whose plans the next push() calls keep; both valid until the next call
  void begin_block(const sim::Plan& head, std::span<const BlockSavers> savers) {
    head_ = &head;
    savers_ = savers;
    stored_ = false;
  }
  /// keeps the current block's plan with savers[j] applied and, where block_layers > 0, full
  /// recompute of that many layers (block method)
  void push(std::size_t j, int block_layers) {
    if (!stored_) {
      // a head's savers: the part's last ones again as a rule (a 1D part's blocks all have the same)
      const bool same = last_n_ == savers_.size() && std::equal(savers_.begin(), savers_.end(), pool_.begin() + static_cast<std::ptrdiff_t>(last_at_));
      if (!same) {
        last_at_ = pool_.size();
        last_n_ = savers_.size();
        pool_.insert(pool_.end(), savers_.begin(), savers_.end());
      }
      first_saver_.push_back(last_at_);
      if (first_saver_.size() % kChunk == 1) {
        head_chunks_.emplace_back();
        head_chunks_.back().reserve(kChunk);
      }
      head_chunks_.back().push_back(*head_);
      stored_ = true;
    }
    refs_.push_back({.head = static_cast<std::uint32_t>(first_saver_.size() - 1), .saver = static_cast<std::uint32_t>(j), .block_layers = block_layers});
  }
  std::size_t size() const { return refs_.size(); }
  /// `hash(plan i)` where the plan's block head and recompute mode (what Evaluator::bound_class_hash
  /// reads of a block's plans: the savers' ZeRO, bucket size and recomputed layers it does not)
  /// first ask for it, else as then (the twins of a block - bucket sizes, ZeRO stages - come
  /// together: 2,035 bounds of the default search, far fewer blocks). Not thread-safe.
  template <class Hash>
  std::size_t class_hash(std::size_t i, Hash&& hash) const {
    const Ref& r = refs_[i];
    const auto rc = static_cast<std::size_t>(pool_[first_saver_[r.head] + r.saver].recompute);
    auto& known = hashes_[r.head][rc];
    if (!known) known = hash((*this)[i]);
    return *known;
  }
  sim::Plan operator[](std::size_t i) const {
    const Ref& r = refs_[i];
    sim::Plan p = head_chunks_[r.head / kChunk][r.head % kChunk];
    pool_[first_saver_[r.head] + r.saver].apply(p);
    if (r.block_layers > 0) {
      p.recompute_method = sim::RecomputeMethod::block;
      p.recompute_layers = r.block_layers;
    }
    return p;
  }

 private:
  static constexpr std::size_t kChunk = 256;
  struct Ref {
    std::uint32_t head, saver;
    int block_layers;
  };
  const sim::Plan* head_ = nullptr;
  std::span<const BlockSavers> savers_;
  bool stored_ = false;
  std::vector<std::vector<sim::Plan>> head_chunks_;  // the heads kept, in chunks that never move
  std::vector<BlockSavers> pool_;                    // the kept heads' savers
  std::vector<std::size_t> first_saver_;             // per kept head: where its savers start in pool_
  std::size_t last_at_ = 0, last_n_ = 0;             // the last savers added to pool_
  std::vector<Ref> refs_;
  // class_hash's, per kept head (of the few whose plans get a full bound) and recompute mode
  mutable std::unordered_map<std::uint32_t, std::array<std::optional<std::size_t>, 3>> hashes_;
};

/// Where a part's candidates (Candidate::index and slot numbered within the part, below) lie among
/// all of them: the offsets that make their indices and slots the search's.
struct PartOffsets {
  std::size_t passed = 0;  ///< a plan that passed check_plan: the plans that passed in the parts before
  std::size_t added = 0;   ///< a block-recompute plan: every plan that passed, and the ones added in the parts before
  std::size_t slot = 0;    ///< the candidates of the parts before
};

/// A part numbers its candidates from 0: a plan that passed check_plan by its position among the
/// part's, a block-recompute plan kAdded + its position among the part's added ones.
constexpr std::size_t kAdded = std::size_t{1} << 62;

/// The candidates, taken in (bound, index) order over them all, one queue per pruning group
/// (Candidate::own). A group's plans are pruned by one threshold, so when the first of a group is
/// pruned by its bound every other one is too (their bounds are no smaller): the group is dropped
/// at once (`drop`) rather than popped plan by plan.
///
/// A group's queue is a tournament over heaps: each part's candidates of the group, made a
/// min-heap on (bound, part's index) on the search's threads as the part is decided, and one heap
/// for the candidates pushed back with their full bounds (the search's indices). A part's
/// numbering keeps the order of the search's within the part (offsets added; its added plans after
/// its others in both), so each heap comes off in the search's order, and the tournament takes the
/// first over the heaps: the order of one heap of them all, without the serial merge of tens of
/// thousands of candidates into it and its heapify between the parts and the first bound
/// (0.7-1.2 ms of a default `tune`, the other thread idle; docs/benchmarks.md).
class CandidateQueue {
 public:
  explicit CandidateQueue(std::size_t groups) : groups_(groups) {
    for (Group& gr : groups_) gr.sources.push_back({&gr.pushed, {}});  // source 0: the pushed-back heap
  }
  CandidateQueue(const CandidateQueue&) = delete;  // its sources point into it
  CandidateQueue& operator=(const CandidateQueue&) = delete;
  /// makes a part's candidates of each group (Candidate::own) a heap of the part's numbering; on
  /// the thread deciding the part
  static void heapify_part(std::vector<std::vector<Candidate>>& by_group) {
    for (auto& h : by_group) std::make_heap(h.begin(), h.end(), after);
  }
  /// a part's heap of group g (heapify_part), read in place until the search ends
  void add_part(std::size_t g, std::vector<Candidate>& heap, const PartOffsets& at) {
    if (heap.empty()) return;
    Group& gr = groups_[g];
    gr.sources.push_back({&heap, at});
    size_ += heap.size();
    enter(gr, gr.sources.size() - 1);
  }
  void push(const Candidate& c) {
    Group& gr = groups_[c.own];
    const bool was_empty = gr.pushed.empty();
    gr.pushed.push_back(c);
    std::push_heap(gr.pushed.begin(), gr.pushed.end(), after);
    ++size_;
    if (was_empty) {
      enter(gr, 0);
    } else if (gr.pushed.front().index == c.index && gr.pushed.front().bound == c.bound) {
      // source 0's first changed: its place in the tournament with it
      std::make_heap(gr.order.begin(), gr.order.end(), [&](std::size_t a, std::size_t b) { return after(first(gr, a), first(gr, b)); });
    }
  }
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  /// the group whose first candidate comes first over all (!empty())
  std::size_t top_group() const {
    std::size_t best = groups_.size();
    Candidate at{};
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      if (groups_[g].order.empty()) continue;
      const Candidate c = top(g);
      if (best == groups_.size() || after(at, c)) {
        best = g;
        at = c;
      }
    }
    return best;
  }
  /// group g's first candidate, numbered as the search numbers them
  Candidate top(std::size_t g) const { return first(groups_[g], groups_[g].order.front()); }
  Candidate pop(std::size_t g) {
    Group& gr = groups_[g];
    const auto cmp = [&](std::size_t a, std::size_t b) { return after(first(gr, a), first(gr, b)); };
    const std::size_t s = gr.order.front();
    const Candidate c = first(gr, s);
    std::pop_heap(gr.order.begin(), gr.order.end(), cmp);
    gr.order.pop_back();
    std::vector<Candidate>& h = *gr.sources[s].heap;
    std::pop_heap(h.begin(), h.end(), after);
    h.pop_back();
    --size_;
    if (!h.empty()) enter(gr, s);
    return c;
  }
  /// removes the group's candidates; how many
  std::size_t drop(std::size_t g) {
    Group& gr = groups_[g];
    std::size_t n = 0;
    for (const std::size_t s : gr.order) {
      n += gr.sources[s].heap->size();
      gr.sources[s].heap->clear();
    }
    gr.order.clear();
    size_ -= n;
    return n;
  }

 private:
  struct Source {
    std::vector<Candidate>* heap;
    PartOffsets at;  ///< zero for the pushed-back heap (the search's numbering already)
  };
  struct Group {
    std::vector<Source> sources;
    std::vector<std::size_t> order;  ///< the non-empty sources, a heap on their first candidates
    std::vector<Candidate> pushed;   ///< candidates pushed back (push), the search's numbering
  };
  static bool after(const Candidate& a, const Candidate& b) {  // std::*_heap keep the largest on top: invert
    return a.bound != b.bound ? a.bound > b.bound : a.index > b.index;
  }
  /// source s's first candidate in the search's numbering
  static Candidate first(const Group& gr, std::size_t s) {
    const Source& src = gr.sources[s];
    Candidate c = src.heap->front();
    if (s != 0) {  // a part's heap (source 0 is the pushed-back one)
      c.index = c.index >= kAdded ? src.at.added + (c.index - kAdded) : src.at.passed + c.index;
      c.slot += src.at.slot;
    }
    return c;
  }
  void enter(Group& gr, std::size_t s) {
    gr.order.push_back(s);
    std::push_heap(gr.order.begin(), gr.order.end(), [&](std::size_t a, std::size_t b) { return after(first(gr, a), first(gr, b)); });
  }
  std::vector<Group> groups_;
  std::size_t size_ = 0;
};

// ---- estimates as bytes, for the processes of a distributed search (same program, same machine kind) ----
template <class T>
void put(std::string& out, const T& v) {
  static_assert(std::is_trivially_copyable_v<T>);
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
template <class T>
T take(std::string_view& in) {
  static_assert(std::is_trivially_copyable_v<T>);
  if (in.size() < sizeof(T)) throw std::runtime_error("tuner: a distributed search received a truncated estimate");
  T v;
  std::memcpy(&v, in.data(), sizeof v);
  in.remove_prefix(sizeof v);
  return v;
}
void put_estimate(std::string& out, std::uint64_t slot, const Estimate& e) {
  put(out, slot);
  for (Duration d : {e.step_time, e.compute, e.exposed_comm, e.idle, e.lower_bound}) put(out, d.ps);
  for (double x : {e.model_flops, e.mfu, e.tokens_per_s}) put(out, x);
  put(out, e.memory);  // every field of the breakdown (doubles only), whatever it grows to
  put(out, static_cast<std::uint8_t>(e.extrapolated));
  put(out, static_cast<std::uint64_t>(e.streams.size()));
  for (const auto& st : e.streams) {
    put(out, static_cast<std::uint64_t>(st.name.size()));
    out += st.name;
    put(out, static_cast<std::uint8_t>(st.kind));
    put(out, st.busy.ps);
  }
}
std::uint64_t take_estimate(std::string_view& in, Estimate& e) {
  const auto slot = take<std::uint64_t>(in);
  for (Duration* d : {&e.step_time, &e.compute, &e.exposed_comm, &e.idle, &e.lower_bound}) d->ps = take<std::int64_t>(in);
  for (double* x : {&e.model_flops, &e.mfu, &e.tokens_per_s}) *x = take<double>(in);
  e.memory = take<sim::MemoryEstimate>(in);
  e.extrapolated = take<std::uint8_t>(in) != 0;
  const auto n = take<std::uint64_t>(in);
  if (n > in.size()) throw std::runtime_error("tuner: a distributed search received a malformed estimate");
  e.streams.resize(n);
  for (auto& st : e.streams) {
    const auto len = take<std::uint64_t>(in);
    if (len > in.size()) throw std::runtime_error("tuner: a distributed search received a malformed estimate");
    st.name.assign(in.substr(0, len));
    in.remove_prefix(len);
    st.kind = static_cast<sim::StreamKind>(take<std::uint8_t>(in));
    st.busy.ps = take<std::int64_t>(in);
  }
  return slot;
}

}  // namespace

SearchResult search(const sim::ModelSpec& model, const hardware::ClusterSpec& cluster, const hardware::CostModel& cost,
                    const SearchSpace& space, const SearchOptions& opt) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  // the cost model prices the kernels of one software stack (its fused ops, attention, GEMM speed)
  if (cost.stack() != space.stack)
    throw std::invalid_argument(fmt::format("tuner::search: the cost model prices stack {}, the search space asks for {}", hardware::to_string(cost.stack()),
                                            hardware::to_string(space.stack)));
  SearchResult res;
  res.threads = thread_count(opt.threads);
  // every GEMM and attention shape priced once for the whole search (the bounds' class graphs, the
  // screening and the whole simulations ask for the same few thousand shapes again and again)
  std::optional<PricingCache> own_priced;
  std::optional<Evaluator> own_ev;
  if (const Evaluator* given = opt.evaluator) {
    const auto* cache = dynamic_cast<const PricingCache*>(&given->cost());
    if (&given->model() != &model || &given->cluster() != &cluster || given->short_layers() != 1 ||
        (&given->cost() != &cost && (!cache || &cache->base() != &cost)))
      throw std::invalid_argument("tuner::search: SearchOptions::evaluator must be built over the search's model, cluster and cost model (or a PricingCache of it), with 1 short layer");
  } else {
    own_priced.emplace(cost);
    own_ev.emplace(model, cluster, *own_priced);
  }
  const Evaluator& ev = opt.evaluator ? *opt.evaluator : *own_ev;
  const std::size_t classes_before = ev.bound_classes();
  const Distribution& dist = opt.distribution;
  if (dist.size > 1 && (!dist.allgather || dist.rank < 0 || dist.rank >= dist.size))
    throw std::invalid_argument("tuner::search: a distribution needs an all-gather and a rank in [0, size)");
  res.processes = std::max(1, dist.size);

  res.strategies = searched_strategies(space);
  auto strategy_index = [&](const sim::Plan& p) {
    return static_cast<std::size_t>(std::find(res.strategies.begin(), res.strategies.end(), p.strategy) - res.strategies.begin());
  };
  // ---- feasibility, block by block as the space is enumerated (tuner::enumerate_plan_blocks: the
  // plans of a block differ only in ZeRO, recompute and bucket size, and no plan elsewhere is the
  // same once those are reset). Per plan: the shapes (check_plan), then the memory of its
  // sim::memory_key (closed form, priced once per key: most plans differ from another only in what
  // leaves memory as it is - the strategy and its knobs). Only the candidates are kept: most of a
  // large space is refused or skipped here.
  //
  // Memory savers only cost time where a plan fits without them. Among plans alike but for them
  // (same layout, strategy, knobs, kernel, buckets): with a ZeRO stage and recompute mode that
  // fits, more recompute (none < selective < full) at that stage, and a higher stage >= 2 at that
  // recompute mode, are dominated (ZeRO-2 reduce-scatters every micro-batch what ZeRO-1 does once,
  // ZeRO-3 adds the gathers); full recompute of every layer gives way to the fewest layers that
  // fit (block method), which the search adds.
  //
  // The space's parts (plan_space_parts: one per 1D tp, pp, vp; the grids) are decided apart, on
  // the search's threads, and merged in enumeration order, so every count, index and example is
  // that of one pass over the space. A plan's index (the final tie-break) is its position among the
  // plans that pass check_plan, in enumeration order; the block-recompute plans the search adds
  // come after all of those, in the order they were added.
  const std::size_t kinds = sim::kInfeasibilityKinds;
  struct Part {
    // per strategy and reason: plans refused and the first one's message (SearchResult::without_plan)
    std::vector<std::array<std::pair<std::size_t, std::string>, sim::kInfeasibilityKinds>> refused_of;
    std::array<Refusal, sim::kInfeasibilityKinds> refused{};
    // the example of a memory refusal is the plan closest to fitting (smallest excess; first on ties)
    double closest = std::numeric_limits<double>::infinity();
    std::size_t considered = 0, infeasible = 0, dominated = 0;
    std::size_t passed = 0, added = 0;  // plans that passed check_plan; block-recompute plans added
    PlanStore plans;                    // the candidates: Candidate::slot (in this part)
    // the candidates by group (Candidate::own), each made a heap at the part's end
    // (CandidateQueue::heapify_part); index: among this part's passed, or kAdded + among its added
    std::vector<std::vector<Candidate>> heaps;
    double memory_seconds = 0, seconds = 0;  // thread time: memory and dominance; the whole part
  };
  const std::size_t groups = res.strategies.size() + 3;  // Candidate::own: the strategies, then the layouts (1d unused)
  auto memory_message = [&](const sim::Plan& p, const sim::MemoryEstimate& m) {
    // two decimals: the closest refusal is often a few tens of MB over, which one decimal shows as "0.0 GB over"
    return fmt::format("needs {:.2f} GB per GPU{} ({:.1f} GB model state, {:.1f} GB saved activations of {} of {}), "
                       "{:.2f} GB over the {:.2f} GB usable of {} ({:g} % of {:.0f} GB kept free)",
                       m.total() / 1e9, p.pp > 1 ? " on its fullest stage" : "", m.model_state() / 1e9, m.activations / 1e9,
                       p.pp > 1 ? "the micro-batches in flight" : "a micro-batch", p.micro_batch, m.over() / 1e9, m.usable() / 1e9,
                       cluster.gpu.name, 100 * m.reserve_fraction, m.capacity / 1e9);
  };
  auto decide_part = [&](std::size_t part_no, Part& part) {
    const auto start = clock::now();
    part.refused_of.resize(res.strategies.size());
    part.heaps.resize(groups);
    // `plan`: the plan refused, or a callable that makes it (made only where it is kept as an example);
    // `msg`: the message, or a callable that makes it (formatted only for the plans kept as examples);
    // `count` plans alike but for their savers, the first of them refused for the same reason;
    // `si`: the strategy's index (strategy_index)
    auto refuse = [&](std::size_t si, auto&& plan, sim::Infeasibility r, auto&& msg, double over = 0, std::size_t count = 1) {
      auto text = [&]() -> std::string {
        if constexpr (std::is_invocable_v<decltype(msg)>) return msg();
        else return std::string(msg);
      };
      if (si < part.refused_of.size()) {
        auto& [n, first] = part.refused_of[si][static_cast<int>(r)];
        if (n == 0) first = text();
        n += count;
      }
      auto& f = part.refused[static_cast<int>(r)];
      const bool better = r == sim::Infeasibility::memory && over < part.closest;
      if (f.count == 0 || better) {
        f.reason = r;
        if constexpr (std::is_invocable_v<decltype(plan)>) f.example = plan();
        else f.example = plan;
        f.message = text();
        if (r == sim::Infeasibility::memory) part.closest = over;
      }
      f.count += count;
      part.infeasible += count;
    };
    // A block's verdict: what becomes of each of its plans (refused by a saver check or by memory,
    // skipped as a dominated saver, a candidate) and the block-recompute plans it adds. It reads
    // only the fields of the block's memory_key_without_savers and its savers - check_plan_savers
    // reads ZeRO, recompute, pp, dp, the kernel and the dtype; the memory is its memory_key's;
    // dominance and the fewest recomputed layers read the fits and the savers - so the blocks of
    // one key with the same savers (blocks that differ in the strategy and its knobs: 84 % of the
    // default space's blocks that pass their shape checks) share it: decided for the first, replayed
    // for the others, with the same counts, indices, examples and candidates in the same order.
    enum class Fate : std::uint8_t { refused, memory, dominated, candidate };
    struct PlanFate {
      Fate fate = Fate::candidate;
      sim::Infeasibility reason{};       // Fate::refused: check_plan_savers' reason
      const sim::MemoryEstimate* mem{};  // Fate::memory, candidate: the plan's memory
    };
    struct AddedPlan {
      std::size_t from;  // the full-recompute plan of the block it recomputes fewer layers of
      int layers;        // recompute_layers (block method)
      const sim::MemoryEstimate* mem;
    };
    struct Verdict {
      std::vector<PlanFate> plans;
      std::vector<AddedPlan> added;
    };
    // Memory per key: the plans of blocks with one memory_key_without_savers share a PlanMemory and,
    // position by position (the same savers in the same order: a block's savers depend only on dp
    // and the space), their estimates and the verdict. A block whose savers are not those of the
    // first one of its key (none in today's enumeration) is decided plan by plan.
    struct BlockMemory {
      sim::Plan plan;  // the key's first block's head (shared refers to it; map nodes do not move)
      std::optional<sim::PlanMemory> shared;
      std::vector<BlockSavers> savers;  // the key's first block's
      std::vector<std::optional<sim::MemoryEstimate>> est;
      /// per position: the first position of the same memory_key (positions that differ only in a
      /// bucket size the memory does not read share an estimate); filled by the first verdict
      std::vector<std::size_t> same_as;
      std::optional<Verdict> verdict;
    };
    std::unordered_map<sim::MemoryKey, BlockMemory, sim::MemoryKeyHash> block_mem;
    std::unordered_map<sim::MemoryKey, sim::MemoryEstimate, sim::MemoryKeyHash> mem_of;  // the plan-by-plan fallback
    BlockMemory* bm = nullptr;  // the current block's, or null: plan by plan
    auto memory_of = [&](const sim::Plan& p, std::size_t j) -> const sim::MemoryEstimate& {
      if (bm) {
        auto& e = bm->est[bm->same_as[j]];
        if (!e) e = sim::estimate_memory(bm->shared->for_savers(p));
        return *e;
      }
      auto [it, fresh] = mem_of.try_emplace(sim::memory_key(p));
      if (fresh) it->second = sim::estimate_memory(model, cluster, p);
      return it->second;
    };
    // block recompute: per memory key of a full-recompute plan, the fewest layers that fit and that plan's memory
    std::unordered_map<sim::MemoryKey, std::pair<int, sim::MemoryEstimate>, sim::MemoryKeyHash> fewest_of;
    // scratch for deciding a verdict: the block's plans, each one's memory, fit, dominance and group
    std::vector<sim::Plan> block;
    std::vector<char> fit_of, dominated;
    std::vector<int> group;
    std::vector<std::size_t> reps;  // each group's first member (position in the block)
    Verdict own;                    // a verdict not shared (bm null)
    auto decide = [&](std::span<const sim::Plan> block, Verdict& v) {
      const std::size_t n = block.size();
      v.plans.assign(n, PlanFate{});
      v.added.clear();
      if (bm && bm->same_as.empty())
        for (std::size_t j = 0; j < n; ++j) {
          std::size_t k = 0;
          while (!sim::same_memory_savers(block[k], block[j])) ++k;
          bm->same_as.push_back(k);
        }
      for (std::size_t j = 0; j < n; ++j)
        if (auto prob = sim::check_plan_savers(model, cluster, block[j], false)) v.plans[j] = {.fate = Fate::refused, .reason = prob->reason};
      fit_of.assign(n, 0);
      dominated.assign(n, 0);
      group.assign(n, -1);
      reps.clear();
      for (std::size_t j = 0; j < n; ++j) {
        if (v.plans[j].fate == Fate::refused) continue;
        v.plans[j].mem = &memory_of(block[j], j);
        fit_of[j] = v.plans[j].mem->fits();
        // groups: plans equal once ZeRO and recompute are reset, in order of their first member;
        // a block's plans differ only in those and the bucket size (enumerate_plan_blocks)
        for (std::size_t g = 0; g < reps.size() && group[j] < 0; ++g)
          if (block[reps[g]].dp_bucket_mb == block[j].dp_bucket_mb) group[j] = static_cast<int>(g);
        if (group[j] < 0) {
          group[j] = static_cast<int>(reps.size());
          reps.push_back(j);
        }
      }
      for (std::size_t g = 0; g < reps.size(); ++g) {
        // fits[zero][recompute]
        std::array<std::array<bool, 3>, sim::kMaxZeroStage + 1> fit{};
        for (std::size_t j = 0; j < n; ++j)
          if (group[j] == static_cast<int>(g) && fit_of[j]) fit[block[j].zero][static_cast<int>(block[j].recompute)] = true;
        for (std::size_t j = 0; j < n; ++j) {
          if (group[j] != static_cast<int>(g)) continue;
          const auto& p = block[j];
          const int z = p.zero, r = static_cast<int>(p.recompute);
          for (int r2 = 0; r2 < r && !dominated[j]; ++r2) dominated[j] = fit[z][r2];
          for (int z2 = 1; z2 < z && !dominated[j]; ++z2) dominated[j] = fit[z2][r];
        }
        // block recompute: where full recompute fits but no recompute does, the fewest layers that fit
        if (!space.block_recompute) continue;
        for (std::size_t j = 0; j < n; ++j) {
          if (group[j] != static_cast<int>(g)) continue;
          const auto& p = block[j];
          if (p.recompute != sim::Recompute::full || !fit_of[j]) continue;
          if (fit[p.zero][static_cast<int>(sim::Recompute::none)]) continue;
          sim::Plan q = p;
          q.recompute_method = sim::RecomputeMethod::block;
          // the fewest layers depend only on the memory key (plans differing in the strategy alone search alike)
          const auto [known, fresh] = fewest_of.try_emplace(sim::memory_key(p));
          if (fresh) {
            int lo = 1, hi = model.layers;  // fits at hi (every layer); find the fewest
            while (lo < hi) {
              const int mid = (lo + hi) / 2;
              q.recompute_layers = mid;
              if ((bm ? sim::estimate_memory(bm->shared->for_savers(q)) : sim::estimate_memory(model, cluster, q)).fits()) hi = mid;
              else lo = mid + 1;
            }
            known->second.first = lo;
            if (lo < model.layers) {
              q.recompute_layers = lo;
              known->second.second = bm ? sim::estimate_memory(bm->shared->for_savers(q)) : sim::estimate_memory(model, cluster, q);
            }
          }
          const int lo = known->second.first;
          if (lo >= model.layers) continue;
          v.added.push_back({.from = j, .layers = lo, .mem = &known->second.second});
          dominated[j] = 1;  // the same plan recomputing more layers
        }
      }
      for (std::size_t j = 0; j < n; ++j) {
        PlanFate& f = v.plans[j];
        if (f.fate == Fate::refused) continue;
        f.fate = dominated[j] && fit_of[j] ? Fate::dominated : fit_of[j] ? Fate::candidate : Fate::memory;
      }
    };
    // the block's cheap bounds so far: cheap_lower_bound reads of the savers only the recompute
    // mode, method and layers (ZeRO and the bucket size change no kernel it sums)
    std::vector<std::pair<std::array<int, 3>, Duration>> cheap;
    auto consider = [&](const sim::Plan& p, std::size_t i, std::size_t si, std::optional<Evaluator::GemmParts>& parts, std::size_t j, int block_layers) {
      if (!parts) parts = ev.gemm_parts(p);  // one class per block: the savers do not change it
      const bool grid = p.grid_tp();
      const std::array<int, 3> rc{static_cast<int>(p.recompute), static_cast<int>(p.recompute_method), p.recompute_layers};
      auto known = std::find_if(cheap.begin(), cheap.end(), [&](const auto& c) { return c.first[0] == rc[0] && c.first[1] == rc[1] && c.first[2] == rc[2]; });
      if (known == cheap.end()) known = cheap.insert(cheap.end(), {rc, ev.cheap_lower_bound(p, *parts)});
      const std::size_t own = grid ? res.strategies.size() + static_cast<std::size_t>(p.tp_layout) : si;
      part.heaps[own].push_back({.index = i,
                                 .slot = part.plans.size(),
                                 .bound = known->second,
                                 .none = p.strategy->baseline && !grid,
                                 .own = static_cast<std::uint16_t>(own)});
      part.plans.push(j, block_layers);
    };
    sim::Plan q;  // scratch: a plan of the block made from its head
    enumerate_plan_block_heads(model, cluster, space, part_no, [&](const sim::Plan& head, std::span<const BlockSavers> savers) {
      const std::size_t n = savers.size();
      const std::size_t si = strategy_index(head);
      auto plan_at = [&](std::size_t j) -> sim::Plan& {
        q = head;
        savers[j].apply(q);
        return q;
      };
      // check_plan: its shape checks read nothing a block's plans differ in (one call per block), the
      // saver checks per plan (in the verdict), their message formatted only for a plan kept as an example
      part.considered += n;
      if (const auto shapes = sim::check_plan_shapes(model, cluster, head, false)) {
        refuse(si, head, shapes->reason, [&] { return sim::check_plan_shapes(model, cluster, head)->message; }, 0, n);
        return;
      }
      auto [it, fresh] = block_mem.try_emplace(sim::memory_key_without_savers(head));
      BlockMemory& b = it->second;
      if (fresh) {
        b.plan = head;
        b.shared.emplace(model, cluster, b.plan);
        b.savers.assign(savers.begin(), savers.end());
        b.est.assign(n, std::nullopt);
      }
      bm = std::equal(b.savers.begin(), b.savers.end(), savers.begin(), savers.end()) ? &b : nullptr;
      const Verdict* v = bm && bm->verdict ? &*bm->verdict : nullptr;
      if (!v) {
        const auto tm = clock::now();
        block.assign(n, head);
        for (std::size_t j = 0; j < n; ++j) savers[j].apply(block[j]);
        Verdict& out = bm ? bm->verdict.emplace() : own;
        decide(block, out);
        v = &out;
        part.memory_seconds += std::chrono::duration<double>(clock::now() - tm).count();
      }
      // the saver refusals, then (in a second pass, as check_plan before the memory) the rest
      for (std::size_t j = 0; j < n; ++j)
        if (v->plans[j].fate == Fate::refused)
          refuse(si, [&] { return plan_at(j); }, v->plans[j].reason,
                 [&] { return sim::check_plan_savers(model, cluster, plan_at(j))->message; });
      std::optional<Evaluator::GemmParts> parts;
      part.plans.begin_block(head, savers);
      cheap.clear();
      std::size_t index = part.passed;  // a plan's index: its position among the plans that pass check_plan
      part.passed += static_cast<std::size_t>(std::count_if(v->plans.begin(), v->plans.end(), [](const PlanFate& f) { return f.fate != Fate::refused; }));
      for (std::size_t j = 0; j < n; ++j) {
        const PlanFate& f = v->plans[j];
        switch (f.fate) {
          case Fate::refused:
            continue;
          case Fate::dominated:
            ++part.dominated;
            break;
          case Fate::memory:
            refuse(si, [&] { return plan_at(j); }, sim::Infeasibility::memory, [&] { return memory_message(plan_at(j), *f.mem); }, f.mem->over());
            break;
          case Fate::candidate:
            consider(plan_at(j), index, si, parts, j, 0);
            break;
        }
        ++index;
      }
      for (const AddedPlan& a : v->added) {
        ++part.considered;
        sim::Plan& p = plan_at(a.from);
        p.recompute_method = sim::RecomputeMethod::block;
        p.recompute_layers = a.layers;
        const std::size_t i = kAdded + part.added++;
        if (!a.mem->fits()) refuse(si, p, sim::Infeasibility::memory, [&] { return memory_message(p, *a.mem); }, a.mem->over());
        else consider(p, i, si, parts, a.from, a.layers);
      }
    });
    CandidateQueue::heapify_part(part.heaps);
    part.seconds = std::chrono::duration<double>(clock::now() - start).count();
  };
  std::vector<Part> parts(plan_space_parts(model, cluster, space));
  // handed out last part first: the parts come in order of tensor-parallel width, and the wider
  // ones let more strategies and knobs run, so hold more candidates and take longest (the default
  // space's tp 4 and tp 2 parts 1.0-1.4 ms each, its tp 1 parts 0.02-0.5 ms); the short ones last
  // even out the threads' ends (the default `tune`: 0.8-1.1 ms of a thread idle at the end of this
  // wait in first-part-first order, 0.1-0.3 ms so; docs/benchmarks.md). Each part is decided apart
  // and merged in order below: the same result in any order.
  parallel_for(parts.size(), res.threads, [&](std::size_t j) {
    const std::size_t k = parts.size() - 1 - j;
    decide_part(k, parts[k]);
  });
  // merged in order
  std::vector<std::array<std::pair<std::size_t, std::string>, sim::kInfeasibilityKinds>> refused_of(res.strategies.size());
  std::array<Refusal, sim::kInfeasibilityKinds> refused{};
  double closest = std::numeric_limits<double>::infinity();
  // the candidates (slot = Candidate::slot), kept in their parts: the parts' first slots
  std::vector<std::size_t> first_slot;
  auto locate = [&](std::size_t slot) {  // the part holding it, and its slot there
    const std::size_t k = static_cast<std::size_t>(std::upper_bound(first_slot.begin(), first_slot.end(), slot) - first_slot.begin()) - 1;
    return std::pair<const PlanStore&, std::size_t>(parts[k].plans, slot - first_slot[k]);
  };
  auto plan_of = [&](std::size_t slot) {
    const auto [store, i] = locate(slot);
    return store[i];
  };
  auto class_hash_of = [&](std::size_t slot) {
    const auto [store, i] = locate(slot);
    return store.class_hash(i, [&](const sim::Plan& p) { return ev.bound_class_hash(p); });
  };
  CandidateQueue queue(groups);  // the candidates (below)
  std::size_t passed = 0, added = 0, slots = 0;
  double memory_seconds = 0, part_seconds = 0;
  for (const Part& part : parts) passed += part.passed;
  first_slot.reserve(parts.size());
  std::size_t passed_before = 0;
  for (Part& part : parts) {
    for (std::size_t si = 0; si < refused_of.size(); ++si)
      for (std::size_t r = 0; r < kinds; ++r) {
        auto& [n, first] = refused_of[si][r];
        const auto& [pn, pfirst] = part.refused_of[si][r];
        if (n == 0 && pn > 0) first = pfirst;
        n += pn;
      }
    for (std::size_t r = 0; r < kinds; ++r) {
      auto& f = refused[r];
      Refusal& pf = part.refused[r];
      if (pf.count == 0) continue;
      const bool better = static_cast<sim::Infeasibility>(r) == sim::Infeasibility::memory && part.closest < closest;
      const std::size_t count = f.count + pf.count;
      if (f.count == 0 || better) {
        f = std::move(pf);
        if (static_cast<sim::Infeasibility>(r) == sim::Infeasibility::memory) closest = part.closest;
      }
      f.count = count;
    }
    res.considered += part.considered;
    res.infeasible += part.infeasible;
    res.dominated += part.dominated;
    memory_seconds += part.memory_seconds;
    part_seconds += part.seconds;
    const PartOffsets at{.passed = passed_before, .added = passed + added, .slot = slots};
    for (std::size_t g = 0; g < groups; ++g) queue.add_part(g, part.heaps[g], at);
    first_slot.push_back(slots);
    slots += part.plans.size();
    passed_before += part.passed;
    added += part.added;
  }
  // the wall time of the pass, split as its parts' time (summed over threads) was: memory + dominance, the rest
  const double decided_s = std::chrono::duration<double>(clock::now() - t0).count();
  res.phases.memory = part_seconds > 0 ? decided_s * memory_seconds / part_seconds : 0;
  res.phases.enumerate = decided_s - res.phases.memory;
  auto lap = [&, last = clock::now()]() mutable {
    const auto now = clock::now();
    const double d = std::chrono::duration<double>(now - last).count();
    last = now;
    return d;
  };
  // Candidates are taken in the order of (compute_lower_bound, index). That bound costs graphs of
  // 1 and 2 layers per class, so it is computed lazily: a min-heap on (bound, index) starts with
  // every candidate's cheap_lower_bound (strictly below its compute_lower_bound); a candidate on
  // top with only the cheap bound is pruned by it if it can no longer win (its full bound would
  // be pruned too: thresholds only fall) or else gets its full bound and goes back. A candidate on
  // top with its full bound comes off in exactly the order of the sorted list, so the rounds, the
  // estimates and the counts are those of computing every bound first (tests/tuner). The queue is
  // one per pruning group (CandidateQueue: a tournament over the parts' heaps and the heap of those
  // given their full bounds): a group whose first candidate is pruned is pruned whole.
  const std::size_t candidates = queue.size();
  std::size_t decided = 0;

  res.phases.bound = lap();  // the queue set up (its heaps came with the parts); the full bounds are computed in the rounds below
  // ---- screening in fixed rounds with bound pruning ----
  const std::size_t keep = static_cast<std::size_t>(std::max(1, opt.top_k) + std::max(0, opt.extra_full));
  struct Screened {
    std::size_t index, slot;
    Estimate est;
  };
  std::vector<Screened> best;       // the `keep` best estimates, sorted
  std::vector<Screened> best_none;  // the 3 best estimates of plans without overlap
  // the best estimate of each pipeline depth: the screening's error differs between pp = 1 (the
  // reduced-layer simulation) and pp > 1 (the pipeline estimate), so the finalists, simulated whole,
  // include each depth's best rather than only the `keep` near-identical variants of one depth
  std::map<int, Screened> best_of_pp;
  // the best estimate of each strategy searched (its index in res.strategies): the comparison of
  // strategies (per_strategy) needs each one's best, not only the overall winner's
  std::vector<std::optional<Screened>> best_of_strategy(res.strategies.size());
  // 2D / 2.5D grids (strategy none, tp_layout 2d | 2.5d) are compared as rows of their own: each
  // layout's best is kept apart from 1D Megatron-LM's (which stays the baseline)
  std::map<sim::TpLayout, Screened> best_of_layout;
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
  std::vector<Candidate> refine;
  std::vector<Duration> thr_own;  // per group (Candidate::own): the best screened step so far
  std::vector<std::pair<std::size_t, std::vector<std::size_t>>> by_class;  // a class's hash, its candidates in refine
  while (!queue.empty()) {
    const Duration thr_all = best.size() >= keep ? best.back().est.step_time : kInf;
    const Duration thr_none = best_none.size() >= 3 ? best_none.back().est.step_time : kInf;
    // the best screened step of each group (Candidate::own) so far
    thr_own.assign(groups, kInf);
    for (std::size_t si = 0; si < res.strategies.size(); ++si)
      if (best_of_strategy[si]) thr_own[si] = best_of_strategy[si]->est.step_time;
    for (const auto& [layout, sc] : best_of_layout) thr_own[res.strategies.size() + static_cast<std::size_t>(layout)] = sc.est.step_time;
    auto prunable = [&](const Candidate& c) {
      return opt.prune && c.bound >= thr_all && (!c.none || c.bound >= thr_none) && c.bound >= thr_own[c.own];
    };
    // the first candidate of a group pruned: the group's others are too (CandidateQueue)
    auto prune_group = [&](std::size_t g) {
      const std::size_t n = queue.drop(g);
      res.pruned += n;
      decided += n;
    };
    std::vector<Candidate> batch;
    while (!queue.empty() && batch.size() < kRound) {
      const std::size_t g = queue.top_group();
      if (prunable(queue.top(g))) {
        prune_group(g);
        continue;
      }
      if (!queue.top(g).full) {
        // the next candidates on top with cheap bounds: pruned by them, or their full bounds computed
        refine.clear();
        // Within a screening round the thresholds do not change, so the batch's size decides how the
        // bounds are split into jobs and at most how many are computed ahead (one refined early may
        // be one a later round would have pruned on its cheap bound; a pruned plan is pruned either
        // way), never which plans are screened, in what order, or any count shown. Large by default (SearchOptions::bound_batch): a job of
        // 32 held a class graph or two to build (a few tens of us, the other thread idle around
        // them); the default search's 2,035 full bounds took 76 jobs of 32 and take 26 of up to 256
        // (docs/benchmarks.md).
        while (!queue.empty() && refine.size() < std::max<std::size_t>(1, opt.bound_batch)) {
          const std::size_t h = queue.top_group();
          if (queue.top(h).full) break;
          if (prunable(queue.top(h))) prune_group(h);
          else refine.push_back(queue.pop(h));
        }
        res.full_bounds += refine.size();
        // class by class (a class's graph is built once, then the cache answers the rest): two
        // threads building one class's graph at once would each pay for it
        by_class.clear();
        for (std::size_t k = 0; k < refine.size(); ++k) {
          const std::size_t h = class_hash_of(refine[k].slot);
          auto g = std::find_if(by_class.begin(), by_class.end(), [&](const auto& c) { return c.first == h; });
          if (g == by_class.end()) by_class.push_back({h, {k}});
          else g->second.push_back(k);
        }
        parallel_for(by_class.size(), res.threads, [&](std::size_t c) {
          for (std::size_t k : by_class[c].second) {
            refine[k].bound = ev.compute_lower_bound(plan_of(refine[k].slot));
            refine[k].full = true;
          }
        });
        for (const Candidate& c : refine) queue.push(c);
        continue;
      }
      ++decided;
      batch.push_back(queue.pop(g));
    }
    if (dist.size <= 1) {
      parallel_for(batch.size(), res.threads, [&](std::size_t b) { est[b] = ev.estimate(plan_of(batch[b].slot)); });
    } else {
      // this process screens slots rank, rank + size, ...; then every process gets every estimate
      const std::size_t r = static_cast<std::size_t>(dist.rank), n = static_cast<std::size_t>(dist.size);
      const std::size_t mine = batch.size() > r ? (batch.size() - r + n - 1) / n : 0;
      // a process that fails still takes part in the all-gather (its peers would wait forever), with
      // its error: then every process throws the error of the lowest failed rank, the same everywhere
      std::string out(1, '\0');
      try {
        parallel_for(mine, res.threads, [&](std::size_t k) { est[r + k * n] = ev.estimate(plan_of(batch[r + k * n].slot)); });
        for (std::size_t k = 0; k < mine; ++k) put_estimate(out, r + k * n, est[r + k * n]);
      } catch (const common::ConfigError& e) {
        out = std::string(1, '\1') + e.what();
      } catch (const std::exception& e) {
        out = std::string(1, '\2') + e.what();
      }
      const std::vector<std::string> all = dist.allgather(out);
      for (const std::string& part : all) {
        if (part.empty() || part[0] == '\0') continue;
        const std::string msg = part.substr(1);
        if (part[0] != '\1') throw std::runtime_error(msg);
        const auto colon = msg.find(": ");  // ConfigError's text is "source: ...": rebuilt as it was
        if (colon == std::string::npos) throw common::ConfigError("tune", "", msg);
        throw common::ConfigError(msg.substr(0, colon), "", msg.substr(colon + 2));
      }
      std::vector<char> got(batch.size(), 0);
      for (const std::string& part : all) {
        std::string_view in(part);
        in.remove_prefix(1);
        while (!in.empty()) {
          Estimate e;
          const std::uint64_t slot = take_estimate(in, e);
          if (slot >= batch.size()) throw std::runtime_error("tuner: a distributed search received an estimate for no plan");
          est[slot] = std::move(e);
          got[slot] = 1;
        }
      }
      if (std::count(got.begin(), got.end(), 0))
        throw std::runtime_error("tuner: a distributed search is missing estimates (the processes disagree on the plan space)");
    }
    for (std::size_t b = 0; b < batch.size(); ++b) {
      const std::size_t i = batch[b].slot;
      ++res.screened;
      const Screened s{batch[b].index, i, est[b]};
      insert(best, s, keep);
      const sim::Plan pi = plan_of(i);
      if (pi.strategy->baseline && !pi.grid_tp()) insert(best_none, s, 3);
      const auto [at, fresh] = best_of_pp.try_emplace(pi.pp, s);
      if (!fresh && better(s, at->second)) at->second = s;
      if (pi.grid_tp()) {
        const auto [lt, first] = best_of_layout.try_emplace(pi.tp_layout, s);
        if (!first && better(s, lt->second)) lt->second = s;
        continue;
      }
      auto& own = best_of_strategy[strategy_index(pi)];
      if (!own || better(s, *own)) own = s;
    }
    if (opt.progress) opt.progress({decided, candidates, std::chrono::duration<double>(clock::now() - t0).count()});
  }

  res.phases.screen = lap();
  res.bound_classes = ev.bound_classes() - classes_before;
  // ---- whole-model simulations of the finalists ----
  std::vector<Screened> finalists = best;
  auto add_finalist = [&](const Screened& s) {
    if (std::none_of(finalists.begin(), finalists.end(), [&](const Screened& f) { return f.slot == s.slot; })) finalists.push_back(s);
  };
  for (const auto& s : best_none) add_finalist(s);
  for (const auto& [pp, s] : best_of_pp) add_finalist(s);
  for (const auto& [layout, s] : best_of_layout) add_finalist(s);
  for (const auto& s : best_of_strategy)
    if (s) add_finalist(*s);
  std::vector<RankedPlan> full(finalists.size());
  // the caller's plans (SearchOptions::also_simulate), simulated in the same wait as the finalists:
  // those that are not finalists, each once, after them
  std::vector<sim::Plan> also;
  if (opt.also_simulate && !best.empty())
    for (sim::Plan& q : opt.also_simulate(plan_of(best.front().slot)))
      if (std::find(also.begin(), also.end(), q) == also.end()) also.push_back(std::move(q));
  std::vector<sim::Plan> finalist_plans;
  finalist_plans.reserve(finalists.size());
  for (const Screened& f : finalists) finalist_plans.push_back(plan_of(f.slot));
  std::vector<std::size_t> also_from(also.size(), finalists.size());  // the finalist it is, or finalists.size()
  std::vector<std::size_t> also_run;                                  // the others: simulated below
  for (std::size_t k = 0; k < also.size(); ++k) {
    for (std::size_t f = 0; f < finalists.size() && also_from[k] == finalists.size(); ++f)
      if (finalist_plans[f] == also[k]) also_from[k] = f;
    if (also_from[k] == finalists.size()) also_run.push_back(k);
  }
  std::vector<Duration> also_step(also.size());
  // job 0 frees the parts (the candidates, their heaps, the refusals' leftovers: tens of thousands
  // of blocks, 0.16-0.29 ms of the default `tune` when they went at the search's end, the other
  // thread idle) beside the simulations; nothing reads them from here on
  parallel_for(1 + finalists.size() + also_run.size(), res.threads, [&](std::size_t job) {
    if (job == 0) {
      std::vector<Part>().swap(parts);
      return;
    }
    const std::size_t f = job - 1;
    if (f >= finalists.size()) {
      const std::size_t k = also_run[f - finalists.size()];
      also_step[k] = ev.simulate(also[k]).step_time;
      return;
    }
    const sim::Plan& p = finalist_plans[f];
    full[f] = RankedPlan{.index = finalists[f].index, .plan = p, .estimate = finalists[f].est};
    if (opt.keep_simulations) {
      auto kept = std::make_shared<sim::SimulatedPlan>(ev.simulate_kept(p));
      full[f].report = kept->report;
      full[f].report.timelines.clear();  // kept once, in `simulated`
      // not the graphs: 5-6 MB more at the peak for the default search, and a page fault here
      // costs ~10 us (docs/benchmarks.md); explain_plan rebuilds the few it reads
      kept->graphs = {};
      for (auto& t : kept->report.timelines) t.graph = nullptr;
      full[f].simulated = std::move(kept);
    } else {
      full[f].report = ev.simulate(p);
    }
  });
  res.simulated_full = full.size();
  for (std::size_t k = 0; k < also.size(); ++k)
    res.also_simulated.emplace_back(std::move(also[k]), also_from[k] < full.size() ? full[also_from[k]].report.step_time : also_step[k]);
  res.phases.whole = lap();
  for (const auto& r : full)
    res.max_screen_error = std::max(res.max_screen_error, std::abs(r.estimate.step_time.s() - r.report.step_time.s()) / r.report.step_time.s());
  std::sort(full.begin(), full.end(), [](const RankedPlan& a, const RankedPlan& b) {
    return a.report.step_time != b.report.step_time ? a.report.step_time < b.report.step_time : a.index < b.index;
  });
  for (const auto& r : full)
    if (r.plan.strategy->baseline && !r.plan.grid_tp()) {  // Megatron-LM: 1D tensor parallelism without overlap
      res.baseline = r;
      break;
    }
  // full is fastest first: the first finalist of each strategy (and of each grid layout) is its best
  for (const auto& r : full)
    if (std::none_of(res.per_strategy.begin(), res.per_strategy.end(),
                     [&](const RankedPlan& q) { return q.plan.strategy == r.plan.strategy && q.plan.tp_layout == r.plan.tp_layout; }))
      res.per_strategy.push_back(r);
  // the ranking is every finalist simulated whole, fastest first: a plan screened only as a baseline
  // candidate that simulates faster than the screened best is ranked (and recommended) too, so the
  // recommendation is never slower than the baseline
  for (const auto& r : full) {
    if (static_cast<int>(res.top.size()) >= std::max(1, opt.top_k)) break;
    res.top.push_back(r);
  }
  for (auto& f : refused)
    if (f.count) res.refusals.push_back(f);
  for (std::size_t si = 0; si < res.strategies.size(); ++si) {
    const sim::Strategy* st = res.strategies[si];
    if (std::any_of(res.per_strategy.begin(), res.per_strategy.end(), [&](const RankedPlan& q) { return q.plan.strategy == st && !q.plan.grid_tp(); }))
      continue;
    StrategyRefusal w{.strategy = st};
    std::size_t most = 0;
    for (const auto& [n, first] : refused_of[si]) {
      w.plans += n;
      if (n > most) {
        most = n;
        w.message = first;
      }
    }
    res.without_plan.push_back(std::move(w));
  }
  res.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return res;
}

}  // namespace tuner
