// The event loop: in-order streams per simulated rank, the host's issue times, collectives that
// start together on their group's simulated members, and rates from the resource models.
#include "sim/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>

#include "common/checked.hpp"
#include "common/limits.hpp"
#include "sim/rate_memo.hpp"

namespace sim {
namespace {

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
constexpr int kIdle = EngineView::kIdle;
constexpr std::size_t kNoFork = std::numeric_limits<std::size_t>::max();

/// Another simulated member of one of a rank's groups, and that group's index in its graph.
struct Peer {
  int rank;
  GroupId group;
};

/// Whether the host waits, after issuing task i, until the GPU has run it and everything issued before
/// it (torch.cuda.synchronize), issuing the tasks after it from then on at its launch cost each:
/// a pipeline receive of a plan without p2p_overlap. Megatron-LM's blocking exchange
/// (p2p_communication.py _communicate: the batched sends and receives posted together, waited for,
/// then torch.cuda.synchronize() "to protect against race condition when using
/// batch_isend_irecv()"), so a stage's host issues the pass that needs the data only once it has
/// arrived and cannot run ahead of its GPU across passes.
/// The receives of one exchange (a pass's row slices) are posted together and waited for once: the
/// sync comes after the last of consecutive receives. The 1F1B schedule only: its graphs issue each
/// exchange where Megatron-LM does (the sends of a pass, then the receives the next pass needs);
/// Megatron-LM's interleaved schedule exchanges both directions at once after a forward and a
/// backward pass (send_forward_backward_recv_forward_backward), an order its graphs do not
/// reproduce, so a blocking interleaved plan keeps the host's lead.
bool host_sync(const StepGraph& g, std::size_t i) {
  auto receive = [&](std::size_t k) { return g.tasks[k].op == Op::pipe && g.tasks[k].n_inputs == 0; };
  return g.plan.schedule == PipelineSchedule::one_f_one_b && !g.plan.p2p_overlap && receive(i) && !(i + 1 < g.size() && receive(i + 1));
}

/// The graphs' tasks priced once for every Simulation of one Engine::simulate (first, middle and
/// last micro-batch): per rank, its table and each task's cost index in it.
struct Priced {
  std::vector<CostTable*> tables;
  std::vector<std::unique_ptr<CostTable>> own;
  std::vector<std::vector<std::uint32_t>> cost_index;
  Priced(std::span<const StepGraph* const> graphs, const hardware::CostModel& cost) : tables(graphs.size()), own(graphs.size()), cost_index(graphs.size()) {
    for (std::size_t r = 0; r < graphs.size(); ++r) {
      const StepGraph& g = *graphs[r];
      tables[r] = &kept_cost_table(cost, g.plan.stack, own[r]);
      cost_index[r].resize(g.size());
      for (std::size_t i = 0; i < g.size(); ++i) cost_index[r][i] = tables[r]->index(g.tasks[i]);
    }
  }
};

struct RankState {
  const StepGraph* g = nullptr;
  const CostTable* table = nullptr;            // distinct costs of this rank's tasks (Priced)
  const std::uint32_t* cost_index = nullptr;   // task -> its cost in `table`
  const TaskCost& cost(std::uint32_t t) const { return (*table)[cost_index[t]]; }
  std::vector<std::vector<std::uint32_t>> queue;  // per stream: included tasks, issue order
  std::vector<std::int64_t> issue_ps;             // host has issued task i by then (kNever: behind a host sync not yet reached)
  std::vector<std::int64_t> host_ps;              // the host's launch time through task i, from the step's start
  std::vector<std::uint32_t> syncs;               // included tasks with host_sync, in issue order
  std::vector<std::uint32_t> sync_need;           // per sync: included tasks issued up to it (all must complete)
  std::size_t next_sync = 0;                      // the sync the host waits at (or will)
  std::uint32_t done_before_sync = 0;             // completed tasks issued up to syncs[next_sync]
  std::vector<std::uint32_t> pending;
  std::vector<std::uint32_t> pending0;            // `pending` before the run (Simulation::hand_over)
  std::vector<TaskTiming> timing;
  std::vector<std::size_t> head;     // per stream
  std::vector<int> running;          // per stream: index into the activities, or kIdle
  std::vector<char> compute_stream;  // per stream: of kind compute
  std::vector<StreamId> compute_streams, comm_streams;
  bool in_order_start = false;  // kernels start in issue order (CUDA_DEVICE_MAX_CONNECTIONS=1): see gated()
  std::vector<std::vector<Peer>> peers;            // per group: its other simulated members
  std::vector<std::vector<std::uint32_t>> by_seq;  // per group: the task with each sequence number
  // the busy times, counted as intervals end (Simulation::settle): since when each stream's task
  // runs, how many compute and communication streams run, since when the rank has been in its class
  std::vector<std::int64_t> busy_since;
  int n_compute = 0, n_comm = 0;
  std::int64_t since = 0;
};

struct RankStats {
  std::int64_t compute = 0, exposed = 0, idle = 0;
  std::vector<std::int64_t> busy;  // per stream
};

struct RunStats {
  std::int64_t end = 0;
  std::vector<RankStats> ranks;  // per simulated graph
  std::size_t events = 0;
  std::size_t shared = 0;  // of events, those taken over from another run (Simulation::hand_over)
  std::size_t repeated = 0;  // of events, those repeated from the layer before (Simulation::fast_forward)
};

/// Which micro-batch of the step a run simulates: the tasks it includes (Task::step_start only in
/// the first, Task::once_per_step only in the last; `only`: a step of one micro-batch has both).
enum class MicroBatch : std::uint8_t { first, middle, last, only };

bool runs_in(const Task& t, MicroBatch mb) {
  if (t.once_per_step && mb != MicroBatch::last && mb != MicroBatch::only) return false;
  if (t.step_start && mb != MicroBatch::first && mb != MicroBatch::only) return false;
  return true;
}

class Simulation {
 public:
  /// `memo`: the rates remembered per running set, shared by the runs of one Engine::simulate (they
  /// price the same tasks alike: Priced). `fast_forward`: repeat steady layers (EngineOptions).
  Simulation(std::span<const StepGraph* const> graphs, const hardware::CostModel& cost, const Priced& priced, const std::vector<ModelFactory>& models,
             MicroBatch which, bool timeline, RateMemo& memo, bool fast_forward)
      : timeline_(timeline), which_(which), memo_(&memo) {
    const auto& cl = cost.cluster();
    for (const auto& link : cost.links()) link_bytes_per_ps_.push_back(link.bytes_per_s * 1e-12);
    for (const auto& make : models) {
      models_.push_back(make(cost));
      memoize_ = memoize_ && models_.back()->memoizable();
    }
    stateless_ = memoize_;
    ranks_.resize(graphs.size());
    std::size_t max_running = 0;
    for (std::size_t r = 0; r < graphs.size(); ++r) {
      auto& rs = ranks_[r];
      const StepGraph& g = *graphs[r];
      rs.g = &g;
      const auto n = g.size();
      const std::size_t ns = g.streams.size();
      rs.table = priced.tables[r];
      rs.cost_index = priced.cost_index[r].data();
      rs.issue_ps.assign(n, 0);
      rs.pending.assign(g.in_degree.begin(), g.in_degree.end());
      if (timeline_) rs.timing.assign(n, TaskTiming{});
      rs.queue.resize(ns);
      rs.head.assign(ns, 0);
      rs.running.assign(ns, kIdle);
      rs.busy_since.assign(ns, 0);
      for (std::size_t s = 0; s < ns; ++s) {
        const bool compute = g.streams[s].kind == StreamKind::compute;
        rs.compute_stream.push_back(compute);
        (compute ? rs.compute_streams : rs.comm_streams).push_back(static_cast<StreamId>(s));
      }
      max_running += ns;
      // Megatron-LM requires CUDA_DEVICE_MAX_CONNECTIONS=1 with tensor parallelism before Blackwell
      // (arguments.py validate_args; bridge/check.cpp): one hardware queue, kernels start in issue order.
      rs.in_order_start = g.plan.tp > 1 && cl.gpu.arch != hardware::GpuArch::blackwell && cl.gpu.arch != hardware::GpuArch::cpu;
      const std::int64_t launch = cl.host.launch_for(g.plan.stack).ps;
      std::int64_t host = 0;
      rs.host_ps.assign(n, 0);
      std::uint32_t included = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const Task& t = g.tasks[i];
        if (!runs_in(t, which)) {
          // not in this micro-batch: what waits for it does not
          for (auto v : boost::make_iterator_range(g.successors(i))) --rs.pending[v];
          continue;
        }
        // checked: a hand-edited graph (simulate --graph) may carry 65,535 launches per task
        host = common::checked_add(host, common::checked_mul(launch, t.launches, "simulated time"), "simulated time");
        rs.host_ps[i] = host;
        // tasks behind a host sync are issued once the host gets past it (release_sync)
        rs.issue_ps[i] = rs.syncs.empty() ? host : kNever;
        rs.queue[t.stream].push_back(static_cast<std::uint32_t>(i));
        ++included;
        if (host_sync(g, i)) {
          rs.syncs.push_back(static_cast<std::uint32_t>(i));
          rs.sync_need.push_back(included);
        }
      }
      rs.peers.resize(g.groups.size());
      rs.by_seq.resize(g.groups.size());
      if (graphs.size() > 1)
        for (std::size_t i = 0; i < n; ++i) {
          const Task& t = g.tasks[i];
          if (!t.group || !t.is_collective()) continue;
          auto& seqs = rs.by_seq[*t.group];
          if (seqs.size() <= t.seq) seqs.resize(t.seq + 1, ~0u);
          seqs[t.seq] = static_cast<std::uint32_t>(i);
        }
      rs.pending0 = rs.pending;
    }
    // groups are matched by (name, instance) across the simulated graphs
    for (std::size_t r = 0; r < ranks_.size(); ++r)
      for (std::size_t gi = 0; gi < ranks_[r].g->groups.size(); ++gi)
        for (std::size_t q = 0; q < ranks_.size(); ++q) {
          if (q == r) continue;
          const auto& mine = ranks_[r].g->groups[gi];
          const auto& theirs = ranks_[q].g->groups;
          for (std::size_t gj = 0; gj < theirs.size(); ++gj)
            if (theirs[gj].name == mine.name && theirs[gj].instance == mine.instance)
              ranks_[r].peers[gi].push_back({static_cast<int>(q), static_cast<GroupId>(gj)});
        }
    active_.reserve(max_running);  // never reallocates: at most one activity per stream
    active_key_.reserve(max_running);
    // the memo key packs a rank in 12 bits and a flow partner in 10: beyond that, no memo
    if (ranks_.size() > 0xFFF || max_running > 0x3FF) memoize_ = false;
    // More than two distinct ranks (pipeline stages) run out of phase: their joint running sets
    // rarely repeat, and a memo of them grows by a long key per event (measured on gpt3-175b at
    // pp 16: 2.4 s and 284 MB with it, 1.5 s and 105 MB without; same step to the picosecond).
    if (ranks_.size() > 2) memoize_ = false;
    for (const auto& rs : ranks_) rank_views_.push_back({rs.running, rs.compute_streams, rs.comm_streams});
    // steady layers (fast_forward): one rank, no host syncs, rates of the running set alone, and
    // layers enough to repeat (the tuner's reduced-layer graphs have 1 or 2)
    if (fast_forward && ranks_.size() == 1 && stateless_ && ranks_[0].syncs.empty() && !ranks_[0].compute_streams.empty() &&
        ranks_[0].g->model.layers >= 4) {
      ff_.on = true;
      ff_.main = ranks_[0].compute_streams[0];
    }
    view_.ranks = rank_views_;
    view_.link_bytes_per_ps = link_bytes_per_ps_;
    view_.cluster = &cl;
  }

