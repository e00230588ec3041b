// How Megatron-LM, DeepSpeed-Domino and NeMo run the registered strategies: the built-in
// declarations (none, domino, te-pipelined, te-bulk, async-tp, fused), the registry, and what export / import / check derive from it.
#include "bridge/strategy_support.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

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

// TransformerEngine's userbuffers overlap (te-pipelined, te-bulk) and PyTorch's async TP
// (async-tp). Read in Megatron-LM d98e8a6 (2026-08-22), NeMo 8cfedd7 (2025-09-20), TransformerEngine
// d0067d0 (2026-08-22), DeepSpeedExamples 83757d9 and DeepSpeed 38327e0 (2025-02).
constexpr std::string_view kSrcMegatronUb =
    "Megatron-LM megatron/core/model_parallel_config.py ModelParallelConfig: tp_comm_overlap (default False), tp_comm_bulk_dgrad, "
    "tp_comm_bulk_wgrad, tp_comm_overlap_ag, tp_comm_overlap_rs (default True, read only under tp_comm_overlap); megatron/"
    "training/arguments.py makes them --tp-comm-overlap and the store_false --disable-tp-comm-bulk-dgrad, --disable-tp-comm-"
    "bulk-wgrad, --disable-tp-comm-overlap-ag, --disable-tp-comm-overlap-rs (ArgumentGroupFactory in _add_network_size_args; "
    "written out in _add_training_args before #2896); megatron/core/extensions/transformer_engine.py TELinear and "
    "TELayerNormColumnParallelLinear pass them to TE as ub_overlap_ag, ub_overlap_rs, ub_bulk_dgrad, ub_bulk_wgrad";
constexpr std::string_view kSrcNemoUb =
    "NeMo examples/nlp/language_modeling/conf/megatron_gpt_config.yaml: transformer_engine: False, ub_tp_comm_overlap: False; "
    "nemo/collections/nlp/models/language_modeling/megatron_gpt_model.py get_specs builds TE's layers (te_gpt) only with "
    "transformer_engine; megatron_base_model.py build_model_parallel_config sets tp_comm_overlap from ub_tp_comm_overlap, "
    "build_transformer_config copies model keys named as TransformerConfig fields (tp_comm_bulk_dgrad, tp_comm_overlap_ag, ...: "
    "not in the YAML, hence Hydra's +); Megatron-core's TE layers read them as in Megatron-LM";
constexpr std::string_view kSrcDomNoTe =
    "DeepSpeed-Domino domino/arguments.py defines no --sequence-parallel and no --tp-comm-overlap; domino/language_model.py builds "
    "its layers with sequence_parallel=False as deepspeed/runtime/domino/transformer.py DominoTransformerLayer (torch.matmul and "
    "deepspeed.comm all_reduce, no TransformerEngine)";
// the knobs: TE's per-site userbuffers config, which neither export writes
constexpr std::string_view kSrcTeDefaultsMegatron =
    "TransformerEngine transformer_engine/pytorch/module/base.py initialize_ub get_default_config: num_splits 4 and num_sm 16 "
    "for the pipeline (proj_fprop, fc2_fprop) and bulk (qkv_dgrad, qkv_wgrad, fc1_dgrad, fc1_wgrad) sites unless ub_cfgs sets "
    "them; Megatron-LM megatron/training/initialize.py _initialize_tp_communicators: ub_cfgs = yaml.safe_load of "
    "--tp-comm-overlap-cfg, else {}";
constexpr std::string_view kSrcTeDefaultsNemo =
    "NeMo megatron_gpt_model.py initialize_ub_func: TE's initialize_ub with ub_cfgs = model.ub_tp_comm_overlap_cfg (null in "
    "megatron_gpt_config.yaml: get_default_config's num_splits 4, num_sm 16; conf/tp_overlap/*.yaml are NeMo's presets)";
constexpr std::string_view kSrcMegatronNoAsyncTp =
    "Megatron-LM megatron/ has no call of torch's symmetric-memory fused_all_gather_matmul / fused_matmul_reduce_scatter and "
    "no micro_pipeline_tp setting; its one symmetric-memory TP option, symmetric_ar_type (megatron/core/transformer/"
    "transformer_config.py, passed to TE in megatron/core/extensions/transformer_engine.py TELinear), replaces an all-reduce, "
    "not the sequence-parallel AllGather + GEMM / GEMM + ReduceScatter";
