// How Megatron-LM, NeMo and DeepSpeed-Domino run te-pipelined, te-bulk, async-tp and fused (issue 14): the declarations in
// bridge/strategy_support.cpp, followed through export, import and check. The expected arguments come from the frameworks'
// sources, cited per check (read in Megatron-LM d98e8a6, NeMo 8cfedd7, TransformerEngine d0067d0, DeepSpeedExamples 83757d9).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>

#include "bridge/check.hpp"
#include "bridge/export.hpp"
#include "bridge/megatron_args.hpp"
#include "bridge/strategy_support.hpp"
#include "cli_run.hpp"
#include "sim/strategy.hpp"

namespace {

using F = bridge::Framework;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// The argument lines of an export, without their comments, in order (e.g. "--tp-comm-overlap").
std::vector<std::string> argument_lines(const std::string& script) {
  std::vector<std::string> out;
  std::size_t p = 0;
  while (p < script.size()) {
    const std::size_t e = std::min(script.find('\n', p), script.size());
    const std::string line = script.substr(p, e - p);
    p = e + 1;
    if (!line.starts_with("  ")) continue;
    const std::size_t hash = line.find("  #", 2);
    std::string arg = line.substr(2, hash == std::string::npos ? std::string::npos : hash - 2);
    while (!arg.empty() && arg.back() == ' ') arg.pop_back();
    out.push_back(arg);
  }
  return out;
}

bool has_line(const std::vector<std::string>& lines, const std::string& arg) {
  return std::find(lines.begin(), lines.end(), arg) != lines.end();
}

struct Setup {
  sim::ModelSpec model = sim::load_model("gpt3-13b");
  hardware::ClusterSpec cluster = hardware::load_cluster("dgx-h100");
  /// tp 8 with sequence parallelism (all three need it), micro-batch 2 (even, for DeepSpeed-Domino's own rules; fits 80 GB), one
  /// micro-batch per step
  sim::Plan plan(const sim::Strategy& s, sim::PlanInput in = {}) const {
    in.tp = 8;
    in.micro_batch = 2;
    in.global_batch = 2;
    in.sequence_parallel = true;
    in.strategy = &s;
    return sim::resolve_plan(model, cluster, in);
  }
  std::string script(F f, const sim::Plan& p) const { return bridge::export_plan(f, {.model = model, .cluster = cluster, .plan = p}); }
  std::vector<bridge::Finding> check(F f, const sim::Plan& p) const {
    return bridge::preflight(f, {.model = model, .cluster = cluster, .plan = p});
  }
};

sim::Plan import_plan(const std::string& script) {
  const auto imp = bridge::parse_megatron_args(script, "export");
  sim::TargetInput in;
  in.cluster = "dgx-h100";
  return bridge::resolve_imported(imp, in).plan;
}

const bridge::Finding* finding(const std::vector<bridge::Finding>& fs, const std::string& rule) {
  for (const auto& x : fs)
    if (x.rule == rule) return &x;
  return nullptr;
}

bool says_no_declaration(const std::vector<bridge::Finding>& fs) {
  for (const auto& x : fs)
    if (contains(x.message, "no declaration")) return true;
  return false;
}

}  // namespace

TEST_CASE("te-pipelined to Megatron-LM: --tp-comm-overlap with the bulk overlaps switched off, TE's default splits and SMs") {
  const Setup s;
  const sim::Plan plan = s.plan(sim::strategy_te_pipelined());  // num_splits 4, num_sm 16: the knobs' defaults
  const std::string script = s.script(F::megatron, plan);
  INFO(script);
  const auto lines = argument_lines(script);
  // megatron/core/model_parallel_config.py: tp_comm_overlap turns on tp_comm_overlap_ag / _rs (te-pipelined's ring exchange and
  // pipelined ReduceScatter) and tp_comm_bulk_dgrad / _wgrad (te-bulk's); megatron/training/arguments.py's store_false
  // --disable-tp-comm-bulk-dgrad / --disable-tp-comm-bulk-wgrad switch the bulk ones off
  CHECK(has_line(lines, "--tp-comm-overlap"));
  CHECK(has_line(lines, "--disable-tp-comm-bulk-dgrad"));
  CHECK(has_line(lines, "--disable-tp-comm-bulk-wgrad"));
  CHECK_FALSE(has_line(lines, "--disable-tp-comm-overlap-ag"));
  CHECK_FALSE(has_line(lines, "--disable-tp-comm-overlap-rs"));
  CHECK(has_line(lines, "--sequence-parallel"));  // arguments.py validate_args asserts it under --tp-comm-overlap
  // TE initialize_ub get_default_config: 4 splits, 16 SMs for proj_fprop / fc2_fprop without a --tp-comm-overlap-cfg YAML
  CHECK(contains(script, "# num_splits 4: Megatron-LM runs this (TE's default for proj_fprop / fc2_fprop without a "
                         "--tp-comm-overlap-cfg YAML"));
  CHECK(contains(script, "# num_sm 16: Megatron-LM runs this"));
  CHECK_FALSE(contains(script, "Not expressible"));
  CHECK_FALSE(contains(script, "strategy=te-pipelined"));  // the arguments select it
  // round trip: the arguments select te-pipelined and nothing else
  const auto imp = bridge::parse_megatron_args(script, "export");
  CHECK(imp.plan.strategy == &sim::strategy_te_pipelined());
  CHECK(imp.unknown.empty());
  CHECK(import_plan(script) == plan);
  // check: no "no declaration" warning, no error
  const auto findings = s.check(F::megatron, plan);
  INFO(bridge::check_table(findings));
  CHECK_FALSE(says_no_declaration(findings));
  CHECK_FALSE(bridge::has_errors(findings));
}

