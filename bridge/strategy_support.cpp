// How Megatron-LM, DeepSpeed-Domino and NeMo run the registered strategies: the built-in
// declarations (none, domino), the registry, and what export / import / check derive from it.
#include "bridge/strategy_support.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace bridge {

namespace {

// Sources (the framework file and the check, quoted where the framework prints one).
constexpr std::string_view kSrcDomSlices =
    "DeepSpeed-Domino domino/language_model.py TransformerLanguageModel.forward: intra_partitions = 2; "
    "deepspeed/runtime/domino/transformer.py DominoTransformerLayer.forward: hidden_states0, hidden_states1 = hidden_states";
constexpr std::string_view kSrcDomAxis =
    "DeepSpeed-Domino domino/language_model.py: torch.tensor_split(encoder_input, 2, dim=1) - dim 1 of [s, b, h] is the batch";
constexpr std::string_view kSrcDomCol =
    "deepspeed/runtime/domino/transformer.py DominoTransformerLayer: one matmul per half for out-proj and FC2 (weight_r), no "
    "column chunks";
constexpr std::string_view kSrcMegatronNoSlices =
    "Megatron-LM megatron/training/arguments.py defines no row or column slicing of a layer; megatron/core/transformer/"
    "transformer_layer.py runs each layer on the whole micro-batch";
constexpr std::string_view kSrcNemoNoSlices =
    "NeMo examples/nlp/language_modeling/conf/megatron_gpt_config.yaml has no slicing key; its layers are Megatron-core's";

constexpr std::string_view kSrcMegatronNcclCfg =
    "Megatron-LM megatron/core/parallel_state.py get_nccl_options: per process group ('tp', 'dp', ...) cga_cluster_size, "
    "max_ctas, min_ctas from the YAML of --nccl-communicator-config-path";
constexpr std::string_view kSrcDomNoNcclCfg =
    "DeepSpeed deepspeed/utils/groups.py creates its groups with torch.distributed.new_group and no NCCL options; "
    "NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS set every communicator's channels";
// tp_channels in Megatron-LM and NeMo: their arguments leave the channels to NCCL; a per-group
// NCCL config file pins them, which the export does not write
constexpr KnobSupport kMegatronTpChannels{
    .key = "tp_channels",
    .fixed = 0,
    .quiet_at_fixed = true,
    .why = "its arguments leave the TP group's channels to NCCL; to pin them give --nccl-communicator-config-path a YAML "
           "with tp: {min_ctas: N, max_ctas: N} (the export does not write that file)",
    .source = kSrcMegatronNcclCfg};

const StrategySupport& support_none() {
  static const StrategySupport s{
      .strategy = "none",
      .frameworks =
          {
              {.framework = Framework::megatron, .runs = true, .knobs = {kMegatronTpChannels}},
              {.framework = Framework::nemo, .runs = true, .knobs = {kMegatronTpChannels}},
              {.framework = Framework::deepspeed_domino,
               .runs = false,
               .instead =
                   "DeepSpeed-Domino always splits each micro-batch in 2 and overlaps the halves' TP collectives (its only "
                   "schedule), i.e. strategy domino 2x1",
               .source = kSrcDomSlices},
          },
  };
  return s;
}

const StrategySupport& support_domino() {
  static const StrategySupport s{
      .strategy = "domino",
      .frameworks =
          {
              {.framework = Framework::megatron,
               .runs = false,
               .instead =
                   "Megatron-LM runs every layer unsliced with blocking TP collectives (its nearest overlap, --tp-comm-overlap "
                   "with TransformerEngine userbuffers, is a different strategy); launch DeepSpeed-Domino (--export "
                   "deepspeed-domino) to get the predicted overlap",
               .source = kSrcMegatronNoSlices},
              {.framework = Framework::nemo,
               .runs = false,
               .instead =
                   "NeMo runs each layer unsliced; its overlap is ub_tp_comm_overlap (TransformerEngine userbuffers, needs "
                   "sequence_parallel), a different strategy",
               .source = kSrcNemoNoSlices},
              {.framework = Framework::deepspeed_domino,
               .runs = true,
               .knobs =
                   {
                       {.key = "row_slices", .fixed = 2, .why = "its layer takes exactly 2 halves", .source = kSrcDomSlices},
                       {.key = "row_axis", .fixed = 0, .why = "it splits the batch dimension", .source = kSrcDomAxis},
                       {.key = "col_slices",
                        .fixed = 1,
                        .why = "it has no column chunks of out-proj / FC2",
                        .source = kSrcDomCol},
                       {.key = "tp_channels",
                        .fixed = 0,
                        .quiet_at_fixed = true,
                        .why = "it leaves the TP group's channels to NCCL (NCCL_MAX_NCHANNELS would pin the DP group's too)",
                        .source = kSrcDomNoNcclCfg},
                   }},
          },
  };
  return s;
}

struct Registry {
  std::vector<const StrategySupport*> supports;
};

Registry& registry() {
  static Registry r{.supports = {&support_none(), &support_domino()}};
  return r;
}

const StrategySupport* find_declaration(std::string_view strategy) {
  for (const StrategySupport* s : registry().supports)
    if (s->strategy == strategy) return s;
  return nullptr;
}

const KnobSupport* find_knob(const FrameworkSupport& f, std::string_view key) {
  for (const auto& k : f.knobs)
    if (k.key == key) return &k;
  return nullptr;
}

std::string rule_id(std::string_view strategy, std::string_view key) {
  std::string id = fmt::format("{}-{}", strategy, key);
  std::replace(id.begin(), id.end(), '_', '-');
  return id;
}

/// "--flag 4" (Megatron-style) or "key=4" (NeMo's Hydra overrides).
std::string argument(Framework f, std::string_view arg, const std::string& value) {
  return f == Framework::nemo ? fmt::format("{}={}", arg, value) : fmt::format("{} {}", arg, value);
}

}  // namespace

