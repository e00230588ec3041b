// Config and plan errors: each names the source, the key and what was expected.
#include <doctest/doctest.h>

#include <functional>

#include "common/config_reader.hpp"
#include "common/embedded_configs.hpp"
#include "sim/target.hpp"
#include "sim/strategy.hpp"

namespace {
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const common::ConfigError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("embedded configs load and unknown names are refused with the list") {
  CHECK(sim::load_model("llama2-70b").kv_heads == 8);  // configs/models/llama2-70b.yaml: 8 KV heads (GQA)
  CHECK(hardware::load_cluster("dgx-h100").gpu.sm_count == 132);
  const auto e = error_of([] { sim::load_model("gpt5"); });
  CHECK(e.find("gpt5") != std::string::npos);
  CHECK(e.find("unknown model") != std::string::npos);
  CHECK(e.find("gpt3-13b") != std::string::npos);  // lists what exists
}

TEST_CASE("malformed YAML names the source and the line") {
  const auto e = error_of([] { sim::parse_model("name: x\nlayers: [1, 2\n", "bad.yaml"); });
  CHECK(e.find("bad.yaml") == 0);
  CHECK(e.find("malformed YAML at line") != std::string::npos);
}

TEST_CASE("unknown keys are refused") {
  const auto e = error_of([] { sim::parse_plan_input("tp: 2\nrow_slice: 2\n", "plan.yaml"); });
  CHECK(e == "plan.yaml: row_slice: unknown key");
  const auto c = error_of([] {
    auto text = std::string(common::resolve_config("clusters", "dgx-h100").text) + "turbo: true\n";
    hardware::parse_cluster(text, "c.yaml");
  });
  CHECK(c == "c.yaml: turbo: unknown key");
}

TEST_CASE("host.kernel_efficiency must be a fraction in (0, 1] per stack") {
  std::string text(common::resolve_config("clusters", "dgx-h100").text);
  const auto at = text.find("kernel_efficiency: {eager: 0.66");
  REQUIRE(at != std::string::npos);
  text.replace(at, std::string("kernel_efficiency: {eager: 0.66").size(), "kernel_efficiency: {eager: 1.5");
  CHECK(error_of([&] { hardware::parse_cluster(text, "c.yaml"); }) == "c.yaml: host.kernel_efficiency.eager: expected a fraction in (0, 1], got 1.5");
}

TEST_CASE("wrong types and values name the key") {
  CHECK(error_of([] { sim::parse_plan_input("tp: two\n", "p.yaml"); }) == "p.yaml: tp: expected an integer (at most 19 digits), got 'two'");
  CHECK(error_of([] { sim::parse_plan_input("strategy: fast\n", "p.yaml"); }) ==
        "p.yaml: strategy: expected one of none | domino, got 'fast'");
}

TEST_CASE("infeasible plans are refused with the reason") {
  sim::TargetInput in{.model = "gpt3-13b", .cluster = "dgx-h100"};
  in.flags.tp = 16;  // 40 heads
  in.nodes = 2;
  CHECK(error_of([&] { sim::resolve_target(in); }) == "flags: tp: heads=40 is not divisible by tp=16");
  in.flags.tp = 8;
  in.nodes = 1;
  in.flags.strategy = &sim::strategy_domino();
  in.flags.micro_batch = 2;
  in.flags.row_slices = 4;
  CHECK(error_of([&] { sim::resolve_target(in); }) ==
        "flags: row_slices: micro_batch=2 is not divisible by row_slices=4 (row_axis batch)");
  in.flags.row_slices = 2;
  in.flags.dp = 2;
  CHECK(error_of([&] { sim::resolve_target(in); }).find("tp x dp x pp = 8 x 2 x 1 = 16 but the cluster has 8 GPUs") != std::string::npos);
  in.flags.dp.reset();
  in.flags.dtype = common::DType::fp8;
  in.cluster = "dgx-a100";
  CHECK(error_of([&] { sim::resolve_target(in); }) == "flags: dtype: A100-SXM4-80GB has no fp8 support");
}

TEST_CASE("a plan written as YAML reads back to the same plan") {
  sim::TargetInput in{.model = "llama2-13b", .cluster = "dgx-h100", .nodes = 2};
  in.flags.tp = 8;
  in.flags.micro_batch = 4;
  in.flags.global_batch = 64;
  in.flags.strategy = &sim::strategy_domino();
  in.flags.row_slices = 2;
  in.flags.col_slices = 2;
  in.flags.row_axis = sim::RowAxis::sequence;
  in.flags.sequence_parallel = true;
  const auto t = sim::resolve_target(in);
  const auto back = sim::resolve_plan(t.model, t.cluster, sim::parse_plan_input(sim::plan_to_yaml(t.plan, "test"), "x.yaml"));
  CHECK(back == t.plan);
  CHECK(t.plan.dp == 2);  // 16 GPUs / tp 8
  CHECK(t.plan.grad_accum_steps() == 8);  // 64 / (4 x 2)
}
