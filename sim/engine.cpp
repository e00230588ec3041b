#include "sim/engine.hpp"

#include "hardware/interference.hpp"
#include "sim/maxmin.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <unordered_map>

namespace sim {
namespace {

using hardware::CollectiveOp;
using hardware::LinkClass;

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

/// A task's cost as the engine uses it, in picoseconds at solo speed.
struct TaskCost {
  std::int64_t first_ps = 0;   ///< compute: whole time; collective: latency stage
  std::int64_t second_ps = 0;  ///< collective: transfer stage
  double hbm_util = 0;         ///< compute: fraction of HBM bandwidth it streams
  std::array<double, hardware::kLinkClasses> wire_rate{};  ///< collective: bytes per ps per link at solo speed
  double sm_fraction = 0;      ///< collective: share of SMs its channels occupy
  bool collective = false;
};

struct OpHash {
  std::size_t operator()(const TaskKind& k) const {
    std::size_t h = k.index() * 0x9E3779B97F4A7C15ull;
    auto mix = [&h](std::int64_t v) { h ^= static_cast<std::size_t>(v) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2); };
    std::visit([&](const auto& op) {
      using T = std::decay_t<decltype(op)>;
      if constexpr (std::is_same_v<T, hardware::GemmOp>) { mix(op.m); mix(op.n); mix(op.k); mix(static_cast<int>(op.dtype)); mix(op.batch); }
      else if constexpr (std::is_same_v<T, hardware::AttentionOp>) { mix(op.batch); mix(op.heads); mix(op.kv_heads); mix(op.s_q); mix(op.s_kv); mix(op.head_dim); mix(op.q_offset); mix(op.backward); mix(op.causal); }
      else if constexpr (std::is_same_v<T, hardware::ElementwiseOp>) { mix(static_cast<int>(op.kind)); mix(op.elements); mix(static_cast<std::int64_t>(op.bytes)); mix(op.backward); }
      else if constexpr (std::is_same_v<T, hardware::CollectiveOp>) { mix(static_cast<int>(op.kind)); mix(op.bytes); mix(op.ranks); mix(op.nodes); mix(static_cast<int>(op.dtype)); }
      else { mix(op.params); }
    }, k);
    return h;
  }
};

struct OpEqual {
  bool operator()(const TaskKind& a, const TaskKind& b) const {
    if (a.index() != b.index()) return false;
    return std::visit([&](const auto& x) {
      using T = std::decay_t<decltype(x)>;
      const auto& y = std::get<T>(b);
      if constexpr (std::is_same_v<T, hardware::GemmOp>) return x.m == y.m && x.n == y.n && x.k == y.k && x.dtype == y.dtype && x.batch == y.batch;
      else if constexpr (std::is_same_v<T, hardware::AttentionOp>)
        return x.batch == y.batch && x.heads == y.heads && x.kv_heads == y.kv_heads && x.s_q == y.s_q && x.s_kv == y.s_kv &&
               x.head_dim == y.head_dim && x.q_offset == y.q_offset && x.backward == y.backward && x.causal == y.causal && x.dtype == y.dtype;
      else if constexpr (std::is_same_v<T, hardware::ElementwiseOp>) return x.kind == y.kind && x.elements == y.elements && x.bytes == y.bytes && x.backward == y.backward;
      else if constexpr (std::is_same_v<T, hardware::CollectiveOp>) return x.kind == y.kind && x.bytes == y.bytes && x.ranks == y.ranks && x.nodes == y.nodes && x.dtype == y.dtype;
      else return x.params == y.params;
    }, a);
  }
};

class CostTable {
 public:
  explicit CostTable(const hardware::CostModel& m) : m_(m), hbm_(m.cluster().gpu.hbm_bytes_per_s), sms_(m.cluster().gpu.sm_count) {}

