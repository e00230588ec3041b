// The CPU backend: the compute stream runs on the calling (interpreter) thread, each
// communication stream on its own thread making blocking MPI calls (MPI_THREAD_MULTIPLE), so a
// slice's collective really runs while the next slice computes. Cross-stream edges are per-task
// completion flags (an epoch number per micro-batch, C++20 atomic wait / notify).
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "executor/backend.hpp"
#include "executor/cpu/flash_attention.hpp"
#include "executor/grid_pieces.hpp"
#include "executor/tp_pieces.hpp"
#include "executor/zero_layout.hpp"
#include "executor/cpu/kernels.hpp"
#include "executor/cpu/openblas.hpp"
#include <mpi.h>

#include "common/check.hpp"
#include "executor/cpu/wait_polling.hpp"
#include "common/config_reader.hpp"


namespace executor {
namespace {

using Clock = std::chrono::steady_clock;
using sim::Op;
using sim::Phase;

/// An in-order queue served by one thread (a "stream").
class StreamThread {
 public:
  using Work = std::function<void()>;
  /// `on_error` is called (on this thread) with the first error a work item raises.
  explicit StreamThread(std::function<void(std::exception_ptr)> on_error) : on_error_(std::move(on_error)), thread_([this] { loop(); }) {}
  ~StreamThread() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void push(Work w) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(w));
    }
    cv_.notify_all();
  }
  /// Rethrows the first error a work item raised (after the queue drained).
  void check() {
    std::lock_guard lock(mu_);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void loop() {
    for (;;) {
      Work w;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        w = std::move(queue_.front());
        queue_.pop_front();
      }
      try {
        w();
      } catch (...) {
        bool first = false;
        {
          std::lock_guard lock(mu_);
          first = !error_;
          if (first) error_ = std::current_exception();
        }
        if (first && on_error_) on_error_(std::current_exception());
      }
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Work> queue_;
  bool stop_ = false;
  std::exception_ptr error_;
  std::function<void(std::exception_ptr)> on_error_;
  std::thread thread_;  // last: starts after the members above exist
};

/// MPI reduction of cross-entropy statistics triples (max, sum-exp, target logit).
void combine_stats_op(void* in, void* inout, int* len, MPI_Datatype*) {
  cpu::combine_stats(static_cast<const float*>(in), static_cast<float*>(inout), *len);
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const BackendOptions& o) : o_(o) {
    int provided = 0;
    MPI_CHECK(MPI_Query_thread(&provided));
    if (provided < MPI_THREAD_MULTIPLE)
      throw std::runtime_error("cpu backend: MPI was initialised without MPI_THREAD_MULTIPLE");
    cpu::openblas().set_num_threads(o.cpu_threads);
    // every rank has arrived before the blocking communicator set-up below (MPI has no non-blocking
    // MPI_Comm_split): a rank stopped or dead at start-up ends the job here, named, not in a hang
    MPI_Request arrived;
    MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &arrived));
    cpu::wait_polling(1, &arrived, world_watchdog("the backend's start-up barrier (MPI_Barrier)"));
    // world rank = t + tp (d + dp s): TP groups are (d, s), DP groups (t, s); pipeline transfers
    // address the neighbouring stage's rank of the same lane on a communicator of their own
    const int lanes = o.tp * o.dp, tp_rank = o.world_rank % o.tp, dp_rank = (o.world_rank / o.tp) % o.dp, stage = o.world_rank / lanes;
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, o.world_rank / o.tp, tp_rank, &tp_comm_));
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, tp_rank + o.tp * stage, dp_rank, &dp_comm_));
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &pp_comm_));
    const bool end_stage = o.pp > 1 && (stage == 0 || stage == o.pp - 1);
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, end_stage ? o.world_rank % lanes : MPI_UNDEFINED, stage, &embd_comm_));
    lanes_ = lanes;
    MPI_CHECK(MPI_Type_contiguous(3, MPI_FLOAT, &stats_type_));
    MPI_CHECK(MPI_Type_commit(&stats_type_));
    MPI_CHECK(MPI_Op_create(&combine_stats_op, 1, &stats_op_));
    tp_rank_ = tp_rank;
    dp_rank_ = dp_rank;
  }
  ~CpuBackend() override {
    streams_.clear();
    if (faulted_.load()) return;  // the job is being aborted: free nothing a stuck peer might hold
    for (auto& c : owned_comms_) MPI_Comm_free(&c);
    for (MPI_Comm* c : {&row_comm_, &col_comm_, &depth_comm_})
      if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
    MPI_Op_free(&stats_op_);
    MPI_Type_free(&stats_type_);
    MPI_Comm_free(&tp_comm_);
    MPI_Comm_free(&dp_comm_);
    MPI_Comm_free(&pp_comm_);
    if (embd_comm_ != MPI_COMM_NULL) MPI_Comm_free(&embd_comm_);
  }

  std::string describe() const override {
    return fmt::format("cpu (OpenBLAS fp32, {} thread{} per rank, {} MPI rank{})", o_.cpu_threads, o_.cpu_threads > 1 ? "s" : "",
                       o_.world_size, o_.world_size > 1 ? "s" : "");
  }

  void prepare(const sim::StepGraph& g, const TrainingOptions& t) override {
    if (g.plan.dtype != common::DType::fp32)
      throw common::ConfigError("--dtype", "", fmt::format("the cpu backend runs fp32 only, got {}", common::to_string(g.plan.dtype)));
    check_memory(g);
    g_ = &g;
    t_ = t;
    pieces_ = std::make_unique<TpPieces>(g);
    if (g.plan.grid_tp()) {
      grid_ = std::make_unique<GridPieces>(g);
      at_ = g.plan.grid_coord(tp_rank_);
      make_grid_comms(g.plan);
    }
    data_.resize(g.tensors.size());
    for (std::size_t i = 0; i < g.tensors.size(); ++i) {
      const auto& ti = g.tensors[i];
      if (ti.role == sim::TensorRole::weight && ti.op != Op::param_gather)
        data_[i] = init_weight(g, static_cast<sim::TensorId>(i), tp_rank_, t.seed);
      else data_[i].assign(static_cast<std::size_t>(ti.rows * ti.cols), 0.0f);
    }
    // ZeRO: each parameter shard starts as this rank's part of its bucket's initial weights; the
    // optimizer decays the parts that belong to decaying weights
    std::map<sim::TensorId, std::vector<ShardPiece>> shard_of;
    for (std::uint32_t i = 0; i < g.size(); ++i) {
      if (!is_dp_bucket_collective(g, i) || g.tasks[i].op != Op::param_gather) continue;
      const sim::TensorId shard = g.inputs(i)[0];
      if (shard_of.count(shard)) continue;
      auto pieces = shard_pieces(bucket_layout(g, i), g, dp_rank_);
      for (const auto& pc : pieces)
        std::copy_n(data_[pc.tensor].begin() + pc.tensor_offset, pc.count, data_[shard].begin() + pc.shard_offset);
      shard_of.emplace(shard, std::move(pieces));
    }
    ints_.resize(g.tensors.size());
    // the optimizer's operands pair gradient i with weight i
    for (std::size_t i = 0; i < g.size(); ++i)
      if (g.tasks[i].op == Op::optimizer) {
        auto in = g.inputs(i), out = g.outputs(i);
        for (std::size_t k = 0; k < out.size(); ++k) {
          Param prm{out[k], in[k], std::vector<float>(data_[out[k]].size()), std::vector<float>(data_[out[k]].size()), {}};
          if (auto it = shard_of.find(out[k]); it != shard_of.end()) {
            for (const auto& pc : it->second) prm.segments.push_back({pc.shard_offset, pc.count, decays(g.tensors[pc.tensor])});
          } else {
            prm.segments.push_back({0, static_cast<std::int64_t>(prm.m.size()), decays(g.tensors[out[k]])});
          }
          params_.push_back(std::move(prm));
        }
      }
    for (std::size_t i = 0; i < g.size(); ++i)
      if (g.tasks[i].op == Op::attention && g.tasks[i].phase == Phase::bwd_dgrad)
        for (auto id : g.outputs(i)) zero_each_micro_batch_.push_back(id);
    done_ = std::make_unique<std::atomic<std::uint32_t>[]>(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) done_[i].store(0);
    clock_.assign(g.size(), {});
    // one thread per communication stream; each communicator group of the graph on its MPI communicator
    streams_.resize(g.streams.size());
    last_comm_.assign(g.streams.size(), -1);
    for (std::size_t s = 0; s < g.streams.size(); ++s)
      if (g.streams[s].kind == sim::StreamKind::comm)
        streams_[s] = std::make_unique<StreamThread>([this](std::exception_ptr e) { fault(e); });
    for (const auto& grp : g.groups) {
      if (grp.name == "tp") group_comm_.push_back(tp_comm_);
      else if (grp.name == "dp") group_comm_.push_back(dp_comm_);
      else if (grp.name == "pp_fwd" || grp.name == "pp_bwd") group_comm_.push_back(pp_comm_);
      else if (grp.name == "embd" && embd_comm_ != MPI_COMM_NULL) group_comm_.push_back(embd_comm_);
      else if (grp.name == "row" && row_comm_ != MPI_COMM_NULL) group_comm_.push_back(row_comm_);
      else if (grp.name == "col" && col_comm_ != MPI_COMM_NULL) group_comm_.push_back(col_comm_);
      else if (grp.name == "depth_dp" && depth_comm_ != MPI_COMM_NULL) group_comm_.push_back(depth_comm_);
      else throw common::ConfigError("plan", "strategy", fmt::format("the cpu backend has no communicator for group '{}'", grp.name));
    }
    // one communicator per (group, stream): collectives of one group issued from two streams
    // (ZeRO: gradient reduce-scatters on dp_comm, parameter gathers on param_comm) would otherwise
    // reach MPI in a different order on different ranks. The first stream of a group uses the
    // group's communicator, later ones duplicates made in task order (the same on every rank).
    for (std::uint32_t i = 0; i < g.size(); ++i) {
      const auto& task = g.tasks[i];
      if (!task.is_collective() || !task.group) continue;
      const auto key = std::make_pair(*task.group, task.stream);
      if (stream_comm_.count(key)) continue;
      bool group_used = false;
      for (const auto& [k, c] : stream_comm_) group_used |= k.first == *task.group;
      MPI_Comm c = group_comm_.at(*task.group);
      if (group_used) {
        MPI_Comm dup = MPI_COMM_NULL;
        MPI_CHECK(MPI_Comm_dup(c, &dup));
        owned_comms_.push_back(dup);
        c = dup;
      }
      stream_comm_.emplace(key, c);
    }
  }

  void begin_micro_batch(const Batch& b) override {
    const auto& g = *g_;
    ++epoch_;
    std::fill(clock_.begin(), clock_.end(), TaskClock{});
    for (auto id : zero_each_micro_batch_) std::fill(data_[id].begin(), data_[id].end(), 0.0f);
    positions_ = b.positions;
    column_tokens_ = b.column_tokens;
    column_positions_ = b.column_positions;
    // input tensors: Op::embedding ones take the slice's tokens, Op::loss ones its targets
    for (std::size_t i = 0; i < g.tensors.size(); ++i) {
      const auto& ti = g.tensors[i];
      if (ti.role != sim::TensorRole::input) continue;
      const std::size_t s = batch_index(g, ti.micro, ti.slice);
      const auto& src = ti.op == Op::embedding ? b.tokens.at(s) : b.targets.at(s);
      if (static_cast<std::int64_t>(src.size()) != ti.rows)
        throw std::logic_error(fmt::format("batch entry {} has {} rows, tensor {} {}", s, src.size(), ti.name(), ti.rows));
      ints_[i] = src;
    }
    t0_ = Clock::now();
  }

  void issue(std::uint32_t t, std::span<const std::uint32_t> waits) override {
    const auto& task = g_->tasks[t];
    if (!g_->on_compute(t)) {
      std::vector<std::uint32_t> w(waits.begin(), waits.end());
      last_comm_[task.stream] = static_cast<std::int64_t>(t);
      streams_[task.stream]->push([this, t, w = std::move(w)] {
        wait_for(w);
        clock_[t].start_ns = now_ns();
        run_collective(t);
        clock_[t].end_ns = now_ns();
        mark_done(t);
      });
      return;
    }
    // a compute stream runs its tasks inline, collectives too (a strategy may issue them there)
    wait_for(waits);
    clock_[t].start_ns = now_ns();
    if (task.is_collective()) run_collective(t);
    else run_compute(t);
    clock_[t].end_ns = now_ns();
    mark_done(t);
  }

  void end_micro_batch(std::vector<TaskClock>& timing) override {
    for (std::size_t s = 0; s < streams_.size(); ++s) {
      if (!streams_[s]) continue;
      if (last_comm_[s] >= 0) {
        const std::uint32_t last = static_cast<std::uint32_t>(last_comm_[s]);
        wait_for(std::span<const std::uint32_t>(&last, 1));
      }
      last_comm_[s] = -1;
      streams_[s]->check();
    }
    {
      std::lock_guard lock(sends_mu_);
      for (auto& b : sends_)  // a receiver that stopped: the send to it never completes (rendezvous sizes)
        cpu::wait_polling(1, &b.request,
                          {.timeout = watchdog_timeout(),
                           .describe = [&] { return fmt::format("the pipeline send (MPI_Isend) waiting on rank {}", b.peer); },
                           .check = [this] { check_fault(); }});
      sends_.clear();
    }
    timing = clock_;
  }

  double loss_sum() override {
    double s = 0;
    for (std::size_t i = 0; i < g_->tensors.size(); ++i) {
      const auto& ti = g_->tensors[i];
      if (ti.op == Op::loss && ti.role == sim::TensorRole::activation)
        for (float v : data_[i]) s += v;
    }
    return s;
  }

  std::vector<float> read_tensor(sim::TensorId id) override {
    if (g_->tensors[id].role == sim::TensorRole::input) return {ints_[id].begin(), ints_[id].end()};
    return data_[id];
  }

 private:
  std::int64_t now_ns() const { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0_).count(); }
  void wait_for(std::span<const std::uint32_t> waits) {
    for (auto w : waits) {
      std::uint32_t v;
      while ((v = done_[w].load(std::memory_order_acquire)) != epoch_) {
        if (v == kFaulted) rethrow_fault();
        done_[w].wait(v, std::memory_order_acquire);
      }
    }
  }
  /// A stream failed (an exchange timed out, an MPI call failed): remember the first error and wake
  /// every waiter, on any thread, by writing kFaulted into every completion flag (a waiter either
  /// sees it before it sleeps or is woken by the notify), so the whole rank stops promptly.
  void fault(std::exception_ptr e) {
    {
      std::lock_guard lock(fault_mu_);
      if (!fault_) fault_ = e;
    }
    faulted_.store(true);
    for (std::size_t i = 0; i < g_->size(); ++i) {
      done_[i].store(kFaulted, std::memory_order_release);
      done_[i].notify_all();
    }
  }
  [[noreturn]] void rethrow_fault() {
    std::lock_guard lock(fault_mu_);
    std::rethrow_exception(fault_);
  }
  void check_fault() {
    if (faulted_.load()) rethrow_fault();
  }
  void mark_done(std::uint32_t t) {
    done_[t].store(epoch_, std::memory_order_release);
    done_[t].notify_all();
  }
  float* f(sim::TensorId id) { return data_[id].data(); }
  /// The first output row an AllGather step's GEMM writes (its shard's), 0 for any other task.
  std::int64_t ag_row(std::uint32_t t) const {
    if (pieces_->kind[t] != TpPieces::Kind::ag_gemm) return 0;
    return TpPieces::ag_shard(tp_rank_, g_->tasks[t].chunk, g_->plan.tp) * g_->tensors[g_->inputs(t)[0]].rows;
  }
  const std::int32_t* ints(sim::TensorId id) { return ints_[id].data(); }
  /// Which vocabulary block this rank's logits hold: its TP rank, on a grid its column.
  int vocab_rank() const { return grid_ ? at_.col : tp_rank_; }

  void run_collective(std::uint32_t t) {
    const auto& task = g_->tasks[t];
    const auto& c = std::get<hardware::CollectiveOp>(task.kind);
    const MPI_Comm comm = stream_comm_.at({task.group.value(), task.stream});
    auto in = g_->inputs(t), out = g_->outputs(t);
    if (is_dp_bucket_collective(*g_, t)) {
      run_bucket_collective(t, comm);
      return;
    }
    if (grid_ && grid_->kind[t] != GridPieces::Kind::none) {
      run_grid_collective(t, comm);
      return;
    }
    std::vector<MPI_Request> requests;
    requests.reserve(out.size() + 1);
    std::string waiting_on;  // the ranks the watchdog names: the communicator's unless an exchange says
    if (const auto kind = pieces_->kind[t]; kind == TpPieces::Kind::ag_exchange || kind == TpPieces::Kind::rs_peer_exchange) {
      // a step of a decomposed TP site (executor/tp_pieces.hpp): receive from one TP rank while
      // sending to another, point-to-point on the TP communicator of this stream (its exchanges run
      // in the same order on every rank, so the tag only separates them from the pipeline's)
      const auto [to, from] = pieces_->exchange_peers(*g_, t, tp_rank_);
      const int tag = kind == TpPieces::Kind::ag_exchange ? 3 : 4;
      const int count = static_cast<int>(data_[in[0]].size());
      if (data_[out[0]].size() != data_[in[0]].size())
        throw std::logic_error(fmt::format("{}: sends and receives different sizes", g_->task_name(t)));
      requests.resize(2);
      MPI_CHECK(MPI_Irecv(f(out[0]), count, MPI_FLOAT, from, tag, comm, &requests[0]));
      MPI_CHECK(MPI_Isend(f(in[0]), count, MPI_FLOAT, to, tag, comm, &requests[1]));
      const int base = o_.world_rank - tp_rank_;  // world rank of TP rank 0 (world rank = t + tp x ...)
      waiting_on = to == from ? fmt::format("rank {}", base + to)
                              : fmt::format("ranks {} (send) and {} (receive)", base + to, base + from);
    } else if (c.kind == hardware::CollectiveKind::send_recv) {  // pipeline: to / from the neighbouring stage's rank of this lane
      const bool fwd = g_->groups[*task.group].name == "pp_fwd", send = !in.empty();
      const bool to_next = fwd == send;  // pp_fwd sends and pp_bwd receives face the next stage
      const int peer = (o_.world_rank + (to_next ? lanes_ : o_.world_size - lanes_)) % o_.world_size;
      const int tag = fwd ? 1 : 2;
      if (send) {
        // A send is complete once its data is handed to MPI (a buffered send): the compute stream may
        // wait for it (p2p_overlap false) without waiting for the receiver to reach its receive -
        // a host blocked on compute could not issue that receive (the simulator's host never
        // blocks). The buffers are released at the end of the micro-batch round.
        std::lock_guard lock(sends_mu_);
        auto& b = sends_.emplace_back();
        b.data = data_[in[0]];
        b.peer = peer;
        MPI_CHECK(MPI_Isend(b.data.data(), static_cast<int>(b.data.size()), MPI_FLOAT, peer, tag, comm, &b.request));
        return;
      }
      requests.emplace_back();
      MPI_CHECK(MPI_Irecv(f(out[0]), static_cast<int>(data_[out[0]].size()), MPI_FLOAT, peer, tag, comm, &requests.back()));
    } else if (c.kind == hardware::CollectiveKind::all_gather) {  // [rows/tp, cols] -> [rows, cols], rank-ordered row blocks
      requests.emplace_back();
      const int n = static_cast<int>(data_[in[0]].size());
      MPI_CHECK(MPI_Iallgather(f(in[0]), n, MPI_FLOAT, f(out[0]), n, MPI_FLOAT, comm, &requests.back()));
    } else if (c.kind == hardware::CollectiveKind::reduce_scatter) {  // sum, rank r keeps row block r
      requests.emplace_back();
      const int n = static_cast<int>(data_[out[0]].size());
      MPI_CHECK(MPI_Ireduce_scatter_block(f(in[0]), f(out[0]), n, MPI_FLOAT, MPI_SUM, comm, &requests.back()));
    } else if (c.kind != hardware::CollectiveKind::all_reduce) {
      throw std::runtime_error(fmt::format("cpu backend: {} is not supported", hardware::to_string(c.kind)));
    } else if (task.op == Op::loss_comm) {  // vocab-parallel cross-entropy statistics: log-sum-exp merge
      requests.emplace_back();
      MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, f(out[0]), static_cast<int>(g_->tensors[out[0]].rows), stats_type_, stats_op_, comm,
                               &requests.back()));
    } else {
      for (auto id : out) {  // in place: inputs == outputs (one tensor, or a DP bucket)
        requests.emplace_back();
        MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, f(id), static_cast<int>(data_[id].size()), MPI_FLOAT, MPI_SUM, comm, &requests.back()));
      }
    }
    // sleeps between polls (see there); the watchdog names the ranks of the communicator
    const cpu::Watchdog watchdog{
        .timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o_.watchdog_s * 1e3)),
        .describe = [&] {
          return fmt::format("{} {} '{}' waiting on {}", g_->groups[*task.group].name, hardware::to_string(c.kind), g_->task_name(t),
                             waiting_on.empty() ? cpu::peers_of(comm) : waiting_on);
        },
        .check = [this] { check_fault(); }};
    cpu::wait_polling(static_cast<int>(requests.size()), requests.data(), watchdog);
  }

  void run_compute(std::uint32_t t);
  bool run_grid_compute(std::uint32_t t);
  void run_grid_collective(std::uint32_t t, MPI_Comm comm);

  /// 2D / 2.5D: the row (ranks ordered by column), column (ordered by row) and depth x dp
  /// communicators of this rank's grid position (world rank = tp rank + tp x dp rank; pp = 1).
  void make_grid_comms(const sim::Plan& p) {
    MPI_Request arrived;
    MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &arrived));
    cpu::wait_polling(1, &arrived, world_watchdog("the grid communicators' set-up (MPI_Barrier)"));
    const int q = p.tp_q, d = p.tp_d, layer = (o_.world_rank / o_.tp) * d + at_.depth;
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, layer * q + at_.row, at_.col, &row_comm_));
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, layer * q + at_.col, at_.row, &col_comm_));
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, tp_rank_ % (q * q), dp_rank_ * d + at_.depth, &depth_comm_));
  }

  /// Refuses, before allocating anything, a plan whose tensors (fp32: every activation, gradient,
  /// weight and weight gradient of the graph, plus AdamW's m and v per weight) do not fit this
  /// node's available memory (MemAvailable of /proc/meminfo) shared by the node's ranks. Every rank
  /// decides together (an MPI_Allreduce), so all refuse alike and the error prints once.
  void check_memory(const sim::StepGraph& g) {
    double need = 0;
    for (const auto& ti : g.tensors) {
      const double bytes = static_cast<double>(ti.rows) * static_cast<double>(ti.cols) * 4.0;
      need += ti.role == sim::TensorRole::weight ? 3 * bytes : bytes;  // weight + Adam m and v
    }
    MPI_Comm local;
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local));
    int local_ranks = 1;
    MPI_CHECK(MPI_Comm_size(local, &local_ranks));
    MPI_Comm_free(&local);
    const double available = available_memory_bytes();
    int fits = need * local_ranks <= 0.9 * available ? 1 : 0;  // 10 % for MPI, OpenBLAS and the rest of the process
    MPI_Request decided;
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, &fits, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &decided));
    cpu::wait_polling(1, &decided, world_watchdog("the memory check (MPI_Allreduce)"));
    if (!fits)
      throw common::ConfigError(
          "--model", "",
          fmt::format("{} with this plan needs {:.1f} GB per rank on the cpu backend (fp32 tensors, gradients and AdamW state), "
                      "{:.1f} GB for the {} rank{} on this node, but it has {:.1f} GB available (MemAvailable; the limit is 90 % of it); "
                      "use a smaller model, shorter sequences, a larger tp or fewer ranks per node",
                      g.model.name, need / 1e9, need * local_ranks / 1e9, local_ranks, local_ranks > 1 ? "s" : "", available / 1e9));
  }
  static double available_memory_bytes() {
    std::FILE* f = std::fopen("/proc/meminfo", "r");
    if (!f) return 1e300;  // not Linux: nothing to check against
    char line[256];
    double kb = -1;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    std::fclose(f);
    return kb >= 0 ? kb * 1024.0 : 1e300;
  }

  BackendOptions o_;
  int tp_rank_ = 0;
  const sim::StepGraph* g_ = nullptr;
  TrainingOptions t_;
  std::vector<std::vector<float>> data_;
  std::vector<std::vector<std::int32_t>> ints_;
  std::unique_ptr<TpPieces> pieces_;  ///< the strategy's decomposed TP sites (row blocks per rank)
  std::vector<std::vector<std::int32_t>> positions_;
  std::vector<std::vector<std::int32_t>> column_tokens_, column_positions_;  ///< grid: the rank's column (Batch)
  std::unique_ptr<GridPieces> grid_;  ///< 2D / 2.5D plans: SUMMA steps and norm statistics
  sim::Plan::GridCoord at_;           ///< grid: this rank's row, column and depth
  MPI_Comm row_comm_ = MPI_COMM_NULL, col_comm_ = MPI_COMM_NULL, depth_comm_ = MPI_COMM_NULL;
  /// A run of a parameter tensor (or ZeRO shard) with one weight-decay setting.
  struct Segment {
    std::int64_t offset, count;
    bool decay;
  };
  struct Param {
    sim::TensorId w, g;
    std::vector<float> m, v;
    std::vector<Segment> segments;
  };
  void run_bucket_collective(std::uint32_t t, MPI_Comm comm);
  std::chrono::milliseconds watchdog_timeout() const { return std::chrono::milliseconds(static_cast<std::int64_t>(o_.watchdog_s * 1e3)); }
  /// The watchdog of an exchange of every rank (`what`), outside the step's task graph.
  cpu::Watchdog world_watchdog(std::string what) const {
    return {.timeout = watchdog_timeout(),
            .describe = [what] { return what + " (all ranks) waiting on " + cpu::peers_of(MPI_COMM_WORLD); },
            .check = {}};
  }
  /// The watchdog of task `t`'s exchange on `comm` (`what`: the collective), naming its ranks.
  cpu::Watchdog watchdog_for(std::uint32_t t, MPI_Comm comm, std::string what) {
    return {.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o_.watchdog_s * 1e3)),
            .describe = [this, t, comm, what] {
              return fmt::format("{} {} '{}' waiting on {}", g_->groups[*g_->tasks[t].group].name, what, g_->task_name(t), cpu::peers_of(comm));
            },
            .check = [this] { check_fault(); }};
  }
  std::vector<Param> params_;
  int opt_step_ = 0;
  std::vector<sim::TensorId> zero_each_micro_batch_;
  std::unique_ptr<std::atomic<std::uint32_t>[]> done_;
  std::uint32_t epoch_ = 0;
  std::vector<TaskClock> clock_;
  Clock::time_point t0_;
  std::vector<std::int64_t> last_comm_;  // per stream: the last task issued on it, -1 if none
  MPI_Comm tp_comm_ = MPI_COMM_NULL, dp_comm_ = MPI_COMM_NULL, pp_comm_ = MPI_COMM_NULL, embd_comm_ = MPI_COMM_NULL;
  int lanes_ = 1;  // ranks per pipeline stage: tp x dp
  struct BufferedSend {
    std::vector<float> data;
    MPI_Request request = MPI_REQUEST_NULL;
    int peer = 0;  // world rank
  };
  std::mutex sends_mu_;
  std::deque<BufferedSend> sends_;  // pipeline sends in flight (a deque: requests keep their address)
  std::vector<MPI_Comm> group_comm_;     // per graph group
  std::map<std::pair<sim::GroupId, sim::StreamId>, MPI_Comm> stream_comm_;  // per (group, stream) issuing on it
  std::vector<MPI_Comm> owned_comms_;    // the duplicates among them
  int dp_rank_ = 0;
  MPI_Datatype stats_type_ = MPI_DATATYPE_NULL;
  MPI_Op stats_op_ = MPI_OP_NULL;
  static constexpr std::uint32_t kFaulted = ~std::uint32_t{0};  // completion flag of a faulted rank (epochs never reach it)
  std::mutex fault_mu_;
  std::exception_ptr fault_;
  std::atomic<bool> faulted_{false};
  std::vector<std::unique_ptr<StreamThread>> streams_;  // per graph stream: a thread for each comm stream
};

