#include "bridge/megatron_args.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <set>

#include "bridge/shell_words.hpp"
#include "bridge/strategy_support.hpp"
#include "common/config_reader.hpp"
#include "common/limits.hpp"

namespace bridge {

namespace {

// The flag tables below are built on first use, not as the program starts: every command would
// otherwise pay for them (157,000 instructions, 4 % of a `simulate`'s; callgrind).

// Flags that take no value (everything else listed below takes one). Megatron-LM argument
// names (megatron/training/arguments.py and the TransformerConfig fields it turns into flags).
const std::set<std::string>& switches() {
  static const std::set<std::string> s{
    "--sequence-parallel", "--bf16", "--fp16", "--swiglu", "--group-query-attention", "--untie-embeddings-and-output-weights",
    "--disable-bias-linear", "--add-bias-linear", "--overlap-grad-reduce", "--overlap-param-gather", "--use-distributed-optimizer",
    "--recompute-activations", "--tp-comm-overlap", "--tp-comm-overlap-rs-dgrad", "--enable-cuda-graph", "--external-cuda-graph", "--accumulate-allreduce-grads-in-fp32",
    "--grad-reduce-in-bf16", "--use-rotary-position-embeddings", "--squared-relu", "--openai-gelu", "--quick-geglu", "--llama-model",
    "--no-gradient-accumulation-fusion", "--use-flash-attn", "--use-mcore-models", "--use-legacy-models", "--no-masked-softmax-fusion",
    "--no-bias-gelu-fusion", "--no-bias-dropout-fusion", "--no-bias-swiglu-fusion", "--no-rope-fusion", "--mock-data",
    "--no-async-tensor-model-parallel-allreduce", "--distribute-saved-activations", "--no-position-embedding", "--exit-on-missing-checkpoint",
    "--no-save-optim", "--no-save-rng", "--no-load-optim", "--no-load-rng", "--log-throughput", "--log-timers-to-tensorboard",
    "--use-checkpoint-args", "--standalone", "--apply-layernorm-1p", "--no-persist-layer-norm", "--fp8-param-gather",
    "--use-torch-fsdp2", "--use-megatron-fsdp", "--overlap-p2p-communication", "--deterministic-mode", "--no-create-attention-mask-in-dataloader",
    "--calculate-per-token-loss", "--ddp-average-in-collective", "--check-for-nan-in-loss-and-grad", "--bf16-reduce"};
  return s;
}

// Flags that do not change the cost of one training step: optimisation hyper-parameters, data,
// tokenizer, logging, checkpoints, kernel fusions the cluster file's stack already describes.
const std::set<std::string>& ignored_flags() {
  static const std::set<std::string> s{
    "--lr", "--min-lr", "--lr-decay-style", "--lr-decay-iters", "--lr-decay-samples", "--lr-warmup-fraction", "--lr-warmup-iters",
    "--lr-warmup-samples", "--weight-decay", "--start-weight-decay", "--end-weight-decay", "--clip-grad", "--adam-beta1", "--adam-beta2",
    "--adam-eps", "--init-method-std", "--train-iters", "--train-samples", "--data-path", "--split", "--vocab-file", "--merge-file",
    "--tokenizer-type", "--tokenizer-model", "--log-interval", "--save", "--load", "--save-interval", "--eval-interval", "--eval-iters",
    "--seed", "--hidden-dropout", "--attention-dropout", "--norm-epsilon", "--layernorm-epsilon", "--rotary-base", "--rotary-percent",
    "--make-vocab-size-divisible-by", "--distributed-backend", "--tensorboard-dir", "--wandb-project", "--wandb-exp-name",
    "--no-gradient-accumulation-fusion", "--use-mcore-models", "--use-legacy-models", "--transformer-impl",
    "--no-masked-softmax-fusion", "--no-bias-gelu-fusion", "--no-bias-dropout-fusion", "--no-bias-swiglu-fusion",
    "--no-rope-fusion", "--mock-data", "--exit-on-missing-checkpoint", "--no-save-optim", "--no-save-rng", "--no-load-optim",
    "--no-load-rng", "--log-throughput", "--log-timers-to-tensorboard", "--use-checkpoint-args", "--data-impl", "--local_rank",
    "--exit-interval", "--exit-duration-in-mins", "--ckpt-format", "--dataloader-type", "--num-workers", "--fp8-recipe",
    "--fp8-amax-history-len", "--fp8-amax-compute-algo", "--fp8-margin", "--loss-scale", "--initial-loss-scale", "--min-loss-scale",
    "--loss-scale-window", "--hysteresis", "--optimizer", "--deterministic-mode", "--check-for-nan-in-loss-and-grad",
    "--no-create-attention-mask-in-dataloader", "--apply-layernorm-1p", "--no-persist-layer-norm", "--calculate-per-token-loss",
    "--ddp-average-in-collective", "--cuda-graph-scope", "--manual-gc", "--manual-gc-interval"};
  return s;
}

struct Reader {
  const std::string& source;
  ImportedPlan& out;