  /// Until this run and `next` (a run of the same graphs and Priced, another micro-batch) part - the
  /// first time a stream of either reaches a task the other does not run, or a task issued after
  /// one - they are the same run event for event: this run hands its state over to `next` there
  /// (hand_over), and next.run() goes on from it instead of simulating the shared part again. The
  /// micro-batches differ in their tasks step_start and once_per_step: a step's last micro-batch
  /// first runs its DP reductions and optimizer late in its backward pass (Builder), so all its forward
  /// pass and most of its backward are the runs' shared part. Not with host syncs (pipeline graphs, run
  /// once) or models with state of their own.
  void fork_into(Simulation& next);
  RunStats run();
  std::vector<RankState>& ranks() { return ranks_; }

 private:
  bool ready(int r, StreamId s, std::int64_t now, std::int64_t& wake) const {
    const auto& rs = ranks_[r];
    if (rs.running[s] != kIdle || rs.head[s] >= rs.queue[s].size()) return false;
    const auto t = rs.queue[s][rs.head[s]];
    if (rs.pending[t] != 0) return false;
    if (rs.issue_ps[t] > now) {
      wake = std::min(wake, rs.issue_ps[t]);
      return false;
    }
    return !gated(r, s, t, now, wake);
  }
  /// Kernels start in issue order (RankState::in_order_start): a collective issued behind a GEMM
  /// of several waves gets SMs for its CTAs only when the GEMM's last wave has been placed
  /// (pytorch/pytorch#143890; hardware::overlap, IssueOrder::compute_first): it waits until the
  /// GEMM has that wave's work left. `wake`: when to look again.
  bool gated(int r, StreamId s, std::uint32_t t, std::int64_t now, std::int64_t& wake) const {
    const auto& rs = ranks_[r];
    if (!rs.in_order_start || rs.compute_stream[s]) return false;
    bool wait = false;
    for (StreamId cs : rs.compute_streams) {
      const int ai = rs.running[cs];
      if (ai == kIdle) continue;
      const Activity& a = active_[static_cast<std::size_t>(ai)];
      if (a.task > t || a.cost->gemm_waves <= 1) continue;  // issued after the collective, or no wave to wait for
      const double last_wave = static_cast<double>(a.cost->first_ps) / a.cost->gemm_waves;
      const double left = a.remaining - last_wave;  // ps of work before its last wave is placed
      if (left < 1.0) continue;
      wait = true;
      const double ps = a.rate > 0 ? left / a.rate : left;
      wake = std::min(wake, now + std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(ps))));
    }
    return wait;
  }
  /// The stream on which peer `p` can start its member of the collective with sequence number
  /// `seq`, if it is at the head of that stream and ready now.
  std::optional<StreamId> peer_ready(const Peer& p, std::uint32_t seq, std::int64_t now) const {
    const auto& qs = ranks_[p.rank];
    const auto& seqs = qs.by_seq[p.group];
    if (seq >= seqs.size() || seqs[seq] == ~0u) return std::nullopt;
    const std::uint32_t qt = seqs[seq];
    const StreamId s = qs.g->tasks[qt].stream;
    std::int64_t wake = kNever;
    if (!ready(p.rank, s, now, wake) || qs.queue[s][qs.head[s]] != qt) return std::nullopt;
    return s;
  }
  void start(int r, StreamId s, std::int64_t now, std::uint32_t flow);
  void complete(std::size_t a, std::int64_t now);
  void release_sync(RankState& rs, std::int64_t now);
  void update_rates();
  void hand_over(std::int64_t now, const RunStats& st);
  /// Rank r's time from its `since` to now, to the class it was in: compute (a compute stream
  /// busy), exposed (only communication streams busy) or idle.
  void settle(std::size_t r, std::int64_t now) {
    RankState& rs = ranks_[r];
    RankStats& rk = st_->ranks[r];
    const std::int64_t dt = now - rs.since;
    (rs.n_compute ? rk.compute : rs.n_comm ? rk.exposed : rk.idle) += dt;
    rs.since = now;
  }
  /// Every rank's and running stream's time up to now, into the run's stats.
  void flush(std::int64_t now) {
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      settle(r, now);
      RankState& rs = ranks_[r];
      for (std::size_t s = 0; s < rs.running.size(); ++s)
        if (rs.running[s] != kIdle) {
          st_->ranks[r].busy[s] += now - rs.busy_since[s];
          rs.busy_since[s] = now;
        }
    }
  }
  void steady_look(std::int64_t& now, RunStats& st);
  bool fast_forward(std::int64_t& now, RunStats& st);
  /// When the host has issued every task of this run up to task x (no host syncs: issue times grow
  /// with the task index).
  std::int64_t issued_by(std::size_t x) const {
    const RankState& rs = ranks_[0];
    for (std::size_t i = x + 1; i-- > 0;)
      if (runs_in(rs.g->tasks[i], which_)) return rs.issue_ps[i];
    return 0;
  }
  void steady_snapshot(std::int64_t now, const RunStats& st);

  bool timeline_;
  MicroBatch which_;
  bool stateless_ = true;  // every model memoizable: the rates depend on the running set alone (fork_into)
  Simulation* fork_ = nullptr;                     // the run this one hands its state over to (fork_into)
  std::vector<std::vector<std::size_t>> fork_at_;  // per rank, per stream: the queue position where the runs part (kNoFork: never)
  std::vector<std::pair<int, StreamId>> at_fork_;  // the streams whose head is at their fork_at_
  bool must_part() const;
  bool resumed_ = false;                           // this run goes on from a hand-over: resume_st_ at resume_now_
  RunStats resume_st_;
  std::int64_t resume_now_ = 0;
  std::vector<double> link_bytes_per_ps_;
  std::vector<std::unique_ptr<EngineModel>> models_;
  std::vector<RankState> ranks_;
  std::vector<Activity> active_;
  std::vector<EngineView::Rank> rank_views_;
  EngineView view_;
  bool memoize_ = true;  // every model's rates depend on the running set alone (EngineModel::memoizable)
  /// An activity's word of the memo key: its cost (index in its rank's table), stream, stage and rank.
  std::uint64_t memo_word(const Activity& a) const {
    return ranks_[a.rank].cost_index[a.task] | (std::uint64_t{a.stream} << 32) | (std::uint64_t(a.stage) << 40) |
           (std::uint64_t(a.rank) << 42);
  }
  std::vector<std::uint64_t> active_key_;  // per activity (as active_): memo_word
  std::vector<std::uint64_t> key_;         // scratch: the key with flows, several ranks
  std::vector<double> rates_;              // scratch: its rates
  RateMemo* memo_;
  RunStats* st_ = nullptr;  // the stats of the run under way (run())
  std::uint32_t next_flow_ = 0;
  std::vector<StreamId> peer_streams_;  // scratch: where each peer starts its member of a collective
  std::vector<char> dirty_;             // per rank: a task of it completed since its streams were scanned
  std::vector<std::int64_t> rank_wake_;  // per rank: the earliest issue time its scan waits for
  std::uint64_t memo_lookups_ = 0, memo_hits_ = 0;
  /// Steady layers (EngineOptions::fast_forward): the state when rank 0's first compute stream
  /// reached a layer's first task (anchor A), and what started and ended since.
  struct Steady {
    bool on = false;
    StreamId main = 0;                 // the compute stream whose head marks the layers
    std::size_t seen_head = ~std::size_t{0};
    bool have = false;                 // a snapshot is held
    std::int64_t now = 0;
    std::uint32_t anchor = 0;          // the task at main's head at A
    std::vector<std::size_t> head;
    std::vector<Activity> active;
    std::vector<std::uint32_t> pending;
    RankStats stats;
    std::size_t events = 0;
    char dirty = 0;
    std::int64_t wake = 0;             // rank_wake_ - now (kNever: none)
    std::vector<std::pair<std::uint32_t, std::int64_t>> started, ended;
    std::vector<std::size_t> advance;  // scratch: per stream, tasks started per period
    std::vector<std::uint32_t> inert;  // scratch: heads that wait through the periods
    std::vector<std::uint32_t> dec;    // scratch: the pending counts one period lowers
  } ff_;
};

