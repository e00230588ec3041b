#include "sim/plan_limits.hpp"

#include <fmt/format.h>

#include "common/config_error.hpp"
#include "common/limits.hpp"
#include "sim/strategy.hpp"

namespace sim {

namespace lim = common::limits;

std::int64_t max_tasks(const ModelSpec& m, const Plan& p) {
  // every factor is bounded by common::limits, so the products fit easily:
  // 4096 layers x 127 slices x (28 + 4 x 127) < 2^28
  const std::int64_t L = m.layers, r = p.row_slices, C = p.col_slices;
  // a strategy's token chunks and peer steps (TpOverlap): per layer and slice, four AllGather
  // sites of up to 2 tp tasks and two ReduceScatter sites of up to 2 x chunks + 1 (generous)
  const TpOverlap ov = p.sequence_parallel && p.tp > 1 ? p.strategy->tp_overlap(p) : TpOverlap{};
  std::int64_t steps = ov.any() ? 8 * std::int64_t{ov.ag_chunks(p.tp)} + 4 * std::int64_t{ov.rs_chunks(p.tp)} * C + 2 : 0;
  // fused (FLUX): four AllGather sites of 2 tp - 1 tasks, four ReduceScatter sites (forward and
  // backward) of up to 2 x tp x kFusedMaxSubchunks + 1
  if (ov.fused) steps = 8 * std::int64_t{p.tp} + 4 * (2 * std::int64_t{p.tp} * TpOverlap::kFusedMaxSubchunks + 1) + 2;
  // a 2D / 2.5D grid: per layer four SUMMA linears of 3 q tasks forward and 6 q backward, plus the
  // norms' statistics; the head one more linear
  const std::int64_t grid = p.grid_tp() ? (L + 1) * (36 * std::int64_t{p.tp_q} + 12) : 0;
  const std::int64_t base = L * r * (28 + 4 * C + steps) + 15 * r + 6 * L + 6 + grid;
  // recompute re-emits (at most) every forward task in the backward: at most twice the tasks.
  // ZeRO: per bucket (at most one per weight; a layer's weights are at most 12 + 4 C with its
  // column chunks, plus 8 outside the layers) a reduce-scatter, up to two gathers and its
  // optimizer step. Generous (these only refuse graphs of about kMaxTasks), still < 2^32.
  const std::int64_t weights = L * (12 + 4 * C) + 8;
  return base * (p.recompute != Recompute::none ? 2 : 1) + (p.zero >= 1 ? 4 * weights : 0);
}

void check_model_limits(const ModelSpec& m, const std::string& source) {
  auto in = [&](const char* key, std::int64_t v, std::int64_t hi) {
    if (v < 1 || v > hi) throw common::ConfigError(source, key, fmt::format("expected an integer in [1, {}], got {}", hi, v));
  };
  in("layers", m.layers, lim::kMaxLayers);
  in("hidden", m.hidden, lim::kMaxHidden);
  in("heads", m.heads, lim::kMaxHeads);
  in("kv_heads", m.kv_heads, lim::kMaxHeads);
  in("ffn_hidden", m.ffn_hidden, lim::kMaxFfnHidden);
  in("vocab", m.vocab, lim::kMaxVocab);
  in("seq_len", m.seq_len, lim::kMaxSeqLen);
}

void check_plan_limits(const ModelSpec& m, const hardware::ClusterSpec& c, const Plan& p, const std::string& source) {
  auto fail = [&](const char* key, const std::string& what) { throw common::ConfigError(source, key, what); };
  auto in = [&](const char* key, std::int64_t v, std::int64_t hi) {
    if (v < 1 || v > hi) fail(key, fmt::format("expected an integer in [1, {}], got {}", hi, v));
  };
  check_model_limits(m, m.name);
  in("tp", p.tp, lim::kMaxGpus);
  in("dp", p.dp, lim::kMaxGpus);
  in("micro_batch", p.micro_batch, lim::kMaxMicroBatch);
  in("global_batch", p.global_batch, lim::kMaxGlobalBatch);
  in("seq_len", p.seq_len, lim::kMaxSeqLen);
  in("row_slices", p.row_slices, lim::kMaxRowSlices);
  in("col_slices", p.col_slices, lim::kMaxColSlices);
  in("recompute_layers", p.recompute_layers, lim::kMaxLayers);
  if (p.zero < 0 || p.zero > kMaxZeroStage) fail("zero", fmt::format("expected a ZeRO stage 0 | 1 | 2 | 3, got {}", p.zero));
  if (!(p.dp_bucket_mb > 0 && p.dp_bucket_mb <= lim::kMaxDpBucketMb))
    fail("dp_bucket_mb", fmt::format("expected a number of MB in (0, {}], got {}", lim::kMaxDpBucketMb, p.dp_bucket_mb));
  if (c.nodes < 1 || c.nodes > lim::kMaxNodes || static_cast<std::int64_t>(c.nodes) * c.node.gpus_per_node > lim::kMaxGpus)
    fail("nodes", fmt::format("{} nodes x {} GPUs: expected at most {} nodes and {} GPUs", c.nodes, c.node.gpus_per_node, lim::kMaxNodes,
                              lim::kMaxGpus));
  // each factor is at most 2^24, so the products are exact in 64 bits before they are compared
  const std::int64_t mb_tokens = static_cast<std::int64_t>(p.micro_batch) * p.seq_len;
  if (mb_tokens > lim::kMaxTokensPerMicroBatch)
    fail("micro_batch", fmt::format("micro_batch x seq_len = {} x {} = {} tokens is more than the {} a micro-batch may have", p.micro_batch,
                                    p.seq_len, mb_tokens, lim::kMaxTokensPerMicroBatch));
  const std::int64_t step_tokens = static_cast<std::int64_t>(p.global_batch) * p.seq_len;
  if (step_tokens > lim::kMaxTokensPerStep)
    fail("global_batch", fmt::format("global_batch x seq_len = {} x {} = {} tokens is more than the {} a step may have", p.global_batch,
                                     p.seq_len, step_tokens, lim::kMaxTokensPerStep));
  const std::int64_t tasks = max_tasks(m, p);
  if (tasks > lim::kMaxTasks)
    fail("row_slices", fmt::format("{} layers x {} row slices x {} column chunks make up to {} tasks per rank, more than the {} "
                                   "slicetune builds (about 200 bytes each); use fewer slices",
                                   m.layers, p.row_slices, p.col_slices, tasks, lim::kMaxTasks));
}

}  // namespace sim