TEST_CASE("te-pipelined away from TE's defaults: carried for the import, a gap with its rule in check") {
  const Setup s;
  const sim::Plan plan = s.plan(sim::strategy_te_pipelined(), {.num_splits = 2, .num_sm = 32});
  for (F f : {F::megatron, F::nemo}) {
    const std::string script = s.script(f, plan);
    INFO(script);
    // TE runs 4 x 16 unless the userbuffers YAML says otherwise, and the export writes none
    CHECK(contains(script, fmt::format("# Not expressible in {}: num_splits 2: {} runs num_splits 4 only", bridge::display_name(f),
                                       bridge::display_name(f))));
    CHECK(contains(script, fmt::format("# Not expressible in {}: num_sm 32: {} runs num_sm 16 only", bridge::display_name(f),
                                       bridge::display_name(f))));
    CHECK(contains(script, "num_splits=2 num_sm=32"));
    const auto findings = s.check(f, plan);
    REQUIRE(finding(findings, "te-pipelined-num-splits"));
    CHECK(finding(findings, "te-pipelined-num-splits")->severity == bridge::Severity::error);
    CHECK(finding(findings, "te-pipelined-num-sm")->severity == bridge::Severity::error);
  }
  CHECK(import_plan(s.script(F::megatron, plan)) == plan);  // the # slicetune: line carries 2 and 32
}

TEST_CASE("te-bulk to Megatron-LM: --tp-comm-overlap with the pipelined and ring-exchange overlaps switched off") {
  const Setup s;
  const sim::Plan plan = s.plan(sim::strategy_te_bulk());  // te_bulk_sms 16
  const std::string script = s.script(F::megatron, plan);
  INFO(script);
  const auto lines = argument_lines(script);
  // --disable-tp-comm-overlap-ag / -rs (megatron/training/arguments.py, store_false of tp_comm_overlap_ag / _rs) leave
  // TE's ub_bulk_dgrad / ub_bulk_wgrad on (megatron/core/extensions/transformer_engine.py TELayerNormColumnParallelLinear)
  CHECK(has_line(lines, "--tp-comm-overlap"));
  CHECK(has_line(lines, "--disable-tp-comm-overlap-ag"));
  CHECK(has_line(lines, "--disable-tp-comm-overlap-rs"));
  CHECK_FALSE(has_line(lines, "--disable-tp-comm-bulk-dgrad"));
  CHECK_FALSE(has_line(lines, "--disable-tp-comm-bulk-wgrad"));
  // TE get_default_config: num_sm 16 for the bulk sites
  CHECK(contains(script, "# te_bulk_sms 16: Megatron-LM runs this (TE's default for qkv_dgrad, qkv_wgrad, fc1_dgrad, fc1_wgrad"));
  CHECK_FALSE(contains(script, "Not expressible"));
  const auto imp = bridge::parse_megatron_args(script, "export");
  CHECK(imp.plan.strategy == &sim::strategy_te_bulk());
  CHECK(import_plan(script) == plan);
  const auto findings = s.check(F::megatron, plan);
  INFO(bridge::check_table(findings));
  CHECK_FALSE(says_no_declaration(findings));
  CHECK_FALSE(bridge::has_errors(findings));
  // te_bulk_sms 4: TE would run 16
  const sim::Plan four = s.plan(sim::strategy_te_bulk(), {.te_bulk_sms = 4});
  CHECK(contains(s.script(F::megatron, four), "# Not expressible in Megatron-LM: te_bulk_sms 4: Megatron-LM runs te_bulk_sms 16 only"));
  CHECK(import_plan(s.script(F::megatron, four)) == four);
  REQUIRE(finding(s.check(F::megatron, four), "te-bulk-te-bulk-sms"));
}

