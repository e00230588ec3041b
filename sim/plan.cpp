#include "sim/plan.hpp"

#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "common/config_reader.hpp"
#include "common/limits.hpp"
#include "sim/plan_limits.hpp"
#include "sim/shapes.hpp"
#include "sim/strategy.hpp"

namespace sim {

std::string_view to_string(RowAxis a) { return a == RowAxis::batch ? "batch" : "sequence"; }

std::string_view to_string(PipelineSchedule s) { return s == PipelineSchedule::one_f_one_b ? "1f1b" : "interleaved"; }

bool parse_pipeline_schedule(std::string_view s, PipelineSchedule& out) {
  for (auto v : {PipelineSchedule::one_f_one_b, PipelineSchedule::interleaved})
    if (to_string(v) == s) {
      out = v;
      return true;
    }
  return false;
}

std::string_view to_string(TpLayout l) {
  switch (l) {
    case TpLayout::one_d: return "1d";
    case TpLayout::two_d: return "2d";
    case TpLayout::two_five_d: return "2.5d";
  }
  return "?";
}

bool parse_tp_layout(std::string_view s, TpLayout& out) {
  for (auto v : {TpLayout::one_d, TpLayout::two_d, TpLayout::two_five_d})
    if (to_string(v) == s) {
      out = v;
      return true;
    }
  return false;
}

std::string_view to_string(TpGridOrder o) { return o == TpGridOrder::row ? "row" : "col"; }

bool parse_tp_grid_order(std::string_view s, TpGridOrder& out) {
  for (auto v : {TpGridOrder::row, TpGridOrder::col})
    if (to_string(v) == s) {
      out = v;
      return true;
    }
  return false;
}

std::string_view to_string(Infeasibility r) {
  switch (r) {
    case Infeasibility::tp_heads: return "tp does not divide heads";
    case Infeasibility::tp_kv_heads: return "tp does not divide kv_heads";
    case Infeasibility::tp_ffn: return "tp does not divide ffn_hidden";
    case Infeasibility::tp_vocab: return "tp does not divide vocab";
    case Infeasibility::tp_node: return "tp exceeds the NVLink domain";
    case Infeasibility::gpus: return "tp x dp x pp != GPUs";
    case Infeasibility::global_batch: return "global_batch not a multiple of micro_batch x dp";
    case Infeasibility::row_slices_batch: return "micro_batch not divisible by row_slices";
    case Infeasibility::row_slices_sequence: return "seq_len not divisible by row_slices";
    case Infeasibility::col_slices: return "hidden not divisible by col_slices";
    case Infeasibility::dtype: return "dtype not supported by the GPU";
    case Infeasibility::memory: return "memory over GPU capacity";
    case Infeasibility::pp_layers: return "pp x vp does not split the layers";
    case Infeasibility::strategy: return "the strategy cannot run the plan";
    case Infeasibility::pp_micro_batches: return "too few micro-batches for the interleaved schedule";
    case Infeasibility::recompute: return "recompute setting out of range";
    case Infeasibility::zero: return "ZeRO stage out of range";
    case Infeasibility::attention: return "attention kernel cannot run the dtype";
    case Infeasibility::pp_savers: return "ZeRO-2/3 with pipeline parallelism";
    case Infeasibility::tp_grid: return "2D / 2.5D grid does not split the model or batch";
  }
  return "?";
}

void PlanInput::merge(const PlanInput& o) {
  auto take = [](auto& dst, const auto& src) { if (src) dst = src; };
  take(tp_layout, o.tp_layout); take(tp_q, o.tp_q); take(tp_d, o.tp_d); take(tp_grid_order, o.tp_grid_order);
  take(tp, o.tp); take(dp, o.dp); take(pp, o.pp); take(vp, o.vp); take(schedule, o.schedule);
  take(pipeline_layers, o.pipeline_layers); take(p2p_overlap, o.p2p_overlap); take(micro_batch, o.micro_batch); take(global_batch, o.global_batch);
  take(row_slices, o.row_slices); take(col_slices, o.col_slices); take(num_splits, o.num_splits); take(num_sm, o.num_sm); take(tp_channels, o.tp_channels); take(te_bulk_sms, o.te_bulk_sms); take(seq_len, o.seq_len);
  take(dtype, o.dtype); take(sequence_parallel, o.sequence_parallel); take(strategy, o.strategy);
  take(row_axis, o.row_axis); take(dp_bucket_mb, o.dp_bucket_mb); take(stack, o.stack);
  take(recompute, o.recompute); take(recompute_method, o.recompute_method); take(recompute_layers, o.recompute_layers);
  take(zero, o.zero); take(overlap_grad_reduce, o.overlap_grad_reduce); take(overlap_param_gather, o.overlap_param_gather);
  take(attention, o.attention);
}

std::optional<std::string> attention_unsupported(const hardware::ClusterSpec& c, hardware::AttentionKernel k, common::DType dtype) {
  if (k != hardware::AttentionKernel::flash) return std::nullopt;
  const common::DType act = activation_dtype(dtype);
  if (c.gpu.arch == hardware::GpuArch::cpu) return std::nullopt;  // the tiled CPU kernel: the dtypes the CPU runs
  if (act == common::DType::bf16 || act == common::DType::fp16) return std::nullopt;
  return fmt::format("attention=flash needs bf16 or fp16 activations on {} (FlashAttention-2/3 kernels), not {}; use attention: unfused",
                     c.gpu.name, common::to_string(dtype));
}

hardware::AttentionKernel default_attention(const hardware::ClusterSpec& c, hardware::Stack stack, common::DType dtype) {
  const hardware::AttentionKernel own = c.host.stack(stack).attention;
  return attention_unsupported(c, own, dtype) ? hardware::AttentionKernel::unfused : own;
}

std::array<hardware::AttentionKernel, 2> attention_choices(hardware::AttentionKernel own) {
  return {own, own == hardware::AttentionKernel::flash ? hardware::AttentionKernel::unfused : hardware::AttentionKernel::flash};
}

namespace {

/// Whether the checks on this thread format their messages (check_plan_shapes' `message`).
thread_local bool t_messages = true;

/// A problem; `msg` a string or a callable that makes it, called only where messages are wanted
/// (the tuner formats one only for the plans it keeps as examples).
template <class Msg>
std::optional<PlanProblem> bad(Infeasibility r, std::string key, Msg&& msg) {
  if (!t_messages) return PlanProblem{r, {}, {}};
  if constexpr (std::is_invocable_v<Msg>) return PlanProblem{r, msg(), std::move(key)};
  else return PlanProblem{r, std::string(std::forward<Msg>(msg)), std::move(key)};
}

/// pp, vp, schedule and the layer split agree with each other and with the model.
std::optional<PlanProblem> check_pipeline_split(const ModelSpec& m, const Plan& p) {
  if (p.pp < 1) return bad(Infeasibility::pp_layers, "pp", [&] { return fmt::format("expected a positive integer, got {}", p.pp); });
  if (p.vp < 1) return bad(Infeasibility::pp_layers, "vp", [&] { return fmt::format("expected a positive integer, got {}", p.vp); });
  if (p.vp > 1 && p.pp == 1)
    return bad(Infeasibility::pp_layers, "vp", [&] { return fmt::format("vp={} model chunks per rank need pipeline parallelism (pp > 1)", p.vp); });
  if (p.schedule == PipelineSchedule::interleaved && p.vp < 2)
    return bad(Infeasibility::pp_layers, "vp", "the interleaved schedule needs vp >= 2 model chunks per pipeline rank");
  if (p.schedule == PipelineSchedule::one_f_one_b && p.vp > 1)
    return bad(Infeasibility::pp_layers, "schedule", [&] { return fmt::format("vp={} model chunks per rank need schedule: interleaved", p.vp); });
  const int v = p.virtual_stages();
  if (!p.pipeline_layers.empty()) {
    if (static_cast<int>(p.pipeline_layers.size()) != v)
      return bad(Infeasibility::pp_layers, "pipeline_layers",
                 [&] { return fmt::format("expected pp x vp = {} x {} = {} entries (layers per virtual stage), got {}", p.pp, p.vp, v, p.pipeline_layers.size()); });
    long long sum = 0;
    for (std::size_t i = 0; i < p.pipeline_layers.size(); ++i) {
      if (p.pipeline_layers[i] < 1)
        return bad(Infeasibility::pp_layers, fmt::format("pipeline_layers[{}]", i), [&] { return fmt::format("expected at least 1 layer, got {}", p.pipeline_layers[i]); });
      sum += p.pipeline_layers[i];
    }
    if (sum != m.layers)
      return bad(Infeasibility::pp_layers, "pipeline_layers", [&] { return fmt::format("the entries sum to {} layers, the model has {}", sum, m.layers); });
  } else if (m.layers % v) {
    if (p.vp > 1)
      return bad(Infeasibility::pp_layers, "vp",
                 [&] { return fmt::format("layers={} is not divisible by pp x vp = {} x {} (give pipeline_layers for an uneven split)", m.layers, p.pp, p.vp); });
    return bad(Infeasibility::pp_layers, "pp",
               [&] { return fmt::format("layers={} is not divisible by pp={} (give pipeline_layers for an uneven split)", m.layers, p.pp); });
  }
  return std::nullopt;
}

/// 2D / 2.5D: the grid's shape against tp, the model's widths and the micro-batch, and what the
/// SUMMA layers do not run with (yet).
std::optional<PlanProblem> check_grid(const ModelSpec& m, const hardware::ClusterSpec&, const Plan& p) {
  const std::string lay(to_string(p.tp_layout));
  const int q = p.tp_q, d = p.tp_d;
  if (q < 2) return bad(Infeasibility::tp_grid, "tp_q", [&] { return fmt::format("tp_layout {} needs a grid side tp_q >= 2, got {}", lay, q); });
  if (p.tp_layout == TpLayout::two_d && d != 1)
    return bad(Infeasibility::tp_grid, "tp_d", [&] { return fmt::format("tp_layout 2d has depth 1, got tp_d={} (use tp_layout 2.5d)", d); });
  if (d < 1) return bad(Infeasibility::tp_grid, "tp_d", [&] { return fmt::format("expected a positive grid depth, got tp_d={}", d); });
  if (std::int64_t{q} * q * d != p.tp)
    return bad(Infeasibility::tp_grid, "tp",
               p.tp_layout == TpLayout::two_d ? fmt::format("tp_layout 2d needs tp = tp_q^2 = {}^2 = {}, got tp={}", q, q * q, p.tp)
                                              : fmt::format("tp_layout 2.5d needs tp = tp_q^2 x tp_d = {}^2 x {} = {}, got tp={}", q, d,
                                                            std::int64_t{q} * q * d, p.tp));
  auto divides = [&](std::int64_t v, const char* what) -> std::optional<PlanProblem> {
    if (v % q == 0) return std::nullopt;
    return bad(Infeasibility::tp_grid, "tp_q", [&] { return fmt::format("{}={} is not divisible by tp_q={} (tp_layout {})", what, v, q, lay); });
  };
  for (auto [v, what] : {std::pair<std::int64_t, const char*>{m.hidden, "hidden"}, {m.heads, "heads"}, {m.kv_heads, "kv_heads"},
                         {m.ffn_hidden, "ffn_hidden"}, {m.vocab, "vocab"}})
    if (auto problem = divides(v, what)) return problem;
  if (p.micro_batch % (q * d))
    return bad(Infeasibility::tp_grid, "micro_batch",
               d > 1 ? fmt::format("micro_batch={} is not divisible by tp_q x tp_d = {} x {} (the grid's rows and depth split the batch)",
                                   p.micro_batch, q, d)
                     : fmt::format("micro_batch={} is not divisible by tp_q={} (the grid's rows split the batch)", p.micro_batch, q));
  // what the SUMMA layers are not built with (docs/tensor-parallel-2d.md)
  if (p.sequence_parallel)
    return bad(Infeasibility::tp_grid, "sequence_parallel", [&] { return fmt::format("tp_layout {} splits the tokens already; sequence_parallel is 1D only", lay); });
  if (p.pp > 1) return bad(Infeasibility::tp_grid, "pp", [&] { return fmt::format("tp_layout {} is simulated without pipeline parallelism (pp=1), got pp={}", lay, p.pp); });
  if (p.zero > 0)
    return bad(Infeasibility::tp_grid, "zero", [&] { return fmt::format("tp_layout {} is simulated without ZeRO (zero: 0), got zero={}", lay, p.zero); });
  if (p.recompute != Recompute::none)
    return bad(Infeasibility::tp_grid, "recompute", [&] { return fmt::format("tp_layout {} is simulated without activation recompute, got recompute: {}", lay,
                                                                to_string(p.recompute)); });
  // strategies: none (Colossal-AI's SUMMA layers) and domino's row slices, each slice's SUMMA
  // products, norms and attention independent of the other slices' (sim/builder_grid.cpp)
  const bool domino = p.strategy == &strategy_domino();
  if (p.strategy != &default_strategy() && !domino)
    return bad(Infeasibility::tp_grid, "strategy",
               [&] { return fmt::format("tp_layout {} runs its own overlap (the next SUMMA step's broadcasts behind the current GEMM, as Colossal-AI); "
                           "strategy {} decomposes Megatron-LM's 1D collectives and does not compose with it: use strategy: none | domino",
                           lay, p.strategy->name); });
  if (domino) {
    if (p.row_axis != RowAxis::batch)
      return bad(Infeasibility::tp_grid, "row_axis",
                 [&] { return fmt::format("tp_layout {} slices rows along the batch only (row_axis: batch), got row_axis: sequence", lay); });
    if (p.col_slices != 1)
      return bad(Infeasibility::tp_grid, "col_slices",
                 [&] { return fmt::format("col_slices={}: domino's column chunks split the 1D row-parallel GEMM before its all-reduce, which a SUMMA "
                             "product does not have (tp_layout {}): use col_slices: 1",
                             p.col_slices, lay); });
    if (p.row_slices >= 1 && (p.micro_batch / (q * d)) % p.row_slices)
      return bad(Infeasibility::tp_grid, "row_slices",
                 [&] { return fmt::format("row_slices={} does not divide the {} sequences of a grid rank (micro_batch / (tp_q x tp_d) = {} / ({} x {}))",
                             p.row_slices, p.micro_batch / (q * d), p.micro_batch, q, d); });
  }
  return std::nullopt;
}

}  // namespace

std::optional<PlanProblem> check_plan_shapes(const ModelSpec& m, const hardware::ClusterSpec& c, const Plan& p, bool message) {
  // `message` false: the reason alone, for this call (its checks read t_messages)
  struct Restore {
    bool was = t_messages;
    ~Restore() { t_messages = was; }
  } restore;
  t_messages = message;
  if (auto problem = check_pipeline_split(m, p)) return problem;
  if (p.grid_tp()) {  // the grid's own divisibility (by q, and the batch by q x d)
    if (auto problem = check_grid(m, c, p)) return problem;
  } else {
    if (m.heads % p.tp) return bad(Infeasibility::tp_heads, "tp", [&] { return fmt::format("heads={} is not divisible by tp={}", m.heads, p.tp); });
    if (m.kv_heads % p.tp) return bad(Infeasibility::tp_kv_heads, "tp", [&] { return fmt::format("kv_heads={} is not divisible by tp={}", m.kv_heads, p.tp); });
    if (m.ffn_hidden % p.tp) return bad(Infeasibility::tp_ffn, "tp", [&] { return fmt::format("ffn_hidden={} is not divisible by tp={}", m.ffn_hidden, p.tp); });
    if (m.vocab % p.tp) return bad(Infeasibility::tp_vocab, "tp", [&] { return fmt::format("vocab={} is not divisible by tp={}", m.vocab, p.tp); });
    if (p.tp > c.node.gpus_per_node && p.tp % c.node.gpus_per_node != 0)
      return bad(Infeasibility::tp_node, "tp", [&] { return fmt::format("tp={} spans nodes of {} GPUs unevenly", p.tp, c.node.gpus_per_node); });
  }
  if (p.gpus() != c.total_gpus())
    return bad(Infeasibility::gpus, "dp", [&] { return fmt::format("tp x dp x pp = {} x {} x {} = {} but the cluster has {} GPUs ({} nodes x {})",
                                                      p.tp, p.dp, p.pp, p.gpus(), c.total_gpus(), c.nodes, c.node.gpus_per_node); });
  if (p.micro_batch <= 0 || p.global_batch % (std::int64_t{p.micro_batch} * p.dp) != 0)
    return bad(Infeasibility::global_batch, "global_batch",
               [&] { return fmt::format("global_batch={} is not a multiple of micro_batch x dp = {} x {}", p.global_batch, p.micro_batch, p.dp); });
  if (p.schedule == PipelineSchedule::interleaved) {
    // Megatron-LM's interleaved schedule runs micro-batches in groups of pp per model chunk
    // (microbatch_group_size_per_vp_stage = pp): it needs at least pp of them, and whole groups.
    const int mbs = p.grad_accum_steps();
    if (mbs < p.pp || mbs % p.pp)
      return bad(Infeasibility::pp_micro_batches, "global_batch",
                 [&] { return fmt::format("the interleaved schedule needs a multiple of pp={} micro-batches per pipeline, got global_batch / (micro_batch x dp)"
                             " = {} / ({} x {}) = {}",
                             p.pp, p.global_batch, p.micro_batch, p.dp, mbs); });
  }
  // knobs: in range; a knob of another strategy (that matters here) at its neutral value
  const Strategy& st = *p.strategy;
  const auto knobs = plan_knobs();
  const auto owns = own_knobs(st);
  for (std::size_t i = 0; i < knobs.size(); ++i) {
    const Knob* k = knobs[i];
    const int v = k->get(p);
    const Knob* own = owns[i];
    if (own && (v < own->min || v > own->max || (!own->choices.empty() && v >= static_cast<int>(own->choices.size()))))
      return bad(own->refused_as, std::string(k->key), [&] { return fmt::format("{}={} is out of range ({})", k->key, v, own->expected()); });
    if (!own && v != k->neutral && k->applies(p)) {
      std::string owners;
      for (const Strategy* o : strategies())
        if (o->knob(k->key)) owners += (owners.empty() ? "" : " | ") + std::string(o->name);
      return bad(k->refused_as, "strategy",
                 [&] { return fmt::format("{}={} needs strategy {} (strategy {} has no {})", k->key, k->format(v), owners, st.name, k->key); });
    }
  }
  if (p.row_axis == RowAxis::batch && p.micro_batch % p.row_slices)
    return bad(Infeasibility::row_slices_batch, "row_slices",
               [&] { return fmt::format("micro_batch={} is not divisible by row_slices={} (row_axis batch)", p.micro_batch, p.row_slices); });
  if (p.row_axis == RowAxis::sequence && p.seq_len % p.row_slices)
    return bad(Infeasibility::row_slices_sequence, "row_slices",
               [&] { return fmt::format("seq_len={} is not divisible by row_slices={} (row_axis sequence)", p.seq_len, p.row_slices); });
  if (p.sequence_parallel) {
    const std::int64_t rows = p.row_axis == RowAxis::batch ? p.seq_len * (p.micro_batch / p.row_slices)
                                                          : (p.seq_len / p.row_slices) * p.micro_batch;
    if (rows % p.tp)
      return bad(Infeasibility::row_slices_sequence, "sequence_parallel",
                 [&] { return fmt::format("a slice's {} tokens are not divisible by tp={}", rows, p.tp); });
  }
  if (m.hidden % p.col_slices)
    return bad(Infeasibility::col_slices, "col_slices", [&] { return fmt::format("hidden={} is not divisible by col_slices={}", m.hidden, p.col_slices); });
  if (auto why = st.check(m, c, p)) return bad(Infeasibility::strategy, "strategy", [&] { return fmt::format("strategy {}: {}", st.name, *why); });
  return std::nullopt;
}

std::optional<PlanProblem> check_plan_savers(const ModelSpec& m, const hardware::ClusterSpec& c, const Plan& p, bool message) {
  // `message` false: the reason alone (the tuner formats a message only for the plans it keeps as examples)
  auto bad = [message](Infeasibility r, std::string key, auto&& msg) -> std::optional<PlanProblem> {
    if (!message) return PlanProblem{r, {}, {}};
    if constexpr (std::is_invocable_v<decltype(msg)>) return PlanProblem{r, msg(), std::move(key)};
    else return PlanProblem{r, std::string(msg), std::move(key)};
  };
  if (p.zero < 0 || p.zero > kMaxZeroStage)
    return bad(Infeasibility::zero, "zero", [&] { return fmt::format("zero={} is not a ZeRO stage (expected 0 | 1 | 2 | 3)", p.zero); });
  // ZeRO-1 (Megatron-LM's distributed optimizer, DeepSpeed ZeRO-1) runs with pipeline parallelism:
  // every stage reduce-scatters its gradients once, after the last micro-batch. ZeRO-2 and 3 reduce
  // (and ZeRO-3 gathers) in every micro-batch's backward, which neither framework's pipeline runs:
  // DeepSpeed's PipelineEngine asserts zero_optimization_stage() < 2 with this message.
  if (p.pp > 1 && p.zero >= 2 && p.dp > 1)
    return bad(Infeasibility::pp_savers, "zero", [&] {
      return fmt::format("zero={} with pp={}: ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism (DeepSpeed's pipeline "
                         "engine; Megatron-LM's distributed optimizer is ZeRO-1); use zero: 0 | 1 or pp: 1",
                         p.zero, p.pp);
    });
  if (p.recompute_layers < 1 || p.recompute_layers > m.layers)
    return bad(Infeasibility::recompute, "recompute_layers",
               [&] { return fmt::format("recompute_layers={} is outside 1..{} (the model's layers)", p.recompute_layers, m.layers); });
  if (p.recompute != Recompute::full && (p.recompute_layers != 1 || p.recompute_method != RecomputeMethod::uniform))
    return bad(Infeasibility::recompute, "recompute", [&] {
      return fmt::format("recompute_layers / recompute_method need recompute: full (recompute is {})", to_string(p.recompute));
    });
  if (auto why = attention_unsupported(c, p.attention, p.dtype)) return bad(Infeasibility::attention, "attention", *why);
  if (c.gpu.peak_flops(p.dtype) <= 0)
    return bad(Infeasibility::dtype, "dtype", [&] { return fmt::format("{} has no {} support", c.gpu.name, common::to_string(p.dtype)); });
  return std::nullopt;
}

std::optional<PlanProblem> check_plan(const ModelSpec& m, const hardware::ClusterSpec& c, const Plan& p) {
  if (auto problem = check_plan_shapes(m, c, p)) return problem;
  return check_plan_savers(m, c, p);
}

Plan fill_plan(const ModelSpec& m, const hardware::ClusterSpec& c, const PlanInput& in, const std::string& source) {
  Plan p;
  p.tp_layout = in.tp_layout.value_or(TpLayout::one_d);
  p.tp_grid_order = in.tp_grid_order.value_or(TpGridOrder::row);
  if (!p.grid_tp()) {
    if (in.tp_q && *in.tp_q != 1) throw common::ConfigError(source, "tp_q", fmt::format("tp_q={} needs tp_layout 2d | 2.5d (tp_layout is 1d)", *in.tp_q));
    if (in.tp_d && *in.tp_d != 1) throw common::ConfigError(source, "tp_d", fmt::format("tp_d={} needs tp_layout 2.5d (tp_layout is 1d)", *in.tp_d));
  } else {
    // the grid from tp_q / tp_d, or from tp where that names it: 2D tp = q^2, 2.5D tp = q^2 x d
    p.tp_d = in.tp_d.value_or(1);
    if (p.tp_layout == TpLayout::two_d && p.tp_d != 1)
      throw common::ConfigError(source, "tp_d", fmt::format("tp_layout 2d has depth 1, got tp_d={} (use tp_layout 2.5d)", p.tp_d));
    if (in.tp_q) {
      p.tp_q = *in.tp_q;
    } else if (in.tp && p.tp_layout == TpLayout::two_d) {
      int q = 1;
      while (q * q < *in.tp) ++q;
      if (q * q != *in.tp)
        throw common::ConfigError(source, "tp", fmt::format("tp_layout 2d needs tp = q^2 (a square), got tp={}; give tp_q", *in.tp));
      p.tp_q = q;
    } else {
      throw common::ConfigError(source, "tp_q", fmt::format("tp_layout {} needs the grid side tp_q", to_string(p.tp_layout)));
    }
    if (p.tp_q < 2 || p.tp_q > 64) throw common::ConfigError(source, "tp_q", fmt::format("expected a grid side in [2, 64], got tp_q={}", p.tp_q));
    const std::int64_t grid = std::int64_t{p.tp_q} * p.tp_q * p.tp_d;
    if (in.tp && *in.tp != grid)
      throw common::ConfigError(source, "tp",
                                fmt::format("tp={} is not tp_q^2 x tp_d = {}^2 x {} = {} (tp_layout {})", *in.tp, p.tp_q, p.tp_d, grid,
                                            to_string(p.tp_layout)));
    if (grid > common::limits::kMaxGpus)
      throw common::ConfigError(source, "tp_q", fmt::format("tp_q^2 x tp_d = {} GPUs is more than {}", grid, common::limits::kMaxGpus));
  }
  p.tp = p.grid_tp() ? p.tp_q * p.tp_q * p.tp_d : in.tp.value_or(1);
  if (p.tp <= 0) throw common::ConfigError(source, "tp", "expected a positive integer");
  p.pp = in.pp.value_or(1);
  if (p.pp <= 0) throw common::ConfigError(source, "pp", "expected a positive integer");
  p.vp = in.vp.value_or(1);
  if (p.vp <= 0) throw common::ConfigError(source, "vp", "expected a positive integer");
  p.schedule = in.schedule.value_or(p.vp > 1 ? PipelineSchedule::interleaved : PipelineSchedule::one_f_one_b);
  p.pipeline_layers = in.pipeline_layers.value_or(std::vector<int>{});
  p.p2p_overlap = in.p2p_overlap.value_or(p.schedule == PipelineSchedule::interleaved);
  if (in.dp) {
    p.dp = *in.dp;
    if (p.dp <= 0) throw common::ConfigError(source, "dp", "expected a positive integer");
  } else {
    if (c.total_gpus() % p.tp)
      throw common::ConfigError(source, "tp",
                                p.grid_tp() ? fmt::format("tp_layout {}: the grid's tp_q^2 x tp_d = {}^2 x {} = {} GPUs do not divide the cluster's {} GPUs",
                                                          to_string(p.tp_layout), p.tp_q, p.tp_d, p.tp, c.total_gpus())
                                            : fmt::format("tp={} does not divide the cluster's {} GPUs", p.tp, c.total_gpus()));
    if (c.total_gpus() % (std::int64_t{p.tp} * p.pp))
      throw common::ConfigError(source, "pp",
                                fmt::format("pp={} does not divide the cluster's {} GPUs / tp={}", p.pp, c.total_gpus(), p.tp));
    p.dp = static_cast<int>(c.total_gpus() / (std::int64_t{p.tp} * p.pp));  // <= total_gpus, an int
  }
  p.micro_batch = in.micro_batch.value_or(p.tp_rows());  // a grid: one sequence per row of each depth layer
  if (p.micro_batch <= 0) throw common::ConfigError(source, "micro_batch", "expected a positive integer");
  if (in.global_batch) {
    p.global_batch = *in.global_batch;
  } else {  // micro_batch x dp, formed in 64 bits and bounded before it is narrowed
    const std::int64_t gb = std::int64_t{p.micro_batch} * p.dp;
    if (gb > common::limits::kMaxGlobalBatch)
      throw common::ConfigError(source, "global_batch", fmt::format("micro_batch x dp = {} x {} is more than the {} sequences a step may have",
                                                                    p.micro_batch, p.dp, common::limits::kMaxGlobalBatch));
    p.global_batch = static_cast<int>(gb);
  }
  p.seq_len = in.seq_len.value_or(m.seq_len);
  if (p.seq_len <= 0) throw common::ConfigError(source, "seq_len", "expected a positive integer");
  p.dtype = in.dtype.value_or(common::DType::bf16);
  p.sequence_parallel = in.sequence_parallel.value_or(false);
  p.strategy = in.strategy.value_or(&default_strategy());
  const auto knobs = plan_knobs();
  const auto owns = own_knobs(*p.strategy);
  for (std::size_t i = 0; i < knobs.size(); ++i)
    knobs[i]->set(p, knobs[i]->get_input(in).value_or(owns[i] ? owns[i]->default_value : knobs[i]->neutral));
  p.dp_bucket_mb = in.dp_bucket_mb.value_or(25.0);
  if (!(p.dp_bucket_mb > 0)) throw common::ConfigError(source, "dp_bucket_mb", "expected a positive number of MB");
  p.stack = in.stack.value_or(hardware::Stack::eager);
  p.recompute = in.recompute.value_or(Recompute::none);
  p.recompute_method = in.recompute_method.value_or(RecomputeMethod::uniform);
  p.recompute_layers = in.recompute_layers.value_or(1);
  p.zero = in.zero.value_or(0);
  p.overlap_grad_reduce = in.overlap_grad_reduce.value_or(true);
  p.overlap_param_gather = in.overlap_param_gather.value_or(true);
  // the stack's kernel unless it cannot run the dtype (flash at fp32 on a GPU): then unfused; a
  // plan that asks for flash at such a dtype is refused by check_plan
  p.stack_attention = default_attention(c, p.stack, p.dtype);
  p.attention = in.attention.value_or(p.stack_attention);
  // sizes (and the task count) before anything forms products of them or builds a graph: input
  // validation, not a feasibility check, so plans that bridge's preflight inspects get it too
  check_plan_limits(m, c, p, source);
  return p;
}

Plan resolve_plan(const ModelSpec& m, const hardware::ClusterSpec& c, const PlanInput& in, const std::string& source) {
  Plan p = fill_plan(m, c, in, source);
  if (auto problem = check_plan(m, c, p)) throw common::ConfigError(source, problem->key, problem->message);
  return p;
}

PlanInput parse_plan_input(const std::string& yaml_text, const std::string& source) {
  common::ConfigReader r(common::parse_yaml(yaml_text, source), source);
  PlanInput in;
  namespace lim = common::limits;
  auto opt_int = [&](const char* key, std::optional<int>& dst, std::int64_t hi) {
    if (r.has(key)) dst = r.int_in(key, 1, static_cast<int>(hi));  // range-checked before narrowing
  };
  opt_int("tp", in.tp, lim::kMaxGpus);
  if (r.has("tp_layout")) parse_tp_layout(r.choice("tp_layout", {"1d", "2d", "2.5d"}), in.tp_layout.emplace());
  opt_int("tp_q", in.tp_q, 64);
  opt_int("tp_d", in.tp_d, lim::kMaxGpus);
  if (r.has("tp_grid_order")) parse_tp_grid_order(r.choice("tp_grid_order", {"row", "col"}), in.tp_grid_order.emplace());
  opt_int("dp", in.dp, lim::kMaxGpus);
  opt_int("pp", in.pp, lim::kMaxLayers);
  opt_int("vp", in.vp, lim::kMaxLayers);
  opt_int("micro_batch", in.micro_batch, lim::kMaxMicroBatch);
  opt_int("global_batch", in.global_batch, lim::kMaxGlobalBatch);
  if (r.has("schedule")) {
    PipelineSchedule sc;
    parse_pipeline_schedule(r.choice("schedule", {"1f1b", "interleaved"}), sc);
    in.schedule = sc;
  }
  if (r.has("pipeline_layers")) {
    std::vector<int> layers;
    for (long long v : r.positive_integer_list("pipeline_layers")) {
      if (v > lim::kMaxLayers)
        r.fail("pipeline_layers", fmt::format("expected at most {} layers per stage, got {}", lim::kMaxLayers, v));
      layers.push_back(static_cast<int>(v));
    }
    in.pipeline_layers = std::move(layers);
  }
  if (r.has("p2p_overlap")) in.p2p_overlap = r.boolean("p2p_overlap");
  if (r.has("seq_len")) in.seq_len = r.positive_integer("seq_len", lim::kMaxSeqLen);
  if (r.has("dtype")) {
    common::DType t;
    common::parse_dtype(r.choice("dtype", {"bf16", "fp16", "fp8", "fp32"}), t);
    in.dtype = t;
  }
  if (r.has("sequence_parallel")) in.sequence_parallel = r.boolean("sequence_parallel");
  if (r.has("strategy")) {
    std::vector<std::string> names;
    for (const Strategy* s : strategies()) names.emplace_back(s->name);
    in.strategy = &find_strategy(r.choice("strategy", names), source);
  }
  for (const Knob* k : plan_knobs()) {
    if (!r.has(std::string(k->key))) continue;
    const std::string key(k->key);
    if (!k->choices.empty()) {
      const std::vector<std::string> choices(k->choices.begin(), k->choices.end());
      k->set_input(in, static_cast<int>(*k->parse(r.choice(key, choices))));
    } else {
      k->set_input(in, r.int_in(key, k->min, k->max));  // range-checked before narrowing
    }
  }
  if (r.has("dp_bucket_mb")) in.dp_bucket_mb = r.positive("dp_bucket_mb", lim::kMaxDpBucketMb);
  if (r.has("stack")) {
    hardware::Stack s;
    std::vector<std::string> names;  // every stack, megatron-core included (plan_to_yaml writes it)
    for (hardware::Stack st : hardware::kAllStacks) names.emplace_back(hardware::to_string(st));
    hardware::parse_stack(r.choice("stack", names), s);
    in.stack = s;
  }
  if (r.has("recompute")) parse_recompute(r.choice("recompute", {"none", "selective", "full"}), in.recompute.emplace());
  if (r.has("recompute_method"))
    parse_recompute_method(r.choice("recompute_method", {"uniform", "block"}), in.recompute_method.emplace());
  if (r.has("recompute_layers")) {
    in.recompute_layers = r.int_in("recompute_layers", 1, static_cast<int>(lim::kMaxLayers));  // range-checked before narrowing
  }
  if (r.has("zero")) {
    in.zero = r.int_in("zero", 0, kMaxZeroStage);  // range-checked before narrowing
  }
  if (r.has("overlap_grad_reduce")) in.overlap_grad_reduce = r.boolean("overlap_grad_reduce");
  if (r.has("overlap_param_gather")) in.overlap_param_gather = r.boolean("overlap_param_gather");
  if (r.has("attention")) hardware::parse_attention_kernel(r.choice("attention", {"flash", "unfused", "unfused_compiled"}), in.attention.emplace());
  r.finish();
  return in;
}

PlanInput load_plan_input(const std::string& path) {
  return parse_plan_input(common::read_text_file(path), path);
}

std::string plan_to_yaml(const Plan& p, const std::string& comment) {
  std::string out;
  if (!comment.empty()) out += "# " + comment + "\n";
  out += fmt::format("tp: {}\ndp: {}\npp: {}\nmicro_batch: {}\nglobal_batch: {}\nseq_len: {}\ndtype: {}\nsequence_parallel: {}\nstrategy: {}\n",
                     p.tp, p.dp, p.pp, p.micro_batch, p.global_batch, p.seq_len, common::to_string(p.dtype),
                     p.sequence_parallel ? "true" : "false", p.strategy->name);
  for (const Knob* k : plan_knobs()) out += fmt::format("{}: {}\n", k->key, k->format(k->get(p)));
  out += fmt::format("dp_bucket_mb: {}\nstack: {}\n", p.dp_bucket_mb, hardware::to_string(p.stack));
  if (p.pp > 1) {
    out += fmt::format("vp: {}\nschedule: {}\np2p_overlap: {}\n", p.vp, to_string(p.schedule), p.p2p_overlap ? "true" : "false");
    if (!p.pipeline_layers.empty()) out += fmt::format("pipeline_layers: [{}]\n", fmt::join(p.pipeline_layers, ", "));
  }
  out += fmt::format("recompute: {}\nrecompute_method: {}\nrecompute_layers: {}\nzero: {}\noverlap_grad_reduce: {}\n"
                     "overlap_param_gather: {}\n",
                     to_string(p.recompute), to_string(p.recompute_method), p.recompute_layers, p.zero,
                     p.overlap_grad_reduce ? "true" : "false", p.overlap_param_gather ? "true" : "false");
  if (p.grid_tp())  // absent under 1D: such plans print as before
    out += fmt::format("tp_layout: {}\ntp_q: {}\ntp_d: {}\ntp_grid_order: {}\n", to_string(p.tp_layout), p.tp_q, p.tp_d, to_string(p.tp_grid_order));
  // absent: the stack's kernel (host.stacks.<stack>.attention) wherever the plan is loaded
  if (p.attention != p.stack_attention) out += fmt::format("attention: {}\n", hardware::to_string(p.attention));
  return out;
}

namespace {
/// A grid plan's TP: SUMMA, with domino's row slices where the plan has them ("summa domino 2").
std::string describe_grid_strategy(const Plan& p) {
  return p.strategy == &strategy_domino() ? fmt::format("summa domino {}", p.row_slices) : std::string("summa");
}
}  // namespace

std::string describe(const Plan& p) {
  std::string pipe;
  if (p.pp > 1) {
    pipe = fmt::format(" pp{}", p.pp);
    if (!p.pipeline_layers.empty()) pipe += fmt::format("[{}]", fmt::join(p.pipeline_layers, ","));
    if (p.vp > 1) pipe += fmt::format(" vp{}", p.vp);
    if (p.p2p_overlap != (p.schedule == PipelineSchedule::interleaved)) pipe += p.p2p_overlap ? " p2p-overlap" : " p2p-blocking";
  }
  std::string tp = fmt::format("tp{}", p.tp);
  if (p.tp_layout == TpLayout::two_d) tp = fmt::format("tp2d[{},{}]", p.tp_q, p.tp_q);
  if (p.tp_layout == TpLayout::two_five_d) tp = fmt::format("tp2.5d[{},{},{}]", p.tp_q, p.tp_q, p.tp_d);
  if (p.grid_tp() && p.tp_grid_order == TpGridOrder::col) tp += "c";
  std::string s = fmt::format("{} dp{}{} mb{}{} {}", tp, p.dp, pipe, p.micro_batch, p.sequence_parallel ? " sp" : "",
                              p.grid_tp() ? describe_grid_strategy(p) : p.strategy->describe(p));
  if (p.zero > 0) s += fmt::format(" zero{}", p.zero);
  if (p.recompute == Recompute::selective) s += " rc-sel";
  if (p.recompute == Recompute::full) {
    s += " rc-full";
    if (p.recompute_method == RecomputeMethod::block) s += fmt::format("/{}b", p.recompute_layers);
    else if (p.recompute_layers > 1) s += fmt::format("/{}u", p.recompute_layers);
  }
  if (p.attention != p.stack_attention) s += fmt::format(" {}", hardware::to_string(p.attention));
  return s;
}

}  // namespace sim