  /// Index of the distinct cost of `k` (priced on first sight; compute tasks as the stack runs
  /// them: stack_compute_ps).
  std::uint32_t index(const TaskKind& k) {
    auto it = memo_.find(k);
    if (it != memo_.end()) return it->second;
    TaskCost c = price(k);
    if (!c.collective) {
      c.first_ps = stack_compute_ps(m_.cluster().host, stack_, c.first_ps);
      c.hbm_util *= m_.cluster().host.kernel_efficiency_for(stack_);  // same bytes over a longer time
    }
    costs_.push_back(c);
    kinds_.push_back(k);
    const auto i = static_cast<std::uint32_t>(costs_.size() - 1);
    memo_.emplace(k, i);
    return i;
  }

  /// Tasks at the same place of different layers (same op, phase, slice, chunk) usually have the
  /// same shape: a direct-mapped cache on that place, verified by comparing the op, avoids hashing it.
  std::uint32_t index(const Task& t) {
    const std::uint32_t key = 1u + static_cast<std::uint32_t>(t.op) + (static_cast<std::uint32_t>(t.phase) << 5) +
                              (static_cast<std::uint32_t>(t.slice + 1) << 8) + (static_cast<std::uint32_t>(t.chunk + 1) << 16) +
                              (static_cast<std::uint32_t>(t.kind.index()) << 24);
    auto& slot = slots_[(key * 2654435761u) >> (32 - kSlotBits)];
    if (slot.key == key && OpEqual{}(kinds_[slot.index], t.kind)) return slot.index;
    slot.key = key;
    slot.index = index(t.kind);
    return slot.index;
  }

  const TaskCost& operator[](std::uint32_t i) const { return costs_[i]; }
  void set_stack(hardware::Stack s) { stack_ = s; }

