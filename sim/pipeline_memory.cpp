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
/// tuner asks for the same few thousands of times (thread-safe). Each thread keeps where the
/// frontiers it asked for lie: a lookup it made before takes no lock (the lock's cache line went
/// from core to core on every lookup of a search's two threads, docs/benchmarks.md).
const std::vector<std::vector<int>>& frontier(const Plan& p, int stage) {
  using Key = std::tuple<int, int, int, int, int>;
  static std::mutex mu;
  static std::map<Key, std::vector<std::vector<int>>> cache;  // never erased: its values never move
  thread_local std::map<Key, const std::vector<std::vector<int>>*> seen;
  const int m = p.grad_accum_steps();
  const Key key = std::make_tuple(static_cast<int>(p.schedule), p.pp, p.vp, m, stage);
  if (auto it = seen.find(key); it != seen.end()) return *it->second;
  std::lock_guard lock(mu);
  auto it = cache.find(key);
  if (it == cache.end()) {
    std::vector<std::vector<int>> f;
    if (p.vp == 1 && p.schedule == PipelineSchedule::one_f_one_b) f = {{std::min(p.pp - stage, m)}};
    else f = in_flight_frontier(pipeline_order(p.schedule, p.pp, p.vp, m, stage), p.vp);
    it = cache.emplace(key, std::move(f)).first;  // std::map: references stay valid
  }
  seen.emplace(key, &it->second);
  return it->second;
}

/// The stage's model chunks as MemoryStages (one micro-batch in flight each), into `out`; `vs`:
/// the plan's virtual_stage_layers.
void chunk_stages(const ModelSpec& m, const Plan& p, int stage, const std::vector<LayerRange>& vs, std::vector<MemoryStage>& out) {
  out.clear();
  for (int c = 0; c < p.vp; ++c) {
    const LayerRange& r = vs[static_cast<std::size_t>(c * p.pp + stage)];
    out.push_back({.layers = r.size(), .embedding = r.first == 0, .head = r.end == m.layers, .in_flight = 1});
  }
}

/// estimate_memory of MemoryStages of one plan, each shape computed once: a plan's stages and
/// chunks repeat the same few (interior chunks alike; the embedding's, the head's), and the tuner
/// asks for the worst stage of tens of thousands of plans.
using SeenStages = std::vector<std::pair<MemoryStage, MemoryEstimate>>;

bool same_stage(const MemoryStage& a, const MemoryStage& b) {
  return a.layers == b.layers && a.embedding == b.embedding && a.head == b.head && a.in_flight == b.in_flight;
}

class StageMemo {
 public:
  StageMemo(const ModelSpec& m, const hardware::ClusterSpec& c, const Plan& p) : plan_(m, c, p), seen_(own_) { seen_.reserve(8); }
  /// `seen`: a buffer the caller reuses from plan to plan (cleared here; no allocation per plan)
  StageMemo(const PlanMemory& shared, SeenStages& seen) : plan_(shared), seen_(seen) { seen_.clear(); }
  StageMemo(const StageMemo&) = delete;
  StageMemo& operator=(const StageMemo&) = delete;
  const MemoryEstimate& operator()(const MemoryStage& st) {
    for (const auto& [k, v] : seen_)
      if (same_stage(k, st)) return v;
    seen_.emplace_back(st, plan_.stage(st));
    return seen_.back().second;
  }

 private:
  PlanMemory plan_;  // what the stages share
  SeenStages own_;
  SeenStages& seen_;
};

/// The closed form for the whole stage, its activations from `chunk_bytes` (per chunk, one pass)
/// times the schedule's peak in-flight passes.
MemoryEstimate stage_memory(StageMemo& memo, const Plan& p, int stage, const std::vector<MemoryStage>& chunks,
                            const std::vector<double>& chunk_bytes) {
  MemoryStage whole{.layers = 0, .embedding = false, .head = false, .in_flight = 1};
  for (const auto& ch : chunks) {
    whole.layers += ch.layers;
    whole.embedding |= ch.embedding;
    whole.head |= ch.head;
  }
  MemoryEstimate r = memo(whole);
  r.recomputed = 0;
  for (const auto& ch : chunks) r.recomputed = std::max(r.recomputed, memo(ch).recomputed);
  if (p.vp == 1 && p.schedule == PipelineSchedule::one_f_one_b) {  // frontier's closed form, without its lock
    r.activations = std::min(p.pp - stage, p.grad_accum_steps()) * chunk_bytes[0];
    return r;
  }
  // the bytes of peak_in_flight's passes (the same sum, in the same order), without its vector
  double peak = 0, most = -1;
  for (const auto& v : frontier(p, stage)) {
    double b = 0;
    for (std::size_t c = 0; c < v.size(); ++c) b += v[c] * chunk_bytes[c];
    if (b > most) most = peak = b;
  }
  r.activations = peak;
  return r;
}

