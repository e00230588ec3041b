// slicetune check: each documented incompatible combination is refused with the framework's reason (issue 16).
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "bridge/check.hpp"
#include "bridge/megatron_args.hpp"
#include "sim/strategy.hpp"
#include "cli_run.hpp"

namespace {

struct Case {
  bridge::Framework framework;
  std::string model, cluster;
  sim::PlanInput plan;
  std::string args;  ///< Megatron-LM flags, for rules on flags the plan does not carry
  std::map<std::string, std::string> env;
};

std::vector<bridge::Finding> findings(const Case& c) {
  const sim::ModelSpec m = sim::load_model(c.model);
  const hardware::ClusterSpec cl = hardware::load_cluster(c.cluster);
  std::optional<bridge::ImportedPlan> imp;
  sim::Plan p;
  if (!c.args.empty()) {
    // as slicetune check does: the import's plan, the case's fields over it, unchecked
    imp = bridge::parse_megatron_args(c.args, "args");
    sim::TargetInput in{.model = c.model, .cluster = c.cluster};
    in.flags = c.plan;
    p = bridge::resolve_imported(*imp, in, false).plan;
  } else {
    p = sim::fill_plan(m, cl, c.plan);
  }
  return bridge::preflight(c.framework, {.model = m, .cluster = cl, .plan = p, .imported = imp ? &*imp : nullptr, .environment = c.env});
}

bool has_error(const std::vector<bridge::Finding>& f, const std::string& rule) {
  for (const auto& x : f)
    if (x.rule == rule && x.severity == bridge::Severity::error) return true;
  return false;
}

}  // namespace

TEST_CASE("a plan every framework runs as given has no errors and says which environment it needs") {
  // gpt3-13b on one DGX-H100, tp 8, micro-batch 16 (even), seq 1024, Domino 2 x 1 along the batch: DeepSpeed-Domino's own example
  const Case ok{bridge::Framework::deepspeed_domino, "gpt3-13b", "dgx-h100",
                {.tp = 8, .micro_batch = 16, .row_slices = 2, .seq_len = 1024, .strategy = &sim::strategy_domino()}, "", {}};
  const auto f = findings(ok);
  CHECK_FALSE(bridge::has_errors(f));
  bool env = false;
  for (const auto& x : f) env |= x.severity == bridge::Severity::env && x.message == "export CUDA_DEVICE_MAX_CONNECTIONS=1";
  CHECK(env);
}

