#include "executor/run.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <mpi.h>

#include "common/check.hpp"
#include "executor/cpu/wait_polling.hpp"
#include "sim/pipeline_schedule.hpp"
#include "executor/zero_layout.hpp"

namespace executor {
namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Completes a non-blocking MPI_COMM_WORLD exchange under the watchdog (a stopped or dead peer
/// throws FaultError naming the ranks instead of waiting forever).
void finish(MPI_Request request, double watchdog_s, const char* what) {
  cpu::wait_polling(1, &request,
                    {.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(watchdog_s * 1e3)),
                     .describe = [what] { return std::string(what) + " (all ranks) waiting on " + cpu::peers_of(MPI_COMM_WORLD); },
                     .check = {}});
}

/// MPI_Comm_split (blocking: MPI has no non-blocking split) once every rank has arrived, checked
/// under the watchdog: a stopped or dead rank ends the job at the barrier, named, not in the split.
MPI_Comm split_after_barrier(int color, int key, double watchdog_s, const char* what) {
  MPI_Request arrived;
  MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &arrived));
  finish(arrived, watchdog_s, what);
  MPI_Comm c = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, key, &c));
  return c;
}

/// ZeRO: every weight gradient of a reduce-scattered bucket, reassembled from the DP ranks'
/// shards (the summed gradient; the bucket's own gradient tensors were consumed).
std::map<sim::TensorId, std::vector<float>> unshard_grads(const sim::StepGraph& g, Backend& b, const sim::PipelinePosition& pos,
                                                          double watchdog_s) {
  std::map<sim::TensorId, std::vector<float>> out;
  bool any = false;
  for (std::uint32_t t = 0; t < g.size(); ++t) any |= is_dp_bucket_collective(g, t) && g.tasks[t].op == sim::Op::dp_reduce;
  if (!any) return out;
  // the DP group of this rank's pipeline stage (world rank = tp rank + tp x (dp rank + dp x stage))
  MPI_Comm dp_comm = split_after_barrier(pos.tp_rank + g.plan.tp * pos.stage, pos.dp_rank, watchdog_s,
                                         "the ZeRO gradient unsharding's set-up (MPI_Barrier)");
  for (std::uint32_t t = 0; t < g.size(); ++t) {
    if (!is_dp_bucket_collective(g, t) || g.tasks[t].op != sim::Op::dp_reduce) continue;
    const BucketLayout lay = bucket_layout(g, t);
    const auto shard = b.read_tensor(g.outputs(t)[0]);
    std::vector<float> packed(static_cast<std::size_t>(lay.shard * g.plan.dp));
    MPI_Request req;
    MPI_CHECK(MPI_Iallgather(shard.data(), static_cast<int>(lay.shard), MPI_FLOAT, packed.data(), static_cast<int>(lay.shard), MPI_FLOAT,
                             dp_comm, &req));
    finish(req, watchdog_s, "the ZeRO gradient unsharding (MPI_Allgather)");
    for (std::size_t i = 0; i < lay.tensors.size(); ++i) {
      const auto& ti = g.tensors[lay.tensors[i]];
      out[lay.tensors[i]].assign(packed.begin() + lay.offsets[i], packed.begin() + lay.offsets[i] + ti.rows * ti.cols);
    }
  }
  MPI_CHECK(MPI_Comm_free(&dp_comm));
  return out;
}

