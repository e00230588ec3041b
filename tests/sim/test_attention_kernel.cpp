// The attention kernel of a plan: its stack's (host.stacks.<stack>.attention of the cluster file)
// unless the plan's optional `attention` key says otherwise - how a plan resolves it, how it is
// priced and counted in memory, how it is labelled and written back, and what the tuner tries.
#include <doctest/doctest.h>

#include <set>

#include "common/config_reader.hpp"
#include "hardware/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/memory.hpp"
#include "sim/plan.hpp"
#include "sim/step_graph.hpp"
#include "sim/strategy.hpp"
#include "tuner/space.hpp"

namespace {

using K = hardware::AttentionKernel;
using hardware::Stack;

struct Setup {
  sim::ModelSpec model = sim::load_model("gpt3-13b");
  hardware::ClusterSpec cluster = hardware::load_cluster("dgx-h100");
};

sim::PlanInput input(Stack stack, std::optional<K> attention = std::nullopt, common::DType dtype = common::DType::bf16) {
  sim::PlanInput in;
  in.tp = 8;
  in.micro_batch = 16;
  in.seq_len = 1024;
  in.dtype = dtype;
  in.stack = stack;
  in.attention = attention;
  return in;
}

}  // namespace

TEST_CASE("a plan without an attention key runs its stack's kernel; an explicit key overrides it") {
  const Setup s;
  // configs/clusters/dgx-h100.yaml host.stacks: eager and cpp run Megatron's unfused core attention,
  // cuda_graphs the released Domino layer's scaled_dot_product_attention (flash), megatron-core
  // TransformerEngine's flash attention
  const std::pair<Stack, K> expected[] = {
      {Stack::eager, K::unfused}, {Stack::cpp, K::unfused}, {Stack::cuda_graphs, K::flash}, {Stack::megatron_core, K::flash}};
  for (const auto& kv : expected) {
    const auto stack = kv.first;  // not structured bindings: CAPTURE uses a lambda (clang 14)
    const auto kernel = kv.second;
    CAPTURE(hardware::to_string(stack));
    const sim::Plan p = sim::resolve_plan(s.model, s.cluster, input(stack));
    CHECK(p.attention == kernel);
    CHECK(p.stack_attention == kernel);
    CHECK(sim::describe(p) == "tp8 dp1 mb16 megatron");  // the stack's own kernel is not named
  }
  // an explicit key wins, and the label names it because it is not the stack's
  const sim::Plan flash = sim::resolve_plan(s.model, s.cluster, input(Stack::eager, K::flash));
  CHECK(flash.attention == K::flash);
  CHECK(flash.stack_attention == K::unfused);
  CHECK(sim::describe(flash) == "tp8 dp1 mb16 megatron flash");
  const sim::Plan unfused = sim::resolve_plan(s.model, s.cluster, input(Stack::megatron_core, K::unfused));
  CHECK(sim::describe(unfused) == "tp8 dp1 mb16 megatron unfused");
  // flash has no fp32 kernels on a GPU: megatron-core's default falls back to unfused at fp32, and
  // asking for flash there is a one-line error naming the key
  const sim::Plan fp32 = sim::resolve_plan(s.model, s.cluster, input(Stack::megatron_core, std::nullopt, common::DType::fp32));
  CHECK(fp32.attention == K::unfused);
  CHECK(sim::describe(fp32) == "tp8 dp1 mb16 megatron");
  try {
    sim::resolve_plan(s.model, s.cluster, input(Stack::megatron_core, K::flash, common::DType::fp32));
    FAIL("flash at fp32 on a GPU was accepted");
  } catch (const common::ConfigError& e) {
    const std::string what = e.what();
    CHECK(what.find("attention") != std::string::npos);
    CHECK(what.find('\n') == std::string::npos);
  }
}