 private:
  TaskCost from_compute(const hardware::ComputeCost& cc) const {
    TaskCost c;
    c.first_ps = cc.time.ps;
    const double secs = cc.time.s();
    c.hbm_util = secs > 0 ? std::min(1.0, cc.hbm_bytes / (secs * hbm_)) : 0.0;
    return c;
  }
  TaskCost price(const TaskKind& k) const {
    return std::visit([&](const auto& op) -> TaskCost {
      using T = std::decay_t<decltype(op)>;
      if constexpr (std::is_same_v<T, hardware::GemmOp>) return from_compute(m_.gemm(op));
      else if constexpr (std::is_same_v<T, hardware::AttentionOp>) return from_compute(m_.attention(op));
      else if constexpr (std::is_same_v<T, hardware::ElementwiseOp>) return from_compute(m_.elementwise(op));
      else if constexpr (std::is_same_v<T, hardware::OptimizerOp>) return from_compute(m_.optimizer(op));
      else {
        const auto cc = m_.collective(op);
        TaskCost c;
        c.collective = true;
        c.first_ps = cc.latency.ps;
        c.second_ps = cc.transfer.ps;
        for (int l = 0; l < hardware::kLinkClasses; ++l)
          c.wire_rate[l] = c.second_ps > 0 ? cc.wire_bytes[l] / static_cast<double>(c.second_ps) : 0.0;
        c.sm_fraction = static_cast<double>(cc.sms) / sms_;
        return c;
      }
    }, k);
  }
  const hardware::CostModel& m_;
  double hbm_;
  int sms_;
  std::unordered_map<TaskKind, std::uint32_t, OpHash, OpEqual> memo_;
  std::vector<TaskCost> costs_;  // distinct costs
  std::vector<TaskKind> kinds_;  // the op of each distinct cost
  hardware::Stack stack_ = hardware::Stack::eager;
  static constexpr int kSlotBits = 10;
  struct Slot {
    std::uint32_t key = 0, index = 0;
  };
  std::vector<Slot> slots_ = std::vector<Slot>(std::size_t{1} << kSlotBits);
};

enum class Stage : std::uint8_t { compute, latency, transfer };

struct Active {
  int rank;
  std::uint32_t task;
  Stream stream;
  Stage stage;
  double remaining;  // ps of work at solo speed
  double rate;       // fraction of solo speed
  std::int64_t finish;
};

struct RankState {
  const StepGraph* g = nullptr;
  std::unique_ptr<CostTable> table;                        // distinct costs of this rank's tasks
  std::vector<std::uint32_t> cost_index;                   // task -> its cost in `table`
  const TaskCost& cost(std::uint32_t t) const { return (*table)[cost_index[t]]; }
  std::array<std::vector<std::uint32_t>, kStreams> queue;  // included tasks per stream, issue order
  std::vector<std::int64_t> issue_ps;                      // host has issued task i by then
  std::vector<std::uint32_t> pending;
  std::vector<TaskTiming> timing;
  std::array<std::size_t, kStreams> head{};
  std::array<int, kStreams> running{};                     // index into actives, -1 idle
  std::vector<int> tp_peers, dp_peers;                     // other simulated ranks of the same group instance
};

struct RunStats {
  std::int64_t end = 0;
  std::int64_t compute = 0, tp = 0, dp = 0, exposed = 0, idle = 0;
  std::size_t events = 0;
};

class Simulation {
 public:
  Simulation(std::span<const StepGraph* const> graphs, const hardware::CostModel& cost, bool include_once, bool timeline)
      : cost_(cost), timeline_(timeline) {
    const auto& cl = cost.cluster();
    cap_[0] = cost.link_capacity(LinkClass::nvlink) * 1e-12;  // bytes per ps
    cap_[1] = cost.link_capacity(LinkClass::nic) * 1e-12;
    hbm_per_ps_ = cl.gpu.hbm_bytes_per_s * 1e-12;
    interference_ = cl.interference;
    ranks_.resize(graphs.size());
    for (std::size_t r = 0; r < graphs.size(); ++r) {
      auto& rs = ranks_[r];
      const StepGraph& g = *graphs[r];
      rs.g = &g;
      const auto n = g.size();
      rs.table = std::make_unique<CostTable>(cost);
      rs.cost_index.assign(n, 0);
      rs.issue_ps.assign(n, 0);
      rs.pending.assign(g.in_degree.begin(), g.in_degree.end());
      if (timeline_) rs.timing.assign(n, TaskTiming{});
      const std::int64_t launch = cl.host.launch_for(g.plan.stack).ps;
      rs.table->set_stack(g.plan.stack);
      std::int64_t host = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const Task& t = g.tasks[i];
        if (t.once_per_step && !include_once) continue;
        rs.cost_index[i] = rs.table->index(t);
        host += launch * t.launches;
        rs.issue_ps[i] = host;
        rs.queue[static_cast<int>(t.stream)].push_back(static_cast<std::uint32_t>(i));
      }
      rs.running.fill(-1);
    }
    for (std::size_t r = 0; r < ranks_.size(); ++r)
      for (std::size_t q = 0; q < ranks_.size(); ++q) {
        if (q == r) continue;
        if (ranks_[q].g->tp_instance == ranks_[r].g->tp_instance) ranks_[r].tp_peers.push_back(static_cast<int>(q));
        if (ranks_[q].g->dp_instance == ranks_[r].g->dp_instance) ranks_[r].dp_peers.push_back(static_cast<int>(q));
      }
  }

  RunStats run();
  std::vector<RankState>& ranks() { return ranks_; }

 private:
  bool ready(int r, Stream s, std::int64_t now, std::int64_t& wake) const {
    const auto& rs = ranks_[r];
    const int si = static_cast<int>(s);
    if (rs.running[si] >= 0 || rs.head[si] >= rs.queue[si].size()) return false;
    const auto t = rs.queue[si][rs.head[si]];
    if (rs.pending[t] != 0) return false;
    if (rs.issue_ps[t] > now) {
      wake = std::min(wake, rs.issue_ps[t]);
      return false;
    }
    return true;
  }
  void start(int r, Stream s, std::int64_t now);
  void complete(std::size_t a, std::int64_t now);
  void compute_rates();

  const hardware::CostModel& cost_;
  bool timeline_;
  std::array<double, hardware::kLinkClasses> cap_{};
  double hbm_per_ps_ = 0;
  hardware::InterferenceSpec interference_;
  std::vector<RankState> ranks_;
  std::vector<Active> active_;
  MaxMinSystem lmm_;
  std::vector<int> flow_var_;
};