// ZeRO (executor/zero_layout.hpp): a gradient ReduceScatter packs its bucket, sums it over the DP
// ranks, adds this rank's block to its shard (+=: ZeRO-2/3 reduce every micro-batch; the optimizer
// zeroes the shard after its step) and zeroes the bucket's gradients (consumed); a parameter
// AllGather unpacks every rank's shard into the bucket's weights.
void CpuBackend::run_bucket_collective(std::uint32_t t, MPI_Comm comm) {
  const auto& g = *g_;
  const BucketLayout b = bucket_layout(g, t);
  int ranks = 1;
  MPI_CHECK(MPI_Comm_size(comm, &ranks));
  std::vector<float> packed(static_cast<std::size_t>(b.shard * ranks), 0.0f);
  MPI_Request req;
  if (g.tasks[t].op == Op::dp_reduce) {
    for (std::size_t i = 0; i < b.tensors.size(); ++i) {
      auto& d = data_[b.tensors[i]];
      std::copy(d.begin(), d.end(), packed.begin() + b.offsets[i]);
      std::fill(d.begin(), d.end(), 0.0f);
    }
    std::vector<float> mine(static_cast<std::size_t>(b.shard));
    MPI_CHECK(MPI_Ireduce_scatter_block(packed.data(), mine.data(), static_cast<int>(b.shard), MPI_FLOAT, MPI_SUM, comm, &req));
    cpu::wait_polling(1, &req, watchdog_for(t, comm, "ZeRO bucket reduce_scatter"));
    float* shard = f(g.outputs(t)[0]);
    for (std::int64_t e = 0; e < b.shard; ++e) shard[e] += mine[static_cast<std::size_t>(e)];
    return;
  }
  MPI_CHECK(MPI_Iallgather(f(g.inputs(t)[0]), static_cast<int>(b.shard), MPI_FLOAT, packed.data(), static_cast<int>(b.shard), MPI_FLOAT,
                           comm, &req));
  cpu::wait_polling(1, &req, watchdog_for(t, comm, "ZeRO bucket all_gather"));
  for (std::size_t i = 0; i < b.tensors.size(); ++i) {
    auto& d = data_[b.tensors[i]];
    std::copy_n(packed.begin() + b.offsets[i], d.size(), d.begin());
  }
}