void Simulation::start(int r, StreamId s, std::int64_t now, std::uint32_t flow) {
  auto& rs = ranks_[r];
  const auto t = rs.queue[s][rs.head[s]];
  const auto& c = rs.cost(t);
  Activity a{.rank = r,
             .task = t,
             .stream = s,
             .stage = c.collective ? Stage::latency : Stage::compute,
             .flow = flow,
             .cost = &c,
             .remaining = static_cast<double>(c.first_ps),
             .rate = 1.0,
             .finish = now};
  if (timeline_) rs.timing[t].start = Duration::from_ps(now);
  if (ff_.have) ff_.started.emplace_back(t, now);
  settle(static_cast<std::size_t>(r), now);
  ++(rs.compute_stream[s] ? rs.n_compute : rs.n_comm);
  rs.busy_since[s] = now;
  rs.running[s] = static_cast<int>(active_.size());
  active_.push_back(a);
  active_key_.push_back(memo_word(a));
}

void Simulation::complete(std::size_t ai, std::int64_t now) {
  Activity& a = active_[ai];
  auto& rs = ranks_[a.rank];
  const auto& c = *a.cost;
  if (a.stage == Stage::latency && c.second_ps > 0) {
    a.stage = Stage::transfer;
    a.remaining = static_cast<double>(c.second_ps);
    active_key_[ai] = memo_word(a);
    return;
  }
  if (timeline_) rs.timing[a.task].end = Duration::from_ps(now);
  if (ff_.have) ff_.ended.emplace_back(a.task, now);
  settle(static_cast<std::size_t>(a.rank), now);
  --(rs.compute_stream[a.stream] ? rs.n_compute : rs.n_comm);
  st_->ranks[static_cast<std::size_t>(a.rank)].busy[a.stream] += now - rs.busy_since[a.stream];
  dirty_[static_cast<std::size_t>(a.rank)] = 1;
  rs.running[a.stream] = kIdle;
  ++rs.head[a.stream];
  if (fork_ && rs.head[a.stream] == fork_at_[static_cast<std::size_t>(a.rank)][a.stream]) at_fork_.push_back({a.rank, a.stream});
  for (auto v : boost::make_iterator_range(rs.g->successors(a.task))) --rs.pending[v];
  if (rs.next_sync < rs.syncs.size() && a.task <= rs.syncs[rs.next_sync] && ++rs.done_before_sync == rs.sync_need[rs.next_sync])
    release_sync(rs, now);
  a.task = ~0u;  // removed by the caller
}

