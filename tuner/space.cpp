#include "tuner/space.hpp"

#include <algorithm>
#include <functional>

#include "sim/strategy.hpp"

namespace tuner {

int default_global_batch(const hardware::ClusterSpec& c) { return 8 * c.total_gpus(); }

std::vector<const sim::Strategy*> searched_strategies(const SearchSpace& s) {
  if (!s.strategies.empty()) return s.strategies;
  std::vector<const sim::Strategy*> out;
  for (const sim::Strategy* st : sim::strategies())
    if (st->searched) out.push_back(st);
  return out;
}

namespace {

/// 2D / 2.5D plans: each (q, d) grid of each tp, at pp 1 with what the SUMMA layers run with.
void enumerate_grid_plans(const sim::ModelSpec& m, const hardware::ClusterSpec& c, const SearchSpace& s, const std::vector<int>& tps,
                          int gb, const std::vector<hardware::AttentionKernel>& kernels, hardware::AttentionKernel own,
                          const PlanBlockHeadVisitor& visit) {
  std::vector<BlockSavers> savers;
  const int gpus = c.total_gpus();
  // domino's row slices on the grid (each slice's SUMMA products independent, sim/builder_grid.cpp)
  // where domino is searched: 2 and 4 slices of the rank's sequences beside the unsliced grid
  const auto strategies = searched_strategies(s);
  const bool domino = std::find(strategies.begin(), strategies.end(), &sim::strategy_domino()) != strategies.end();
  const std::vector<int> slices = domino ? std::vector<int>{1, 2, 4} : std::vector<int>{1};
  for (const sim::TpLayout layout : s.tp_layouts) {
    if (layout == sim::TpLayout::one_d) continue;
    for (int tp : tps)
      for (int q = 2; q * q <= tp; ++q) {
        if (tp % (q * q)) continue;
        const int d = tp / (q * q);
        if ((layout == sim::TpLayout::two_d) != (d == 1)) continue;
        const int dp = std::max(1, gpus / tp);
        std::vector<int> mbs = s.micro_batch;
        // multiples of the q x d rows that split the batch, doubling: up to max_micro_batch sequences per rank
        if (mbs.empty())
          for (int mb = q * d; mb <= s.max_micro_batch * q * d && mb <= std::max(1, gb / dp); mb *= 2) mbs.push_back(mb);
        // the order matters only where a grid layer does not fit in a node's NVLink domain
        std::vector<sim::TpGridOrder> orders{sim::TpGridOrder::row};
        if (q * q > c.node.gpus_per_node) orders.push_back(sim::TpGridOrder::col);
        // a block: the bucket sizes (no ZeRO or recompute on the grid), one without gradient reduction
        savers.clear();
        for (std::size_t b = 0; b < s.dp_bucket_mb.size(); ++b) {
          if (dp * d == 1 && b > 0) continue;  // no gradient reduction
          savers.push_back({.zero = 0, .recompute = sim::Recompute::none, .dp_bucket_mb = s.dp_bucket_mb[b]});
        }
        if (savers.empty()) continue;
        for (int mb : mbs)
          for (const int r : slices)
          for (const auto order : orders)
            for (const auto att : kernels) {
              if (sim::attention_unsupported(c, att, s.dtype)) continue;
              if ((mb / (q * d)) % r) continue;  // the slices split a rank's sequences
              sim::Plan p;
              p.tp = tp;
              p.tp_layout = layout;
              p.tp_q = q;
              p.tp_d = d;
              p.tp_grid_order = order;
              p.dp = dp;
              p.micro_batch = mb;
              p.global_batch = gb;
              p.seq_len = s.seq_len > 0 ? s.seq_len : m.seq_len;
              p.dtype = s.dtype;
              p.strategy = r > 1 ? &sim::strategy_domino() : &sim::default_strategy();
              p.stack = s.stack;
              p.stack_attention = own;
              for (const sim::Knob* k : sim::plan_knobs()) k->set(p, k->neutral);
              p.row_slices = r;
              p.attention = att;
              savers.front().apply(p);
              visit(p, savers);
            }
      }
  }
}

}  // namespace

std::vector<sim::Plan> enumerate_plans(const sim::ModelSpec& m, const hardware::ClusterSpec& c, const SearchSpace& s) {
  std::vector<sim::Plan> out;
  enumerate_plan_blocks(m, c, s, [&](std::span<const sim::Plan> block) { out.insert(out.end(), block.begin(), block.end()); });
  return out;
}

void enumerate_plans(const sim::ModelSpec& m, const hardware::ClusterSpec& c, const SearchSpace& s,
                     const std::function<void(const sim::Plan&)>& visit) {
  enumerate_plan_blocks(m, c, s, [&](std::span<const sim::Plan> block) {
    for (const sim::Plan& p : block) visit(p);
  });
}

namespace {

std::vector<int> tp_values(const hardware::ClusterSpec& c, const SearchSpace& s) {
  const int gpus = c.total_gpus();
  std::vector<int> tps = s.tp;
  if (tps.empty())
    for (int t = 1; t <= gpus; ++t)
      if (gpus % t == 0) tps.push_back(t);
  return tps;
}

/// The 1D (tp, pp, vp) of the space, in enumeration order: the parts of enumerate_plan_blocks before the grids'.
template <class F>
void for_each_layout(const sim::ModelSpec& m, const hardware::ClusterSpec& c, const SearchSpace& s, F&& f) {
  if (std::find(s.tp_layouts.begin(), s.tp_layouts.end(), sim::TpLayout::one_d) == s.tp_layouts.end()) return;
  const int gpus = c.total_gpus();
  for (int tp : tp_values(c, s)) {
    std::vector<int> pps = s.pp;
    if (pps.empty())
      for (int q = 1; q <= std::max(1, gpus / tp) && q <= m.layers; ++q)
        if ((gpus / tp) % q == 0) pps.push_back(q);
    for (int pp : pps)
      for (int vp : pp > 1 ? s.vp : std::vector<int>{1}) f(tp, pp, vp);
  }
}

}  // namespace

std::size_t plan_space_parts(const sim::ModelSpec& m, const hardware::ClusterSpec& c, const SearchSpace& s) {
  std::size_t n = 0;
  for_each_layout(m, c, s, [&](int, int, int) { ++n; });
  return n + 1;  // the grids
}

void enumerate_plan_blocks(const sim::ModelSpec& m, const hardware::ClusterSpec& c, const SearchSpace& s, const PlanBlockVisitor& visit) {
  const std::size_t parts = plan_space_parts(m, c, s);
  for (std::size_t k = 0; k < parts; ++k) enumerate_plan_blocks(m, c, s, k, visit);
}

void enumerate_plan_blocks(const sim::ModelSpec& m, const hardware::ClusterSpec& c, const SearchSpace& s, std::size_t part,
                           const PlanBlockVisitor& visit) {
  std::vector<sim::Plan> block;
  enumerate_plan_block_heads(m, c, s, part, [&](const sim::Plan& head, std::span<const BlockSavers> savers) {
    block.assign(savers.size(), head);
    for (std::size_t j = 0; j < savers.size(); ++j) savers[j].apply(block[j]);
    visit(block);
  });
}

void enumerate_plan_block_heads(const sim::ModelSpec& m, const hardware::ClusterSpec& c, const SearchSpace& s, std::size_t part,
                                const PlanBlockHeadVisitor& visit) {
  std::vector<BlockSavers> savers;
  const int gpus = c.total_gpus();
  const int gb = s.global_batch > 0 ? s.global_batch : default_global_batch(c);
  const std::vector<int> tps = tp_values(c, s);
  const std::vector<const sim::Strategy*> strategies = searched_strategies(s);
  std::vector<hardware::AttentionKernel> kernels = s.attention;
  const hardware::AttentionKernel own = sim::default_attention(c, s.stack, s.dtype);  // the stack's kernel
  if (kernels.empty())
    for (auto k : sim::attention_choices(own)) kernels.push_back(k);
  std::size_t at = 0;
  for_each_layout(m, c, s, [&](int tp, int pp, int vp) {
    if (at++ != part) return;
    const int dp = std::max(1, gpus / (tp * pp));
    // a block's savers, the same for every block of the part: ZeRO shards over dp ranks (ZeRO-2/3
    // with pp > 1 are enumerated and refused: check_plan), recompute, then the bucket size
    savers.clear();
    const std::vector<int> zs = dp == 1 ? std::vector<int>{0} : s.zero;
    for (int zero : zs)
      for (const auto rc : s.recompute)
        for (std::size_t b = 0; b < s.dp_bucket_mb.size(); ++b) {
          if ((dp == 1 || zero >= 3) && b > 0) continue;  // no gradient buckets: dp 1, or ZeRO-3 (one per layer)
          savers.push_back({.zero = zero, .recompute = rc, .dp_bucket_mb = s.dp_bucket_mb[b]});
        }
    if (savers.empty()) return;
    std::vector<int> mbs = s.micro_batch;
    if (mbs.empty())
      for (int mb = 1; mb <= s.max_micro_batch && mb <= std::max(1, gb / dp); mb *= 2) mbs.push_back(mb);
    for (int mb : mbs)
      for (bool sp : s.sequence_parallel) {
        if (sp && tp == 1) continue;
        for (const sim::Strategy* st : strategies) {
          sim::Plan p;
          p.tp = tp;
          p.dp = dp;
          p.pp = pp;
          p.vp = vp;
          p.schedule = vp > 1 ? sim::PipelineSchedule::interleaved : sim::PipelineSchedule::one_f_one_b;
          p.p2p_overlap = vp > 1;  // Megatron-LM's default: overlap_p2p_comm with the interleaved schedule
          p.micro_batch = mb;
          p.global_batch = gb;
          p.seq_len = s.seq_len > 0 ? s.seq_len : m.seq_len;
          p.dtype = s.dtype;
          p.sequence_parallel = sp;
          p.strategy = st;
          p.stack = s.stack;
          p.stack_attention = own;
          for (const sim::Knob* k : sim::plan_knobs()) k->set(p, k->neutral);
          savers.front().apply(p);
          // the strategy's knobs, first declared outermost; where a knob does not apply (given the
          // ones before it) only its first value, stored as neutral
          std::function<void(std::size_t)> knob = [&](std::size_t i) {
            if (i == st->knobs.size()) {
              for (const auto att : kernels) {
                if (sim::attention_unsupported(c, att, p.dtype)) continue;
                p.attention = att;
                visit(p, savers);
              }
              return;
            }
            const sim::Knob& k = st->knobs[i];
            const auto it = s.knob_values.find(k.key);
            const std::vector<int>& values = it != s.knob_values.end() ? it->second : k.searched;
            for (std::size_t v = 0; v < values.size(); ++v) {
              if (!k.applies(p)) {
                if (v > 0) continue;
                k.set(p, k.neutral);
              } else {
                k.set(p, values[v]);
              }
              knob(i + 1);
            }
          };
          knob(0);
        }
      }
  });
  if (part == at) enumerate_grid_plans(m, c, s, tps, gb, kernels, own, visit);
}

}  // namespace tuner