/// Buffers one plan's stages reuse.
struct StageScratch {
  std::vector<MemoryStage> chunks;
  std::vector<double> bytes;
};

MemoryEstimate stage_memory(StageMemo& memo, const ModelSpec& m, const Plan& p, int stage, const std::vector<LayerRange>& vs,
                            StageScratch& scratch) {
  chunk_stages(m, p, stage, vs, scratch.chunks);
  scratch.bytes.clear();
  for (const auto& ch : scratch.chunks) scratch.bytes.push_back(memo(ch).activations);
  return stage_memory(memo, p, stage, scratch.chunks, scratch.bytes);
}

}  // namespace

MemoryEstimate estimate_stage_memory(const ModelSpec& m, const hardware::ClusterSpec& c, const Plan& p, int stage) {
  StageMemo memo(m, c, p);
  StageScratch scratch;
  return stage_memory(memo, m, p, stage, virtual_stage_layers(m, p), scratch);
}

MemoryEstimate worst_stage_memory(const ModelSpec& m, const hardware::ClusterSpec& c, const Plan& p) { return worst_stage_memory(PlanMemory(m, c, p)); }

MemoryEstimate worst_stage_memory(const PlanMemory& shared) {
  // buffers reused from plan to plan on this thread: the tuner asks for tens of thousands of plans
  thread_local SeenStages seen;
  thread_local StageScratch scratch;
  thread_local std::vector<LayerRange> vs;
  thread_local std::vector<MemoryStage> shapes;  // 1F1B: the stages' shapes computed so far
  StageMemo memo(shared, seen);
  const ModelSpec& m = shared.model();
  const Plan& p = shared.plan();
  virtual_stage_layers(m, p, vs);
  MemoryEstimate worst = stage_memory(memo, m, p, 0, vs, scratch);
  // Under 1F1B a stage holds one chunk and min(pp - stage, m) passes of it: a later stage of the
  // same shape as an earlier one (the interior stages of an even split) needs the same bytes but
  // fewer passes, so it never needs more - and `worst` keeps the first of equal totals - and is
  // not computed (the result is the one of computing every stage).
  const bool one_chunk = p.vp == 1 && p.schedule == PipelineSchedule::one_f_one_b;
  shapes.clear();
  if (one_chunk) shapes.push_back(scratch.chunks.front());
  for (int s = 1; s < p.pp; ++s) {
    if (one_chunk) {
      const LayerRange& r = vs[static_cast<std::size_t>(s)];
      const MemoryStage st{.layers = r.size(), .embedding = r.first == 0, .head = r.end == m.layers, .in_flight = 1};
      if (std::any_of(shapes.begin(), shapes.end(), [&](const MemoryStage& k) { return same_stage(k, st); })) continue;
      shapes.push_back(st);
    }
    MemoryEstimate e = stage_memory(memo, m, p, s, vs, scratch);
    if (e.total() > worst.total()) worst = e;
  }
  return worst;
}

MemoryEstimate estimate_stage_memory(const StepGraph& g, const hardware::ClusterSpec& c) {
  const Plan& p = g.plan;
  // saved activations of one pass per chunk: micro-batch 0's (every micro-batch saves the same)
  const auto saved = saved_activations(g);
  std::vector<double> bytes(static_cast<std::size_t>(p.vp), 0.0);
  for (std::size_t x = 0; x < g.tensors.size(); ++x) {
    const auto& t = g.tensors[x];
    if (saved[x] && t.micro == 0 && t.model_chunk >= 0) bytes[static_cast<std::size_t>(t.model_chunk)] += t.bytes();
  }
  const int stage = pipeline_position(p, g.rank).stage;
  StageMemo memo(g.model, c, p);
  std::vector<MemoryStage> chunks;
  chunk_stages(g.model, p, stage, virtual_stage_layers(g.model, p), chunks);
  return stage_memory(memo, p, stage, chunks, bytes);
}

}  // namespace sim