  [[noreturn]] void fail(const std::string& flag, const std::string& what) const { throw common::ConfigError(source, flag, what); }

  long long integer(const std::string& flag, const std::string& v, long long lo = 1) const {
    char* end = nullptr;
    errno = 0;
    const long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || end == v.c_str() || *end != '\0' || errno == ERANGE || x < lo || x > std::numeric_limits<int>::max())
      fail(flag, fmt::format("expected an integer >= {} below 2^31, got '{}'", lo, v));
    return x;
  }
  double number(const std::string& flag, const std::string& v) const {
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || end == v.c_str() || *end != '\0' || !std::isfinite(x)) fail(flag, fmt::format("expected a finite number, got '{}'", v));
    return x;
  }
  void modelled(const std::string& f, const std::string& v, const std::string& what) { out.modelled.push_back({f, v, what}); }
  void not_modelled(const std::string& f, const std::string& v, const std::string& why) { out.not_modelled.push_back({f, v, why}); }
  void ignored(const std::string& f, const std::string& v, const std::string& why) { out.ignored.push_back({f, v, why}); }
};

bool is_assignment(const std::string& w) {
  const auto eq = w.find('=');
  if (eq == std::string::npos || eq == 0 || w[0] == '-') return false;
  for (std::size_t i = 0; i < eq; ++i)
    if (!(std::isalnum(static_cast<unsigned char>(w[i])) || w[i] == '_')) return false;
  return !std::isdigit(static_cast<unsigned char>(w[0]));
}

// Launcher flags (torchrun / python -m torch.distributed.run / deepspeed) that take a value.
const std::set<std::string>& launcher_valued() {
  static const std::set<std::string> s{
    "--nproc-per-node", "--nproc_per_node", "--nnodes", "--node-rank", "--node_rank", "--master-addr", "--master_addr",
    "--master-port", "--master_port", "--rdzv-backend", "--rdzv_backend", "--rdzv-endpoint", "--rdzv_endpoint", "--rdzv-id",
    "--rdzv_id", "--num_gpus", "--num-gpus", "--num_nodes", "--num-nodes", "--hostfile", "--include", "--exclude", "--max-restarts",
    "--max_restarts", "--log-dir", "--log_dir", "--redirects", "--tee", "--local-addr", "--local_addr", "-m"};
  return s;
}

void apply_annotation(const std::string& text, ImportedPlan& out, const std::string& source) {
  // "key=value key=value": plan keys the framework cannot express (written by --export)
  std::string yaml;
  std::size_t p = 0;
  while (p < text.size()) {
    while (p < text.size() && text[p] == ' ') ++p;
    const auto e = std::min(text.find(' ', p), text.size());
    const std::string kv = text.substr(p, e - p);
    p = e;
    if (kv.empty()) continue;
    const auto eq = kv.find('=');
    if (eq == std::string::npos) throw common::ConfigError(source, "# slicetune:", fmt::format("expected key=value, got '{}'", kv));
    const std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
    if (key == "framework") continue;
    yaml += key + ": " + value + "\n";
    out.modelled.push_back({"# slicetune: " + key, value, key + " (a plan key the framework cannot express)"});
  }
  if (!yaml.empty()) out.plan.merge(sim::parse_plan_input(yaml, source + " (# slicetune: annotation)"));
}

}  // namespace