void Simulation::start(int r, Stream s, std::int64_t now) {
  auto& rs = ranks_[r];
  const int si = static_cast<int>(s);
  const auto t = rs.queue[si][rs.head[si]];
  const auto& c = rs.cost(t);
  Active a{r, t, s, c.collective ? Stage::latency : Stage::compute, static_cast<double>(c.first_ps), 1.0, now};
  if (timeline_) rs.timing[t].start = Duration::from_ps(now);
  rs.running[si] = static_cast<int>(active_.size());
  active_.push_back(a);
}

void Simulation::complete(std::size_t ai, std::int64_t now) {
  Active& a = active_[ai];
  auto& rs = ranks_[a.rank];
  const auto& c = rs.cost(a.task);
  if (a.stage == Stage::latency && c.second_ps > 0) {
    a.stage = Stage::transfer;
    a.remaining = static_cast<double>(c.second_ps);
    return;
  }
  if (timeline_) rs.timing[a.task].end = Duration::from_ps(now);
  rs.running[static_cast<int>(a.stream)] = -1;
  ++rs.head[static_cast<int>(a.stream)];
  for (auto v : boost::make_iterator_range(rs.g->successors(a.task))) --rs.pending[v];
  a.task = ~0u;  // removed by the caller
}

// Rates for the current set of running tasks: max-min fair sharing of each rank's links among its
// collectives in their transfer stage (a link is a constraint, a transfer a variable bounded by
// its solo speed), then mutual slowdown of compute and communication.
void Simulation::compute_rates() {
  lmm_.clear();
  flow_var_.assign(active_.size(), -1);
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    std::array<int, hardware::kLinkClasses> link{};
    link.fill(-1);
    for (std::size_t i = 0; i < active_.size(); ++i) {
      const Active& a = active_[i];
      if (a.rank != static_cast<int>(r) || a.stage != Stage::transfer) continue;
      const auto& wr = ranks_[r].cost(a.task).wire_rate;
      const int v = lmm_.add_variable(1.0);
      flow_var_[i] = v;
      for (int l = 0; l < hardware::kLinkClasses; ++l) {
        if (wr[l] <= 0) continue;
        if (link[l] < 0) link[l] = lmm_.add_constraint(cap_[l]);
        lmm_.expand(link[l], v, wr[l]);
      }
    }
  }
  if (lmm_.variables() > 0) {
    lmm_.solve();
    for (std::size_t i = 0; i < active_.size(); ++i)
      if (flow_var_[i] >= 0) active_[i].rate = lmm_.value(flow_var_[i]);
  }
  // interference, per rank
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    const auto& rs = ranks_[r];
    const int ci = rs.running[static_cast<int>(Stream::compute)];
    double comm_sm = 0, comm_wire = 0;
    bool comm = false;
    for (int s : {static_cast<int>(Stream::tp_comm), static_cast<int>(Stream::dp_comm)}) {
      const int ai = rs.running[s];
      if (ai < 0) continue;
      comm = true;
      const auto& c = rs.cost(active_[ai].task);
      comm_sm += c.sm_fraction;
      if (active_[ai].stage == Stage::transfer)
        for (int l = 0; l < hardware::kLinkClasses; ++l) comm_wire += active_[ai].rate * c.wire_rate[l];
    }
    if (ci >= 0 && comm) {
      const double u = rs.cost(active_[ci].task).hbm_util;
      active_[ci].rate = hardware::compute_rate_beside_comm(interference_, hbm_per_ps_ * 1e12, u, comm_sm, comm_wire * 1e12);
      const double f = hardware::comm_rate_beside_compute(interference_, u);
      for (int s : {static_cast<int>(Stream::tp_comm), static_cast<int>(Stream::dp_comm)}) {
        const int ai = rs.running[s];
        if (ai >= 0 && active_[ai].stage == Stage::transfer) active_[ai].rate *= f;
      }
    } else if (ci >= 0) {
      active_[ci].rate = 1.0;
    }
    for (int s : {static_cast<int>(Stream::tp_comm), static_cast<int>(Stream::dp_comm)}) {
      const int ai = rs.running[s];
      if (ai >= 0 && active_[ai].stage == Stage::latency) active_[ai].rate = 1.0;
    }
  }
}