/// Full (unsharded) weight gradients, summed onto world rank 0: within each pipeline stage onto its
/// first rank, then from there to rank 0 (stages hold different weights).
std::vector<std::pair<std::string, std::vector<float>>> gather_grads(const sim::StepGraph& g, Backend& b, double watchdog_s) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  const auto pos = sim::pipeline_position(g.plan, rank);
  MPI_Comm stage_comm = split_after_barrier(pos.stage, pos.lane, watchdog_s, "the gradient gather's set-up (MPI_Barrier)");
  const auto unsharded = unshard_grads(g, b, pos, watchdog_s);  // ZeRO-1/2/3 (pp > 1: ZeRO-1)
  std::vector<std::pair<std::string, std::vector<float>>> mine;
  for (std::size_t i = 0; i < g.tensors.size(); ++i) {
    const auto& t = g.tensors[i];
    if (t.role != sim::TensorRole::weight_grad || t.op == sim::Op::dp_reduce) continue;  // not ZeRO's shards
    // the last stage's copy of a tied embedding: after the embedding-group sum it equals stage 0's
    if (pos.stage > 0 && g.model.tied_embeddings && t.op == sim::Op::embedding && t.variant == 0) continue;
    const auto id = static_cast<sim::TensorId>(i);
    const auto layout = weight_layout(g, id);
    std::vector<float> full(static_cast<std::size_t>(layout.full_rows * layout.full_cols), 0.0f);
    // after the DP reduction every DP rank holds the same gradient: DP rank 0 contributes;
    // replicated weights: TP rank 0 (a grid: row 0 of each column, depth 0) contributes
    if (pos.dp_rank == 0 && layout.contributes(g.plan, pos.tp_rank)) {
      const auto it = unsharded.find(id);
      const auto local = it != unsharded.end() ? it->second : b.read_tensor(id);
      for (std::int64_t r = 0; r < t.rows; ++r)
        for (std::int64_t c = 0; c < t.cols; ++c)
          full[static_cast<std::size_t>(layout.global_index(g, t, pos.tp_rank, r, c))] = local[static_cast<std::size_t>(r * t.cols + c)];
    }
    std::vector<float> sum(pos.lane == 0 ? full.size() : 0);
    MPI_Request req;
    MPI_CHECK(MPI_Ireduce(full.data(), pos.lane == 0 ? sum.data() : nullptr, static_cast<int>(full.size()), MPI_FLOAT, MPI_SUM, 0,
                          stage_comm, &req));
    finish(req, watchdog_s, "the gradient gather (MPI_Reduce)");
    if (pos.lane == 0) mine.emplace_back(t.name(), std::move(sum));
  }
  MPI_CHECK(MPI_Comm_free(&stage_comm));
  // stage leaders to rank 0: a count, then (name, values) per tensor; each message under the watchdog
  constexpr int kTag = 7301;
  auto send = [&](const void* data, int count, MPI_Datatype type) {
    MPI_Request req;
    MPI_CHECK(MPI_Isend(data, count, type, 0, kTag, MPI_COMM_WORLD, &req));
    cpu::wait_polling(1, &req,
                      {.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(watchdog_s * 1e3)),
                       .describe = [] { return std::string("the gradient gather's send (MPI_Isend) waiting on rank 0"); },
                       .check = {}});
  };
  if (pos.lane == 0 && pos.stage > 0) {
    int count = static_cast<int>(mine.size());
    send(&count, 1, MPI_INT);
    for (const auto& [name, v] : mine) {
      int sizes[2] = {static_cast<int>(name.size()), static_cast<int>(v.size())};
      send(sizes, 2, MPI_INT);
      send(name.data(), sizes[0], MPI_CHAR);
      send(v.data(), sizes[1], MPI_FLOAT);
    }
    return {};
  }
  if (rank != 0) return {};
  for (int s = 1; s < g.plan.pp; ++s) {
    const int src = sim::world_rank_of(g.plan, 0, 0, s);
    auto recv = [&](void* data, int count, MPI_Datatype type) {
      MPI_Request req;
      MPI_CHECK(MPI_Irecv(data, count, type, src, kTag, MPI_COMM_WORLD, &req));
      cpu::wait_polling(1, &req,
                        {.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(watchdog_s * 1e3)),
                         .describe = [src] { return fmt::format("the gradient gather's receive (MPI_Irecv) waiting on rank {}", src); },
                         .check = {}});
    };
    int count = 0;
    recv(&count, 1, MPI_INT);
    for (int k = 0; k < count; ++k) {
      int sizes[2];
      recv(sizes, 2, MPI_INT);
      std::string name(static_cast<std::size_t>(sizes[0]), ' ');
      std::vector<float> v(static_cast<std::size_t>(sizes[1]));
      recv(name.data(), sizes[0], MPI_CHAR);
      recv(v.data(), sizes[1], MPI_FLOAT);
      mine.emplace_back(std::move(name), std::move(v));
    }
  }
  return mine;
}

}  // namespace