TEST_CASE("te-pipelined and te-bulk to NeMo: TE layers, ub_tp_comm_overlap, and the other method's switches as Hydra additions") {
  const Setup s;
  // megatron_gpt_config.yaml: transformer_engine False (get_specs builds TE's layers only with it), ub_tp_comm_overlap False;
  // tp_comm_bulk_* / tp_comm_overlap_* are TransformerConfig fields absent from the YAML (build_transformer_config copies
  // them from the model config), hence Hydra's +
  const auto pipelined = argument_lines(s.script(F::nemo, s.plan(sim::strategy_te_pipelined())));
  for (const char* a : {"model.transformer_engine=True", "model.ub_tp_comm_overlap=True", "+model.tp_comm_bulk_dgrad=False",
                        "+model.tp_comm_bulk_wgrad=False", "model.sequence_parallel=True"})
    CHECK_MESSAGE(has_line(pipelined, a), a);
  CHECK_FALSE(has_line(pipelined, "model.ub_tp_comm_overlap=False"));
  const auto bulk = argument_lines(s.script(F::nemo, s.plan(sim::strategy_te_bulk())));
  for (const char* a : {"model.transformer_engine=True", "model.ub_tp_comm_overlap=True", "+model.tp_comm_overlap_ag=False",
                        "+model.tp_comm_overlap_rs=False"})
    CHECK_MESSAGE(has_line(bulk, a), a);
  for (const sim::Strategy* st : {&sim::strategy_te_pipelined(), &sim::strategy_te_bulk()}) {
    const auto findings = s.check(F::nemo, s.plan(*st));
    INFO(st->name << "\n" << bridge::check_table(findings));
    CHECK_FALSE(says_no_declaration(findings));
    CHECK_FALSE(bridge::has_errors(findings));
  }
}

TEST_CASE("async-tp: no framework runs it; each says what it runs instead, the plan is carried, check refuses it") {
  const Setup s;
  const sim::Plan plan = s.plan(sim::strategy_async_tp());
  // Megatron-LM, NeMo: no symmetric-memory fused_all_gather_matmul / fused_matmul_reduce_scatter, no micro_pipeline_tp in
  // their code; DeepSpeed-Domino: no sequence parallelism (domino/arguments.py)
  const std::vector<std::pair<F, std::string>> instead{
      {F::megatron, "strategy async-tp (async-tp): Megatron-LM has no asynchronous TP"},
      {F::nemo, "strategy async-tp (async-tp): NeMo has no asynchronous TP"},
      {F::deepspeed_domino, "strategy async-tp (async-tp): DeepSpeed-Domino has no sequence parallelism"}};
  for (const auto& fi : instead) {
    const F f = fi.first;
    const std::string& expected = fi.second;
    const std::string script = s.script(f, plan);
    INFO(bridge::to_string(f) << ":\n" << script);
    CHECK(contains(script, fmt::format("# Not expressible in {}: {}", bridge::display_name(f), expected)));
    CHECK(contains(script, "strategy=async-tp"));
    const auto findings = s.check(f, plan);
    const bridge::Finding* x = finding(findings, "strategy-async-tp");
    REQUIRE(x);
    CHECK(x->severity == bridge::Severity::error);  // declared: the framework would silently run another schedule
    CHECK(x->message.starts_with(expected));
    CHECK_FALSE(says_no_declaration(findings));
    if (f != F::nemo) CHECK(bridge::parse_megatron_args(script, "export").plan.strategy == &sim::strategy_async_tp());
  }
  CHECK(import_plan(s.script(F::megatron, plan)) == plan);  // carried by the # slicetune: line
}

TEST_CASE("fused: no framework runs FLUX's kernels; each says what it runs instead, the plan is carried, check refuses it") {
  const Setup s;
  const sim::Plan plan = s.plan(sim::strategy_fused());
  // Megatron-LM d98e8a6, NeMo 8cfedd7: no import of bytedance's flux, no GemmRS / AGKernel (NeMo's `flux` is the diffusion
  // model); DeepSpeed-Domino: no sequence parallelism (domino/arguments.py)
  const std::vector<std::pair<F, std::string>> instead{
      {F::megatron, "strategy fused (fused): Megatron-LM has no FLUX kernels"},
      {F::nemo, "strategy fused (fused): NeMo has no FLUX kernels"},
      {F::deepspeed_domino, "strategy fused (fused): DeepSpeed-Domino has no sequence parallelism"}};
  for (const auto& fi : instead) {
    const F f = fi.first;
    const std::string& expected = fi.second;
    const std::string script = s.script(f, plan);
    INFO(bridge::to_string(f) << ":\n" << script);
    CHECK(contains(script, fmt::format("# Not expressible in {}: {}", bridge::display_name(f), expected)));
    CHECK(contains(script, "strategy=fused"));
    // no argument selects another strategy's overlap in its place
    CHECK_FALSE(has_line(argument_lines(script), "--tp-comm-overlap"));
    const auto findings = s.check(f, plan);
    const bridge::Finding* x = finding(findings, "strategy-fused");
    REQUIRE(x);
    CHECK(x->severity == bridge::Severity::error);  // declared: the framework would silently run another schedule
    CHECK(x->message.starts_with(expected));
    CHECK_FALSE(says_no_declaration(findings));
    if (f != F::nemo) CHECK(bridge::parse_megatron_args(script, "export").plan.strategy == &sim::strategy_fused());
  }
  CHECK(import_plan(s.script(F::megatron, plan)) == plan);  // carried by the # slicetune: line
}