// Every task issued up to the sync has run: the host goes on from now, issuing the tasks up to the
// next sync at its launch cost each (its lead over the GPU is gone).
void Simulation::release_sync(RankState& rs, std::int64_t now) {
  const std::uint32_t at = rs.syncs[rs.next_sync++];
  const std::size_t end = rs.next_sync < rs.syncs.size() ? rs.syncs[rs.next_sync] + std::size_t{1} : rs.issue_ps.size();
  for (std::size_t j = at + std::size_t{1}; j < end; ++j) rs.issue_ps[j] = now + (rs.host_ps[j] - rs.host_ps[at]);
}

void Simulation::fork_into(Simulation& next) {
  if (!stateless_ || !next.stateless_ || next.ranks_.size() != ranks_.size()) return;
  std::vector<std::vector<std::size_t>> at(ranks_.size());
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    const RankState& a = ranks_[r];
    const RankState& b = next.ranks_[r];
    if (a.g != b.g || !a.syncs.empty() || !b.syncs.empty()) return;
    // the first task one run includes and the other does not: the host issues the tasks after it at
    // other times (its launch cost), so those differ too
    const StepGraph& g = *a.g;
    std::size_t d = g.size();
    for (std::size_t i = 0; i < g.size(); ++i)
      if (runs_in(g.tasks[i], which_) != runs_in(g.tasks[i], next.which_)) {
        d = i;
        break;
      }
    at[r].assign(a.queue.size(), kNoFork);
    for (std::size_t s = 0; s < a.queue.size(); ++s) {
      const auto& qa = a.queue[s];
      const auto& qb = b.queue[s];
      // queues are in issue order: their entries before d are the same in both runs
      const auto p = static_cast<std::size_t>(std::lower_bound(qa.begin(), qa.end(), d) - qa.begin());
      if (p == qa.size() && p == qb.size()) continue;  // the stream ends alike in both
      at[r][s] = p;
      if (p == 0) at_fork_.push_back({static_cast<int>(r), static_cast<StreamId>(s)});
    }
  }
  fork_at_ = std::move(at);
  fork_ = &next;
  if (next.timeline_ && !timeline_) {  // the shared part's task times are next's
    timeline_ = true;
    for (auto& rs : ranks_) rs.timing.assign(rs.g->size(), TaskTiming{});
  }
}

