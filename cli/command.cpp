#include "cli/command.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>

#include "bridge/deepspeed_config.hpp"
#include "bridge/megatron_args.hpp"
#include "common/config_reader.hpp"
#include "common/limits.hpp"
#include "hardware/profile.hpp"
#include "hardware/profiled_cost_model.hpp"
#include "sim/strategy.hpp"

namespace cli {

std::multimap<int, Command>& registry();

bool register_command(int order, std::string name, std::string description, CommandSetup setup) {
  registry().emplace(order, Command{.name = std::move(name), .description = std::move(description), .setup = std::move(setup)});
  return true;
}

GivenFlags::GivenFlags(const CLI::App* cmd) : cmd_(cmd) {
  for (const CLI::Option* o : cmd->get_options())
    for (const std::string& name : o->get_lnames()) by_name_.emplace("--" + name, o);
}

std::size_t GivenFlags::operator()(std::string_view flag) const {
  if (const auto f = by_name_.find(flag); f != by_name_.end()) return f->second->count();
  return cmd_->count(std::string(flag));  // not a long name: CLI11's own lookup
}

void bad_flag(const std::string& flag, const std::string& what) { throw common::ConfigError(flag, "", what); }

int launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(var)) {
      char* end = nullptr;
      const long r = std::strtol(v, &end, 10);
      if (end != v && *end == '\0' && r >= 0 && r < (1L << 30)) return static_cast<int>(r);
    }
  return 0;
}

long long int_flag(const std::string& flag, long long v, long long lo, long long hi) {
  if (v < lo || v > hi) bad_flag(flag, fmt::format("expected an integer in [{}, {}], got {}", lo, hi, v));
  return v;
}

double number_flag(const std::string& flag, double v, double lo, double hi, bool lo_open) {
  if (!std::isfinite(v) || (lo_open ? !(v > lo) : !(v >= lo)) || !(v <= hi))
    bad_flag(flag, fmt::format("expected a finite number in {}{}, {}], got {}", lo_open ? "(" : "[", lo, hi, v));
  return v;
}

PlanDefaultsHelp executor_defaults_help() {
  return {.micro_batch = "row_slices with domino along the batch (one sequence per slice), else 1",
          .dtype = "fp32 on a CPU cluster such as cpu-host, else bf16",
          .stack = "cpp: the executor issues kernels from C++"};
}