void register_support(const StrategySupport& s) {
  if (find_declaration(s.strategy))
    throw std::invalid_argument(fmt::format("register_support: strategy '{}' is declared already", s.strategy));
  registry().supports.push_back(&s);
}

const FrameworkSupport* find_support(const sim::Strategy& s, Framework f) {
  const StrategySupport* d = find_declaration(s.name);
  if (!d) return nullptr;
  for (const auto& fs : d->frameworks)
    if (fs.framework == f) return &fs;
  return nullptr;
}

StrategyInFramework express_strategy(Framework f, const sim::Plan& p) {
  StrategyInFramework out;
  const sim::Strategy& s = *p.strategy;
  const std::string_view fw = display_name(f);
  const FrameworkSupport* fs = find_support(s, f);
  auto value_of = [&](const sim::Knob& k) { return k.format(k.get(p)); };
  if (!fs || !fs->runs) {
    out.gaps.push_back(
        {.rule = rule_id("strategy", s.name),
         .message =
             fs ? fmt::format("strategy {} ({}): {}", s.name, s.describe(p), fs->instead)
                : fmt::format(
                      "strategy {} ({}): no declaration of how {} runs it (bridge::register_support), so what it would run "
                      "is not known",
                      s.name, s.describe(p), fw),
         .source = fs ? std::string(fs->source) : "bridge/strategy_support.hpp",
         .declared = fs != nullptr});
    out.annotation.push_back({"strategy", std::string(s.name)});
    for (const sim::Knob& k : s.knobs) out.annotation.push_back({std::string(k.key), value_of(k)});
    return out;
  }
  for (std::string_view sel : fs->selected_by)
    out.args.push_back({std::string(sel), fmt::format("strategy {}: {}", s.name, s.description)});
  if (fs->selected_by.empty() && &s != &sim::default_strategy()) out.annotation.push_back({"strategy", std::string(s.name)});
  for (const sim::Knob& k : s.knobs) {
    const KnobSupport* ks = find_knob(*fs, k.key);
    if (ks && ks->fixed && ks->quiet_at_fixed && k.get(p) == *ks->fixed) continue;  // the framework's default: nothing to say
    const std::string v = value_of(k);
    if (ks && !ks->arg.empty()) {
      out.args.push_back({argument(f, ks->arg, v), fmt::format("{} {}: {}", k.key, v, ks->why)});
      continue;
    }
    out.annotation.push_back({std::string(k.key), v});
    if (!ks) {
      out.gaps.push_back(
          {.rule = rule_id(s.name, k.key),
           .message = fmt::format("{} {}: no declaration of how {} expresses strategy {}'s {} (bridge::register_support)", k.key,
                                  v, fw, s.name, k.key),
           .source = "bridge/strategy_support.hpp",
           .declared = false});
    } else if (ks->fixed) {
      if (k.get(p) == *ks->fixed || !k.applies(p))
        out.notes.push_back(fmt::format("{} {}: {} always runs this ({})", k.key, v, fw, ks->why));
      else
        out.gaps.push_back(
            {.rule = rule_id(s.name, k.key),
             .message = fmt::format("{} {}: {} runs {} {} only ({})", k.key, v, fw, k.key, k.format(*ks->fixed), ks->why),
             .source = std::string(ks->source)});
    } else {
      out.gaps.push_back({.rule = rule_id(s.name, k.key),
                          .message = fmt::format("{} {}: {} cannot express it ({})", k.key, v, fw, ks->why),
                          .source = std::string(ks->source)});
    }
  }
  return out;
}