// Whether the runs part at this iteration: a stream at its fork position whose next task, in
// either run, waits for nothing. Until then the scans of such a stream see a task that waits for
// an input in both runs and leave everything as it is, so the runs stay the same.
bool Simulation::must_part() const {
  for (const auto& [r, s] : at_fork_) {
    const RankState& a = ranks_[static_cast<std::size_t>(r)];
    const RankState& b = fork_->ranks_[static_cast<std::size_t>(r)];
    const std::size_t p = a.head[s];
    if (p < a.queue[s].size() && a.pending[a.queue[s][p]] == 0) return true;
    // the other run's task waits for its own inputs less those completed here (hand_over)
    if (p < b.queue[s].size()) {
      const auto v = b.queue[s][p];
      if (b.pending0[v] - (a.pending0[v] - a.pending[v]) == 0) return true;
    }
  }
  return false;
}

// The runs part now: `next` starts from this run's state, its own tasks waiting as they do in it.
void Simulation::hand_over(std::int64_t now, const RunStats& st) {
  flush(now);
  Simulation& t = *fork_;
  fork_ = nullptr;
  at_fork_.clear();
  t.resume_st_ = st;
  t.resume_st_.shared = st.events;
  t.resume_now_ = now;
  t.resumed_ = true;
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    const RankState& a = ranks_[r];
    RankState& b = t.ranks_[r];
    std::copy(a.head.begin(), a.head.end(), b.head.begin());
    std::copy(a.running.begin(), a.running.end(), b.running.begin());  // in place: the models' views span it
    b.busy_since = a.busy_since;
    b.n_compute = a.n_compute;
    b.n_comm = a.n_comm;
    b.since = a.since;
    // what has completed is the same in both runs: each task waits for its own inputs less those
    for (std::size_t v = 0; v < b.pending.size(); ++v) b.pending[v] = b.pending0[v] - (a.pending0[v] - a.pending[v]);
    if (t.timeline_) b.timing = a.timing;
  }
  t.active_ = active_;
  t.active_key_ = active_key_;
  t.memoize_ = memoize_;
  t.memo_lookups_ = memo_lookups_;
  t.memo_hits_ = memo_hits_;
  t.next_flow_ = next_flow_;
  t.dirty_ = dirty_;
  t.rank_wake_ = rank_wake_;
}

// ---- steady layers (EngineOptions::fast_forward) ----
// A transformer's layers are alike: once the engine reaches layer l + 1's first compute task in the
// state it reached layer l's in - the same running set (costs, stages, work left), every stream's
// head one layer on (or still waiting), the same waits - every task P on (P: one layer's tasks),
// and the graph repeats with period P over the tasks the next layers touch, the next layers run
// exactly as this one did, Δ later each. The engine is deterministic and reads only differences of
// times (integer ps) and the running set, so it would compute the same events, bit for bit: they
// are repeated, not simulated (the completions' effects on the tasks that wait, the task times,
// the busy times and the events counted), and the simulation goes on from the last repeated layer.

// At the top of an iteration: when rank 0's main compute stream has just reached a layer's first
// task, the state is compared with the previous such moment's (fast_forward) and kept.
void Simulation::steady_look(std::int64_t& now, RunStats& st) {
  RankState& rs = ranks_[0];
  const std::size_t h = rs.head[ff_.main];
  if (h == ff_.seen_head) return;
  ff_.seen_head = h;
  const auto& q = rs.queue[ff_.main];
  if (h == 0 || h >= q.size()) return;
  const Task& t = rs.g->tasks[q[h]];
  if (t.layer < 0 || t.layer == rs.g->tasks[q[h - 1]].layer) return;
  // a task the host has not issued yet: its issue time (relative to the GPU's) changes layer by layer
  if (rs.issue_ps[q[h]] > now) return;
  if (ff_.have && fast_forward(now, st)) ff_.seen_head = rs.head[ff_.main];
  steady_snapshot(now, st);
}

void Simulation::steady_snapshot(std::int64_t now, const RunStats& st) {
  flush(now);
  const RankState& rs = ranks_[0];
  ff_.have = true;
  ff_.now = now;
  ff_.anchor = rs.queue[ff_.main][rs.head[ff_.main]];
  ff_.head = rs.head;
  ff_.active = active_;
  ff_.pending = rs.pending;
  ff_.stats = st.ranks[0];
  ff_.events = st.events;
  ff_.dirty = dirty_[0];
  ff_.wake = rank_wake_[0] == kNever ? kNever : rank_wake_[0] - now;
  ff_.started.clear();
  ff_.ended.clear();
}