void CpuBackend::run_compute(std::uint32_t t) {
  const auto& g = *g_;
  const auto& task = g.tasks[t];
  const auto& m = g.model;
  auto in = g.inputs(t);
  auto out = g.outputs(t);
  const auto& T = [&](sim::TensorId id) -> const sim::TensorInfo& { return g.tensors[id]; };
  const bool rms = m.norm == sim::Norm::rmsnorm;
  const std::int64_t h = m.hidden / (g.plan.grid_tp() ? g.plan.tp_q : 1);  // a grid rank holds h/q columns
  const bool fwd = task.phase == Phase::fwd;
  using cpu::gemm;
  if (grid_ && run_grid_compute(t)) return;
  if (pieces_->kind[t] == TpPieces::Kind::rs_peer_sum) {
    // async-tp's local sum, FLUX's reduction: sub-chunk j of this rank's rows = the sum over the
    // peer offsets o of input j x tp + o (executor/tp_pieces.hpp)
    const int tp = g.plan.tp, subs = pieces_->subs[t];
    const std::int64_t e = T(in[0]).rows * T(in[0]).cols;
    float* o = f(out[0]);
    for (int j = 0; j < subs; ++j) {
      float* oj = o + j * e;
      std::copy_n(f(in[static_cast<std::size_t>(j * tp)]), e, oj);
      for (int k = 1; k < tp; ++k) {
        const float* p = f(in[static_cast<std::size_t>(j * tp + k)]);
        for (std::int64_t i = 0; i < e; ++i) oj[i] += p[i];
      }
    }
    return;
  }
  switch (task.op) {
    case Op::embedding: {
      const std::int64_t n = T(in[0]).rows, vl = T(in[1]).rows;
      const auto& pos = positions_.at(batch_index(g, task.micro, task.slice));
      if (fwd) {
        const float* pos_w = in.size() > 2 && tp_rank_ == 0 ? f(in[2]) : nullptr;  // positions added once per TP group
        cpu::embedding_forward(ints(in[0]), pos.data(), f(in[1]), pos_w, tp_rank_ * vl, vl, f(out[0]), n, h);
      } else {  // inputs {dy, tokens}, outputs {d_emb (, d_pos)}
        const std::int64_t vloc = T(out[0]).rows;
        cpu::embedding_backward(ints(in[1]), pos.data(), f(in[0]), f(out[0]), out.size() > 1 ? f(out[1]) : nullptr, tp_rank_ * vloc,
                                vloc, n, h);
      }
      return;
    }
    case Op::norm1:
    case Op::norm2:
    case Op::final_norm:
      if (fwd) cpu::norm_forward(rms, f(in[0]), f(in[1]), f(out[0]), T(in[0]).rows, h);
      else  // inputs {d_out, x, w (, residual dy)}, outputs {dx, dw}
        cpu::norm_backward(rms, f(in[0]), f(in[1]), f(in[2]), in.size() > 3 ? f(in[3]) : nullptr, f(out[0]), f(out[1]), T(in[0]).rows, h);
      return;
    case Op::residual1:
    case Op::residual2: {  // out = x + [partial_0 | partial_1 | ...] (column chunks)
      const std::int64_t n = T(out[0]).rows, chunks = static_cast<std::int64_t>(in.size()) - 1, w = h / chunks;
      const float* x = f(in[0]);
      float* o = f(out[0]);
      // row chunks (TE's pipelined ReduceScatter): partial c holds rows [c n/chunks, (c+1) n/chunks)
      if (chunks > 1 && T(in[1]).cols == h) {
        const std::int64_t rows = n / chunks;
        for (std::int64_t c = 0; c < chunks; ++c) {
          const float* p = f(in[static_cast<std::size_t>(c + 1)]);
          for (std::int64_t e = 0; e < rows * h; ++e) o[c * rows * h + e] = x[c * rows * h + e] + p[e];
        }
        return;
      }
      for (std::int64_t c = 0; c < chunks; ++c) {
        const float* p = f(in[static_cast<std::size_t>(c + 1)]);
        for (std::int64_t r = 0; r < n; ++r)
          for (std::int64_t j = 0; j < w; ++j) o[r * h + c * w + j] = x[r * h + c * w + j] + p[r * w + j];
      }
      return;
    }
    case Op::qkv:
    case Op::fc1: {
      const auto& W = T(in[1]);
      if (task.phase == Phase::fwd) {  // Y (N, out) = X (N, in) . W (in, out); an AllGather step: its shard's rows of Y
        const std::int64_t at = ag_row(t);
        gemm(false, false, T(in[0]).rows, W.cols, W.rows, 1, f(in[0]), W.rows, f(in[1]), W.cols, 0, f(out[0]) + at * W.cols,
             W.cols);
      } else if (task.phase == Phase::bwd_dgrad) {  // dX (N, in) = dY (N, out) . W^T; a fused GEMM + ReduceScatter chunk: its rows of dY
        const bool piece = pieces_->kind[t] == TpPieces::Kind::rs_peer_gemm;
        const std::int64_t rows = piece ? T(out[0]).rows : T(in[0]).rows, at = piece ? pieces_->rs_input_row(g, t, tp_rank_) : 0;
        gemm(false, true, rows, W.rows, W.cols, 1, f(in[0]) + at * W.cols, W.cols, f(in[1]), W.cols, 0, f(out[0]), W.rows);
      } else {  // inputs {dY, X}: dW (in, out) += X^T . dY
        const auto& dW = T(out[0]);
        gemm(true, false, dW.rows, dW.cols, T(in[0]).rows, 1, f(in[1]), dW.rows, f(in[0]), dW.cols, 1, f(out[0]), dW.cols);
      }
      return;
    }
    case Op::out_proj:
    case Op::fc2: {
      const auto kind = pieces_->kind[t];
      if (task.phase == Phase::fwd && kind == TpPieces::Kind::rs_split_gemm) {
        // TE's pipeline chunk k: for each TP rank p its rows [p R + k r, p R + (k+1) r) into row block p (r = R / splits)
        const auto& W = T(in[1]);
        const auto& X = T(in[0]);
        const auto& Y = T(out[0]);
        if (Y.cols != W.cols) throw std::logic_error(fmt::format("{}: token chunks of a column chunk", g.task_name(t)));
        const std::int64_t R = X.rows / g.plan.tp, r = Y.rows / g.plan.tp, k = task.chunk;
        for (std::int64_t p = 0; p < g.plan.tp; ++p)
          gemm(false, false, r, Y.cols, W.rows, 1, f(in[0]) + (p * R + k * r) * X.cols, X.cols, f(in[1]), W.cols, 0,
               f(out[0]) + p * r * Y.cols, Y.cols);
      } else if (task.phase == Phase::fwd && kind == TpPieces::Kind::rs_peer_gemm) {  // peer step c: (sub-chunk of) shard (r + c) mod tp
        const auto& W = T(in[1]);
        const auto& X = T(in[0]);
        const auto& Y = T(out[0]);
        const std::int64_t at = pieces_->rs_input_row(g, t, tp_rank_);
        gemm(false, false, Y.rows, Y.cols, W.rows, 1, f(in[0]) + at * X.cols, X.cols, f(in[1]), W.cols, 0, f(out[0]), Y.cols);
      } else if (task.phase == Phase::fwd) {  // Y_c (N, h/C) = X (N, in) . W[:, chunk c]
        const auto& W = T(in[1]);
        const std::int64_t w = T(out[0]).cols, c = std::max<int>(0, task.chunk);
        gemm(false, false, T(in[0]).rows, w, W.rows, 1, f(in[0]), W.rows, f(in[1]) + c * w, W.cols, 0, f(out[0]), w);
      } else if (task.phase == Phase::bwd_dgrad) {  // dX (N, in) = dY (N, h) . W^T; an AllGather step: its shard's rows of dX
        const auto& W = T(in[1]);
        const std::int64_t at = ag_row(t);
        gemm(false, true, T(in[0]).rows, W.rows, W.cols, 1, f(in[0]), W.cols, f(in[1]), W.cols, 0, f(out[0]) + at * W.rows,
             W.rows);
      } else if (kind == TpPieces::Kind::ag_wgrad) {  // inputs {dY piece 0 .. tp-1, X}: dW += X[piece k's rows]^T . dY_k
        const auto& dW = T(out[0]);
        const sim::TensorId x = in.back();
        for (std::size_t k = 0; k + 1 < in.size(); ++k) {
          const std::int64_t rows = T(in[k]).rows, at = TpPieces::ag_shard(tp_rank_, static_cast<int>(k), g.plan.tp) * rows;
          gemm(true, false, dW.rows, dW.cols, rows, 1, f(x) + at * dW.rows, dW.rows, f(in[k]), dW.cols, 1, f(out[0]), dW.cols);
        }
      } else {  // inputs {dY, X}: dW (in, h) += X^T . dY
        const auto& dW = T(out[0]);
        gemm(true, false, dW.rows, dW.cols, T(in[0]).rows, 1, f(in[1]), dW.rows, f(in[0]), dW.cols, 1, f(out[0]), dW.cols);
      }
      return;
    }
    case Op::attention: {
      const auto& a = std::get<hardware::AttentionOp>(task.kind);
      cpu::AttentionShape s{.batch = a.batch, .heads = a.heads, .kv_heads = a.kv_heads, .head_dim = a.head_dim, .s_q = a.s_q,
                            .q_offset = a.q_offset, .kv_block = a.s_q, .rope = m.position == sim::Position::rope};
      const bool flash = a.kernel == hardware::AttentionKernel::flash;
      if (fwd) {  // inputs {qkv...}, outputs {ctx, probs | lse}
        std::vector<const float*> kv;
        for (auto id : in) kv.push_back(f(id));
        if (flash) cpu::flash_attention_forward(s, kv, f(out[0]), f(out[1]));
        else cpu::attention_forward(s, kv, f(out[0]), f(out[1]));
      } else {  // inputs {qkv..., ctx, probs | lse, dctx}, outputs {dqkv...}
        std::vector<const float*> kv;
        for (std::size_t i = 0; i + 3 < in.size(); ++i) kv.push_back(f(in[i]));
        std::vector<float*> dkv;
        for (auto id : out) dkv.push_back(f(id));
        const float *ctx = f(in[in.size() - 3]), *aux = f(in[in.size() - 2]), *dctx = f(in[in.size() - 1]);
        if (flash) cpu::flash_attention_backward(s, kv, ctx, aux, dctx, dkv);
        else cpu::attention_backward(s, kv, ctx, aux, dctx, dkv);
      }
      return;
    }
    case Op::activation: {
      const std::int64_t n = T(in[0]).rows;
      if (m.activation == sim::Activation::gelu) {
        if (fwd) cpu::gelu_forward(f(in[0]), f(out[0]), n * T(in[0]).cols);
        else cpu::gelu_backward(f(in[0]), f(in[1]), f(out[0]), n * T(in[0]).cols);
      } else {
        if (fwd) cpu::swiglu_forward(f(in[0]), f(out[0]), n, T(out[0]).cols);
        else cpu::swiglu_backward(f(in[0]), f(in[1]), f(out[0]), n, T(in[1]).cols);
      }
      return;
    }
    case Op::lm_head: {
      const auto& W = T(in[1]);  // (V/tp, h)
      if (fwd) {  // logits (N, V) = X (N, h) . W^T
        gemm(false, true, T(in[0]).rows, W.rows, h, 1, f(in[0]), h, f(in[1]), h, 0, f(out[0]), W.rows);
      } else if (task.phase == Phase::bwd_dgrad) {  // dX (N, h) = dlogits (N, V) . W
        gemm(false, false, T(in[0]).rows, h, W.rows, 1, f(in[0]), W.rows, f(in[1]), h, 0, f(out[0]), h);
      } else {  // inputs {dlogits, X}: dW (V, h) += dlogits^T . X
        const auto& dW = T(out[0]);
        gemm(true, false, dW.rows, h, T(in[0]).rows, 1, f(in[0]), dW.rows, f(in[1]), h, 1, f(out[0]), h);
      }
      return;
    }
    case Op::loss_comm: {  // local statistics of the vocab-parallel logits
      const auto& L = T(in[0]);
      cpu::cross_entropy_stats(f(in[0]), ints(in[1]), vocab_rank() * L.cols, L.cols, f(out[0]), L.rows);
      return;
    }
    case Op::loss: {  // inputs {logits, stats, targets}, outputs {dlogits, loss}
      const auto& L = T(in[0]);
      const float scale = 1.0f / static_cast<float>(tokens_per_step(g.plan));
      cpu::cross_entropy_backward(f(in[0]), f(in[1]), ints(in[2]), vocab_rank() * L.cols, L.cols, scale, f(out[0]), f(out[1]), L.rows);
      return;
    }
    case Op::optimizer: {
      ++opt_step_;
      const cpu::AdamW o{.lr = static_cast<float>(t_.lr), .beta1 = static_cast<float>(t_.beta1), .beta2 = static_cast<float>(t_.beta2),
                         .eps = static_cast<float>(t_.eps), .weight_decay = static_cast<float>(t_.weight_decay)};
      for (auto& p : params_)
        for (const auto& sg : p.segments)
          cpu::adamw(o, opt_step_, f(p.w) + sg.offset, f(p.g) + sg.offset, p.m.data() + sg.offset, p.v.data() + sg.offset, sg.count,
                     sg.decay);
      return;
    }
    default:
      throw std::runtime_error(fmt::format("cpu backend: no kernel for {} ({})", g.task_name(t), sim::to_string(task.op)));
  }
}

