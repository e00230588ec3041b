// executor::measure_overlap and executor::to_task_timing: what a measured timeline says, with no MPI
// (the slicetune program reports runs with them; train() itself is in the MPI plug-in)
#include <algorithm>

#include "executor/run.hpp"

namespace executor {
namespace {

/// Total length of the union of intervals.
std::int64_t union_length(std::vector<std::pair<std::int64_t, std::int64_t>> iv) {
  std::sort(iv.begin(), iv.end());
  std::int64_t total = 0, cur_s = 0, cur_e = -1;
  for (auto [s, e] : iv) {
    if (s > cur_e) {
      if (cur_e > cur_s) total += cur_e - cur_s;
      cur_s = s;
      cur_e = e;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  if (cur_e > cur_s) total += cur_e - cur_s;
  return total;
}

}  // namespace

Overlap measure_overlap(const sim::StepGraph& g, const std::vector<TaskClock>& timeline) {
  std::vector<std::pair<std::int64_t, std::int64_t>> comm, compute;
  for (std::size_t i = 0; i < g.size() && i < timeline.size(); ++i) {
    const auto& c = timeline[i];
    if (c.start_ns < 0) continue;
    // a grid's TP communication runs on its row and column streams, FLUX's fused kernels' on fused_comm
    const auto& stream = g.stream_of(i).name;
    if (stream == "tp_comm" || stream == "row_comm" || stream == "col_comm" || stream == "fused_comm")
      comm.emplace_back(c.start_ns, c.end_ns);
    else if (g.on_compute(i))
      compute.emplace_back(c.start_ns, c.end_ns);
  }
  // |comm ∩ compute| = |comm| + |compute| - |comm ∪ compute|
  const std::int64_t a = union_length(comm), b = union_length(compute);
  auto both = comm;
  both.insert(both.end(), compute.begin(), compute.end());
  const std::int64_t u = union_length(both);
  return Overlap{.comm_busy_ms = a / 1e6, .overlapped_ms = static_cast<double>(a + b - u) / 1e6};
}

std::vector<sim::TaskTiming> to_task_timing(const std::vector<TaskClock>& timeline) {
  std::vector<sim::TaskTiming> out(timeline.size());
  for (std::size_t i = 0; i < timeline.size(); ++i)
    if (timeline[i].start_ns >= 0)
      out[i] = {common::Duration::from_ns(timeline[i].start_ns), common::Duration::from_ns(timeline[i].end_ns)};
  return out;
}

}  // namespace executor