bool Simulation::fast_forward(std::int64_t& now, RunStats& st) {
  RankState& rs = ranks_[0];
  const StepGraph& g = *rs.g;
  const std::uint32_t b = rs.queue[ff_.main][rs.head[ff_.main]];
  if (b <= ff_.anchor || now <= ff_.now) return false;
  const std::uint32_t P = b - ff_.anchor;  // tasks per layer
  const std::int64_t D = now - ff_.now;    // time per layer
  // the running set: every activity's task P on, the same stream, stage and work left
  if (active_.size() != ff_.active.size() || dirty_[0] != ff_.dirty) return false;
  if ((rank_wake_[0] == kNever ? kNever : rank_wake_[0] - now) != ff_.wake) return false;
  std::uint32_t lo = ff_.anchor, top = b;  // the tasks one layer touches: [lo, top]
  for (std::size_t i = 0; i < active_.size(); ++i) {
    const Activity& x = ff_.active[i];
    const Activity& y = active_[i];
    if (y.task != x.task + P || y.stream != x.stream || y.stage != x.stage || y.remaining != x.remaining) return false;
    lo = std::min(lo, x.task);
    top = std::max(top, y.task);
  }
  // every stream: its head P on, or waiting where it was (not ready), or done in both
  const std::size_t ns = rs.queue.size();
  ff_.advance.assign(ns, 0);
  ff_.inert.clear();
  for (std::size_t s = 0; s < ns; ++s) {
    const auto& q = rs.queue[s];
    const std::size_t ha = ff_.head[s], hb = rs.head[s];
    if (ha == q.size()) {
      if (hb != ha) return false;
      continue;
    }
    if (hb == ha) {
      if (rs.running[s] != kIdle || rs.pending[q[hb]] == 0) return false;
      ff_.inert.push_back(q[hb]);
      continue;
    }
    if (hb >= q.size() || q[hb] != q[ha] + P) return false;
    ff_.advance[s] = hb - ha;
    lo = std::min(lo, q[ha]);
    top = std::max(top, q[hb]);
  }
  // the graph repeats with period P from lo up to hi: task i and i + P alike (cost, stream,
  // launches, in this run or not, inputs), their successors P apart or both beyond hi (another
  // part of the step: the backward pass of a forward layer's outputs)
  const std::size_t n = g.size();
  std::size_t hi = n;
  for (std::size_t i = lo; i + P < hi; ++i) {
    const Task& a = g.tasks[i];
    const Task& c = g.tasks[i + P];
    if (rs.cost_index[i] != rs.cost_index[i + P] || a.stream != c.stream || a.launches != c.launches ||
        runs_in(a, which_) != runs_in(c, which_) || g.in_degree[i] != g.in_degree[i + P]) {
      hi = i + P;
      break;
    }
  }
  // (successors beyond a smaller hi are beyond a larger one: a pair judged alike stays alike as hi shrinks)
  for (std::size_t i = lo; i + P < hi; ++i) {
    auto [ai, ae] = g.successors(i);
    auto [ci, ce] = g.successors(i + P);
    bool same = true;
    for (; same && ai != ae && ci != ce; ++ai, ++ci) same = *ci == *ai + P || (*ai >= hi && *ci >= hi);
    if (!same || ai != ae || ci != ce) {
      hi = i + P;
      break;
    }
  }
  // layer k's tasks pair with layer k + 1's while top + (k - 1) P < hi - P
  if (top + P >= hi) return false;
  // every task the layer from A touched had been issued at A (so no issue time bore on it)
  if (issued_by(top) > ff_.now) return false;
  const std::size_t most = (hi - P - 1 - top) / P + 1;
  // the same waits: every task from lo on waits for as many inputs as the task P before it did at A
  for (std::size_t v = lo; v + P < hi; ++v)
    if (rs.pending[v + P] != ff_.pending[v]) return false;
  // repeat the layer's completions period by period while no waiting head - an inert stream's, or
  // one where this run and the one it hands over to part - would become ready, and no stream
  // reaches the position where the runs part
  std::size_t k = 0;
  while (k < most) {
    const std::size_t next = k + 1;
    ff_.dec.clear();
    for (const auto& [x, t] : ff_.ended)
      for (auto w : boost::make_iterator_range(g.successors(x + next * P))) {
        --rs.pending[w];
        ff_.dec.push_back(static_cast<std::uint32_t>(w));
      }
    // the host has issued every task period `next` touches when it starts
    bool ok = issued_by(top + next * P) <=
              common::checked_add(ff_.now, common::checked_mul(D, static_cast<std::int64_t>(next), "simulated time"), "simulated time");
    for (auto h : ff_.inert) ok = ok && rs.pending[h] != 0;
    if (fork_) {
      ok = ok && !must_part();
      for (std::size_t s = 0; s < ns && ok; ++s) {
        const std::size_t at = fork_at_[0][s];
        ok = at == kNoFork || ff_.advance[s] == 0 || rs.head[s] + next * ff_.advance[s] < at;
      }
    }
    if (!ok) {
      for (auto w : ff_.dec) ++rs.pending[w];
      break;
    }
    k = next;
  }
  if (k == 0) return false;
  flush(now);
  const auto kk = static_cast<std::int64_t>(k);
  const std::int64_t shift = common::checked_mul(D, kk, "simulated time");
  if (timeline_)
    for (std::size_t r = 1; r <= k; ++r) {
      const std::int64_t dt = D * static_cast<std::int64_t>(r);  // <= shift: no overflow
      for (const auto& [x, t] : ff_.started) rs.timing[x + r * P].start = Duration::from_ps(t + dt);
      for (const auto& [x, t] : ff_.ended) rs.timing[x + r * P].end = Duration::from_ps(t + dt);
    }
  for (std::size_t s = 0; s < ns; ++s) rs.head[s] += k * ff_.advance[s];
  for (auto& a : active_) a.task += static_cast<std::uint32_t>(k * P);
  RankStats& rk = st.ranks[0];
  rk.compute += kk * (rk.compute - ff_.stats.compute);
  rk.exposed += kk * (rk.exposed - ff_.stats.exposed);
  rk.idle += kk * (rk.idle - ff_.stats.idle);
  for (std::size_t s = 0; s < rk.busy.size(); ++s) rk.busy[s] += kk * (rk.busy[s] - ff_.stats.busy[s]);
  const std::size_t repeated = k * (st.events - ff_.events);
  st.events += repeated;
  st.repeated += repeated;
  now = common::checked_add(now, shift, "simulated time");
  if (rank_wake_[0] != kNever) rank_wake_[0] += shift;
  rs.since = now;  // the repeated periods' times are counted above
  for (std::size_t s = 0; s < ns; ++s)
    if (rs.running[s] != kIdle) rs.busy_since[s] = now;
  return true;
}

