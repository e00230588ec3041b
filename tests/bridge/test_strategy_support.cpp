// Export, import and check read each strategy's framework support from declarations
// (bridge/strategy_support.hpp), not from code that names strategies.
#include <doctest/doctest.h>

#include <stdexcept>

#include "bridge/check.hpp"
#include "bridge/export.hpp"
#include "bridge/megatron_args.hpp"
#include "bridge/strategy_support.hpp"
#include "cli_run.hpp"
#include "common/config_reader.hpp"
#include "sim/strategy.hpp"

namespace test {
const sim::Strategy& strategy_chunked();  // strategy_chunked.cpp (registered there)
const bridge::StrategySupport& support_chunked();
}  // namespace test

namespace {

using F = bridge::Framework;

std::string keys(const bridge::StrategyInFramework& st) {
  std::string s;
  for (const auto& [k, v] : st.annotation) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("the built-in declarations: Megatron-LM and NeMo run none, DeepSpeed-Domino runs domino 2 x 1 along the batch") {
  const sim::ModelSpec m = sim::load_model("gpt3-13b");
  const hardware::ClusterSpec c = hardware::load_cluster("dgx-h100");
  const sim::Plan none = sim::resolve_plan(m, c, {.tp = 8, .micro_batch = 16});
  const sim::Plan domino = sim::resolve_plan(m, c, {.tp = 8, .micro_batch = 16, .strategy = &sim::strategy_domino()});
  // none in Megatron-LM: its own schedule, nothing to select, nothing to carry
  const auto mn = bridge::express_strategy(F::megatron, none);
  CHECK(mn.args.empty());
  CHECK(mn.gaps.empty());
  CHECK(keys(mn).empty());
  // domino 2x1 batch in DeepSpeed-Domino: runs, each knob at the one value Domino runs (noted), the strategy and knobs carried
  const auto dd = bridge::express_strategy(F::deepspeed_domino, domino);
  CHECK(dd.gaps.empty());
  REQUIRE(dd.notes.size() == 3);
  CHECK(dd.notes[0] == "row_slices 2: DeepSpeed-Domino runs this (its layer takes exactly 2 halves)");
  CHECK(keys(dd) == "strategy=domino row_slices=2 row_axis=batch col_slices=1");
  // domino in Megatron-LM and NeMo, none in DeepSpeed-Domino: declared as not run, with what runs instead
  for (auto [f, plan, rule] :
       {std::tuple{F::megatron, &domino, "strategy-domino"}, std::tuple{F::nemo, &domino, "strategy-domino"},
        std::tuple{F::deepspeed_domino, &none, "strategy-none"}}) {
    const auto st = bridge::express_strategy(f, *plan);
    REQUIRE(st.gaps.size() == 1);
    CHECK(st.gaps[0].rule == rule);
    CHECK(st.gaps[0].declared);
    CHECK(!st.gaps[0].source.empty());
  }
  CHECK(bridge::express_strategy(F::megatron, domino)
            .gaps[0]
            .message.starts_with("strategy domino (domino 2x1): Megatron-LM runs every layer unsliced"));
  // a knob away from Domino's value: a gap with the knob's own rule
  const sim::Plan four =
      sim::resolve_plan(m, c, {.tp = 8, .micro_batch = 16, .row_slices = 4, .strategy = &sim::strategy_domino()});
  const auto d4 = bridge::express_strategy(F::deepspeed_domino, four);
  REQUIRE(d4.gaps.size() == 1);
  CHECK(d4.gaps[0].rule == "domino-row-slices");
  CHECK(d4.gaps[0].message == "row_slices 4: DeepSpeed-Domino runs row_slices 2 only (its layer takes exactly 2 halves)");
}

TEST_CASE("the rules the declarations imply are check rules with their sources") {
  std::map<std::string, std::vector<F>> rules;
  for (const auto& r : bridge::check_rules()) {
    CHECK_MESSAGE(!r.source.empty(), r.id);
    rules[r.id] = r.frameworks;
  }
  CHECK(rules.at("strategy-none") == std::vector<F>{F::deepspeed_domino});
  CHECK(rules.at("strategy-domino") == std::vector<F>{F::megatron, F::nemo});
  for (const char* id : {"domino-row-slices", "domino-row-axis", "domino-col-slices"})
    CHECK(rules.at(id) == std::vector<F>{F::deepspeed_domino});
  // the toy declares arguments for every knob and no framework it does not run: it adds no rule
  for (const auto& [id, f] : rules) CHECK_FALSE(id.starts_with("chunked"));
  CHECK(rules.count("strategy-chunked") == 0);
}

TEST_CASE("a strategy selected by an argument: export writes the argument and its knob's, import reads them back") {
  const sim::ModelSpec m = sim::load_model("gpt3-13b");
  const hardware::ClusterSpec c = hardware::load_cluster("dgx-h100");
  const sim::Plan plan =
      sim::resolve_plan(m, c, {.tp = 8, .micro_batch = 4, .col_slices = 4, .strategy = &test::strategy_chunked()});
  const std::string meg = bridge::export_plan(F::megatron, {.model = m, .cluster = c, .plan = plan});
  INFO(meg);
  CHECK(contains(meg, "  --toy-chunked-overlap "));
  CHECK(contains(meg, "  --toy-col-chunks 4 "));
  CHECK(contains(meg, "# col_slices 4: chunks of out-proj / FC2"));
  CHECK_FALSE(contains(meg, "# slicetune:"));  // nothing left that the arguments do not carry
  CHECK_FALSE(contains(meg, "Not expressible"));
  const auto imp = bridge::parse_megatron_args(meg, "export");
  CHECK(imp.plan.strategy == &test::strategy_chunked());
  CHECK(imp.plan.col_slices == 4);
  CHECK(imp.unknown.empty());
  const std::string nemo = bridge::export_plan(F::nemo, {.model = m, .cluster = c, .plan = plan});
  CHECK(contains(nemo, "  model.toy_chunked=True "));
  CHECK(contains(nemo, "  model.toy_col_chunks=4 "));
  CHECK_FALSE(contains(nemo, "model.ub_tp_comm_overlap=False"));  // a strategy NeMo runs by its own keys says them
  // a value outside the knob's range names the argument and what it expects
  CHECK_THROWS_WITH_AS(bridge::parse_megatron_args("--toy-chunked-overlap --toy-col-chunks 9", "a"),
                       "a: --toy-col-chunks: expected an integer in 1..8 (strategy chunked's col_slices), got '9'",
                       common::ConfigError);
}

TEST_CASE("a framework without a declaration is said in the export, carried for the import, and a warning in check") {
  const sim::ModelSpec m = sim::load_model("gpt3-13b");
  const hardware::ClusterSpec c = hardware::load_cluster("dgx-h100");
  const sim::Plan plan = sim::resolve_plan(
      m, c, {.tp = 8, .micro_batch = 16, .global_batch = 16, .col_slices = 4, .strategy = &test::strategy_chunked()});
  const std::string ds = bridge::export_plan(F::deepspeed_domino, {.model = m, .cluster = c, .plan = plan});
  INFO(ds);
  CHECK(contains(
      ds, "# Not expressible in DeepSpeed-Domino: strategy chunked (chunked 4): no declaration of how DeepSpeed-Domino runs it"));
  CHECK(contains(ds, "# slicetune: framework=deepspeed-domino strategy=chunked col_slices=4 stack=eager dp_bucket_mb=25"));
  const auto imp = bridge::parse_megatron_args(ds, "export");
  CHECK(imp.plan.strategy == &test::strategy_chunked());
  CHECK(imp.plan.col_slices == 4);
  const auto findings = bridge::preflight(F::deepspeed_domino, {.model = m, .cluster = c, .plan = plan});
  bool warned = false, refused = false;
  for (const auto& x : findings) {
    warned |= x.rule == "strategy-chunked" && x.severity == bridge::Severity::warning;
    refused |= x.rule == "strategy-chunked" && x.severity == bridge::Severity::error;
  }
  CHECK(warned);
  CHECK_FALSE(refused);  // slicetune does not know what Domino would run: it says so instead of refusing
}

TEST_CASE("a strategy is declared once") {
  CHECK_THROWS_AS(bridge::register_support(test::support_chunked()), std::invalid_argument);
  CHECK(bridge::find_support(sim::strategy_none(), F::megatron)->runs);
  CHECK(bridge::find_support(test::strategy_chunked(), F::deepspeed_domino) == nullptr);
}

TEST_CASE(
    "arguments that name no strategy run the framework's own schedule: check reads a DeepSpeed-Domino script as domino 2x1") {
  // From the declarations: Megatron-LM and NeMo run none unselected; DeepSpeed-Domino does not run none and runs domino
  // with nothing selecting it, its knobs fixed at 2 row slices along the batch, 1 column chunk.
  CHECK(bridge::own_schedule(F::megatron) == &sim::strategy_none());
  CHECK(bridge::own_schedule(F::nemo) == &sim::strategy_none());
  CHECK(bridge::own_schedule(F::deepspeed_domino) == &sim::strategy_domino());
  sim::PlanInput in;
  CHECK(bridge::apply_own_schedule(F::deepspeed_domino, in) == "strategy domino, row_slices 2, row_axis batch, col_slices 1");
  CHECK(in.row_slices == 2);
  sim::PlanInput given{.strategy = &sim::strategy_none()};
  CHECK(bridge::apply_own_schedule(F::deepspeed_domino, given).empty());  // a strategy given is kept (and check refuses it)
  CHECK(given.strategy == &sim::strategy_none());
  sim::PlanInput meg;
  CHECK(bridge::apply_own_schedule(F::megatron, meg).empty());
  CHECK_FALSE(meg.strategy);

  // A DeepSpeed-Domino launch as a user writes it (no `# slicetune:` line): DeepSpeed-Domino accepts it; Megatron-LM would run
  // the same arguments unsliced, which is no error either.
  const std::string args =
      "deepspeed --num_gpus 8 --num_nodes 1 pretrain_gpt.py --num-layers 40 --hidden-size 5120 --num-attention-heads 40 "
      "--seq-length 1024 --max-position-embeddings 2048 --tensor-model-parallel-size 8 --micro-batch-size 16 --global-batch-size "
      "16 --bf16";
  const CliRun ds = run_cli("check --framework deepspeed --model gpt3-13b --no-environment --megatron-args \"" + args + "\"");
  INFO(ds.out << ds.err);
  CHECK(ds.rc == 0);
  CHECK(ds.out.find("for deepspeed-domino: tp8 dp1 mb16 domino 2x1") != std::string::npos);
  const CliRun meg_run = run_cli("check --framework megatron --model gpt3-13b --no-environment --megatron-args \"" + args + "\"");
  CHECK(meg_run.rc == 0);
  CHECK(meg_run.out.find("for megatron: tp8 dp1 mb16 megatron") != std::string::npos);
  // --strategy on the command line wins: none is what DeepSpeed-Domino cannot run
  const CliRun none =
      run_cli("check --framework deepspeed --model gpt3-13b --no-environment --strategy none --megatron-args \"" + args + "\"");
  CHECK(none.rc == 1);
  CHECK(none.out.find("strategy-none                strategy none (megatron): DeepSpeed-Domino always splits") !=
        std::string::npos);
}