RunResult train(const sim::StepGraph& g, Backend& backend, const RunOptions& o, bool capture_grads) {
  int rank = 0, world = 1;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
  const auto& p = g.plan;
  const std::size_t n = g.size();
  const auto position = sim::pipeline_position(p, rank);
  const int dp_rank = position.dp_rank, tp_rank = position.tp_rank, accum = p.grad_accum_steps();
  // a graph of one micro-batch runs accum times; a pipeline stage's graph holds the whole step
  const int rounds = accum / g.micro_batches;

  // waits[t]: predecessors of t on other streams (same-stream order is the stream's own)
  std::vector<std::vector<std::uint32_t>> waits(n);
  for (std::size_t u = 0; u < n; ++u)
    for (auto v : boost::make_iterator_range(g.successors(u)))
      if (g.tasks[v].stream != g.tasks[u].stream) waits[v].push_back(static_cast<std::uint32_t>(u));
  std::uint32_t optimizer = static_cast<std::uint32_t>(n);
  for (std::size_t t = 0; t < n; ++t)
    if (g.tasks[t].op == sim::Op::optimizer) optimizer = static_cast<std::uint32_t>(t);

  backend.prepare(g, o.training);
  RunResult r;
  r.warmup = std::min(o.warmup, std::max(0, o.steps - 1));
  std::vector<std::vector<TaskClock>> step_timelines;  // this rank, per step
  std::vector<std::uint32_t> w;
  for (int step = 0; step < o.steps; ++step) {
    MPI_Request barrier;
    MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &barrier));
    finish(barrier, o.watchdog_s, "the step-start barrier");
    const auto step_begin = Clock::now();
    double loss_sum = 0;
    std::vector<TaskClock> timing;
    for (int round = 0; round < rounds; ++round) {
      const bool last = round == rounds - 1;
      const Batch batch = make_batch(g, o.training.seed, step, round * g.micro_batches, dp_rank, tp_rank);
      const auto mb_begin = Clock::now();
      backend.begin_micro_batch(batch);
      const bool hold_optimizer = capture_grads && step == 0 && last;
      const bool first = round == 0;
      auto runs = [&](const sim::Task& x) { return (!x.once_per_step || last) && (!x.step_start || first); };
      for (std::uint32_t t = 0; t < n; ++t) {
        const auto& task = g.tasks[t];
        if (!runs(task)) continue;
        if (hold_optimizer && t >= optimizer) break;  // the optimizer and what follows it (ZeRO's gathers) after the dump
        w.clear();
        for (auto u : waits[t])
          if (runs(g.tasks[u])) w.push_back(u);
        backend.issue(t, w);
      }
      backend.end_micro_batch(timing);
      if (hold_optimizer) {
        r.first_step_grads = gather_grads(g, backend, o.watchdog_s);
        if (optimizer < n) {
          for (std::uint32_t t = optimizer; t < n; ++t) {
            if (!runs(g.tasks[t])) continue;
            w.clear();
            for (auto u : waits[t])
              if (runs(g.tasks[u])) w.push_back(u);  // not the first micro-batch's parameter gathers (ZeRO)
            backend.issue(t, w);
          }
          std::vector<TaskClock> opt_timing;
          backend.end_micro_batch(opt_timing);
          for (std::uint32_t t = optimizer; t < n; ++t) timing[t] = opt_timing[t];
        }
      }
      loss_sum += backend.loss_sum();
      if (last) {
        const std::int64_t offset = std::chrono::duration_cast<std::chrono::nanoseconds>(mb_begin - step_begin).count();
        for (auto& c : timing)
          if (c.start_ns >= 0) {
            c.start_ns += offset;
            c.end_ns += offset;
          }
      }
    }
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - step_begin).count();
    MPI_Request reqs[2];
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, &ms, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &reqs[0]));
    finish(reqs[0], o.watchdog_s, "the step-time reduction (MPI_Allreduce)");
    // every TP rank holds the same per-token losses (a grid: the q ranks of a grid row, which
    // hold the same tokens): sum over the world, divide by how many ranks hold each token's loss
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, &loss_sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &reqs[1]));
    finish(reqs[1], o.watchdog_s, "the loss reduction (MPI_Allreduce)");
    const double loss = loss_sum / (p.tp / p.tp_rows()) / static_cast<double>(tokens_per_step(p));
    r.step_times_ms.push_back(ms);
    r.loss.push_back(loss);
    step_timelines.push_back(std::move(timing));
    if (rank == 0 && o.on_step) o.on_step(step, ms, loss);
  }

  std::vector<double> measured(r.step_times_ms.begin() + r.warmup, r.step_times_ms.end());
  r.step_time_ms = median(measured);
  r.step_time_min_ms = *std::min_element(measured.begin(), measured.end());
  r.step_time_max_ms = *std::max_element(measured.begin(), measured.end());
  double mean = 0, var = 0;
  for (double v : measured) mean += v / static_cast<double>(measured.size());
  for (double v : measured) var += (v - mean) * (v - mean) / static_cast<double>(measured.size());
  r.step_time_stdev_ms = std::sqrt(var);
  r.tokens_per_s = static_cast<double>(tokens_per_step(p)) / (r.step_time_ms / 1e3);
  // the measured step closest to the median
  r.median_step = r.warmup;
  for (int s = r.warmup; s < o.steps; ++s)
    if (std::abs(r.step_times_ms[s] - r.step_time_ms) < std::abs(r.step_times_ms[r.median_step] - r.step_time_ms)) r.median_step = s;

  // per-task median durations (this rank), and every rank's median-step timeline on rank 0
  if (rank == 0) {
    r.task_median_us.assign(n, -1.0);
    std::vector<double> d;
    for (std::size_t t = 0; t < n; ++t) {
      d.clear();
      for (int s = r.warmup; s < o.steps; ++s) {
        const auto& c = step_timelines[s][t];
        if (c.start_ns >= 0) d.push_back(static_cast<double>(c.end_ns - c.start_ns) / 1e3);
      }
      if (!d.empty()) r.task_median_us[t] = median(d);
    }
  }
  // every rank's median-step timeline onto rank 0 (pipeline stages have graphs of different sizes)
  std::vector<std::int64_t> mine(2 * n);
  for (std::size_t t = 0; t < n; ++t) {
    mine[2 * t] = step_timelines[r.median_step][t].start_ns;
    mine[2 * t + 1] = step_timelines[r.median_step][t].end_ns;
  }
  int my_count = static_cast<int>(2 * n);
  std::vector<int> counts(rank == 0 ? world : 0), displs(rank == 0 ? world : 0);
  MPI_Request gather;
  MPI_CHECK(MPI_Igather(&my_count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD, &gather));
  finish(gather, o.watchdog_s, "the timeline gather (MPI_Gather)");
  std::size_t total = 0;
  for (int k = 0; k < static_cast<int>(counts.size()); ++k) {
    displs[k] = static_cast<int>(total);
    total += static_cast<std::size_t>(counts[k]);
  }
  std::vector<std::int64_t> all(total);
  MPI_CHECK(MPI_Igatherv(mine.data(), my_count, MPI_INT64_T, all.data(), counts.data(), displs.data(), MPI_INT64_T, 0, MPI_COMM_WORLD,
                         &gather));
  finish(gather, o.watchdog_s, "the timeline gather (MPI_Gatherv)");
  if (rank == 0) {
    r.timelines.assign(world, {});
    for (int k = 0; k < world; ++k) {
      const std::size_t nk = static_cast<std::size_t>(counts[k]) / 2;
      r.timelines[k].resize(nk);
      for (std::size_t t = 0; t < nk; ++t)
        r.timelines[k][t] = {all[static_cast<std::size_t>(displs[k]) + 2 * t], all[static_cast<std::size_t>(displs[k]) + 2 * t + 1]};
    }
    r.overlap = measure_overlap(g, r.timelines[0]);
  }
  return r;
}

}  // namespace executor