// 2D / 2.5D grids (executor/grid_pieces.hpp): SUMMA broadcasts and reduces rooted at the step's
// rank of the row / column communicator, and the norms' row statistics.
void CpuBackend::run_grid_collective(std::uint32_t t, MPI_Comm comm) {
  const auto& g = *g_;
  const auto& task = g.tasks[t];
  auto in = g.inputs(t), out = g.outputs(t);
  using K = GridPieces::Kind;
  const K kind = grid_->kind[t];
  const std::int64_t H = g.model.hidden, h = H / g.plan.tp_q;
  const bool rms = g.model.norm == sim::Norm::rmsnorm;
  int me = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &me));
  MPI_Request req;
  auto wait = [&](const char* what) { cpu::wait_polling(1, &req, watchdog_for(t, comm, what)); };
  switch (kind) {
    case K::broadcast: {
      const int root = task.chunk;
      auto& dst = data_[out[0]];
      if (me == root) std::copy(data_[in[0]].begin(), data_[in[0]].end(), dst.begin());
      MPI_CHECK(MPI_Ibcast(dst.data(), static_cast<int>(dst.size()), MPI_FLOAT, root, comm, &req));
      wait("broadcast");
      return;
    }
    case K::reduce_set:
    case K::reduce_add: {
      const int root = task.chunk;
      const auto& src = data_[in[0]];
      std::vector<float> sum(me == root ? src.size() : 0);
      MPI_CHECK(MPI_Ireduce(src.data(), me == root ? sum.data() : nullptr, static_cast<int>(src.size()), MPI_FLOAT, MPI_SUM, root, comm,
                            &req));
      wait("reduce");
      if (me != root) return;
      auto& dst = data_[out[1]];
      if (dst.size() != sum.size()) throw std::logic_error(fmt::format("{}: reduces into a tensor of another size", g.task_name(t)));
      if (kind == K::reduce_set) std::copy(sum.begin(), sum.end(), dst.begin());
      else
        for (std::size_t e = 0; e < sum.size(); ++e) dst[e] += sum[e];
      return;
    }
    case K::norm_stats_fwd: {  // statistic `chunk` of every token: its column of the [T, 2] tensor
      const int part = task.chunk;
      const std::int64_t n = g.tensors[out[0]].rows;
      float* stats = f(out[0]);
      cpu::grid_norm_stats(rms, part, f(in[0]), stats, n, h, H);
      std::vector<float> col(static_cast<std::size_t>(n));
      for (std::int64_t r = 0; r < n; ++r) col[static_cast<std::size_t>(r)] = stats[2 * r + part];
      MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, col.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm, &req));
      wait("all_reduce");
      for (std::int64_t r = 0; r < n; ++r) stats[2 * r + part] = col[static_cast<std::size_t>(r)];
      return;
    }
    case K::norm_stats_bwd: {  // the norm backward's operands {dy, x, w, ...} and the forward's statistics
      const auto norm_in = g.inputs(grid_->norm_task[t]);
      const std::int64_t n = g.tensors[out[0]].rows;
      cpu::grid_norm_backward_sums(rms, f(norm_in[0]), f(norm_in[1]), f(norm_in[2]), f(grid_->fwd_stats[t]), f(out[0]), n, h, H);
      MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, f(out[0]), static_cast<int>(2 * n), MPI_FLOAT, MPI_SUM, comm, &req));
      wait("all_reduce");
      return;
    }
    default: throw std::logic_error(fmt::format("cpu backend: {} is no grid collective", g.task_name(t)));
  }
}