TEST_CASE("unfused_compiled is priced with one pass over the score matrix but kept as the unfused kernel's in memory") {
  const Setup s;
  const auto cost = hardware::make_analytic_cost_model(s.cluster, Stack::cuda_graphs);
  // one TP rank of gpt3-13b at tp 8: 40 / 8 = 5 heads of 128, 16 sequences of 1024, bf16
  hardware::AttentionOp op{.batch = 16, .heads = 5, .kv_heads = 5, .s_q = 1024, .s_kv = 1024, .head_dim = 128, .dtype = common::DType::bf16};
  const double elems = 16.0 * 5 * 1024 * 1024, e = 2;
  const auto& g = s.cluster.gpu;
  const double hbm = g.hbm_bytes_per_s * g.memory_efficiency;
  for (bool backward : {false, true}) {
    CAPTURE(backward);
    op.backward = backward;
    op.kernel = K::unfused;
    const double two_pass = cost->attention(op).time.s();
    op.kernel = K::unfused_compiled;
    const double one_pass = cost->attention(op).time.s();
    // the unfused kernel's softmax and dropout passes move 2e + (2e + 1) bytes per score forward and
    // (2e + 1) + 3e backward; compiled into one they move 2e + 1 and 3e + 1: 2e bytes fewer per score
    // each way, and one kernel launch fewer (hardware/analytic_cost_model.cpp unfused_attention)
    CHECK(two_pass - one_pass == doctest::Approx(elems * 2 * e / hbm + g.kernel_latency.s()).epsilon(1e-9));
  }
  // a cuda_graphs plan that names unfused_compiled is faster than one that names unfused (the same
  // stack otherwise); without the key it runs the stack's flash kernel, priced as one naming it
  auto step = [&](std::optional<K> k) {
    const sim::Plan p = sim::resolve_plan(s.model, s.cluster, input(Stack::cuda_graphs, k));
    sim::Engine engine(*cost);
    return engine.simulate(sim::build_step_graph(s.model, s.cluster, p)).step_time;
  };
  CHECK(step(K::unfused_compiled) < step(K::unfused));
  CHECK(step(std::nullopt) == step(K::flash));
  // memory: the compiled kernel still writes and keeps the score matrix (Korthikanti's softmax
  // output, 2 a s^2 b / t bytes per layer without dropout), flash keeps only its fp32 log-sum-exp
  auto activations = [&](K k) {
    const sim::Plan p = sim::resolve_plan(s.model, s.cluster, input(Stack::cuda_graphs, k));
    return sim::estimate_memory(s.model, s.cluster, p).activations;
  };
  CHECK(activations(K::unfused_compiled) == activations(K::unfused));
  const double layers = 40, a = 40, sq = 1024, b = 16, t = 8;
  CHECK(activations(K::unfused) - activations(K::flash) == doctest::Approx(layers * (2 * a * sq * sq * b / t - 4 * a * sq * b / t)));
}

TEST_CASE("plan files name the attention kernel only where it is not the stack's, and read back the same plan") {
  const Setup s;
  for (const auto& in : {input(Stack::eager), input(Stack::eager, K::flash), input(Stack::cuda_graphs), input(Stack::cuda_graphs, K::unfused)}) {
    const sim::Plan p = sim::resolve_plan(s.model, s.cluster, in);
    const std::string yaml = sim::plan_to_yaml(p);
    CAPTURE(yaml);
    CHECK((yaml.find("attention:") != std::string::npos) == (p.attention != p.stack_attention));
    CHECK(sim::resolve_plan(s.model, s.cluster, sim::parse_plan_input(yaml, "round trip")) == p);
  }
  // a plan file without the key takes the kernel of the stack it runs on
  const sim::PlanInput no_key = sim::parse_plan_input("tp: 8\nmicro_batch: 16\nseq_len: 1024\nstack: megatron-core\n", "test");
  CHECK(sim::resolve_plan(s.model, s.cluster, no_key).attention == K::flash);
}

TEST_CASE("the tuner tries the stack's kernel and flash (unfused where the stack's is flash)") {
  const Setup s;
  // one point of the space (tp 8, one micro-batch size, no SP, Megatron, no ZeRO / recompute): the
  // plans enumerated there differ only in the attention kernel
  const std::pair<Stack, std::set<K>> expected[] = {{Stack::eager, {K::unfused, K::flash}},
                                                     {Stack::cuda_graphs, {K::flash, K::unfused}},
                                                     {Stack::megatron_core, {K::flash, K::unfused}}};
  for (const auto& kv : expected) {
    const auto stack = kv.first;  // not structured bindings: CAPTURE uses a lambda (clang 14)
    const auto& kernels = kv.second;
    CAPTURE(hardware::to_string(stack));
    tuner::SearchSpace sp;
    sp.tp = {8};
    sp.tp_layouts = {sim::TpLayout::one_d};  // 1D: no 2D / 2.5D grids at tp 8 = 2^2 x 2
    sp.micro_batch = {1};
    sp.sequence_parallel = {false};
    sp.strategies = {&sim::strategy_none()};
    sp.zero = {0};
    sp.recompute = {sim::Recompute::none};
    sp.block_recompute = false;
    sp.stack = stack;
    const auto plans = tuner::enumerate_plans(s.model, s.cluster, sp);
    REQUIRE(plans.size() == 2);
    std::set<K> seen;
    for (const auto& p : plans) {
      seen.insert(p.attention);
      CHECK(p.stack_attention == s.cluster.host.stack(stack).attention);
    }
    CHECK(seen == kernels);
    CHECK(plans[0].attention == s.cluster.host.stack(stack).attention);  // the stack's own first
  }
}