TEST_CASE("each documented incompatible combination is refused with its rule and source") {
  using F = bridge::Framework;
  const sim::Strategy* domino = &sim::strategy_domino();
  const sim::Strategy* te_pipelined = &sim::strategy_te_pipelined();
  const sim::Strategy* te_bulk = &sim::strategy_te_bulk();
  const sim::Strategy* async_tp = &sim::strategy_async_tp();
  const sim::Strategy* fused = &sim::strategy_fused();
  // Each case: the one rule it must break (the expected value), and why that is the framework's refusal (the rule's source).
  const std::vector<std::pair<std::string, Case>> cases{
      {"world-size", {F::megatron, "gpt3-13b", "dgx-h100", {.tp = 8, .dp = 2}, "", {}}},                  // 8 x 2 != 8 GPUs
      {"global-batch", {F::megatron, "gpt3-13b", "dgx-h100", {.tp = 4, .micro_batch = 4, .global_batch = 20}, "", {}}},  // 20 % (4 x 2)
      {"heads-tp", {F::megatron, "gpt3-13b", "dgx-h100", {.tp = 16, .dp = 1}, "", {}}},                   // 40 heads / 16
      {"kv-heads-tp", {F::megatron, "llama2-70b", "dgx-h100", {}, "", {}}},  // built below
      {"ffn-tp", {F::megatron, "llama2-7b", "dgx-h100", {}, "", {}}},  // built below
      {"sp-tp1", {F::megatron, "gpt3-2.7b", "dgx-h100", {.tp = 1, .sequence_parallel = true}, "", {}}},
      {"sp-seq-tp", {F::megatron, "gpt3-13b", "dgx-h100", {.tp = 8, .micro_batch = 1, .seq_len = 1020, .sequence_parallel = true}, "", {}}},
      {"max-positions", {F::megatron, "gpt3-13b", "dgx-h100", {}, "--tensor-model-parallel-size 8 --seq-length 4096 --max-position-embeddings 2048", {}}},
      {"fp8-arch", {F::megatron, "gpt3-13b", "dgx-a100", {.tp = 8, .dtype = common::DType::fp8}, "", {}}},
      {"tp-comm-overlap-sp", {F::megatron, "gpt3-13b", "dgx-h100", {}, "--tensor-model-parallel-size 8 --tp-comm-overlap --bf16", {}}},
      {"overlap-param-gather", {F::megatron, "gpt3-13b", "dgx-h100", {}, "--tensor-model-parallel-size 8 --overlap-param-gather --overlap-grad-reduce", {}}},
      {"pp-layers", {F::megatron, "gpt3-13b", "dgx-h100", {}, "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 3", {}}},  // 40 % 3
      {"distribute-saved-activations", {F::megatron, "gpt3-2.7b", "dgx-h100", {}, "--tensor-model-parallel-size 1 --distribute-saved-activations", {}}},
      {"cuda-device-max-connections", {F::megatron, "gpt3-13b", "dgx-h100", {.tp = 8}, "", {{"CUDA_DEVICE_MAX_CONNECTIONS", "8"}}}},
      {"domino-pp", {F::deepspeed_domino, "gpt3-13b", "dgx-h100", {.micro_batch = 16, .strategy = domino}, "--tensor-model-parallel-size 4 --pipeline-model-parallel-size 2", {}}},
      {"domino-sp", {F::deepspeed_domino, "gpt3-13b", "dgx-h100", {.tp = 8, .micro_batch = 16, .sequence_parallel = true, .strategy = domino}, "", {}}},
      {"strategy-none", {F::deepspeed_domino, "gpt3-13b", "dgx-h100", {.tp = 8, .micro_batch = 16}, "", {}}},  // Domino always splits in 2
      {"strategy-domino", {F::megatron, "gpt3-13b", "dgx-h100", {.tp = 8, .micro_batch = 16, .strategy = domino}, "", {}}},  // Megatron-LM does not slice
      {"domino-row-slices", {F::deepspeed_domino, "gpt3-13b", "dgx-h100", {.tp = 8, .micro_batch = 16, .row_slices = 4, .strategy = domino}, "", {}}},
      {"domino-row-axis", {F::deepspeed_domino, "gpt3-13b", "dgx-h100", {.tp = 8, .micro_batch = 16, .strategy = domino, .row_axis = sim::RowAxis::sequence}, "", {}}},
      {"domino-col-slices", {F::deepspeed_domino, "gpt3-13b", "dgx-h100", {.tp = 8, .micro_batch = 16, .row_slices = 2, .col_slices = 2, .strategy = domino}, "", {}}},
      {"domino-odd-batch", {F::deepspeed_domino, "gpt3-13b", "dgx-h100", {.tp = 8, .micro_batch = 3, .row_slices = 2, .strategy = domino, .row_axis = sim::RowAxis::batch}, "", {}}},
      {"domino-accumulation", {F::deepspeed_domino, "gpt3-13b", "dgx-h100", {.tp = 8, .micro_batch = 16, .global_batch = 64, .strategy = domino}, "", {}}},
      {"domino-gqa", {F::deepspeed_domino, "llama2-70b", "dgx-h100", {.tp = 8, .micro_batch = 2, .strategy = domino}, "", {}}},
      {"domino-untied", {F::deepspeed_domino, "meta-llama-3-8b/config.json", "dgx-h100", {.tp = 8, .micro_batch = 2, .strategy = domino}, "", {}}},
      {"none-tp-channels", {F::megatron, "gpt3-13b", "dgx-h100", {.tp = 8, .micro_batch = 16, .tp_channels = 8}, "", {}}},  // no argument pins them
      {"domino-tp-channels", {F::deepspeed_domino, "gpt3-13b", "dgx-h100", {.tp = 8, .micro_batch = 16, .tp_channels = 8, .strategy = domino}, "", {}}},
      {"domino-fp8", {F::deepspeed_domino, "gpt3-13b", "dgx-h100", {.tp = 8, .micro_batch = 16, .dtype = common::DType::fp8, .strategy = domino}, "", {}}},
      {"memory", {F::megatron, "gpt3-175b", "dgx-h100", {.tp = 8, .micro_batch = 1}, "", {}}},  // 175B / 8 GPUs: 16 bytes per parameter alone is 350 GB
      // TE userbuffers' knobs away from TE's defaults (transformer_engine/pytorch/module/base.py initialize_ub
      // get_default_config: num_splits 4, num_sm 16), which the export's arguments cannot change (no ub config YAML)
      {"te-pipelined-num-splits", {F::megatron, "gpt3-13b", "dgx-h100", {.tp = 8, .micro_batch = 1, .num_splits = 2, .sequence_parallel = true, .strategy = te_pipelined}, "", {}}},
      {"te-pipelined-num-sm", {F::nemo, "gpt3-13b", "dgx-h100", {.tp = 8, .micro_batch = 1, .num_sm = 32, .sequence_parallel = true, .strategy = te_pipelined}, "", {}}},
      {"te-bulk-te-bulk-sms", {F::megatron, "gpt3-13b", "dgx-h100", {.tp = 8, .micro_batch = 1, .te_bulk_sms = 4, .sequence_parallel = true, .strategy = te_bulk}, "", {}}},
      // DeepSpeed-Domino has no sequence parallelism and no TransformerEngine layers (domino/arguments.py, language_model.py)
      {"strategy-te-pipelined", {F::deepspeed_domino, "gpt3-13b", "dgx-h100", {.tp = 8, .micro_batch = 16, .global_batch = 16, .sequence_parallel = true, .strategy = te_pipelined}, "", {}}},
      {"strategy-te-bulk", {F::deepspeed_domino, "gpt3-13b", "dgx-h100", {.tp = 8, .micro_batch = 16, .global_batch = 16, .sequence_parallel = true, .strategy = te_bulk}, "", {}}},
      // Megatron-LM has no asynchronous TP (no symmetric-memory fused_all_gather_matmul / fused_matmul_reduce_scatter in megatron/)
      {"strategy-async-tp", {F::megatron, "gpt3-13b", "dgx-h100", {.tp = 8, .micro_batch = 1, .sequence_parallel = true, .strategy = async_tp}, "", {}}},
      // none of them runs FLUX's fused kernels (bytedance/flux's GemmRS / AGKernel appear in neither Megatron-LM's nor NeMo's code)
      {"strategy-fused", {F::nemo, "gpt3-13b", "dgx-h100", {.tp = 8, .micro_batch = 1, .sequence_parallel = true, .strategy = fused}, "", {}}},
  };
  std::set<std::string> refused;
  for (const auto& kv : cases) {
    // named copies, not structured bindings: INFO captures them in a lambda (clang 14 refuses bindings there)
    const std::string& rule = kv.first;
    const auto& c = kv.second;
    if (rule == "kv-heads-tp" || rule == "ffn-tp") continue;  // built below with shapes that break exactly these
    const auto f = findings(c);
    INFO("rule " << rule << ":\n" << bridge::check_table(f));
    CHECK(has_error(f, rule));
    if (has_error(f, rule)) refused.insert(rule);
  }
  // kv-heads-tp: 12 K/V heads over tp 8 (>= tp, not divisible); ffn-tp: ffn 11000 over tp 8 (Megatron's ColumnParallelLinear divide())
  {
    const sim::ModelSpec base = sim::load_model("llama2-13b");  // 40 heads, hidden 5120
    sim::ModelSpec kv = base;
    kv.heads = 48;
    kv.hidden = 6144;
    kv.kv_heads = 12;
    const auto cl = hardware::load_cluster("dgx-h100");
    const sim::Plan p = sim::fill_plan(kv, cl, {.tp = 8});
    const auto f = bridge::preflight(F::megatron, {.model = kv, .cluster = cl, .plan = p});
    CHECK(has_error(f, "kv-heads-tp"));
    if (has_error(f, "kv-heads-tp")) refused.insert("kv-heads-tp");
    sim::ModelSpec ffn = base;
    ffn.ffn_hidden = 11000 + 4;  // 11004 = 4 x 2751: not divisible by 8
    const sim::Plan q = sim::fill_plan(ffn, cl, {.tp = 8});
    const auto g = bridge::preflight(F::nemo, {.model = ffn, .cluster = cl, .plan = q});
    CHECK(has_error(g, "ffn-tp"));
    if (has_error(g, "ffn-tp")) refused.insert("ffn-tp");
  }
  // at least ten documented combinations, each with its source
  CHECK(refused.size() >= 10);
  CHECK(refused.size() == cases.size());
  for (const auto& rule : bridge::check_rules()) {
    CHECK_MESSAGE(!rule.source.empty(), rule.id);
    CHECK_MESSAGE(refused.count(rule.id) == 1, "rule " << rule.id << " has no refusing test");
  }
}