// Returns false for the ops a grid runs like 1D on its local blocks (attention, activation,
// residuals, the loss, the optimizer).
bool CpuBackend::run_grid_compute(std::uint32_t t) {
  const auto& g = *g_;
  const auto& task = g.tasks[t];
  auto in = g.inputs(t), out = g.outputs(t);
  const auto& T = [&](sim::TensorId id) -> const sim::TensorInfo& { return g.tensors[id]; };
  const std::int64_t H = g.model.hidden, h = H / g.plan.tp_q;
  const bool rms = g.model.norm == sim::Norm::rmsnorm, head = task.op == Op::lm_head;
  using K = GridPieces::Kind;
  using cpu::gemm;
  switch (grid_->kind[t]) {
    case K::summa_fwd: {  // inputs {a, b, y}: y (+)= a . b (the head: a . b^T)
      const auto& A = T(in[0]);
      const auto& B = T(in[1]);
      const float beta = task.chunk == 0 ? 0.0f : 1.0f;
      if (head) gemm(false, true, A.rows, B.rows, B.cols, 1, f(in[0]), A.cols, f(in[1]), B.cols, beta, f(out[0]), B.rows);
      else gemm(false, false, A.rows, B.cols, B.rows, 1, f(in[0]), A.cols, f(in[1]), B.cols, beta, f(out[0]), B.cols);
      return true;
    }
    case K::summa_dgrad: {  // inputs {dy, b}: c = dy . b^T (the head: dy . b)
      const auto& D = T(in[0]);
      const auto& B = T(in[1]);
      if (head) gemm(false, false, D.rows, B.cols, B.rows, 1, f(in[0]), D.cols, f(in[1]), B.cols, 0, f(out[0]), B.cols);
      else gemm(false, true, D.rows, B.rows, B.cols, 1, f(in[0]), D.cols, f(in[1]), B.cols, 0, f(out[0]), B.rows);
      return true;
    }
    case K::summa_wgrad: {  // inputs {a, dy}: e = a^T . dy (the head: dy^T . a)
      const auto& A = T(in[0]);
      const auto& E = T(out[0]);
      if (head) gemm(true, false, E.rows, E.cols, A.rows, 1, f(in[1]), E.rows, f(in[0]), E.cols, 0, f(out[0]), E.cols);
      else gemm(true, false, E.rows, E.cols, A.rows, 1, f(in[0]), E.rows, f(in[1]), E.cols, 0, f(out[0]), E.cols);
      return true;
    }
    case K::norm_fwd:  // inputs {x, w, stats}
      cpu::grid_norm_forward(rms, f(in[0]), f(in[1]), f(in[2]), f(out[0]), T(in[0]).rows, h, H);
      return true;
    case K::norm_bwd:  // inputs {dy, x, w (, residual dy)}, outputs {dx, dw}
      cpu::grid_norm_backward(rms, f(in[0]), f(in[1]), f(in[2]), in.size() > 3 ? f(in[3]) : nullptr, f(grid_->fwd_stats[t]),
                              f(grid_->bwd_sums[t]), f(out[0]), f(out[1]), T(in[0]).rows, h, H);
      return true;
    default: break;
  }
  if (task.op != Op::embedding) return false;
  // vocab-parallel along the column: the column's q x T tokens against vocabulary block `row`
  const std::size_t b = batch_index(g, task.micro, task.slice);
  const auto& tok = column_tokens_.at(b);
  const auto& pos = column_positions_.at(b);
  const std::int64_t n = static_cast<std::int64_t>(tok.size());
  if (task.phase == Phase::fwd) {  // inputs {tokens, w (, positions)}, output [q T, h/q] before the reduce-scatter
    if (T(out[0]).rows != n) throw std::logic_error(fmt::format("{}: {} column tokens for {} rows", g.task_name(t), n, T(out[0]).rows));
    const std::int64_t vl = T(in[1]).rows;
    const float* pos_w = in.size() > 2 && at_.row == 0 ? f(in[2]) : nullptr;  // the reduce-scatter sums the column: added once
    cpu::embedding_forward(tok.data(), pos.data(), f(in[1]), pos_w, at_.row * vl, vl, f(out[0]), n, h);
  } else {  // inputs {dy gathered over the column, tokens}, outputs {d_emb (, d_pos)}
    const std::int64_t vl = T(out[0]).rows;
    cpu::embedding_backward(tok.data(), pos.data(), f(in[0]), f(out[0]), out.size() > 1 ? f(out[1]) : nullptr, at_.row * vl, vl, n, h);
  }
  return true;
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options) { return std::make_unique<CpuBackend>(options); }

}  // namespace executor