TEST_CASE("DeepSpeed-Domino runs neither TE overlap: a declared gap, carried for the import") {
  const Setup s;
  for (const sim::Strategy* st : {&sim::strategy_te_pipelined(), &sim::strategy_te_bulk()}) {
    const sim::Plan plan = s.plan(*st);
    const std::string script = s.script(F::deepspeed_domino, plan);
    INFO(script);
    // domino/arguments.py: no --sequence-parallel, no --tp-comm-overlap; its layers are DominoTransformerLayer, not TE's
    CHECK(contains(script, "DeepSpeed-Domino has no sequence parallelism and no TransformerEngine layers"));
    CHECK_FALSE(contains(script, "--tp-comm-overlap "));
    CHECK(bridge::parse_megatron_args(script, "export").plan.strategy == st);
    const auto findings = s.check(F::deepspeed_domino, plan);
    const bridge::Finding* x = finding(findings, "strategy-" + std::string(st->name));
    REQUIRE(x);
    CHECK(x->severity == bridge::Severity::error);
    CHECK_FALSE(says_no_declaration(findings));
  }
}

TEST_CASE("Megatron-LM's userbuffers switches import as the strategy whose set they are, and no other set selects one") {
  const std::string base = "--tensor-model-parallel-size 8 --sequence-parallel --bf16 ";
  CHECK(bridge::parse_megatron_args(base + "--tp-comm-overlap --disable-tp-comm-bulk-wgrad --disable-tp-comm-bulk-dgrad", "a")
            .plan.strategy == &sim::strategy_te_pipelined());  // order does not matter
  CHECK(bridge::parse_megatron_args(base + "--disable-tp-comm-overlap-rs --tp-comm-overlap --disable-tp-comm-overlap-ag", "a")
            .plan.strategy == &sim::strategy_te_bulk());
  // current Megatron-LM generates these switches from ModelParallelConfig with two names each, --no-X and --disable-X
  // (megatron/training/argument_utils.py ArgumentGroupFactory._build_argparse_kwargs_from_field)
  CHECK(bridge::parse_megatron_args(base + "--tp-comm-overlap --no-tp-comm-bulk-dgrad --no-tp-comm-bulk-wgrad", "a").plan.strategy ==
        &sim::strategy_te_pipelined());
  // --tp-comm-overlap alone: TE runs bulk and pipelined methods together (model_parallel_config.py defaults), which no strategy
  // models; said, not guessed
  const auto both = bridge::parse_megatron_args(base + "--tp-comm-overlap", "a");
  CHECK_FALSE(both.plan.strategy);
  REQUIRE(both.not_modelled.size() >= 1);
  bool said = false;
  for (const auto& nm : both.not_modelled)
    said |= nm.name == "--tp-comm-overlap" &&
            contains(nm.what, "te-pipelined is --tp-comm-overlap --disable-tp-comm-bulk-dgrad --disable-tp-comm-bulk-wgrad") &&
            contains(nm.what, "te-bulk is --tp-comm-overlap --disable-tp-comm-overlap-ag --disable-tp-comm-overlap-rs");
  CHECK(said);
  // one bulk overlap off, the other on: no strategy either
  CHECK_FALSE(bridge::parse_megatron_args(base + "--tp-comm-overlap --disable-tp-comm-bulk-dgrad", "a").plan.strategy);
  // the disabling switches take no value: the next word is not swallowed
  const auto imp = bridge::parse_megatron_args("--tp-comm-overlap --disable-tp-comm-bulk-dgrad --disable-tp-comm-bulk-wgrad 8", "a");
  CHECK(imp.unknown.size() == 1);
}

TEST_CASE("slicetune check on an exported te-pipelined plan: no warning that nothing declares it") {
  const CliRun r = run_cli(
      "check --framework megatron --model gpt3-13b --tp 8 --micro-batch 1 --sequence-parallel --strategy te-pipelined --no-environment "
      "--all");
  INFO(r.out << r.err);
  CHECK(r.rc == 0);
  CHECK_FALSE(contains(r.out, "no declaration"));
}