TEST_CASE("Megatron-LM replicates K/V heads when there are fewer than tp: not a Megatron-LM error (slicetune's own limit is said)") {
  // llama2-70b: 8 K/V heads, tp 16 across 2 nodes (megatron/core/transformer/attention.py: num_query_groups < tp replicates)
  const sim::ModelSpec m = sim::load_model("llama2-70b");
  hardware::ClusterSpec c = hardware::load_cluster("dgx-h100");
  c.nodes = 2;
  const sim::Plan p = sim::fill_plan(m, c, {.tp = 16});
  const auto f = bridge::preflight(bridge::Framework::megatron, {.model = m, .cluster = c, .plan = p});
  CHECK_FALSE(has_error(f, "kv-heads-tp"));
  bool said = false;
  for (const auto& x : f) said |= x.rule == "slicetune" && x.message.find("kv_heads=8 is not divisible by tp=16") != std::string::npos;
  CHECK(said);
}

TEST_CASE("slicetune check exits 1 with one line per finding when the framework would refuse, 0 when it accepts") {
  const CliRun bad = run_cli("check --framework deepspeed --model gpt3-13b --tp 8 --micro-batch 16 --strategy domino --row-slices 4 --no-environment");
  CHECK(bad.rc == 1);
  CHECK(bad.out.find("error  domino-row-slices") != std::string::npos);
  CHECK(bad.out.find("row_slices 4: DeepSpeed-Domino runs row_slices 2 only (its layer takes exactly 2 halves)") != std::string::npos);
  CHECK(bad.out.find("intra_partitions = 2") != std::string::npos);
  const CliRun good = run_cli("check --framework megatron --model gpt3-13b --tp 8 --micro-batch 4 --no-environment");
  CHECK(good.rc == 0);
  CHECK(good.out.find("cuda-device-max-connections  export CUDA_DEVICE_MAX_CONNECTIONS=1") != std::string::npos);
  CHECK(good.out.find("no errors: megatron accepts this plan") != std::string::npos);
  const CliRun json = run_cli("check --framework nemo --model gpt3-2.7b --tp 1 --sequence-parallel --no-environment --json");
  CHECK(json.rc == 1);
  const auto j = nlohmann::json::parse(json.out);
  CHECK(j.at("schema_version") == 1);
  CHECK(j.at("findings").at(0).at("rule") == "sp-tp1");
}