// The models' rates are a function of the running set alone - which task cost runs on which rank
// and stream, in which stage, in which flow - so they are remembered per set: a transformer's
// layers repeat the same few sets thousands of times per step.
void Simulation::update_rates() {
  // the key: one word per activity, in order; with several ranks also which earlier activity
  // (if any) is the same collective flow
  std::span<const std::uint64_t> key = active_key_;
  if (memoize_ && ranks_.size() > 1) {
    key_.assign(active_key_.begin(), active_key_.end());
    for (std::size_t i = 0; i < active_.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        if (active_[j].flow == active_[i].flow) {
          key_[i] |= std::uint64_t{j + 1} << 54;
          break;
        }
    key = key_;
  }
  if (memoize_) {
    ++memo_lookups_;
    if (const auto known = memo_->find(key)) {
      ++memo_hits_;
      for (std::size_t i = 0; i < active_.size(); ++i) active_[i].rate = (*known)[i];
      return;
    }
    // Ranks out of phase (pipeline stages) rarely repeat a running set: a memo that hits less than
    // one lookup in four (over a window of lookups) costs more than it saves, so it is dropped. The rates are the same
    // either way (the models' rates depend on the running set alone).
    if (memo_lookups_ == 4096) {  // judged per window of 4096 lookups
      memoize_ = memo_hits_ * 4 >= memo_lookups_;
      memo_lookups_ = memo_hits_ = 0;
    }
  }
  for (auto& a : active_) a.rate = 1.0;
  view_.activities = active_;
  for (auto& m : models_) m->update_rates(view_);
  if (memoize_) {
    rates_.clear();
    for (const auto& a : active_) rates_.push_back(a.rate);
    memo_->insert(key, rates_);
  }
}

RunStats Simulation::run() {
  RunStats st;
  std::int64_t now = 0;
  if (resumed_) {  // from another run's state (hand_over)
    st = std::move(resume_st_);
    now = resume_now_;
  } else {
    st.ranks.resize(ranks_.size());
    for (std::size_t r = 0; r < ranks_.size(); ++r) st.ranks[r].busy.assign(ranks_[r].g->streams.size(), 0);
    // A rank's streams are scanned again only when something on it completed (dirty_) or its next
    // issue time has come (rank_wake_): nothing else can make one of its tasks ready. A collective
    // waiting on a peer is found when the peer, whose state changed, is scanned.
    dirty_.assign(ranks_.size(), 1);
    rank_wake_.assign(ranks_.size(), kNever);
  }
  st_ = &st;
  for (;;) {
    if (!at_fork_.empty() && must_part()) hand_over(now, st);  // the top of an iteration: the runs' states are alike up to here
    if (ff_.on) steady_look(now, st);
    std::int64_t wake = kNever;
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
      auto& rs = ranks_[r];
      if (!dirty_[r] && rank_wake_[r] > now) {
        wake = std::min(wake, rank_wake_[r]);
        continue;
      }
      dirty_[r] = 0;
      std::int64_t& rank_wake = rank_wake_[r];
      rank_wake = kNever;
      for (std::size_t si = 0; si < rs.queue.size(); ++si) {
        const auto s = static_cast<StreamId>(si);
        if (!ready(r, s, now, rank_wake)) continue;
        const Task& task = rs.g->tasks[rs.queue[s][rs.head[s]]];
        if (task.group && task.is_collective() && !rs.peers[*task.group].empty()) {
          // a collective starts when every simulated member of its group has reached it
          const auto& peers = rs.peers[*task.group];
          std::vector<StreamId>& at = peer_streams_;
          at.clear();
          for (const Peer& p : peers) {
            const auto ps = peer_ready(p, task.seq, now);
            if (!ps) break;
            at.push_back(*ps);
          }
          if (at.size() != peers.size()) continue;
          const std::uint32_t flow = next_flow_++;
          for (std::size_t k = 0; k < peers.size(); ++k) start(peers[k].rank, at[k], now, flow);
          start(r, s, now, flow);
          continue;
        }
        start(r, s, now, next_flow_++);
      }
      wake = std::min(wake, rank_wake);
    }
    if (active_.empty()) {
      if (wake == kNever) break;
      now = wake;  // every rank idle meanwhile (counted as its class when it next changes)
      continue;
    }
    // A lone compute task runs at full speed whatever the models say (they price sharing).
    if (active_.size() == 1 && active_[0].stage == Stage::compute)
      active_[0].rate = 1.0;
    else
      update_rates();
    std::int64_t next = wake;
    for (auto& a : active_) {
      // ceil without the libm call (baseline x86-64 has no roundsd); full speed needs no division
      const double ps = (a.rate == 1.0 ? a.remaining : a.remaining / a.rate) - 1e-6;
      // checked: a resource model's tiny rate must not overflow the cast or the sum (UB, then a
      // negative time); the simulated-time range error names the cause instead
      if (!(ps <= common::limits::kMaxDurationPs)) common::duration_out_of_range(ps);
      std::int64_t whole = static_cast<std::int64_t>(ps);
      if (static_cast<double>(whole) < ps) ++whole;
      a.finish = common::checked_add(now, whole, "simulated time");
      next = std::min(next, a.finish);
    }
    const std::int64_t dt = next - now;
    if (dt > 0)  // (the busy times are counted as intervals end: settle)
      for (auto& a : active_) a.remaining = std::max(0.0, a.remaining - a.rate * static_cast<double>(dt));
    now = next;
    ++st.events;
    bool removed = false;
    for (std::size_t i = 0; i < active_.size(); ++i)
      if (active_[i].finish <= now) {
        complete(i, now);
        removed |= active_[i].task == ~0u;
      }
    if (removed) {
      std::size_t w = 0;
      // (complete() left the removed ones' streams idle; the others' indices move down)
      for (std::size_t i = 0; i < active_.size(); ++i)
        if (active_[i].task != ~0u) {
          if (w != i) {
            active_key_[w] = active_key_[i];
            active_[w] = active_[i];
            ranks_[active_[w].rank].running[active_[w].stream] = static_cast<int>(w);
          }
          ++w;
        }
      active_.resize(w);
      active_key_.resize(w);
    }
  }
  if (fork_) hand_over(now, st);  // never parted: the runs are the same to the end
  flush(now);
  for (const auto& rs : ranks_)
    for (std::size_t s = 0; s < rs.queue.size(); ++s)
      if (rs.head[s] != rs.queue[s].size()) {
        const auto t = rs.queue[s][rs.head[s]];
        throw std::logic_error(fmt::format("engine deadlock: rank {} stream {} stuck at task {} ({})", rs.g->rank,
                                           rs.g->streams[s].name, t, rs.g->task_name(t)));
      }
  st.end = now;
  return st;
}

}  // namespace

Duration StepReport::busy(std::string_view name) const {
  for (const auto& s : streams)
    if (s.name == name) return s.busy;
  return Duration{};
}