RunStats Simulation::run() {
  RunStats st;
  std::int64_t now = 0;
  active_.reserve(ranks_.size() * kStreams);
  for (;;) {
    std::int64_t wake = kNever;
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
      for (Stream s : {Stream::compute, Stream::tp_comm, Stream::dp_comm}) {
        if (!ready(r, s, now, wake)) continue;
        auto& rs = ranks_[r];
        const auto t = rs.queue[static_cast<int>(s)][rs.head[static_cast<int>(s)]];
        const Task& task = rs.g->tasks[t];
        const auto& peers = task.group == CommGroup::tp ? rs.tp_peers : rs.dp_peers;
        if (task.group != CommGroup::none && !peers.empty()) {
          // a collective starts when every simulated member of its group has reached it
          bool all = true;
          for (int q : peers) {
            std::int64_t w2 = kNever;
            if (!ready(q, s, now, w2)) { all = false; break; }
            const auto& qs = ranks_[q];
            const auto qt = qs.queue[static_cast<int>(s)][qs.head[static_cast<int>(s)]];
            if (qs.g->tasks[qt].seq != task.seq) { all = false; break; }
          }
          if (!all) continue;
          for (int q : peers) start(q, s, now);
        }
        start(r, s, now);
      }
    }
    if (active_.empty()) {
      if (wake == kNever) break;
      st.idle += wake - now;
      now = wake;
      continue;
    }
    // A lone compute task runs at full speed whatever the interference model; skip the rate solver.
    if (active_.size() == 1 && active_[0].stage == Stage::compute) active_[0].rate = 1.0;
    else compute_rates();
    std::int64_t next = wake;
    for (auto& a : active_) {
      // ceil without the libm call (baseline x86-64 has no roundsd); full speed needs no division
      const double ps = (a.rate == 1.0 ? a.remaining : a.remaining / a.rate) - 1e-6;
      std::int64_t whole = static_cast<std::int64_t>(ps);
      if (static_cast<double>(whole) < ps) ++whole;
      a.finish = now + whole;
      next = std::min(next, a.finish);
    }
    const std::int64_t dt = next - now;
    if (dt > 0) {
      const auto& r0 = ranks_[0];
      const bool comp = r0.running[static_cast<int>(Stream::compute)] >= 0;
      const bool tp = r0.running[static_cast<int>(Stream::tp_comm)] >= 0;
      const bool dp = r0.running[static_cast<int>(Stream::dp_comm)] >= 0;
      if (comp) st.compute += dt;
      if (tp) st.tp += dt;
      if (dp) st.dp += dt;
      if (!comp && (tp || dp)) st.exposed += dt;
      if (!comp && !tp && !dp) st.idle += dt;
      for (auto& a : active_) a.remaining = std::max(0.0, a.remaining - a.rate * static_cast<double>(dt));
    }
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
      for (std::size_t i = 0; i < active_.size(); ++i)
        if (active_[i].task != ~0u) active_[w++] = active_[i];
      active_.resize(w);
      for (auto& rs : ranks_) rs.running.fill(-1);
      for (std::size_t i = 0; i < active_.size(); ++i)
        ranks_[active_[i].rank].running[static_cast<int>(active_[i].stream)] = static_cast<int>(i);
    }
  }
  for (const auto& rs : ranks_)
    for (int s = 0; s < kStreams; ++s)
      if (rs.head[s] != rs.queue[s].size()) {
        const auto t = rs.queue[s][rs.head[s]];
        throw std::logic_error(fmt::format("engine deadlock: rank {} stream {} stuck at task {} ({})", rs.g->rank,
                                           to_string(static_cast<Stream>(s)), t, rs.g->task_name(t)));
      }
  st.end = now;
  return st;
}

}  // namespace

std::int64_t stack_compute_ps(const hardware::HostSpec& host, hardware::Stack stack, std::int64_t kernel_ps) {
  // checked: a tiny kernel_efficiency must not turn a long kernel into an int64 overflow
  const double ps = static_cast<double>(kernel_ps) / host.kernel_efficiency_for(stack);
  if (!(ps <= common::limits::kMaxDurationPs)) common::duration_out_of_range(ps);
  return common::checked_add(std::llround(ps), host.op_overhead_for(stack).ps, "simulated time");
}

