#include "bridge/export.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <vector>

#include "bridge/strategy_support.hpp"
#include "hardware/collective_model.hpp"

namespace bridge {

namespace {

struct Line {
  std::string arg, comment;
};

std::string pad_lines(const std::vector<Line>& lines, const std::string& indent) {
  std::size_t width = 0;
  for (const auto& l : lines) width = std::max(width, l.arg.size());
  std::string out;
  for (const auto& l : lines) {
    out += indent + l.arg;
    if (!l.comment.empty()) out += std::string(width - l.arg.size() + 2, ' ') + "# " + l.comment;
    out += "\n";
  }
  return out;
}

/// The TP AllReduce of one slice's activations, as the step graph issues it (forward, after out-proj).
hardware::CollectiveCost tp_collective(const ExportInput& in) {
  const auto& p = in.plan;
  const std::int64_t rows = p.row_axis == sim::RowAxis::batch ? p.seq_len * (p.micro_batch / p.row_slices)
                                                             : (p.seq_len / p.row_slices) * p.micro_batch;
  const int tp_nodes = p.tp > in.cluster.node.gpus_per_node ? p.tp / in.cluster.node.gpus_per_node : 1;
  hardware::CollectiveOp op{.kind = p.sequence_parallel ? hardware::CollectiveKind::reduce_scatter : hardware::CollectiveKind::all_reduce,
                            .bytes = rows * in.model.hidden * static_cast<std::int64_t>(common::dtype_bytes(p.dtype)),
                            .ranks = p.tp,
                            .nodes = tp_nodes,
                            .dtype = p.dtype};
  return hardware::price_collective(in.cluster, op);
}

/// Environment every framework needs for this plan (Megatron-LM, Domino and NeMo alike).
std::vector<Line> environment(const ExportInput& in, Framework f) {
  std::vector<Line> env;
  const auto& p = in.plan;
  if (p.tp > 1) {
    std::string why =
        f == Framework::megatron
            ? "Megatron-LM asserts it with tp > 1 before Blackwell (megatron/training/arguments.py validate_args): one hardware "
              "queue, so each TP collective starts in issue order right behind the GEMM it follows"
        : f == Framework::deepspeed_domino
            ? "as DeepSpeed-Domino's launch scripts set it (pretrain_*.sh): kernels leave in issue order, so slice i's async "
              "all-reduce is queued before slice i+1's GEMMs and overlaps them"
            : "NeMo's Megatron-core layers expect it with tp > 1 (the same check as Megatron-LM's arguments.py)";
    env.push_back({"export CUDA_DEVICE_MAX_CONNECTIONS=1", why});
  }
  if (p.tp > 1) {
    const auto c = tp_collective(in);
    if (c.algo == "nvls")
      env.push_back({"export NCCL_NVLS_ENABLE=1", fmt::format("the prediction prices the TP {} as NCCL's NVLS (NVLink SHARP) "
                                                              "algorithm ({} channels): keep it on (NCCL's default where NVSwitch has it)",
                                                              p.sequence_parallel ? "collectives" : "all-reduce", c.channels)});
    if (p.tp_channels > 0)
      env.push_back({"# NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS left unset",
                     fmt::format("the plan gives the TP communicator {} channels (tp_channels) where NCCL would take {}: set min_ctas "
                                 "= max_ctas = {} for the tp group (Megatron-LM: --nccl-communicator-config-path); the environment "
                                 "variables would pin the DP communicator's too",
                                 p.tp_channels, c.channels, p.tp_channels)});
    else
      env.push_back({"# NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS left unset",
                   fmt::format("the prediction assumes NCCL's own channel count for the TP {} ({} {} {} channel(s) = SMs taken from "
                               "the GEMMs beside it); pinning them changes that interference",
                               p.sequence_parallel ? "reduce-scatter" : "all-reduce", c.algo, c.proto, c.channels)});
  }
  return env;
}

/// The `# slicetune:` line: plan keys the framework's arguments do not carry, read back by
/// parse_megatron_args so that export + import gives the same plan.
/// `attention`: the framework's arguments do not say the plan's attention kernel (or not exactly).
std::string annotation(Framework f, const StrategyInFramework& st, bool stack, const sim::Plan& p, bool bucket, bool attention) {
  std::string a;
  for (const auto& [key, value] : st.annotation) a += fmt::format(" {}={}", key, value);
  if (stack) a += fmt::format(" stack={}", hardware::to_string(p.stack));
  if (bucket) a += fmt::format(" dp_bucket_mb={}", p.dp_bucket_mb);
  if (attention) a += fmt::format(" attention={}", hardware::to_string(p.attention));
  if (a.empty()) return "";
  return fmt::format("# slicetune: framework={}{}\n", to_string(f), a);
}

/// The strategy's gaps and notes as comment lines.
std::string strategy_comments(Framework f, const StrategyInFramework& st) {
  std::string out;
  for (const auto& g : st.gaps) out += fmt::format("# Not expressible in {}: {}\n", display_name(f), g.message);
  for (const auto& n : st.notes) out += fmt::format("# {}\n", n);
  return out;
}

void add_strategy_args(const StrategyInFramework& st, std::vector<Line>& a) {
  for (const auto& x : st.args) a.push_back({x.text, x.comment});
}

/// Megatron's --ddp-bucket-size counts parameters; slicetune's bucket counts fp32 main-gradient bytes.
std::optional<long long> bucket_elements(const sim::Plan& p) {
  const double e = p.dp_bucket_mb * 1e6 / 4.0;
  const double r = std::round(e);
  if (std::abs(e - r) > 1e-9 * std::max(1.0, e) || r < 1) return std::nullopt;
  if (static_cast<double>(static_cast<long long>(r)) * 4.0 / 1e6 != p.dp_bucket_mb) return std::nullopt;  // must read back exactly
  return static_cast<long long>(r);
}

std::vector<Line> shape_lines(const ExportInput& in, bool domino) {
  const auto& m = in.model;
  const auto& p = in.plan;
  std::vector<Line> a;
  a.push_back({fmt::format("--num-layers {}", m.layers), "transformer layers"});
  a.push_back({fmt::format("--hidden-size {}", m.hidden), "hidden size h"});
  a.push_back({fmt::format("--ffn-hidden-size {}", m.ffn_hidden), m.activation == sim::Activation::swiglu ? "MLP inner size (per SwiGLU branch)" : "MLP inner size"});
  a.push_back({fmt::format("--num-attention-heads {}", m.heads), "query heads"});
  if (m.kv_heads != m.heads && !domino) {
    a.push_back({"--group-query-attention", "grouped-query attention ..."});
    a.push_back({fmt::format("--num-query-groups {}", m.kv_heads), "... with this many K/V heads"});
  }
  a.push_back({fmt::format("--seq-length {}", p.seq_len), "tokens per sequence"});
  a.push_back({fmt::format("--max-position-embeddings {}", std::max(p.seq_len, m.seq_len)),
               m.position == sim::Position::learned ? "learned position table (>= seq-length)" : "the model's context length (RoPE has no table)"});
  a.push_back({fmt::format("--normalization {}", m.norm == sim::Norm::rmsnorm ? "RMSNorm" : "LayerNorm"), "norm before attention and MLP"});
  if (m.activation == sim::Activation::swiglu) a.push_back({"--swiglu", "gated MLP: SiLU(gate) x up (FC1 is 2 x ffn wide)"});
  a.push_back({fmt::format("--position-embedding-type {}", m.position == sim::Position::rope ? "rope" : "learned_absolute"),
               m.position == sim::Position::rope ? "rotary embeddings on Q and K" : "learned position embeddings"});
  if (!domino) {
    if (!m.tied_embeddings) a.push_back({"--untie-embeddings-and-output-weights", "separate LM-head weight (untied)"});
    a.push_back({"--disable-bias-linear", "no linear biases (as slicetune models the layers)"});
    a.push_back({fmt::format("--vocab-size {}", m.vocab), "vocabulary (NullTokenizer / mock data; a real tokenizer sets it itself)"});
    a.push_back({"--make-vocab-size-divisible-by 1", fmt::format("no padding: tp x 1 divides {} (Megatron-LM pads to a multiple of this x tp)", m.vocab)});
  } else {
    if (m.position == sim::Position::rope || m.norm == sim::Norm::rmsnorm) a.push_back({"--llama-model", "Domino's LLaMA layer (RoPE in attention)"});
  }
  return a;
}

std::string precision_args(const sim::Plan& p, std::vector<Line>& a) {
  switch (p.dtype) {
    case common::DType::bf16: a.push_back({"--bf16", "bf16 weights and activations, fp32 main gradients and optimizer"}); break;
    case common::DType::fp16: a.push_back({"--fp16", "fp16 weights and activations with loss scaling"}); break;
    case common::DType::fp8:
      a.push_back({"--bf16", "bf16 parameters ..."});
      a.push_back({"--fp8-format hybrid", "... and FP8 GEMMs through TransformerEngine (E4M3 forward, E5M2 gradients)"});
      break;
    case common::DType::fp32: break;
  }
  return "";
}

std::string megatron(const ExportInput& in) {
  const auto& p = in.plan;
  const auto& c = in.cluster;
  std::string out = "#!/usr/bin/env bash\n";
  if (!in.headline.empty()) out += "# " + in.headline + "\n";
  out += fmt::format("# Megatron-LM launch (argument names of megatron/training/arguments.py); run from the Megatron-LM checkout.\n"
                     "# Add your data and tokenizer flags (--data-path ... or --mock-data, --tokenizer-type ...) and training schedule.\n");
  out += pad_lines(environment(in, Framework::megatron), "");
  const StrategyInFramework st = express_strategy(Framework::megatron, p);
  out += strategy_comments(Framework::megatron, st);
  if (p.stack == hardware::Stack::cpp)
    out += "# Not expressible in Megatron-LM: stack cpp (kernels issued from C++ without Python, as slicetune's executor does).\n";
  if (p.zero >= 2 && p.dp > 1)
    out += fmt::format("# Not expressible in Megatron-LM's distributed optimizer: ZeRO-{} (DeepSpeed ZeRO-{}{}).\n", p.zero, p.zero,
                       p.zero == 3 ? " or --use-torch-fsdp2" : "");
  const auto elements = bucket_elements(p);
  if (!elements) out += fmt::format("# Not expressible exactly: dp_bucket_mb {} is not a whole number of 4-byte gradients.\n", p.dp_bucket_mb);
  if (!p.pipeline_layers.empty())
    out += fmt::format("# Not expressible exactly: pipeline_layers {} (Megatron-LM splits the layers evenly, or sets the first and last stage's\n"
                       "# own counts with --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers); the flags below split evenly.\n",
                       fmt::join(p.pipeline_layers, ","));
  // --attention-backend says flash or unfused; the compiled unfused kernel (torch.compile) is no backend of its own
  out += annotation(Framework::megatron, st, p.stack == hardware::Stack::cpp, p, !elements, p.attention == hardware::AttentionKernel::unfused_compiled);
  std::vector<Line> a = shape_lines(in, false);
  a.push_back({fmt::format("--tensor-model-parallel-size {}", p.tp), fmt::format("tp: each layer's GEMMs split over {} GPUs", p.tp)});
  if (p.pp == 1) {
    a.push_back({"--pipeline-model-parallel-size 1", "pp: no pipeline stages"});
  } else {
    a.push_back({fmt::format("--pipeline-model-parallel-size {}", p.pp),
                 fmt::format("pp: {} pipeline stages ({})", p.pp, p.vp > 1 ? "interleaved schedule" : "1F1B")});
    if (p.vp > 1)
      a.push_back({fmt::format("--num-layers-per-virtual-pipeline-stage {}", in.model.layers / p.virtual_stages()),
                   fmt::format("vp {}: the interleaved schedule, {} model chunks per rank", p.vp, p.vp)});
    if (p.p2p_overlap) a.push_back({"--overlap-p2p-communication", "pipeline transfers overlap compute"});
  }
  if (p.sequence_parallel) a.push_back({"--sequence-parallel", "norms and residuals on seq/tp tokens: all-gather + reduce-scatter instead of all-reduce"});
  add_strategy_args(st, a);
  a.push_back({fmt::format("--micro-batch-size {}", p.micro_batch), "sequences per micro-batch"});
  a.push_back({fmt::format("--global-batch-size {}", p.global_batch),
               fmt::format("sequences per step: dp {} x micro-batch {} x {} accumulation step(s)", p.dp, p.micro_batch, p.grad_accum_steps())});
  precision_args(p, a);
  if (elements) a.push_back({fmt::format("--ddp-bucket-size {}", *elements), fmt::format("DP gradient bucket: {} MB of fp32 gradients", p.dp_bucket_mb)});
  a.push_back({"--overlap-grad-reduce", "reduce each DP bucket while backward continues (slicetune's DP model)"});
  if (p.stack == hardware::Stack::cuda_graphs) a.push_back({"--cuda-graph-impl local", "capture layers in CUDA graphs (stack cuda_graphs)"});
  a.push_back({fmt::format("--attention-backend {}", p.attention == hardware::AttentionKernel::flash ? "flash" : "unfused"),
               p.attention == c.host.stack(p.stack).attention
                   ? "the attention kernel the cluster file models for this stack (host.stacks.<stack>.attention)"
                   : "the plan's attention kernel (attention:)"});
  // memory savers (sim/recompute.hpp, ZeRO): Megatron-LM's own flags
  if (p.recompute == sim::Recompute::selective) a.push_back({"--recompute-granularity selective", "recompute the attention core in the backward"});
  if (p.recompute == sim::Recompute::full) {
    a.push_back({"--recompute-granularity full", "keep only each checkpointed chunk's input; rerun its forward in the backward"});
    a.push_back({fmt::format("--recompute-method {}", sim::to_string(p.recompute_method)), "uniform chunks or the first layers only (block)"});
    a.push_back({fmt::format("--recompute-num-layers {}", p.recompute_layers), "layers per chunk (uniform) or recomputed (block)"});
  }
  if (p.zero == 1 && p.dp > 1) {
    a.push_back({"--use-distributed-optimizer", "ZeRO-1: optimizer state sharded over dp, gradients reduce-scattered"});
    if (p.overlap_param_gather) a.push_back({"--overlap-param-gather", "gather the updated parameters during the next forward"});
  }
  out += "megatron_args=(\n" + pad_lines(a, "  ") + ")\n";
  std::string launch = fmt::format("torchrun --nproc-per-node {} --nnodes {}", c.node.gpus_per_node, c.nodes);
  if (c.nodes > 1) launch += " --node-rank \"${NODE_RANK:?}\" --master-addr \"${MASTER_ADDR:?}\" --master-port 6000";
  out += fmt::format("{} pretrain_gpt.py \"${{megatron_args[@]}}\" \"$@\"\n", launch);
  return out;
}

std::string domino(const ExportInput& in) {
  const auto& p = in.plan;
  const auto& m = in.model;
  const auto& c = in.cluster;
  std::string out = "#!/usr/bin/env bash\n";
  if (!in.headline.empty()) out += "# " + in.headline + "\n";
  out += "# DeepSpeed-Domino launch (DeepSpeedExamples training/DeepSpeed-Domino, argument names of domino/arguments.py);\n"
         "# run from that folder. Add --data-path / --vocab-file / --merge-file and the training schedule.\n";
  out += pad_lines(environment(in, Framework::deepspeed_domino), "");
  // What Domino's code fixes or lacks (cited in docs/bridge.md; `slicetune check --framework deepspeed` refuses these)
  const StrategyInFramework st = express_strategy(Framework::deepspeed_domino, p);
  std::vector<std::string> cannot;
  if (p.sequence_parallel) cannot.push_back("sequence parallelism: Domino's layers are built with sequence_parallel=False and have no flag for it");
  if (p.grad_accum_steps() != 1) cannot.push_back("gradient accumulation: domino/arguments.py get_num_microbatches() returns 1");
  if (m.kv_heads != m.heads) cannot.push_back("grouped-query attention: domino/arguments.py has no --num-query-groups flag");
  if (!m.tied_embeddings) cannot.push_back("untied LM head: domino/arguments.py has no --untie-embeddings-and-output-weights flag");
  if (p.stack != hardware::Stack::cuda_graphs)
    cannot.push_back(fmt::format("stack {}: the Domino example is modelled as stack cuda_graphs (its released stack); other stacks are not a flag",
                                 hardware::to_string(p.stack)));
  out += strategy_comments(Framework::deepspeed_domino, st);
  for (const auto& s : cannot) out += "# Not expressible in DeepSpeed-Domino: " + s + "\n";
  // Domino has no stack or DP bucket flag: both are always carried for the import
  out += annotation(Framework::deepspeed_domino, st, true, p, true, p.attention != p.stack_attention);
  std::vector<Line> a = shape_lines(in, true);
  a.push_back({fmt::format("--tensor-model-parallel-size {}", p.tp), fmt::format("tp {} (Domino slices each TP layer in 2 along the batch)", p.tp)});
  add_strategy_args(st, a);
  a.push_back({fmt::format("--micro-batch-size {}", p.micro_batch), "sequences per GPU; Domino gives each half its own collectives"});
  a.push_back({fmt::format("--global-batch-size {}", p.global_batch), "sequences per step (Domino runs one micro-batch per step)"});
  precision_args(p, a);
  out += "domino_args=(\n" + pad_lines(a, "  ") + ")\n";
  const bool llama = m.position == sim::Position::rope || m.norm == sim::Norm::rmsnorm;
  out += fmt::format("deepspeed --num_gpus {} --num_nodes {} {} \"${{domino_args[@]}}\" \"$@\"\n", c.node.gpus_per_node, c.nodes,
                     llama ? "pretrain_llama.py" : "pretrain_gpt.py");
  return out;
}

std::string nemo(const ExportInput& in) {
  const auto& p = in.plan;
  const auto& m = in.model;
  const auto& c = in.cluster;
  std::string out = "#!/usr/bin/env bash\n";
  if (!in.headline.empty()) out += "# " + in.headline + "\n";
  out += "# NeMo launch: Hydra overrides of examples/nlp/language_modeling/conf/megatron_gpt_config.yaml for\n"
         "# megatron_gpt_pretraining.py (NeMo 1.x model config keys; NeMo 2 recipes take the same names under trainer.strategy).\n";
  out += pad_lines(environment(in, Framework::nemo), "");
  const StrategyInFramework st = express_strategy(Framework::nemo, p);
  out += strategy_comments(Framework::nemo, st);
  if (p.stack == hardware::Stack::cpp) out += "# Not expressible in NeMo: stack cpp.\n";
  if (!p.pipeline_layers.empty())
    out += fmt::format("# Not expressible exactly: pipeline_layers {} (an uneven split); the overrides below split evenly.\n", fmt::join(p.pipeline_layers, ","));
  out += annotation(Framework::nemo, st, p.stack == hardware::Stack::cpp, p, false, p.attention != p.stack_attention);
  const char* act = m.activation == sim::Activation::swiglu ? "fast-swiglu" : "gelu";
  std::vector<Line> a{
      {fmt::format("trainer.devices={}", c.node.gpus_per_node), "GPUs per node"},
      {fmt::format("trainer.num_nodes={}", c.nodes), "nodes"},
      {fmt::format("trainer.precision={}", p.dtype == common::DType::fp32 ? "32" : p.dtype == common::DType::fp16 ? "16" : "bf16"),
       "precision of weights and activations"},
      {fmt::format("model.megatron_amp_O2={}", p.dtype == common::DType::fp16 || p.dtype == common::DType::fp32 ? "False" : "True"),
       "fp32 main weights and gradients (NeMo refuses O2 with fp16)"},
      {fmt::format("model.fp8={}", p.dtype == common::DType::fp8 ? "True" : "False"), "FP8 GEMMs through TransformerEngine"},
      {fmt::format("model.num_layers={}", m.layers), "transformer layers"},
      {fmt::format("model.hidden_size={}", m.hidden), "hidden size"},
      {fmt::format("model.ffn_hidden_size={}", m.ffn_hidden), "MLP inner size"},
      {fmt::format("model.num_attention_heads={}", m.heads), "query heads"},
      {fmt::format("model.num_query_groups={}", m.kv_heads == m.heads ? std::string("null") : std::to_string(m.kv_heads)), "K/V heads (null: = heads)"},
      {fmt::format("model.encoder_seq_length={}", p.seq_len), "tokens per sequence"},
      {fmt::format("model.max_position_embeddings={}", std::max(p.seq_len, m.seq_len)), "positions"},
      {fmt::format("model.normalization={}", m.norm == sim::Norm::rmsnorm ? "rmsnorm" : "layernorm"), "norm"},
      {fmt::format("model.activation={}", act), "MLP activation"},
      {fmt::format("model.position_embedding_type={}", m.position == sim::Position::rope ? "rope" : "learned_absolute"), "positions"},
      {fmt::format("model.share_embeddings_and_output_weights={}", m.tied_embeddings ? "True" : "False"), "tied LM head"},
      {"model.bias=False", "no linear biases"},
      {fmt::format("model.tensor_model_parallel_size={}", p.tp), "tp"},
      {fmt::format("model.pipeline_model_parallel_size={}", p.pp), p.pp > 1 ? "pipeline stages" : "no pipeline stages"},
      {fmt::format("model.virtual_pipeline_model_parallel_size={}", p.vp > 1 ? std::to_string(p.vp) : std::string("null")),
       p.vp > 1 ? "model chunks per pipeline rank: the interleaved schedule" : "no interleaving"},
      {fmt::format("model.overlap_p2p_comm={}", p.p2p_overlap ? "True" : "False"),
       p.p2p_overlap ? "pipeline transfers overlap compute" : "pipeline transfers block compute"},
      {fmt::format("model.sequence_parallel={}", p.sequence_parallel ? "True" : "False"), "sequence parallelism"},
      {fmt::format("model.micro_batch_size={}", p.micro_batch), "sequences per micro-batch"},
      {fmt::format("model.global_batch_size={}", p.global_batch), fmt::format("sequences per step ({} accumulation step(s))", p.grad_accum_steps())},
  };
  add_strategy_args(st, a);
  if (st.args.empty())  // a strategy NeMo runs by its own keys says them instead
    a.push_back({"model.ub_tp_comm_overlap=False", "no userbuffers overlap (not what slicetune predicted)"});
  out += "nemo_overrides=(\n" + pad_lines(a, "  ") + ")\n";
  out += "# DP gradient buckets: NeMo's O2 optimizer wrapper reduces in its own chunks (grad_allreduce_chunk_size_mb); slicetune's\n"
         "# dp_bucket_mb " + fmt::format("{}", p.dp_bucket_mb) + " has no exact NeMo key.\n";
  out += fmt::format("torchrun --nproc-per-node {} --nnodes {} examples/nlp/language_modeling/megatron_gpt_pretraining.py \"${{nemo_overrides[@]}}\" \"$@\"\n",
                     c.node.gpus_per_node, c.nodes);
  return out;
}

}  // namespace

std::string export_plan(Framework f, const ExportInput& in) {
  switch (f) {
    case Framework::megatron: return megatron(in);
    case Framework::deepspeed_domino: return domino(in);
    case Framework::nemo: return nemo(in);
  }
  return "";
}

}  // namespace bridge
