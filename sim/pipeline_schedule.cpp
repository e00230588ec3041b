#include "sim/pipeline_schedule.hpp"

#include <algorithm>
#include <set>

namespace sim {

namespace {

/// Megatron-LM's get_schedule_table with microbatch_group_size_per_vp_stage = pp: the (micro-batch,
/// chunk) of forward k. Groups of pp micro-batches go through chunk 0, 1, ..., vp - 1; the last
/// group takes what is left.
std::vector<PipelinePass> interleaved_table(int pp, int vp, int m) {
  std::vector<PipelinePass> table;
  table.reserve(static_cast<std::size_t>(m) * vp);
  for (int first = 0; first < m; first += pp) {
    const int end = first + pp >= m ? m : first + pp;
    for (int c = 0; c < vp; ++c)
      for (int i = first; i < end; ++i) table.push_back({.forward = true, .micro = i, .chunk = c});
    if (end == m) break;
  }
  return table;
}

}  // namespace

std::vector<PipelinePass> pipeline_order(PipelineSchedule schedule, int pp, int vp, int m, int rank) {
  std::vector<PipelinePass> fwd, bwd;
  int warmup = 0;
  if (schedule == PipelineSchedule::one_f_one_b) {
    for (int i = 0; i < m; ++i) {
      fwd.push_back({.forward = true, .micro = i, .chunk = 0});
      bwd.push_back({.forward = false, .micro = i, .chunk = 0});
    }
    warmup = std::min(pp - rank - 1, m);
  } else {
    fwd = interleaved_table(pp, vp, m);
    for (const auto& f : fwd) bwd.push_back({.forward = false, .micro = f.micro, .chunk = vp - 1 - f.chunk});
    warmup = std::min(static_cast<int>(fwd.size()), 2 * (pp - rank - 1) + (vp - 1) * pp);
  }
  const int total = static_cast<int>(fwd.size());
  std::vector<PipelinePass> order;
  order.reserve(2 * fwd.size());
  for (int k = 0; k < warmup; ++k) order.push_back(fwd[k]);
  for (int k = 0; k < total - warmup; ++k) {
    order.push_back(fwd[warmup + k]);
    order.push_back(bwd[k]);
  }
  for (int k = total - warmup; k < total; ++k) order.push_back(bwd[k]);
  return order;
}

std::vector<LayerRange> virtual_stage_layers(const ModelSpec& m, const Plan& p) {
  std::vector<LayerRange> out;
  virtual_stage_layers(m, p, out);
  return out;
}

void virtual_stage_layers(const ModelSpec& m, const Plan& p, std::vector<LayerRange>& out) {
  const int v = p.virtual_stages();
  out.resize(static_cast<std::size_t>(v));
  int first = 0;
  for (int i = 0; i < v; ++i) {
    const int n = p.pipeline_layers.empty() ? m.layers / v : p.pipeline_layers[i];
    out[i] = {first, first + n};
    first += n;
  }
}

PipelinePosition pipeline_position(const Plan& p, int r) {
  const int lanes = p.tp * p.dp;
  return {.tp_rank = r % p.tp, .dp_rank = (r / p.tp) % p.dp, .stage = r / lanes, .lane = r % lanes};
}

int world_rank_of(const Plan& p, int tp_rank, int dp_rank, int stage) { return tp_rank + p.tp * (dp_rank + p.dp * stage); }

std::vector<std::vector<int>> in_flight_frontier(const std::vector<PipelinePass>& order, int vp) {
  std::vector<std::vector<int>> seen;  // the distinct live vectors after a forward, in order of appearance
  std::set<std::vector<int>> known;
  std::vector<int> live(static_cast<std::size_t>(vp), 0);
  for (const auto& pass : order) {
    live[static_cast<std::size_t>(pass.chunk)] += pass.forward ? 1 : -1;
    if (pass.forward && known.insert(live).second) seen.push_back(live);
  }
  auto covers = [](const std::vector<int>& a, const std::vector<int>& b) {  // a >= b everywhere
    for (std::size_t c = 0; c < a.size(); ++c)
      if (a[c] < b[c]) return false;
    return true;
  };
  std::vector<std::vector<int>> frontier;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    bool dominated = false;
    for (std::size_t j = 0; j < seen.size() && !dominated; ++j)
      if (j != i && covers(seen[j], seen[i])) dominated = true;
    if (!dominated) frontier.push_back(seen[i]);
  }
  return frontier;
}

std::vector<int> peak_in_flight(const std::vector<std::vector<int>>& frontier, std::span<const double> chunk_bytes) {
  std::vector<int> best(chunk_bytes.size(), 0);
  double best_bytes = -1;
  for (const auto& v : frontier) {
    double b = 0;
    for (std::size_t c = 0; c < v.size(); ++c) b += v[c] * chunk_bytes[c];
    if (b > best_bytes) {
      best_bytes = b;
      best = v;
    }
  }
  return best;
}

}  // namespace sim
