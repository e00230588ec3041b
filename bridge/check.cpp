#include "bridge/check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "bridge/strategy_support.hpp"
#include "sim/engine.hpp"
#include "sim/step_graph.hpp"

namespace bridge {

std::string_view to_string(Severity s) {
  switch (s) {
    case Severity::error: return "error";
    case Severity::warning: return "warning";
    case Severity::env: return "env";
    case Severity::ok: return "ok";
  }
  return "?";
}

namespace {

using F = Framework;
const std::vector<F> kAll{F::megatron, F::deepspeed_domino, F::nemo};
const std::vector<F> kMegatronLike{F::megatron, F::nemo};

// Sources: the framework file and the check (message quoted where the framework prints one).
constexpr const char* kSrcWorld = "Megatron-LM megatron/training/arguments.py validate_args: \"world size (N) is not divisible by total_model_size\"; "
                                  "DeepSpeed-Domino domino/parallel_state.py: data_parallel_size = world_size // (tp x pp)";
constexpr const char* kSrcBatch = "megatron/core/num_microbatches_calculator.py ConstantNumMicroBatchesCalculator: \"global batch size (G) is not "
                                  "divisible by micro batch size (M) times data parallel size (D)\" (NeMo builds the same calculator)";
constexpr const char* kSrcHeads = "megatron/core/transformer/attention.py: divide(num_attention_heads, tp) -> megatron/core/utils.py "
                                  "ensure_divisibility \"H is not divisible by T\"; Domino: deepspeed/runtime/domino/transformer.py "
                                  "ShardedAttention num_attention_heads // world_size (floors)";
constexpr const char* kSrcKv = "megatron/core/transformer/attention.py: divide(num_query_groups, tp) when num_query_groups >= tp";
constexpr const char* kSrcFfn = "megatron/core/tensor_parallel/layers.py ColumnParallelLinear: divide(output_size, world_size); Domino: "
                                "DominoTransformerLayer ffn_hidden_size // world_size (floors)";
constexpr const char* kSrcSpTp1 = "Megatron-LM megatron/training/arguments.py validate_args: \"Disabling sequence parallelism because tensor "
                                  "model parallelism is disabled\"; NeMo megatron_base_model.py _validate_and_override_config sets "
                                  "sequence_parallel False when tensor_model_parallel_size == 1";
constexpr const char* kSrcSpSeq = "megatron/core/tensor_parallel/mappings.py _split_along_first_dim: \"First dimension of the tensor should be "
                                  "divisible by tensor parallel size\" (the [s, b, h] activations split along s)";
constexpr const char* kSrcMaxPos = "Megatron-LM megatron/training/arguments.py validate_args: \"max_position_embeddings (P) must be greater "
                                   "than or equal to seq_length (S)\"";
constexpr const char* kSrcFp8 = "TransformerEngine transformer_engine/pytorch/fp8.py check_fp8_support: \"Device compute capability 8.9 or "
                                "higher required for FP8 execution\"";
constexpr const char* kSrcTpOverlap = "Megatron-LM megatron/training/arguments.py validate_args: \"Tensor parallel communication/GEMM overlap can "
                                      "happen only when sequence parallelism is enabled\"";
constexpr const char* kSrcParamGather = "Megatron-LM megatron/training/arguments.py validate_args: \"--overlap-param-gather only supported with "
                                        "distributed optimizer...\" and \"Must use --overlap-param-gather with --overlap-grad-reduce\"";
constexpr const char* kSrcPpLayers = "Megatron-LM megatron/training/arguments.py validate_args: \"number of layers of the model must be "
                                     "divisible pipeline model parallel size\"";
constexpr const char* kSrcDistAct = "Megatron-LM megatron/training/arguments.py validate_args: \"can distribute recomputed activations only "
                                    "across tensor model parallel groups\"";
constexpr const char* kSrcMaxConn = "Megatron-LM megatron/training/arguments.py validate_args: \"Using tensor model parallelism or context "
                                    "parallelism require setting the environment variable CUDA_DEVICE_MAX_CONNECTIONS to 1\" (before Blackwell)";
constexpr const char* kSrcDomPp = "DeepSpeedExamples training/DeepSpeed-Domino domino/parallel_state.py: pipeline_model_parallel_size = 1 "
                                  "(hard-coded); domino/arguments.py defines no --pipeline-model-parallel-size";
constexpr const char* kSrcDomSp = "DeepSpeed-Domino domino/language_model.py builds its layers with sequence_parallel=False; domino/arguments.py "
                                  "defines no --sequence-parallel";
constexpr const char* kSrcDomOdd = "DeepSpeed-Domino domino/language_model.py: p_batch_size = b // 2 and encoder_output_t[:, 0:p_batch_size] = "
                                   "encoder_outputs[0] (tensor_split gives ceil(b/2) rows: shape mismatch for odd b)";
constexpr const char* kSrcDomAccum = "DeepSpeed-Domino domino/arguments.py get_num_microbatches(): return 1 (one micro-batch per step)";
constexpr const char* kSrcDomGqa = "DeepSpeed-Domino domino/arguments.py defines no --group-query-attention / --num-query-groups";
constexpr const char* kSrcDomTied = "DeepSpeed-Domino domino/arguments.py defines no --untie-embeddings-and-output-weights; "
                                    "domino/language_model.py parallel_lm_logits uses the word-embedding weight";
constexpr const char* kSrcDomFp8 = "DeepSpeed-Domino domino/arguments.py: precision flags are --fp16 and --bf16 only";
constexpr const char* kSrcMemory = "slicetune's memory breakdown (sim::estimate_memory: CUDA context and NCCL buffers included) + --reserve-gb vs HBM less the cluster's fragmentation reserve";

}  // namespace

std::vector<CheckRule> check_rules() {
  std::vector<CheckRule> rules{
      {"world-size", kAll, "tp x pp divides the GPUs (dp = GPUs / (tp x pp))", kSrcWorld},
      {"global-batch", kMegatronLike, "global batch is a multiple of micro-batch x dp", kSrcBatch},
      {"heads-tp", kAll, "tp divides the attention heads", kSrcHeads},
      {"kv-heads-tp", kMegatronLike, "tp divides the K/V heads when there are at least tp of them", kSrcKv},
      {"ffn-tp", kAll, "tp divides the MLP inner size", kSrcFfn},
      {"sp-tp1", kMegatronLike, "sequence parallelism needs tp > 1 (else it is silently switched off)", kSrcSpTp1},
      {"sp-seq-tp", kMegatronLike, "under sequence parallelism tp divides the sequence length", kSrcSpSeq},
      {"max-positions", {F::megatron}, "--max-position-embeddings >= --seq-length", kSrcMaxPos},
      {"fp8-arch", kMegatronLike, "FP8 needs compute capability 8.9+ (Hopper, Ada, Blackwell)", kSrcFp8},
      {"tp-comm-overlap-sp", {F::megatron}, "--tp-comm-overlap needs --sequence-parallel", kSrcTpOverlap},
      {"overlap-param-gather", {F::megatron}, "--overlap-param-gather needs --use-distributed-optimizer and --overlap-grad-reduce", kSrcParamGather},
      {"pp-layers", kMegatronLike, "pp divides the layers", kSrcPpLayers},
      {"distribute-saved-activations", {F::megatron}, "--distribute-saved-activations needs tp > 1", kSrcDistAct},
      {"cuda-device-max-connections", kAll, "CUDA_DEVICE_MAX_CONNECTIONS=1 with tp > 1 (before Blackwell)", kSrcMaxConn},
      {"domino-pp", {F::deepspeed_domino}, "no pipeline parallelism", kSrcDomPp},
      {"domino-sp", {F::deepspeed_domino}, "no sequence parallelism", kSrcDomSp},
      {"domino-odd-batch", {F::deepspeed_domino}, "an even micro-batch", kSrcDomOdd},
      {"domino-accumulation", {F::deepspeed_domino}, "one micro-batch per step (global batch = micro-batch x dp)", kSrcDomAccum},
      {"domino-gqa", {F::deepspeed_domino}, "no grouped-query attention", kSrcDomGqa},
      {"domino-untied", {F::deepspeed_domino}, "a tied LM head", kSrcDomTied},
      {"domino-fp8", {F::deepspeed_domino}, "bf16, fp16 or fp32 (no FP8 flag)", kSrcDomFp8},
      {"memory", kAll, "the plan's memory plus the reserve fits the GPU", kSrcMemory},
  };
  // one per strategy a framework does not run and per knob value it fixes (bridge/strategy_support.cpp)
  for (auto& r : declared_rules()) rules.push_back({std::move(r.id), std::move(r.frameworks), std::move(r.what), std::move(r.source)});
  return rules;
}

std::string rules_markdown() {
  std::string out = "| rule | frameworks | the framework's reason, and where it enforces it |\n|---|---|---|\n";
  for (const auto& r : check_rules()) {
    std::string fw;
    for (Framework f : r.frameworks) fw += fmt::format("{}{}", fw.empty() ? "" : ", ", to_string(f));
    out += fmt::format("| `{}` | {} | {}: {} |\n", r.id, fw, r.what, r.source);
  }
  return out;
}

std::vector<Finding> preflight(Framework f, const CheckInput& in) {
  std::vector<Finding> out;
  const std::vector<CheckRule> rules = check_rules();
  const auto& m = in.model;
  const auto& c = in.cluster;
  const auto& p = in.plan;
  const ImportedPlan* imp = in.imported;
  auto applies = [&](const char* id) {
    for (const auto& r : rules)
      if (r.id == id) return std::find(r.frameworks.begin(), r.frameworks.end(), f) != r.frameworks.end();
    return false;
  };
  auto source_of = [&](const char* id) {
    for (const auto& r : rules)
      if (r.id == id) return r.source;
    return std::string();
  };
  auto add = [&](Severity s, const char* id, std::string msg) {
    if (applies(id)) out.push_back({s, id, std::move(msg), source_of(id)});
  };
  auto flag = [&](const char* name) { return imp && imp->has_flag(name); };
  const bool domino = f == Framework::deepspeed_domino;

  if (c.total_gpus() % (p.tp * p.pp) != 0 || p.tp * p.dp * p.pp != c.total_gpus())
    add(Severity::error, "world-size", fmt::format("tp x dp x pp = {} x {} x {} = {} but the job has {} GPUs", p.tp, p.dp, p.pp, p.gpus(), c.total_gpus()));
  if (p.micro_batch * p.dp > 0 && p.global_batch % (p.micro_batch * p.dp) != 0)
    add(Severity::error, "global-batch", fmt::format("global batch {} is not a multiple of micro-batch {} x dp {}", p.global_batch, p.micro_batch, p.dp));
  if (m.heads % p.tp) add(Severity::error, "heads-tp", fmt::format("{} heads are not divisible by tp {}", m.heads, p.tp));
  if (m.kv_heads >= p.tp && m.kv_heads % p.tp)
    add(Severity::error, "kv-heads-tp", fmt::format("{} K/V heads (query groups) are not divisible by tp {}", m.kv_heads, p.tp));
  if (m.ffn_hidden % p.tp) add(Severity::error, "ffn-tp", fmt::format("ffn {} is not divisible by tp {}", m.ffn_hidden, p.tp));
  if (p.sequence_parallel && p.tp == 1)
    add(Severity::error, "sp-tp1", "sequence parallelism with tp 1: the framework switches it off and runs a different plan");
  if (p.sequence_parallel && p.tp > 1 && p.seq_len % p.tp)
    add(Severity::error, "sp-seq-tp", fmt::format("sequence length {} is not divisible by tp {} under sequence parallelism", p.seq_len, p.tp));
  if (imp && imp->model.max_positions && *imp->model.max_positions < p.seq_len)
    add(Severity::error, "max-positions", fmt::format("--max-position-embeddings {} < --seq-length {}", *imp->model.max_positions, p.seq_len));
  if (p.dtype == common::DType::fp8 && (c.gpu.arch == hardware::GpuArch::ampere || c.gpu.arch == hardware::GpuArch::cpu))
    add(Severity::error, "fp8-arch", fmt::format("fp8 on {} ({}): TransformerEngine refuses FP8 below compute capability 8.9", c.gpu.name,
                                                 hardware::to_string(c.gpu.arch)));
  if (flag("--tp-comm-overlap") && !p.sequence_parallel)
    add(Severity::error, "tp-comm-overlap-sp", "--tp-comm-overlap without --sequence-parallel");
  if (flag("--overlap-param-gather") && (!flag("--use-distributed-optimizer") || !flag("--overlap-grad-reduce")))
    add(Severity::error, "overlap-param-gather", fmt::format("--overlap-param-gather without {}",
                                                             !flag("--use-distributed-optimizer") ? "--use-distributed-optimizer" : "--overlap-grad-reduce"));
  if (p.pp > 1 && m.layers % p.pp) add(Severity::error, "pp-layers", fmt::format("{} layers are not divisible by pp {}", m.layers, p.pp));
  if (flag("--distribute-saved-activations") && p.tp == 1) add(Severity::error, "distribute-saved-activations", "--distribute-saved-activations with tp 1");
  if (p.tp > 1 && c.gpu.arch != hardware::GpuArch::blackwell && c.gpu.arch != hardware::GpuArch::cpu) {
    auto it = in.environment.find("CUDA_DEVICE_MAX_CONNECTIONS");
    if (it != in.environment.end() && it->second != "1")
      add(f == Framework::deepspeed_domino ? Severity::warning : Severity::error, "cuda-device-max-connections",
          fmt::format("CUDA_DEVICE_MAX_CONNECTIONS={} in the environment, tp {} needs 1{}", it->second, p.tp,
                      f == Framework::deepspeed_domino ? " (Domino's scripts set it; without it the halves' collectives may not overlap as predicted)" : ""));
    else
      add(Severity::env, "cuda-device-max-connections", "export CUDA_DEVICE_MAX_CONNECTIONS=1");
  }
  if (domino) {
    if (p.pp > 1) add(Severity::error, "domino-pp", fmt::format("pp {}: DeepSpeed-Domino has no pipeline parallelism", p.pp));
    if (p.sequence_parallel) add(Severity::error, "domino-sp", "sequence parallelism: DeepSpeed-Domino has none");
    if (p.micro_batch % 2) add(Severity::error, "domino-odd-batch", fmt::format("micro-batch {} is odd: DeepSpeed-Domino halves it", p.micro_batch));
    if (p.grad_accum_steps() != 1 && p.global_batch % (p.micro_batch * p.dp) == 0)
      add(Severity::error, "domino-accumulation", fmt::format("{} accumulation steps: DeepSpeed-Domino runs one micro-batch per step", p.grad_accum_steps()));
    if (m.kv_heads != m.heads)
      add(Severity::error, "domino-gqa", fmt::format("{} K/V heads for {} heads: DeepSpeed-Domino's example has no grouped-query attention flag", m.kv_heads, m.heads));
    if (!m.tied_embeddings) add(Severity::error, "domino-untied", "an untied LM head: DeepSpeed-Domino's example ties it to the embedding");
    if (p.dtype == common::DType::fp8) add(Severity::error, "domino-fp8", "fp8: DeepSpeed-Domino's example has no FP8 flag");
  }
  // the plan's strategy and its knobs, as the framework runs them (declared in bridge/strategy_support.cpp);
  // nothing declared: a warning, since slicetune cannot say what the framework would run
  for (auto& g : express_strategy(f, p).gaps)
    out.push_back({g.declared ? Severity::error : Severity::warning, std::move(g.rule), std::move(g.message), std::move(g.source)});
  // slicetune's own model of the plan: memory, when it can build the step graph
  if (auto problem = sim::check_plan(m, c, p)) {
    out.push_back({Severity::warning, "slicetune", fmt::format("slicetune cannot simulate this plan ({}), so its memory is not checked", problem->message),
                   "sim::check_plan"});
  } else {
    // the per-GPU breakdown (CUDA context and NCCL buffers included) against HBM less the
    // cluster's fragmentation reserve, plus whatever extra the user reserves (--reserve-gb)
    const sim::MemoryEstimate mem = sim::estimate_memory(m, c, p);
    const double need = mem.total() / 1e9 + in.reserve_gb, usable = mem.usable() / 1e9;
    if (need > usable)
      add(Severity::error, "memory", fmt::format("needs {:.1f} GB per GPU ({:.1f} GB modelled + {:.1f} GB extra reserve), {} lets a plan use {:.1f} GB "
                                                 "({:.0f} GB less {:g} % kept free)",
                                                 need, mem.total() / 1e9, in.reserve_gb, c.gpu.name, usable, mem.capacity / 1e9,
                                                 100 * mem.reserve_fraction));
    else
      add(Severity::ok, "memory", fmt::format("{:.1f} GB per GPU ({:.1f} GB modelled + {:.1f} GB extra reserve) of {:.1f} GB usable", need,
                                              mem.total() / 1e9, in.reserve_gb, usable));
  }
  if (imp)
    for (const auto& nm : imp->not_modelled)
      out.push_back({Severity::warning, "not-modelled", fmt::format("{}{}{}: {}", nm.name, nm.value.empty() ? "" : " ", nm.value, nm.what),
                     "slicetune's prediction leaves it out"});
  std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) { return a.severity < b.severity; });
  return out;
}

bool has_errors(const std::vector<Finding>& findings) {
  return std::any_of(findings.begin(), findings.end(), [](const Finding& x) { return x.severity == Severity::error; });
}

std::string check_table(const std::vector<Finding>& findings) {
  std::size_t w_sev = 0, w_rule = 0;
  for (const auto& x : findings) {
    w_sev = std::max(w_sev, to_string(x.severity).size());
    w_rule = std::max(w_rule, x.rule.size());
  }
  std::string out;
  for (const auto& x : findings)
    out += fmt::format("{:<{}}  {:<{}}  {}  [{}]\n", to_string(x.severity), w_sev, x.rule, w_rule, x.message, x.source);
  return out;
}

}  // namespace bridge