Duration StepReport::busy_prefix(std::string_view prefix) const {
  Duration d{};
  for (const auto& s : streams)
    if (s.name.starts_with(prefix)) d += s.busy;
  return d;
}

StepReport Engine::simulate(const StepGraph& graph) const {
  const StepGraph* one[] = {&graph};
  return simulate(std::span<const StepGraph* const>(one, 1));
}

StepReport Engine::simulate(std::span<const StepGraph* const> ranks) const {
  if (ranks.empty()) throw std::invalid_argument("Engine::simulate: no graphs");
  const StepGraph& g0 = *ranks[0];
  const int accum = g0.plan.grad_accum_steps();
  if (g0.micro_batches < 1 || accum % g0.micro_batches)
    throw std::invalid_argument(fmt::format("Engine::simulate: the graph issues {} micro-batches, the plan has {} per step", g0.micro_batches, accum));
  const int repeats = accum / g0.micro_batches;  // times the graph runs in a step
  StepReport rep;
  rep.tasks = g0.size();
  // A pipeline stage's graph (micro_batches > 1) is the whole step: simulated once, every task in.
  // Otherwise the graph is one micro-batch: micro-batches 1 .. accum - 1 are alike but for the
  // first one's step_start tasks (ZeRO's parameter gathers): simulated once each kind, the last
  // one (DP reduction, optimizer) apart.
  if (repeats > 1 && g0.micro_batches > 1)
    throw std::invalid_argument(fmt::format("Engine::simulate: a graph of {} micro-batches repeated {} times per step", g0.micro_batches, repeats));
  bool has_start = false;
  for (const StepGraph* g : ranks)
    for (const auto& t : g->tasks) has_start |= t.step_start;
  const Priced priced(ranks, cost_);
  // one memo per thread, emptied for each step: its buffers grown once, not per simulation (the
  // tuner runs hundreds on a thread); Engine::simulate never calls itself
  thread_local RateMemo memo;
  memo.clear();
  RunStats first{}, mid{};
  bool mid_simulated = false;
  const bool ff = options_.fast_forward;
  Simulation last(ranks, cost_, priced, options_.models, repeats > 1 ? MicroBatch::last : MicroBatch::only, options_.timeline, memo, ff);
  if (repeats > 1) {
    // the last micro-batch goes on from the run before it where they part (fork_into)
    Simulation f(ranks, cost_, priced, options_.models, MicroBatch::first, false, memo, ff);
    const bool middle = has_start && repeats > 2;
    if (!middle && options_.share_runs) f.fork_into(last);
    first = f.run();
    mid = first;
    if (middle) {
      Simulation m(ranks, cost_, priced, options_.models, MicroBatch::middle, false, memo, ff);
      if (options_.share_runs) m.fork_into(last);
      mid = m.run();
      mid_simulated = true;
    }
  }
  RunStats ls = last.run();
  const std::int64_t k = std::max<std::int64_t>(0, repeats - 2);
  // checked: the micro-batches of a long step must not wrap to a negative time
  auto total = [&](std::int64_t f, std::int64_t m, std::int64_t b) {
    const std::int64_t firsts = repeats > 1 ? f : 0;
    return Duration::from_ps(
        common::checked_add(common::checked_add(firsts, common::checked_mul(m, k, "simulated time"), "simulated time"), b, "simulated time"));
  };
  rep.step_time = total(first.end, mid.end, ls.end);
  rep.micro_batch_time = Duration::from_ps(repeats > 1 ? mid.end : ls.end / g0.micro_batches);
  const auto& cl = cost_.cluster();
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const StepGraph& g = *ranks[r];
    const RankStats& l = ls.ranks[r];
    const RankStats* f = repeats > 1 ? &first.ranks[r] : nullptr;
    const RankStats* m = repeats > 1 ? &mid.ranks[r] : nullptr;
    RankBusy rb;
    rb.rank = g.rank;
    rb.compute = total(f ? f->compute : 0, m ? m->compute : 0, l.compute);
    rb.exposed_comm = total(f ? f->exposed : 0, m ? m->exposed : 0, l.exposed);
    rb.idle = total(f ? f->idle : 0, m ? m->idle : 0, l.idle);
    for (std::size_t s = 0; s < g.streams.size(); ++s)
      rb.streams.push_back({.name = g.streams[s].name,
                            .kind = g.streams[s].kind,
                            .busy = total(f ? f->busy[s] : 0, m ? m->busy[s] : 0, l.busy[s])});
    if (options_.memory) rb.memory = estimate_memory(g, cl);
    rep.ranks.push_back(std::move(rb));
  }
  rep.compute = rep.ranks[0].compute;
  rep.streams = rep.ranks[0].streams;
  rep.exposed_comm = rep.ranks[0].exposed_comm;
  rep.idle = rep.ranks[0].idle;
  rep.events = first.events + (mid_simulated ? mid.events : 0) + ls.events;
  rep.shared_events = ls.shared;
  rep.repeated_events = first.repeated + (mid_simulated ? mid.repeated : 0) + ls.repeated;
  for (const StepGraph* g : ranks) rep.model_flops += g->micro_batch_flops() * g->represents * repeats;
  const double gpus = g0.plan.gpus();
  rep.mfu = rep.model_flops / (rep.step_time.s() * gpus * cl.gpu.peak_flops(g0.plan.dtype));
  rep.tokens_per_s = static_cast<double>(g0.plan.global_batch) * static_cast<double>(g0.plan.seq_len) / rep.step_time.s();
  rep.memory = rep.ranks[0].memory;
  for (const auto& rb : rep.ranks)
    if (rb.memory.total() > rep.memory.total()) rep.memory = rb.memory;
  if (options_.timeline) {
    // 0 for a pipeline stage's whole-step graph
    const Duration offset =
        Duration::from_ps(common::checked_add(repeats > 1 ? first.end : 0, common::checked_mul(mid.end, k, "simulated time"), "simulated time"));
    for (auto& rs : last.ranks()) {
      RankTimeline tl;
      tl.graph = rs.g;
      tl.timing = std::move(rs.timing);
      for (auto& t : tl.timing) {
        t.start += offset;
        t.end += offset;
      }
      rep.timelines.push_back(std::move(tl));
    }
  }
  return rep;
}

}  // namespace sim