void add_target_flags(CLI::App* cmd, TargetFlags& f, bool with_plan, const PlanDefaultsHelp& d) {
  f.cmd = cmd;
  cmd->add_option("--model", f.model, "model name (slicetune list) or YAML file")->capture_default_str();
  cmd->add_option("--cluster", f.cluster, "cluster name (slicetune list) or YAML file")->capture_default_str();
  cmd->add_option("--nodes", f.nodes, "number of nodes (default: the cluster file's)");
  cmd->add_option("--profile", f.profile,
                  "profile file (slicetune profile): price ops from its measured tables; its machine is the cluster unless "
                  "--cluster is given");
  if (!with_plan) return;
  cmd->add_option("--plan", f.plan, "plan YAML file (flags below override it)");
  cmd->add_option("--tp", f.tp, "tensor-parallel size (default 1)");
  cmd->add_option("--tp-layout", f.tp_layout,
                  "tensor-parallel layout: 1d (Megatron-LM, default) | 2d (SUMMA on a q x q grid, tp = q^2) | 2.5d (Tesseract: d layers "
                  "of a q x q grid, tp = q^2 x d)");
  cmd->add_option("--tp-q", f.tp_q, "2d / 2.5d: the grid side q (2d: default sqrt(tp))");
  cmd->add_option("--tp-d", f.tp_d, "2.5d: the grid depth d, which splits the batch (default 1)");
  cmd->add_option("--tp-grid-order", f.tp_grid_order,
                  "2d / 2.5d: row (default: a grid row's ranks adjacent, inside a node first) | col (a grid column's)");
  cmd->add_option("--dp", f.dp, "data-parallel size (default GPUs / (tp x pp))");
  cmd->add_option("--pp", f.pp, "pipeline stages (default 1)");
  cmd->add_option("--vp", f.vp, "model chunks (virtual stages) per pipeline rank: > 1 runs the interleaved schedule (default 1)");
  cmd->add_option("--schedule", f.schedule, "pipeline schedule: 1f1b (default with vp 1) | interleaved (default with vp > 1)");
  cmd->add_option("--pipeline-layers", f.pipeline_layers,
                  "layers per virtual stage, comma-separated (pp x vp entries, e.g. 7,9,9,7; default an even split)");
  cmd->add_option("--p2p-overlap", f.p2p_overlap,
                  "true | false: pipeline transfers overlap compute (default true with the interleaved schedule, as Megatron-LM)");
  cmd->add_option("--micro-batch", f.micro_batch, "sequences per micro-batch (default " + d.micro_batch + ")");
  cmd->add_option("--global-batch", f.global_batch, "sequences per step (default micro_batch x dp)");
  cmd->add_option("--seq-len", f.seq_len, "sequence length (default the model's)");
  cmd->add_option("--dtype", f.dtype, "bf16 | fp16 | fp8 | fp32 (default " + d.dtype + ")");
  cmd->add_flag("--sequence-parallel", f.sequence_parallel, "Megatron sequence parallelism");
  std::string names;
  for (const sim::Strategy* s : sim::strategies())
    names += fmt::format("{}{}{}", names.empty() ? "" : " | ", s->name, s == &sim::default_strategy() ? " (default)" : "");
  cmd->add_option("--strategy", f.strategy, names);
  for (const sim::Knob* k : sim::plan_knobs()) cmd->add_option(std::string(k->flag), f.knobs[std::string(k->flag)], std::string(k->help));
  cmd->add_option("--dp-bucket-mb", f.dp_bucket_mb, "data-parallel gradient bucket size in MB (default 25)");
  cmd->add_option("--stack", f.stack,
                  "software stack issuing the kernels: eager (Megatron-LM) | cpp (slicetune run) | cuda_graphs (DeepSpeed-Domino)"
                  " | megatron-core (TransformerEngine); each is a cluster-file host.stacks entry (default " + d.stack + ")");
  cmd->add_option("--recompute", f.recompute, "activation recompute: none (default) | selective | full (Megatron-LM --recompute-granularity)");
  cmd->add_option("--recompute-method", f.recompute_method, "with full recompute: uniform (default) | block (--recompute-method)");
  cmd->add_option("--recompute-layers", f.recompute_layers,
                  "with full recompute: layers per checkpointed chunk (uniform) or recomputed layers (block); default 1 (--recompute-num-layers)");
  cmd->add_option("--zero", f.zero, "ZeRO stage 0 (default) | 1 (distributed optimizer) | 2 (+ gradients) | 3 (+ parameters, FSDP)");
  cmd->add_option("--overlap-grad-reduce", f.overlap_grad_reduce, "true (default) | false: reduce gradient buckets during the backward");
  cmd->add_option("--overlap-param-gather", f.overlap_param_gather,
                  "true (default) | false: ZeRO 1/2 gather updated parameters during the next forward");
  cmd->add_option("--attention", f.attention, "attention kernel: flash | unfused | unfused_compiled (default: the stack's, host.stacks.<stack>.attention)");
  cmd->add_option("--megatron-args", f.megatron_args,
                  "the plan (and model shape) as Megatron-LM / DeepSpeed-Domino arguments, e.g. \"--tensor-model-parallel-size 8 "
                  "--micro-batch-size 4 ...\" (a torchrun line or a launch script works too); flags above override it");
  cmd->add_option("--megatron-args-file", f.megatron_args_file, "the same, from a file (a launch script or an argument list)");
  cmd->add_option("--deepspeed-config", f.deepspeed_config, "a DeepSpeed config JSON (batch sizes, precision, ZeRO, bucket) as a plan source");
}

std::optional<bridge::ImportedPlan> TargetFlags::imported() const {
  if (!cmd || !cmd->get_option_no_throw("--megatron-args")) return std::nullopt;
  std::optional<bridge::ImportedPlan> out;
  auto add = [&](bridge::ImportedPlan p) {
    if (out) out->merge(p);
    else out = std::move(p);
  };
  const GivenFlags given(cmd);
  if (given("--megatron-args")) add(bridge::parse_megatron_args(megatron_args, "--megatron-args"));
  if (given("--megatron-args-file")) add(bridge::parse_megatron_args(common::read_text_file(megatron_args_file), megatron_args_file));
  if (given("--deepspeed-config")) add(bridge::parse_deepspeed_config(common::read_text_file(deepspeed_config), deepspeed_config));
  return out;
}

sim::Target TargetFlags::resolve(bool check) const {
  sim::TargetInput in = input();
  if (auto imp = imported()) {
    if (!cmd->count("--model") && imp->model.complete()) in.model.clear();
    return bridge::resolve_imported(*imp, in, check);
  }
  return sim::resolve_target(in, check);
}

std::unique_ptr<hardware::CostModel> TargetFlags::cost_model(const hardware::ClusterSpec& c, hardware::Stack stack) const {
  return hardware::make_cost_model(c, profile, stack);
}