constexpr std::string_view kSrcNemoNoAsyncTp =
    "NeMo nemo/ has no fused_all_gather_matmul, fused_matmul_reduce_scatter, micro_pipeline_tp or "
    "enable_async_tensor_parallel; its GPT layers are Megatron-core's (megatron_gpt_model.py model_provider_func: "
    "MCoreGPTModel)";

// Megatron-LM's --tp-comm-overlap turns on all of TE's methods (bulk and pipelined / ring
// exchange); each strategy is one of them, so the export also writes the switches that turn the
// other one off.
constexpr std::string_view kWhyTpCommOverlap =
    "TransformerEngine userbuffers for the TP collectives (needs --sequence-parallel); alone it runs the bulk and the "
    "pipelined / ring-exchange methods together";
constexpr std::string_view kWhyNoBulkDgrad =
    "... without the bulk AllGather beside the QKV / FC1 input-gradient GEMM (te-bulk's)";
constexpr std::string_view kWhyNoBulkWgrad =
    "... without the bulk ReduceScatter beside the QKV / FC1 weight-gradient GEMM (te-bulk's)";
constexpr std::string_view kWhyNoOverlapAg =
    "... without the ring-exchange AllGather + GEMM of QKV / FC1 forward and out-proj / FC2 dgrad (te-pipelined's)";
constexpr std::string_view kWhyNoOverlapRs =
    "... without the pipelined GEMM + ReduceScatter of out-proj / FC2 forward (te-pipelined's)";
constexpr std::string_view kWhyNemoTe = "TransformerEngine's layers (the userbuffers overlap is theirs)";
constexpr std::string_view kWhyNemoUb =
    "TransformerEngine userbuffers for the TP collectives (NeMo turns it off without sequence_parallel); alone: bulk and "
    "pipelined methods together";

constexpr std::string_view kWhyPipelinedKnobMegatron =
    "TE's default for proj_fprop / fc2_fprop without a --tp-comm-overlap-cfg YAML; other values need that YAML (proj_fprop: "
    "{num_splits: N, num_sm: M}, the same for fc2_fprop), which the export does not write";
constexpr std::string_view kWhyPipelinedKnobNemo =
    "TE's default for proj_fprop / fc2_fprop while model.ub_tp_comm_overlap_cfg is null; other values need that config "
    "(proj_fprop: {num_splits: N, num_sm: M}, the same for fc2_fprop), which the export does not write";
constexpr std::string_view kWhyBulkKnobMegatron =
    "TE's default for qkv_dgrad, qkv_wgrad, fc1_dgrad, fc1_wgrad without a --tp-comm-overlap-cfg YAML; other values need that "
    "YAML (each site: {num_sm: N}), which the export does not write";
constexpr std::string_view kWhyBulkKnobNemo =
    "TE's default for qkv_dgrad, qkv_wgrad, fc1_dgrad, fc1_wgrad while model.ub_tp_comm_overlap_cfg is null; other values need "
    "that config (each site: {num_sm: N}), which the export does not write";

const StrategySupport& support_te_pipelined() {
  static const StrategySupport s{
      .strategy = "te-pipelined",
      .frameworks =
          {
              {.framework = Framework::megatron,
               .runs = true,
               .selected_by = {"--tp-comm-overlap", "--disable-tp-comm-bulk-dgrad", "--disable-tp-comm-bulk-wgrad"},
               .selected_why = {kWhyTpCommOverlap, kWhyNoBulkDgrad, kWhyNoBulkWgrad},
               .knobs = {{.key = "num_splits", .fixed = 4, .why = kWhyPipelinedKnobMegatron, .source = kSrcTeDefaultsMegatron},
                         {.key = "num_sm", .fixed = 16, .why = kWhyPipelinedKnobMegatron, .source = kSrcTeDefaultsMegatron}},
               .source = kSrcMegatronUb},
              {.framework = Framework::nemo,
               .runs = true,
               .selected_by = {"model.transformer_engine=True", "model.ub_tp_comm_overlap=True", "+model.tp_comm_bulk_dgrad=False",
                               "+model.tp_comm_bulk_wgrad=False"},
               .selected_why = {kWhyNemoTe, kWhyNemoUb, kWhyNoBulkDgrad, kWhyNoBulkWgrad},
               .knobs = {{.key = "num_splits", .fixed = 4, .why = kWhyPipelinedKnobNemo, .source = kSrcTeDefaultsNemo},
                         {.key = "num_sm", .fixed = 16, .why = kWhyPipelinedKnobNemo, .source = kSrcTeDefaultsNemo}},
               .source = kSrcNemoUb},
              {.framework = Framework::deepspeed_domino,
               .runs = false,
               .instead =
                   "DeepSpeed-Domino has no sequence parallelism and no TransformerEngine layers: it runs its own schedule, "
                   "domino 2x1 (launch Megatron-LM, --export megatron, for TE's userbuffers overlap)",
               .source = kSrcDomNoTe},
          },
  };
  return s;
}