Duration solo_time(const hardware::CostModel& c, const TaskKind& k, hardware::Stack stack) {
  const auto on_stack = [&](Duration kernel) { return Duration::from_ps(stack_compute_ps(c.cluster().host, stack, kernel.ps)); };
  return std::visit([&](const auto& op) -> Duration {
    using T = std::decay_t<decltype(op)>;
    if constexpr (std::is_same_v<T, hardware::GemmOp>) return on_stack(c.gemm(op).time);
    else if constexpr (std::is_same_v<T, hardware::AttentionOp>) return on_stack(c.attention(op).time);
    else if constexpr (std::is_same_v<T, hardware::ElementwiseOp>) return on_stack(c.elementwise(op).time);
    else if constexpr (std::is_same_v<T, hardware::OptimizerOp>) return on_stack(c.optimizer(op).time);
    else return c.collective(op).total();
  }, k);
}

MemoryEstimate estimate_memory(const StepGraph& g) {
  MemoryEstimate m;
  std::vector<char> saved(g.tensors.size(), 0);
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    if (g.tasks[i].phase == Phase::fwd) continue;
    for (TensorId x : g.inputs(i))
      if (g.tensors[x].role == TensorRole::activation) saved[x] = 1;
  }
  for (std::size_t x = 0; x < g.tensors.size(); ++x) {
    const auto& t = g.tensors[x];
    const double n = static_cast<double>(t.rows) * static_cast<double>(t.cols);
    switch (t.role) {
      case TensorRole::weight:
        m.weights += t.bytes();
        m.optimizer += 12.0 * n;
        break;
      case TensorRole::weight_grad: m.gradients += t.bytes(); break;
      case TensorRole::activation:
        if (saved[x]) m.activations += t.bytes();
        break;
      default: break;
    }
  }
  return m;
}

StepReport Engine::simulate(const StepGraph& graph) const {
  const StepGraph* one[] = {&graph};
  return simulate(std::span<const StepGraph* const>(one, 1));
}

StepReport Engine::simulate(std::span<const StepGraph* const> ranks) const {
  if (ranks.empty()) throw std::invalid_argument("Engine::simulate: no graphs");
  const StepGraph& g0 = *ranks[0];
  const int accum = g0.plan.grad_accum_steps();
  StepReport rep;
  rep.tasks = g0.size();
  RunStats mb{};
  if (accum > 1) {
    Simulation sim(ranks, cost_, false, false);
    mb = sim.run();
  }
  Simulation last(ranks, cost_, true, options_.timeline);
  RunStats ls = last.run();
  const std::int64_t k = accum - 1;
  // checked: (accum - 1) micro-batches of a long step must not wrap to a negative time
  auto total = [&](std::int64_t RunStats::*f) {
    return Duration::from_ps(common::checked_add(common::checked_mul(mb.*f, k, "simulated time"), ls.*f, "simulated time"));
  };
  rep.step_time = total(&RunStats::end);
  rep.micro_batch_time = Duration::from_ps(accum > 1 ? mb.end : ls.end);
  rep.compute = total(&RunStats::compute);
  rep.tp_comm = total(&RunStats::tp);
  rep.dp_comm = total(&RunStats::dp);
  rep.exposed_comm = total(&RunStats::exposed);
  rep.idle = total(&RunStats::idle);
  rep.events = mb.events + ls.events;
  for (const StepGraph* g : ranks) rep.model_flops += g->micro_batch_flops() * g->represents * accum;
  const auto& cl = cost_.cluster();
  const double gpus = g0.plan.gpus();
  rep.mfu = rep.model_flops / (rep.step_time.s() * gpus * cl.gpu.peak_flops(g0.plan.dtype));
  rep.tokens_per_s = static_cast<double>(g0.plan.global_batch) * static_cast<double>(g0.plan.seq_len) / rep.step_time.s();
  rep.memory = estimate_memory(g0);
  if (options_.timeline) {
    const Duration offset = Duration::from_ps(common::checked_mul(mb.end, k, "simulated time"));
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