sim::TargetInput TargetFlags::input() const {
  const GivenFlags given(cmd);
  sim::TargetInput in;
  in.model = model;
  in.cluster = cluster;
  if (!profile.empty() && !given("--cluster")) in.cluster_spec = hardware::load_profile(profile).cluster;
  if (given("--nodes")) in.nodes = nodes;
  if (!cmd->get_option_no_throw("--plan")) return in;
  in.plan_file = plan;
  auto& p = in.flags;
  namespace lim = common::limits;
  auto positive = [&](const char* flag, long long v, std::optional<int>& dst, std::int64_t hi) {
    if (!given(flag)) return;
    dst = static_cast<int>(int_flag(flag, v, 1, hi));  // range-checked before narrowing
  };
  positive("--tp", tp, p.tp, lim::kMaxGpus);
  positive("--dp", dp, p.dp, lim::kMaxGpus);
  if (given("--tp-layout") && !sim::parse_tp_layout(tp_layout, p.tp_layout.emplace()))
    bad_flag("--tp-layout", "expected 1d | 2d | 2.5d, got '" + tp_layout + "'");
  positive("--tp-q", tp_q, p.tp_q, 64);
  positive("--tp-d", tp_d, p.tp_d, lim::kMaxGpus);
  if (given("--tp-grid-order") && !sim::parse_tp_grid_order(tp_grid_order, p.tp_grid_order.emplace()))
    bad_flag("--tp-grid-order", "expected row | col, got '" + tp_grid_order + "'");
  positive("--pp", pp, p.pp, lim::kMaxLayers);
  positive("--vp", vp, p.vp, lim::kMaxLayers);
  if (given("--schedule")) {
    sim::PipelineSchedule sc;
    if (!sim::parse_pipeline_schedule(schedule, sc)) bad_flag("--schedule", "expected 1f1b | interleaved, got '" + schedule + "'");
    p.schedule = sc;
  }
  if (given("--pipeline-layers")) {
    std::vector<int> layers;
    std::string_view rest = pipeline_layers;
    while (true) {
      const auto comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      int v = 0;
      const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
      if (ec != std::errc() || end != item.data() + item.size() || v <= 0 || v > lim::kMaxLayers)
        bad_flag("--pipeline-layers",
                 fmt::format("expected layer counts from 1 to {} separated by commas (e.g. 7,9,9,7), got '{}'", lim::kMaxLayers, pipeline_layers));
      layers.push_back(v);
      if (layers.size() > static_cast<std::size_t>(lim::kMaxLayers))
        bad_flag("--pipeline-layers", fmt::format("expected at most {} stages", lim::kMaxLayers));
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
    p.pipeline_layers = std::move(layers);
  }
  if (given("--p2p-overlap")) {
    if (p2p_overlap != "true" && p2p_overlap != "false") bad_flag("--p2p-overlap", "expected true | false, got '" + p2p_overlap + "'");
    p.p2p_overlap = p2p_overlap == "true";
  }
  positive("--micro-batch", micro_batch, p.micro_batch, lim::kMaxMicroBatch);
  positive("--global-batch", global_batch, p.global_batch, lim::kMaxGlobalBatch);
  if (given("--seq-len")) p.seq_len = int_flag("--seq-len", seq_len, 1, lim::kMaxSeqLen);
  if (given("--dtype")) {
    common::DType t;
    if (!common::parse_dtype(dtype, t)) bad_flag("--dtype", "expected bf16 | fp16 | fp8 | fp32, got '" + dtype + "'");
    p.dtype = t;
  }
  if (given("--sequence-parallel")) p.sequence_parallel = sequence_parallel;
  if (given("--strategy")) p.strategy = &sim::find_strategy(strategy, "--strategy", "");
  for (const sim::Knob* k : sim::plan_knobs()) {
    const std::string flag(k->flag);
    if (!given(flag)) continue;
    const std::string& text = knobs.at(flag);
    const auto v = k->parse(text);
    if (!v) bad_flag(flag, fmt::format("expected {}, got '{}'", k->expected(), text));
    k->set_input(p, *v);
  }
  if (given("--dp-bucket-mb")) p.dp_bucket_mb = number_flag("--dp-bucket-mb", dp_bucket_mb, 0, lim::kMaxDpBucketMb, true);
  if (given("--stack")) {
    hardware::Stack s;
    if (!hardware::parse_stack(stack, s)) bad_flag("--stack", "expected eager | cpp | cuda_graphs | megatron-core, got '" + stack + "'");
    p.stack = s;
  }
  if (given("--recompute") && !sim::parse_recompute(recompute, p.recompute.emplace()))
    bad_flag("--recompute", "expected none | selective | full, got '" + recompute + "'");
  if (given("--recompute-method") && !sim::parse_recompute_method(recompute_method, p.recompute_method.emplace()))
    bad_flag("--recompute-method", "expected uniform | block, got '" + recompute_method + "'");
  positive("--recompute-layers", recompute_layers, p.recompute_layers, lim::kMaxLayers);
  if (given("--zero")) {  // range-checked (64 bits) before narrowing
    if (zero < 0 || zero > sim::kMaxZeroStage) bad_flag("--zero", fmt::format("expected a ZeRO stage 0 | 1 | 2 | 3, got {}", zero));
    p.zero = static_cast<int>(zero);
  }
  auto boolean = [&](const char* flag, const std::string& text, std::optional<bool>& dst) {
    if (!given(flag)) return;
    if (text == "true" || text == "on" || text == "1") dst = true;
    else if (text == "false" || text == "off" || text == "0") dst = false;
    else bad_flag(flag, "expected true | false, got '" + text + "'");
  };
  boolean("--overlap-grad-reduce", overlap_grad_reduce, p.overlap_grad_reduce);
  boolean("--overlap-param-gather", overlap_param_gather, p.overlap_param_gather);
  if (given("--attention") && !hardware::parse_attention_kernel(attention, p.attention.emplace()))
    bad_flag("--attention", "expected flash | unfused | unfused_compiled, got '" + attention + "'");
  return in;
}

}  // namespace cli