ImportedPlan parse_megatron_args(const std::string& text, const std::string& source) {
  ImportedPlan out;
  out.source = source;
  Reader r{source, out};
  const ShellWords sw = split_shell(text, source);
  const auto& w = sw.words;
  std::size_t i = 0;
  // VAR=value assignments in front (export lines included)
  auto take_assignments = [&] {
    while (i < w.size() && is_assignment(w[i].text)) {
      const auto eq = w[i].text.find('=');
      out.env[w[i].text.substr(0, eq)] = w[i].text.substr(eq + 1);
      ++i;
    }
  };
  take_assignments();
  std::optional<long long> nproc, nnodes;
  auto is_launcher = [](const std::string& t) {
    return t == "torchrun" || t == "python" || t == "python3" || t == "deepspeed" || t == "torch.distributed.run" ||
           t == "torch.distributed.launch" || t.ends_with("/torchrun") || t.ends_with("/python") || t.ends_with("/python3") ||
           t.ends_with("/deepspeed");
  };
  // The launcher (torchrun / python -m torch.distributed.run / deepspeed) and its flags, up to the
  // training script; it may come before the script's flags or after them (a bash array first).
  auto take_launcher = [&] {
    r.ignored(w[i].text, "", "launcher");
    for (++i; i < w.size(); ++i) {
      const std::string& t = w[i].text;
      if (t.ends_with(".py")) {
        r.ignored(t, "", "the training script");
        ++i;
        return;
      }
      if (is_launcher(t)) {
        r.ignored(t, "", "launcher");
        continue;
      }
      std::string name = t, value;
      if (const auto eq = t.find('='); t.starts_with("-") && eq != std::string::npos) {
        name = t.substr(0, eq);
        value = t.substr(eq + 1);
      } else if (launcher_valued().count(t) && i + 1 < w.size()) {
        value = w[++i].text;
      }
      if (name == "--nproc-per-node" || name == "--nproc_per_node" || name == "--num_gpus" || name == "--num-gpus") {
        nproc = r.integer(name, value);
        r.modelled(name, value, "GPUs per node (world size = GPUs per node x nodes)");
      } else if (name == "--nnodes" || name == "--num_nodes" || name == "--num-nodes") {
        nnodes = r.integer(name, value);
        r.modelled(name, value, "nodes");
      } else {
        r.ignored(name, value, "launcher setting");
      }
    }
  };

  // the script's flags
  bool gqa = false, model_flag = false, untie = false, swiglu = false, no_bias = false, add_bias = false;
  std::optional<long long> query_groups, kv_channels, bucket_elements;
  std::optional<std::string> normalization, position;
  bool bf16 = false, fp16 = false, fp8 = false, grad_bf16 = false;
  std::vector<std::string> selectors;  // declared strategy-selecting switches present
  for (; i < w.size(); ++i) {
    std::string name = w[i].text, value;
    if (is_launcher(name)) {
      take_launcher();
      --i;
      continue;
    }
    if (is_assignment(name)) {
      take_assignments();
      --i;
      continue;
    }
    if (name == "$@" || name == "$*") {
      r.ignored(name, "", "the script's own arguments");
      continue;
    }
    if (!name.starts_with("-")) {
      r.out.unknown.push_back({name, "", "a word that is not a flag"});
      continue;
    }
    // Megatron-LM names each store_false switch it generates from a config field both --no-X and
    // --disable-X (megatron/training/argument_utils.py ArgumentGroupFactory): read the first as the second
    if (name.starts_with("--no-") && is_selecting_argument("--disable-" + name.substr(5))) name = "--disable-" + name.substr(5);
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else {
      // a strategy's argument (bridge/strategy_support.cpp): a selecting switch, or a knob with a value
      const bool takes_value = find_argument(name) ? true : is_selecting_argument(name) ? false : !switches().count(name);
      if (takes_value && i + 1 < w.size() && !w[i + 1].text.starts_with("--")) value = w[++i].text;
    }
    out.flags[name] = value;
    if (is_selecting_argument(name)) {  // which strategy is decided by all of them together, below
      selectors.push_back(name);
      continue;
    }
    if (const auto declared = find_argument(name)) {
      const sim::Knob& k = *declared->knob;
      const auto v = k.parse(value);
      if (!v) r.fail(name, fmt::format("expected {} (strategy {}'s {}), got '{}'", k.expected(), declared->strategy->name, k.key, value));
      k.set_input(out.plan, *v);
      r.modelled(name, value, fmt::format("{} (a knob of strategy {})", k.key, declared->strategy->name));
      continue;
    }
    auto pos = [&] { return static_cast<int>(r.integer(name, value)); };
    if (name == "--tensor-model-parallel-size") {
      out.plan.tp = pos();
      r.modelled(name, value, "tp");
    } else if (name == "--pipeline-model-parallel-size") {
      out.pp = pos();
      out.plan.pp = *out.pp;
      r.modelled(name, value, *out.pp == 1 ? "pp 1" : "pp (pipeline stages; the 1F1B schedule unless a virtual pipeline size is given)");
    } else if (name == "--virtual-pipeline-model-parallel-size") {
      out.plan.vp = pos();
      if (*out.plan.vp > 1) out.plan.schedule = sim::PipelineSchedule::interleaved;
      r.modelled(name, value, *out.plan.vp == 1 ? "vp 1" : "vp (model chunks per pipeline rank: the interleaved schedule)");
    } else if (name == "--num-layers-per-virtual-pipeline-stage") {
      out.layers_per_virtual_stage = pos();
      r.modelled(name, value, "vp = layers / (pp x this): the interleaved schedule");
    } else if (name == "--overlap-p2p-communication") {
      out.plan.p2p_overlap = true;
      r.modelled(name, value, "p2p_overlap (pipeline transfers overlap compute)");
    } else if (name == "--context-parallel-size" || name == "--expert-model-parallel-size") {
      if (pos() == 1) r.modelled(name, value, "1 (none, as modelled)");
      else r.not_modelled(name, value, name == "--context-parallel-size" ? "context parallelism is not modelled yet"
                                                                         : "expert parallelism is not modelled yet");
    } else if (name == "--num-experts") {
      r.not_modelled(name, value, "mixture-of-experts layers are not modelled yet");
    } else if (name == "--micro-batch-size") {
      out.plan.micro_batch = pos();
      r.modelled(name, value, "micro_batch");
    } else if (name == "--global-batch-size") {
      out.plan.global_batch = pos();
      r.modelled(name, value, "global_batch");
    } else if (name == "--seq-length") {
      out.plan.seq_len = pos();
      r.modelled(name, value, "seq_len");
    } else if (name == "--sequence-parallel") {
      out.plan.sequence_parallel = true;
      r.modelled(name, value, "sequence_parallel");
    } else if (name == "--bf16") {
      bf16 = true;
    } else if (name == "--fp16") {
      fp16 = true;
    } else if (name == "--fp8-format") {
      if (value != "hybrid" && value != "e4m3") r.fail(name, fmt::format("expected hybrid | e4m3, got '{}'", value));
      fp8 = true;
    } else if (name == "--ddp-bucket-size") {
      bucket_elements = r.integer(name, value);
    } else if (name == "--accumulate-allreduce-grads-in-fp32") {
      r.modelled(name, value, "fp32 gradient reduction (as modelled)");
    } else if (name == "--grad-reduce-in-bf16") {
      grad_bf16 = true;
      r.not_modelled(name, value, "bf16 gradient reduction: slicetune reduces fp32 main gradients (2x the DP bytes)");
    } else if (name == "--overlap-grad-reduce") {
      r.modelled(name, value, "DP gradient buckets reduced during backward (as modelled)");
    } else if (name == "--enable-cuda-graph" || name == "--external-cuda-graph") {
      out.plan.stack = hardware::Stack::cuda_graphs;
      r.modelled(name, value, "stack cuda_graphs");
    } else if (name == "--cuda-graph-impl") {
      if (value == "none") r.modelled(name, value, "no CUDA graphs");
      else if (value == "local" || value == "transformer_engine" || value == "full_iteration") {
        out.plan.stack = hardware::Stack::cuda_graphs;
        r.modelled(name, value, "stack cuda_graphs");
      } else r.fail(name, fmt::format("expected none | local | transformer_engine | full_iteration, got '{}'", value));
    } else if (name == "--recompute-activations") {
      out.plan.recompute = sim::Recompute::selective;
      r.modelled(name, value, "recompute selective (Megatron-LM: --recompute-granularity selective)");
    } else if (name == "--recompute-granularity") {
      sim::Recompute rc;
      if (!sim::parse_recompute(value, rc) || rc == sim::Recompute::none) r.fail(name, fmt::format("expected full | selective, got '{}'", value));
      out.plan.recompute = rc;
      r.modelled(name, value, fmt::format("recompute {}", value));
    } else if (name == "--recompute-method") {
      sim::RecomputeMethod rm;
      if (!sim::parse_recompute_method(value, rm)) r.fail(name, fmt::format("expected uniform | block, got '{}'", value));
      out.plan.recompute_method = rm;
      r.modelled(name, value, fmt::format("recompute_method {}", value));
    } else if (name == "--recompute-num-layers") {
      out.plan.recompute_layers = pos();
      r.modelled(name, value, "recompute_layers");
    } else if (name == "--distribute-saved-activations") {
      r.not_modelled(name, value, "checkpoints split over the TP ranks are not modelled (slicetune keeps each whole)");
    } else if (name == "--use-flash-attn") {
      out.plan.attention = hardware::AttentionKernel::flash;
      r.modelled(name, value, "attention flash");
    } else if (name == "--attention-backend") {
      // Megatron-LM AttnBackend: flash (FlashAttention), fused (cuDNN's fused flash-style kernel),
      // unfused / local (core attention over the score matrix), auto (TransformerEngine picks a fused one)
      if (value == "flash" || value == "fused" || value == "auto") out.plan.attention = hardware::AttentionKernel::flash;
      else if (value == "unfused" || value == "local") out.plan.attention = hardware::AttentionKernel::unfused;
      else r.fail(name, fmt::format("expected flash | fused | unfused | local | auto, got '{}'", value));
      r.modelled(name, value, fmt::format("attention {}", hardware::to_string(*out.plan.attention)));
    } else if (name == "--use-distributed-optimizer") {
      out.plan.zero = 1;
      r.modelled(name, value, "zero 1 (gradients reduce-scattered, optimizer state / dp, parameters all-gathered)");
    } else if (name == "--overlap-param-gather") {
      out.plan.overlap_param_gather = true;
      r.modelled(name, value, "overlap_param_gather (the updated parameters gathered during the next forward)");
    } else if (name == "--tp-comm-overlap-cfg") {
      r.not_modelled(name, value,
                     "the userbuffers YAML is not read: te-pipelined's num_splits / num_sm and te-bulk's te_bulk_sms are taken at "
                     "TE's defaults (4, 16, 16) unless the # slicetune: line or flags say");
    } else if (name == "--tp-comm-overlap-rs-dgrad") {
      r.not_modelled(name, value, "TE's ReduceScatter overlapped with the QKV / FC1 input-gradient GEMM (in place of the bulk overlaps) is not modelled");
    } else if (name == "--num-layers") {
      out.model.layers = pos();
      model_flag = true;
      r.modelled(name, value, "layers");
    } else if (name == "--hidden-size") {
      out.model.hidden = pos();
      model_flag = true;
      r.modelled(name, value, "hidden");
    } else if (name == "--ffn-hidden-size") {
      out.model.ffn_hidden = pos();
      model_flag = true;
      r.modelled(name, value, "ffn_hidden");
    } else if (name == "--num-attention-heads") {
      out.model.heads = pos();
      model_flag = true;
      r.modelled(name, value, "heads");
    } else if (name == "--group-query-attention") {
      gqa = true;
    } else if (name == "--num-query-groups") {
      query_groups = r.integer(name, value);
    } else if (name == "--kv-channels") {
      kv_channels = r.integer(name, value);
    } else if (name == "--vocab-size" || name == "--padded-vocab-size") {
      out.model.vocab = pos();
      model_flag = true;
      r.modelled(name, value, "vocab");
    } else if (name == "--max-position-embeddings") {
      out.model.max_positions = pos();
      r.modelled(name, value, "the model's positions (its default seq_len)");
    } else if (name == "--normalization") {
      if (value != "LayerNorm" && value != "RMSNorm") r.fail(name, fmt::format("expected LayerNorm | RMSNorm, got '{}'", value));
      normalization = value;
    } else if (name == "--swiglu") {
      swiglu = true;
    } else if (name == "--squared-relu" || name == "--openai-gelu" || name == "--quick-geglu") {
      r.not_modelled(name, value, "this activation is priced as GeLU (an element-wise kernel of the same size)");
    } else if (name == "--position-embedding-type") {
      if (value != "learned_absolute" && value != "rope" && value != "none")
        r.not_modelled(name, value, "priced as RoPE (element-wise)");
      position = value;
    } else if (name == "--use-rotary-position-embeddings") {
      position = "rope";
    } else if (name == "--no-position-embedding") {
      position = "none";
    } else if (name == "--untie-embeddings-and-output-weights") {
      untie = true;
    } else if (name == "--disable-bias-linear") {
      no_bias = true;
      r.modelled(name, value, "no linear biases (as modelled)");
    } else if (name == "--add-bias-linear") {
      add_bias = true;
      r.not_modelled(name, value, "linear biases are not modelled (< 0.1 % of the FLOPs)");
    } else if (name == "--llama-model") {
      r.modelled(name, value, "DeepSpeed-Domino's LLaMA layer (RoPE applied in attention)");
    } else if (ignored_flags().count(name)) {
      r.ignored(name, value, "does not change one step's cost");
    } else {
      out.unknown.push_back({name, value, "not a flag slicetune knows"});
    }
  }
  if (!selectors.empty()) {
    const Selection sel = select_strategy(selectors);
    for (const auto& name : selectors) {
      if (sel.strategy) r.modelled(name, "", fmt::format("strategy {}", sel.strategy->name));
      else r.not_modelled(name, "", sel.why);
    }
    if (sel.strategy) out.plan.strategy = sel.strategy;
  }
  if (nproc) {  // both below 2^31: the product fits 64 bits; bounded before it is narrowed
    const long long world = *nproc * nnodes.value_or(1);
    if (world > common::limits::kMaxGpus)
      r.fail("--nproc_per_node", fmt::format("{} x {} nodes = {} processes is more than the {} GPUs slicetune models", *nproc,
                                             nnodes.value_or(1), world, common::limits::kMaxGpus));
    out.world_size = static_cast<int>(world);
  }
  if (nnodes) out.nodes = static_cast<int>(*nnodes);
  if (!out.world_size && out.env.count("WORLD_SIZE")) out.world_size = static_cast<int>(r.integer("WORLD_SIZE", out.env["WORLD_SIZE"]));
  // precision: Megatron-LM trains in fp32 unless --bf16 / --fp16
  if (bf16 && fp16) r.fail("--bf16", "--bf16 and --fp16 are both given (Megatron-LM refuses the pair)");
  out.plan.dtype = fp8 ? common::DType::fp8 : bf16 ? common::DType::bf16 : fp16 ? common::DType::fp16 : common::DType::fp32;
  r.modelled(fp8 ? "--fp8-format" : bf16 ? "--bf16" : fp16 ? "--fp16" : "(no --bf16 / --fp16)", "",
             fmt::format("dtype {}", common::to_string(*out.plan.dtype)));
  if (bucket_elements) {
    // Megatron's DDP bucket counts parameters; slicetune's dp_bucket_mb counts the fp32 main
    // gradients it reduces (4 bytes each; 2 with --grad-reduce-in-bf16)
    const double bytes = grad_bf16 ? 2.0 : 4.0;
    out.plan.dp_bucket_mb = static_cast<double>(*bucket_elements) * bytes / 1e6;
    r.modelled("--ddp-bucket-size", std::to_string(*bucket_elements), fmt::format("dp_bucket_mb {} ({} parameters x {} bytes)",
                                                                                  *out.plan.dp_bucket_mb, *bucket_elements, bytes));
  }
  // pipelined: Megatron-LM exchanges activations with blocking send/recv unless --overlap-p2p-communication
  if (out.pp && *out.pp > 1 && !out.has_flag("--overlap-p2p-communication")) {
    out.plan.p2p_overlap = false;
    r.modelled("(no --overlap-p2p-communication)", "", "p2p_overlap false: the stages' transfers block compute (Megatron-LM's default)");
  }
  if (!out.has_flag("--overlap-grad-reduce") && out.has_flag("--tensor-model-parallel-size")) {
    out.plan.overlap_grad_reduce = false;
    r.modelled("(no --overlap-grad-reduce)", "", "overlap_grad_reduce false: Megatron-LM reduces the gradient buckets after the backward");
  }
  if (out.has_flag("--use-distributed-optimizer") && !out.has_flag("--overlap-param-gather")) {
    out.plan.overlap_param_gather = false;
    r.modelled("(no --overlap-param-gather)", "", "overlap_param_gather false: the updated parameters are gathered after the optimizer");
  }
  // model shape: framework defaults where a flag is absent, once the shape is given at all
  if (model_flag) {
    out.model.norm = normalization.value_or("LayerNorm") == "RMSNorm" ? sim::Norm::rmsnorm : sim::Norm::layernorm;
    r.modelled(normalization ? "--normalization" : "(no --normalization)", normalization.value_or(""),
               fmt::format("norm {}", normalization.value_or("LayerNorm")));
    out.model.activation = swiglu ? sim::Activation::swiglu : sim::Activation::gelu;
    r.modelled(swiglu ? "--swiglu" : "(no --swiglu)", "", swiglu ? "activation swiglu" : "activation gelu");
    const std::string pos = position.value_or("learned_absolute");
    out.model.position = pos == "learned_absolute" ? sim::Position::learned : sim::Position::rope;
    r.modelled(position ? "--position-embedding-type" : "(no --position-embedding-type)", pos,
               pos == "learned_absolute" ? "learned positions" : "position rope");
    out.model.tied_embeddings = !untie;
    r.modelled(untie ? "--untie-embeddings-and-output-weights" : "(no --untie-embeddings-and-output-weights)", "",
               untie ? "untied LM head" : "LM head tied to the embedding");
    if (gqa) {
      if (!query_groups) r.fail("--num-query-groups", "--group-query-attention needs --num-query-groups");
      out.model.kv_heads = static_cast<int>(*query_groups);
      r.modelled("--group-query-attention --num-query-groups", std::to_string(*query_groups), "kv_heads");
    } else if (out.model.heads) {
      out.model.kv_heads = *out.model.heads;
      if (query_groups) r.ignored("--num-query-groups", std::to_string(*query_groups), "without --group-query-attention Megatron-LM ignores it");
    }
    if (kv_channels) {
      if (out.model.hidden && out.model.heads && *kv_channels * *out.model.heads != *out.model.hidden)
        r.not_modelled("--kv-channels", std::to_string(*kv_channels), "head_dim != hidden / heads is not modelled");
      else r.modelled("--kv-channels", std::to_string(*kv_channels), "head_dim (= hidden / heads)");
    }
    if (!no_bias && !add_bias)
      r.not_modelled("(no --disable-bias-linear)", "", "Megatron-LM then adds linear biases; slicetune models none (< 0.1 % of the FLOPs)");
    if (!out.model.ffn_hidden && out.model.hidden) {
      out.model.ffn_hidden = 4 * *out.model.hidden;
      r.modelled("(no --ffn-hidden-size)", "", "ffn_hidden = 4 x hidden (Megatron-LM's default)");
    }
  } else if (gqa || query_groups || normalization || swiglu || position || untie) {
    r.not_modelled("(shape flags without --num-layers / --hidden-size)", "", "ignored unless the model's size is given too");
  }
  if (out.world_size && out.plan.tp) {
    const int model_par = *out.plan.tp * out.pp.value_or(1);
    if (model_par > 0 && *out.world_size % model_par == 0) out.plan.dp = *out.world_size / model_par;
  }
  for (const auto& a : sw.annotations) apply_annotation(a, out, source);
  return out;
}

}  // namespace bridge