std::optional<ArgumentTarget> find_argument(std::string_view name) {
  for (const sim::Strategy* s : sim::strategies())
    for (Framework f : {Framework::megatron, Framework::deepspeed_domino}) {
      const FrameworkSupport* fs = find_support(*s, f);
      if (!fs || !fs->runs) continue;
      for (std::string_view sel : fs->selected_by)
        if (sel == name) return ArgumentTarget{.strategy = s};
      for (const auto& ks : fs->knobs)
        if (!ks.arg.empty() && ks.arg == name && s->knob(ks.key)) return ArgumentTarget{.strategy = s, .knob = s->knob(ks.key)};
    }
  return std::nullopt;
}

const sim::Strategy* own_schedule(Framework f) {
  auto own = [f](const sim::Strategy& s) {
    const FrameworkSupport* fs = find_support(s, f);
    return fs && fs->runs && fs->selected_by.empty();
  };
  if (own(sim::default_strategy())) return &sim::default_strategy();
  for (const sim::Strategy* s : sim::strategies())
    if (own(*s)) return s;
  return nullptr;
}

std::string apply_own_schedule(Framework f, sim::PlanInput& plan) {
  if (plan.strategy) return "";
  const sim::Strategy* s = own_schedule(f);
  if (!s || s == &sim::default_strategy()) return "";
  plan.strategy = s;
  std::string what = fmt::format("strategy {}", s->name);
  const FrameworkSupport* fs = find_support(*s, f);
  for (const auto& ks : fs->knobs) {
    const sim::Knob* k = s->knob(ks.key);
    if (!k || !ks.fixed || k->get_input(plan)) continue;
    k->set_input(plan, *ks.fixed);
    if (!ks.quiet_at_fixed) what += fmt::format(", {} {}", ks.key, k->format(*ks.fixed));
  }
  return what;
}

std::vector<DeclaredRule> declared_rules() {
  std::vector<DeclaredRule> out;
  auto add = [&](std::string id, Framework f, std::string what, std::string_view source) {
    for (auto& r : out)
      if (r.id == id) {
        r.frameworks.push_back(f);
        if (r.source.find(source) == std::string::npos) r.source += fmt::format("; {}", source);
        return;
      }
    out.push_back({std::move(id), {f}, std::move(what), std::string(source)});
  };
  for (const sim::Strategy* s : sim::strategies())
    for (Framework f : kFrameworks) {
      const FrameworkSupport* fs = find_support(*s, f);
      if (!fs) continue;
      if (!fs->runs) {
        add(rule_id("strategy", s->name), f, fmt::format("strategy {} (the framework has no such schedule)", s->name),
            fs->source);
        continue;
      }
      for (const auto& ks : fs->knobs) {
        const sim::Knob* k = s->knob(ks.key);
        if (!k || !ks.arg.empty()) continue;
        add(rule_id(s->name, ks.key), f,
            ks.fixed ? fmt::format("{} {} under strategy {} ({})", ks.key, k->format(*ks.fixed), s->name, ks.why)
                     : fmt::format("{} cannot be expressed ({})", ks.key, ks.why),
            ks.source);
      }
    }
  return out;
}

}  // namespace bridge