TEST_CASE("check --rules prints every rule, and docs/bridge.md holds that table as printed") {
  // The binary registers the built-in strategies only (the toy strategy lives in this test program), so its table is the
  // documented one: 22 fixed rules + strategy-none, strategy-domino, Domino's 3 fixed knobs and tp_channels fixed at NCCL's
  // choice under none (Megatron-LM, NeMo) and domino (DeepSpeed-Domino) = 29, + strategy-te-pipelined, strategy-te-bulk,
  // strategy-async-tp and te-pipelined's num_splits, num_sm and te-bulk's te_bulk_sms fixed at TE's defaults
  // (bridge/strategy_support.cpp) = 35, + strategy-fused = 36.
  const CliRun r = run_cli("check --rules");
  REQUIRE(r.rc == 0);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 2 + 36);
  for (const char* id : {"`world-size`", "`strategy-none`", "`strategy-domino`", "`domino-row-slices`", "`memory`"}) CHECK(r.out.find(id) != std::string::npos);
  std::ifstream in(std::string(SLICETUNE_SOURCE_DIR) + "/docs/bridge.md");
  std::stringstream doc;
  doc << in.rdbuf();
  CHECK_MESSAGE(doc.str().find(r.out) != std::string::npos, "docs/bridge.md's rule table differs from `slicetune check --rules`");
}
