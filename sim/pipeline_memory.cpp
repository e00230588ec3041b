// Memory of a pipeline stage: the closed form (sim/memory.cpp) for the layers it holds, and the
// activations of the passes it keeps between their forward and backward, counted from its schedule.
#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "sim/memory.hpp"
#include "sim/pipeline_schedule.hpp"
#include "sim/plan.hpp"
#include "sim/step_graph.hpp"

namespace sim {

namespace {

/// in_flight_frontier of a stage's schedule: 1F1B in closed form (one vector, min(pp - stage, m)
/// passes), the interleaved schedule read off its order once per (pp, vp, m, stage) and kept - the
/// tuner asks for the same few thousands of times (thread-safe).
const std::vector<std::vector<int>>& frontier(const Plan& p, int stage) {
  static std::mutex mu;
  static std::map<std::tuple<int, int, int, int, int>, std::vector<std::vector<int>>> cache;
  const int m = p.grad_accum_steps();
  const auto key = std::make_tuple(static_cast<int>(p.schedule), p.pp, p.vp, m, stage);
  std::lock_guard lock(mu);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  std::vector<std::vector<int>> f;
  if (p.vp == 1 && p.schedule == PipelineSchedule::one_f_one_b) f = {{std::min(p.pp - stage, m)}};
  else f = in_flight_frontier(pipeline_order(p.schedule, p.pp, p.vp, m, stage), p.vp);
  return cache.emplace(key, std::move(f)).first->second;  // std::map: references stay valid
}

/// The stage's model chunks as MemoryStages (one micro-batch in flight each).
std::vector<MemoryStage> chunk_stages(const ModelSpec& m, const Plan& p, int stage) {
  const auto vs = virtual_stage_layers(m, p);
  std::vector<MemoryStage> out;
  for (int c = 0; c < p.vp; ++c) {
    const LayerRange& r = vs[static_cast<std::size_t>(c * p.pp + stage)];
    out.push_back({.layers = r.size(), .embedding = r.first == 0, .head = r.end == m.layers, .in_flight = 1});
  }
  return out;
}

/// The closed form for the whole stage, its activations from `chunk_bytes` (per chunk, one pass)
/// times the schedule's peak in-flight passes.
MemoryEstimate stage_memory(const ModelSpec& m, const hardware::ClusterSpec& c, const Plan& p, int stage,
                            const std::vector<MemoryStage>& chunks, const std::vector<double>& chunk_bytes) {
  MemoryStage whole{.layers = 0, .embedding = false, .head = false, .in_flight = 1};
  for (const auto& ch : chunks) {
    whole.layers += ch.layers;
    whole.embedding |= ch.embedding;
    whole.head |= ch.head;
  }
  MemoryEstimate r = estimate_memory(m, c, p, whole);
  r.recomputed = 0;
  for (const auto& ch : chunks) r.recomputed = std::max(r.recomputed, estimate_memory(m, c, p, ch).recomputed);
  const auto peak = peak_in_flight(frontier(p, stage), chunk_bytes);
  r.activations = 0;
  for (std::size_t k = 0; k < chunk_bytes.size(); ++k) r.activations += peak[k] * chunk_bytes[k];
  return r;
}

}  // namespace

MemoryEstimate estimate_stage_memory(const ModelSpec& m, const hardware::ClusterSpec& c, const Plan& p, int stage) {
  const auto chunks = chunk_stages(m, p, stage);
  std::vector<double> bytes;
  for (const auto& ch : chunks) bytes.push_back(estimate_memory(m, c, p, ch).activations);
  return stage_memory(m, c, p, stage, chunks, bytes);
}

MemoryEstimate worst_stage_memory(const ModelSpec& m, const hardware::ClusterSpec& c, const Plan& p) {
  MemoryEstimate worst = estimate_stage_memory(m, c, p, 0);
  for (int s = 1; s < p.pp; ++s) {
    MemoryEstimate e = estimate_stage_memory(m, c, p, s);
    if (e.total() > worst.total()) worst = e;
  }
  return worst;
}

MemoryEstimate estimate_stage_memory(const StepGraph& g, const hardware::ClusterSpec& c) {
  const Plan& p = g.plan;
  // saved activations of one pass per chunk: micro-batch 0's (every micro-batch saves the same)
  std::vector<char> written(g.tensors.size(), 0), read_later(g.tensors.size(), 0);
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    const Task& t = g.tasks[i];
    if (t.phase == Phase::fwd && !t.recompute)
      for (TensorId x : g.outputs(i)) written[x] = 1;
    if (t.phase != Phase::fwd || t.recompute)
      for (TensorId x : g.inputs(i)) read_later[x] = 1;
  }
  std::vector<double> bytes(static_cast<std::size_t>(p.vp), 0.0);
  for (std::size_t x = 0; x < g.tensors.size(); ++x) {
    const auto& t = g.tensors[x];
    if (written[x] && read_later[x] && t.role == TensorRole::activation && t.micro == 0 && t.model_chunk >= 0)
      bytes[static_cast<std::size_t>(t.model_chunk)] += t.bytes();
  }
  const int stage = pipeline_position(p, g.rank).stage;
  return stage_memory(g.model, c, p, stage, chunk_stages(g.model, p, stage), bytes);
}

}  // namespace sim