const StrategySupport& support_te_bulk() {
  static const StrategySupport s{
      .strategy = "te-bulk",
      .frameworks =
          {
              {.framework = Framework::megatron,
               .runs = true,
               .selected_by = {"--tp-comm-overlap", "--disable-tp-comm-overlap-ag", "--disable-tp-comm-overlap-rs"},
               .selected_why = {kWhyTpCommOverlap, kWhyNoOverlapAg, kWhyNoOverlapRs},
               .knobs = {{.key = "te_bulk_sms", .fixed = 16, .why = kWhyBulkKnobMegatron, .source = kSrcTeDefaultsMegatron}},
               .source = kSrcMegatronUb},
              {.framework = Framework::nemo,
               .runs = true,
               .selected_by = {"model.transformer_engine=True", "model.ub_tp_comm_overlap=True", "+model.tp_comm_overlap_ag=False",
                               "+model.tp_comm_overlap_rs=False"},
               .selected_why = {kWhyNemoTe, kWhyNemoUb, kWhyNoOverlapAg, kWhyNoOverlapRs},
               .knobs = {{.key = "te_bulk_sms", .fixed = 16, .why = kWhyBulkKnobNemo, .source = kSrcTeDefaultsNemo}},
               .source = kSrcNemoUb},
              {.framework = Framework::deepspeed_domino,
               .runs = false,
               .instead =
                   "DeepSpeed-Domino has no sequence parallelism and no TransformerEngine layers: it runs its own schedule, "
                   "domino 2x1 (launch Megatron-LM, --export megatron, for TE's bulk overlap)",
               .source = kSrcDomNoTe},
          },
  };
  return s;
}

const StrategySupport& support_async_tp() {
  static const StrategySupport s{
      .strategy = "async-tp",
      .frameworks =
          {
              {.framework = Framework::megatron,
               .runs = false,
               .instead =
                   "Megatron-LM has no asynchronous TP (PyTorch's symmetric-memory decomposition, torchtitan's "
                   "enable_async_tensor_parallel): with --sequence-parallel it runs each AllGather / ReduceScatter whole "
                   "(strategy none), or TE userbuffers with --tp-comm-overlap (te-pipelined is the nearest: its AllGathers are "
                   "the same copy-engine ring steps)",
               .source = kSrcMegatronNoAsyncTp},
              {.framework = Framework::nemo,
               .runs = false,
               .instead =
                   "NeMo has no asynchronous TP: its Megatron-core layers run each sequence-parallel AllGather / ReduceScatter "
                   "whole (strategy none), or TE userbuffers with ub_tp_comm_overlap (te-pipelined, te-bulk)",
               .source = kSrcNemoNoAsyncTp},
              {.framework = Framework::deepspeed_domino,
               .runs = false,
               .instead =
                   "DeepSpeed-Domino has no sequence parallelism, so no AllGather / ReduceScatter to decompose: it runs its own "
                   "schedule, domino 2x1",
               .source = kSrcDomNoTe},
          },
  };
  return s;
}

// FLUX's fused kernels (fused). Read in Megatron-LM d98e8a6 and NeMo 8cfedd7 (git grep over their
// Python and YAML for flux imports and FLUX's ops, GemmRS and AGKernel) and bytedance/flux 19831ca.
constexpr std::string_view kSrcMegatronNoFlux =
    "Megatron-LM megatron/ neither imports bytedance's flux nor calls its GemmRS / AGKernel ops: its sequence-parallel "
    "linears (megatron/core/tensor_parallel/layers.py, mappings.py) run NCCL's AllGather / ReduceScatter beside cuBLAS, or "
    "TE's userbuffers under --tp-comm-overlap; FLUX's own docs point to a fork (ZSL98/Megatron-LM) and for its MoE "
    "kernels only (bytedance/flux docs/mlsys_comet_ae.md, docs/moe_usage.md)";
constexpr std::string_view kSrcNemoNoFlux =
    "NeMo nemo/ neither imports bytedance's flux nor calls GemmRS / AGKernel; its `flux` (nemo/collections/diffusion/models/"
    "flux) is Black Forest Labs' image model, not these kernels; its GPT layers are Megatron-core's";

