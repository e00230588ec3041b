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

TEST_CASE("host.stacks: every stack's mechanisms, range-checked, named in errors") {
  const std::string text(common::resolve_config("clusters", "dgx-h100", /*as_written=*/true).text);
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const auto at = t.find(from);
    REQUIRE(at != std::string::npos);
    t.replace(at, from.size(), to);
    return t;
  };
  const auto c = hardware::parse_cluster(text, "c.yaml");
  const auto& mc = c.host.stack(hardware::Stack::megatron_core);
  CHECK(mc.attention == hardware::AttentionKernel::flash);
  CHECK(mc.fuses(hardware::ElementwiseKind::gelu));
  CHECK_FALSE(mc.fuses(hardware::ElementwiseKind::layernorm));
  CHECK(c.host.stack(hardware::Stack::cuda_graphs).attention == hardware::AttentionKernel::flash);  // the released Domino layer's SDPA
  CHECK(c.host.kernel_efficiency_for(hardware::Stack::eager) == 1.0);  // retired: no cluster file sets it
  CHECK(error_of([&] { hardware::parse_cluster(replaced("gemm_efficiency: 1.0   # TE", "gemm_efficiency: 1.5   # TE"), "c.yaml"); }) ==
        "c.yaml: host.stacks.megatron-core.gemm_efficiency: expected a fraction in (0, 1], got 1.5");
  CHECK(error_of([&] { hardware::parse_cluster(replaced("fused: [gelu]", "fused: [gelu, softmax]"), "c.yaml"); }).find(
            "c.yaml: host.stacks.megatron-core.fused: 'softmax' is not an element-wise op") == 0);
  CHECK(error_of([&] { hardware::parse_cluster(replaced("    megatron-core:", "    megatron_core:"), "c.yaml"); }).find("megatron-core") !=
        std::string::npos);
  hardware::Stack s;
  CHECK(hardware::parse_stack("megatron-core", s));
  CHECK(s == hardware::Stack::megatron_core);
  CHECK_FALSE(hardware::parse_stack("megatron_core", s));
}

TEST_CASE("host in the form before stacks (profiles of version 1) still reads; kernel_efficiency other than 1 is refused") {
  const std::string legacy = R"(name: old
gpu: {name: g, arch: cpu, peak_tflops: {fp32: 1, bf16: 1, fp16: 1, fp8: 1}, hbm_gb_per_s: 10, hbm_gb: 1, sms: 1, gemm_efficiency: 1,
      gemm_tile_overhead_us: 0, memory_efficiency: 1, kernel_latency_us: 0.1}
node: {gpus: 2, nvlink_gb_per_s: 1, nvlink_links: 1, nvswitch: true, nvls: false}
network: {nics_per_node: 1, nic_gbit_per_s: 10, latency_us: 1, topology: fat_tree, oversubscription: 1}
host:
  launch_us: {eager: 2, cpp: 1, cuda_graphs: 0.5}
  op_overhead_us: {eager: 0, cpp: 0, cuda_graphs: 0}
  kernel_efficiency: {eager: 1, cpp: 1, cuda_graphs: 1}
  attention: flash
interference: {sm_contention: false, hbm_amplification: 0, sm_comm_slowdown: 0}
nccl: {call_overhead_us: 0, nvls_efficiency: 1, nvls_latency_us: 1}
)";
  const auto c = hardware::parse_cluster(legacy, "old.yaml");
  CHECK(c.host.launch_for(hardware::Stack::eager).us() == doctest::Approx(2.0));
  CHECK(c.host.launch_for(hardware::Stack::megatron_core).us() == doctest::Approx(1.0));  // the cpp entry
  std::string bad = legacy;
  bad.replace(bad.find("kernel_efficiency: {eager: 1"), std::string("kernel_efficiency: {eager: 1").size(), "kernel_efficiency: {eager: 0.7");
  CHECK(error_of([&] { hardware::parse_cluster(bad, "old.yaml"); }).find("old.yaml: host.kernel_efficiency.eager: kernel_efficiency is retired") == 0);
}

TEST_CASE("wrong types and values name the key") {
  CHECK(error_of([] { sim::parse_plan_input("tp: two\n", "p.yaml"); }) == "p.yaml: tp: expected an integer (at most 19 digits), got 'two'");
  CHECK(error_of([] { sim::parse_plan_input("strategy: fast\n", "p.yaml"); }) ==
        "p.yaml: strategy: expected one of none | domino | te-pipelined | async-tp | te-bulk | fused, got 'fast'");
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

TEST_CASE("network.nic_efficiency is optional (NVIDIA's 0.94) and must be a fraction in (0, 1]") {
  std::string text(common::resolve_config("clusters", "dgx-h100").text);
  const auto at = text.find("  nic_efficiency: ");
  REQUIRE(at != std::string::npos);
  const auto eol = text.find('\n', at);
  std::string without = text;
  without.erase(at, eol - at + 1);
  CHECK(hardware::parse_cluster(without, "c.yaml").network.nic_efficiency == doctest::Approx(0.94));
  text.replace(at, eol - at, "  nic_efficiency: 1.2");
  CHECK(error_of([&] { hardware::parse_cluster(text, "c.yaml"); }) == "c.yaml: network.nic_efficiency: expected a fraction in (0, 1], got 1.2");
}

TEST_CASE("interference.sm_comm_slowdown and copy_engine_bandwidth are optional fractions, range-checked") {
  std::string text(common::resolve_config("clusters", "dgx-h100").text);
  auto with = [&](const std::string& key, const std::string& value) {
    std::string t = text;
    const auto at = t.find("  " + key + ": ");
    REQUIRE(at != std::string::npos);
    t.replace(at, t.find('\n', at) - at, "  " + key + ": " + value);
    return t;
  };
  CHECK(error_of([&] { hardware::parse_cluster(with("sm_comm_slowdown", "1.0"), "c.yaml"); }) ==
        "c.yaml: interference.sm_comm_slowdown: expected a fraction in [0, 1)");
  CHECK(error_of([&] { hardware::parse_cluster(with("copy_engine_bandwidth", "0"), "c.yaml"); }) ==
        "c.yaml: interference.copy_engine_bandwidth: expected a fraction in (0, 1], got 0");
  CHECK(error_of([&] { hardware::parse_cluster(with("hbm_amplification", "-1"), "c.yaml"); }) ==
        "c.yaml: interference.hbm_amplification: expected HBM bytes per wire byte in [0, 10], got -1");
}