const StrategySupport& support_fused() {
  static const StrategySupport s{
      .strategy = "fused",
      .frameworks =
          {
              {.framework = Framework::megatron,
               .runs = false,
               .instead =
                   "Megatron-LM has no FLUX kernels (bytedance/flux's GemmRS / AGKernel): with --sequence-parallel it runs each "
                   "AllGather / ReduceScatter whole beside its GEMM (strategy none), or TE userbuffers with --tp-comm-overlap "
                   "(te-pipelined is the nearest: chunked GEMMs beside copy-engine ring steps and ReduceScatters)",
               .source = kSrcMegatronNoFlux},
              {.framework = Framework::nemo,
               .runs = false,
               .instead =
                   "NeMo has no FLUX kernels (its `flux` is the diffusion model): its Megatron-core layers run each "
                   "sequence-parallel AllGather / ReduceScatter whole (strategy none), or TE userbuffers with "
                   "ub_tp_comm_overlap (te-pipelined, te-bulk)",
               .source = kSrcNemoNoFlux},
              {.framework = Framework::deepspeed_domino,
               .runs = false,
               .instead =
                   "DeepSpeed-Domino has no sequence parallelism, so no AllGather + GEMM or GEMM + ReduceScatter for FLUX to "
                   "fuse, and no FLUX kernels: it runs its own schedule, domino 2x1",
               .source = kSrcDomNoTe},
          },
  };
  return s;
}

struct Registry {
  std::vector<const StrategySupport*> supports;
};

Registry& registry() {
  static Registry r{
      .supports = {&support_none(), &support_domino(), &support_te_pipelined(), &support_te_bulk(), &support_async_tp(),
                   &support_fused()}};
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
  for (std::size_t i = 0; i < fs->selected_by.size(); ++i)
    out.args.push_back({std::string(fs->selected_by[i]),
                        i < fs->selected_why.size() ? fmt::format("strategy {}: {}", s.name, fs->selected_why[i])
                                                    : fmt::format("strategy {}: {}", s.name, s.description)});
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
        out.notes.push_back(fmt::format("{} {}: {} runs this ({})", k.key, v, fw, ks->why));
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

namespace {
/// The Megatron-style frameworks whose arguments parse_megatron_args reads.
constexpr Framework kMegatronStyle[] = {Framework::megatron, Framework::deepspeed_domino};
}  // namespace

std::optional<ArgumentTarget> find_argument(std::string_view name) {
  for (const sim::Strategy* s : sim::strategies())
    for (Framework f : kMegatronStyle) {
      const FrameworkSupport* fs = find_support(*s, f);
      if (!fs || !fs->runs) continue;
      for (const auto& ks : fs->knobs)
        if (!ks.arg.empty() && ks.arg == name && s->knob(ks.key)) return ArgumentTarget{.strategy = s, .knob = s->knob(ks.key)};
    }
  return std::nullopt;
}

bool is_selecting_argument(std::string_view name) {
  for (const sim::Strategy* s : sim::strategies())
    for (Framework f : kMegatronStyle) {
      const FrameworkSupport* fs = find_support(*s, f);
      if (fs && fs->runs && std::find(fs->selected_by.begin(), fs->selected_by.end(), name) != fs->selected_by.end()) return true;
    }
  return false;
}

Selection select_strategy(const std::vector<std::string>& present) {
  std::vector<std::string_view> given(present.begin(), present.end());
  std::sort(given.begin(), given.end());
  given.erase(std::unique(given.begin(), given.end()), given.end());
  Selection out;
  std::string sets;
  for (const sim::Strategy* s : sim::strategies())
    for (Framework f : kMegatronStyle) {
      const FrameworkSupport* fs = find_support(*s, f);
      if (!fs || !fs->runs || fs->selected_by.empty()) continue;
      std::vector<std::string_view> need(fs->selected_by.begin(), fs->selected_by.end());
      std::sort(need.begin(), need.end());
      if (need == given) {
        out.strategy = s;
        return out;
      }
      // say the sets that share an argument with what was given
      if (std::any_of(need.begin(), need.end(), [&](std::string_view a) { return std::binary_search(given.begin(), given.end(), a); }))
        sets += fmt::format("{}{} is {}", sets.empty() ? "" : "; ", s->name, fmt::join(fs->selected_by, " "));
    }
  out.why = fmt::format("no strategy slicetune models is selected by exactly {} ({})", fmt::join(given, " "),
                        sets.empty() ? "no declaration names them all" : sets);
  return out;
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
