// Pipeline parallelism: the schedules' order of passes, the bubble the engine finds (against the
// closed form it must reproduce exactly in the uniform case), the stage graphs' transfers and
// memory, and the one-line errors of bad pipeline plans.
#include <doctest/doctest.h>

#include <tuple>

#include <fmt/format.h>

#include <functional>

#include "common/config_reader.hpp"
#include "sim/engine.hpp"
#include "sim/memory.hpp"
#include "sim/pipeline_schedule.hpp"
#include "sim/pipeline_step.hpp"
#include "sim/shapes.hpp"
#include "sim/strategy.hpp"
#include "sim/target.hpp"
#include "tests/sim/fake_cost_model.hpp"

namespace {

using sim::PipelinePass;

std::string order_text(const std::vector<PipelinePass>& o) {
  std::string s;
  for (const auto& p : o) s += fmt::format("{}{}{} ", p.forward ? 'F' : 'B', p.micro, p.chunk ? fmt::format(".{}", p.chunk) : "");
  return s;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const common::ConfigError& e) {
    return e.what();
  }
  return "no error";
}

/// A model whose every dimension differs from its vocabulary (96), so that the LM head's GEMMs are
/// told apart from the layers' by shape.
sim::ModelSpec uniform_model(int layers) {
  return sim::ModelSpec{.name = "uniform", .source = "test", .layers = layers, .hidden = 64, .heads = 4, .kv_heads = 4,
                        .ffn_hidden = 256, .vocab = 96, .seq_len = 32};
}

/// The fake cluster (tests/sim/fake_cost_model.hpp) with `gpus` GPUs on its one node: a plan must use every GPU.
hardware::ClusterSpec cluster_of(int gpus) {
  auto c = test::fake_cluster();
  c.node.gpus_per_node = gpus;
  return c;
}

/// Uniform stages without communication cost: every transformer-layer GEMM takes 1 us; the LM
/// head's GEMMs, every element-wise kernel (embedding, norms, loss), attention, the optimizer and
/// every transfer or collective take no time. A layer's forward is then 4 us (QKV, out-proj, FC1,
/// FC2) and its backward 8 us (their input- and weight-gradient GEMMs), on every stage alike.
class UniformLayers final : public hardware::CostModel {
 public:
  /// `launch`: the host's time to issue one kernel (every stack); 0 unless a test says otherwise.
  UniformLayers(std::int64_t vocab_per_rank, int gpus, common::Duration launch = {}) : v_(vocab_per_rank), c_(cluster_of(gpus)) {
    for (auto& st : c_.host.stacks) st.launch = launch;
  }
  hardware::ComputeCost gemm(const hardware::GemmOp& g) const override {
    const bool head = g.m == v_ || g.n == v_ || g.k == v_;
    return {head ? common::Duration{} : common::Duration::from_us(1.0), 0};
  }
  hardware::ComputeCost attention(const hardware::AttentionOp&) const override { return {}; }
  hardware::ComputeCost elementwise(const hardware::ElementwiseOp&) const override { return {}; }
  hardware::ComputeCost optimizer(const hardware::OptimizerOp&) const override { return {}; }
  hardware::CollectiveCost collective(const hardware::CollectiveOp&) const override {
    hardware::CollectiveCost cc;
    cc.wire_bytes.assign(2, 0.0);
    return cc;
  }
  const hardware::ClusterSpec& cluster() const override { return c_; }
  hardware::Stack stack() const override { return hardware::Stack::eager; }  // the plans' default
  std::string describe() const override { return "uniform layers"; }

 private:
  std::int64_t v_;
  hardware::ClusterSpec c_;
};

sim::Plan pipeline_plan(const sim::ModelSpec& m, const hardware::ClusterSpec& c, int pp, int vp, int micro_batches) {
  sim::PlanInput in;
  in.tp = 1;
  in.pp = pp;
  in.vp = vp;
  in.dp = 1;
  in.micro_batch = 1;
  in.global_batch = micro_batches;
  in.dtype = common::DType::fp32;
  return sim::resolve_plan(m, c, in, "test");
}

}  // namespace

TEST_CASE("1F1B order: warm-up forwards, one forward one backward, cool-down backwards") {
  // Megatron-LM's forward_backward_pipelining_without_interleaving with pp = 4, m = 6: stage s runs
  // pp - s - 1 warm-up forwards (3, 2, 1, 0), then F/B pairs, then the remaining backwards.
  using sim::PipelineSchedule;
  CHECK(order_text(sim::pipeline_order(PipelineSchedule::one_f_one_b, 4, 1, 6, 0)) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5 ");
  CHECK(order_text(sim::pipeline_order(PipelineSchedule::one_f_one_b, 4, 1, 6, 2)) == "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5 ");
  CHECK(order_text(sim::pipeline_order(PipelineSchedule::one_f_one_b, 4, 1, 6, 3)) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 ");
  // fewer micro-batches than stages: the warm-up is cut to m
  CHECK(order_text(sim::pipeline_order(PipelineSchedule::one_f_one_b, 4, 1, 2, 0)) == "F0 F1 B0 B1 ");
}

TEST_CASE("interleaved order: groups of pp micro-batches per chunk, Megatron-LM's warm-up") {
  // pp = 2, vp = 2, m = 4. Forward table (groups of pp = 2): (0,c0) (1,c0) (0,c1) (1,c1) (2,c0) (3,c0) (2,c1) (3,c1);
  // backward k runs the same micro-batch through chunk vp - 1 - c. Warm-up: 2 (pp - r - 1) + (vp - 1) pp
  // = 4 forwards on rank 0, 2 on rank 1 (derived by hand from forward_backward_pipelining_with_interleaving).
  using sim::PipelineSchedule;
  CHECK(order_text(sim::pipeline_order(PipelineSchedule::interleaved, 2, 2, 4, 0)) ==
        "F0 F1 F0.1 F1.1 F2 B0.1 F3 B1.1 F2.1 B0 F3.1 B1 B2.1 B3.1 B2 B3 ");
  CHECK(order_text(sim::pipeline_order(PipelineSchedule::interleaved, 2, 2, 4, 1)) ==
        "F0 F1 F0.1 B0.1 F1.1 B1.1 F2 B0 F3 B1 F2.1 B2.1 F3.1 B3.1 B2 B3 ");
}

TEST_CASE("layer split: even by default, explicit per virtual stage, chunk c of rank r is virtual stage c pp + r") {
  const auto c = cluster_of(2);
  const auto m = uniform_model(8);
  const auto even = sim::virtual_stage_layers(m, pipeline_plan(m, c, 2, 2, 4));
  REQUIRE(even.size() == 4);
  CHECK(even[1].first == 2);
  CHECK(even[3].end == 8);
  sim::PlanInput in;
  in.pp = 2;
  in.dp = 1;
  in.global_batch = 4;
  in.pipeline_layers = std::vector<int>{3, 5};
  const auto p = sim::resolve_plan(m, c, in, "test");
  const auto split = sim::virtual_stage_layers(m, p);
  CHECK(split[0].size() == 3);
  CHECK(split[1].first == 3);
  CHECK(sim::describe(p) == "tp1 dp1 pp2[3,5] mb1 megatron");
}

TEST_CASE("bubble test: uniform stages without communication cost give (pp - 1) / (m + pp - 1) exactly") {
  // Closed form of 1F1B (Narayanan et al. 2021, eq. 1): with a forward of F and a backward of B per
  // stage and free transfers the step is (m + pp - 1)(F + B) and each stage computes m (F + B), so the
  // fraction of the step a stage's compute is idle is (pp - 1) / (m + pp - 1). The engine is not told
  // this: the bubble is what remains of its timeline. Here F = 4 us and B = 8 us per layer.
  for (const auto& row : std::vector<std::tuple<int, int, int>>{{2, 3, 4}, {4, 8, 8}, {4, 2, 4}, {8, 16, 8}}) {
    // named variables, not structured bindings: CAPTURE takes them into a lambda (clang 14 refuses bindings there)
    const int pp = std::get<0>(row);
    const int m = std::get<1>(row);
    const int layers = std::get<2>(row);
    CAPTURE(pp);
    CAPTURE(m);
    const auto model = uniform_model(layers);
    const UniformLayers cost(model.vocab, pp);
    const auto plan = pipeline_plan(model, cost.cluster(), pp, 1, m);
    const auto graphs = sim::build_stage_graphs(model, cost.cluster(), plan);
    const auto r = sim::simulate_stages(sim::Engine(cost), graphs);
    const int per_stage = layers / pp;
    const double fb_us = 12.0 * per_stage;
    CHECK(r.step_time.ps == common::Duration::from_us((m + pp - 1) * fb_us).ps);
    const double expected = static_cast<double>(pp - 1) / (m + pp - 1);
    const auto summary = sim::pipeline_summary(model, plan, r);
    REQUIRE(static_cast<int>(summary.stages.size()) == pp);
    for (const auto& st : summary.stages) {
      CAPTURE(st.stage);
      CHECK(st.compute.ps == common::Duration::from_us(m * fb_us).ps);
      CHECK(st.bubble == doctest::Approx(expected).epsilon(1e-15));
    }
    CHECK(summary.mean_bubble == doctest::Approx(expected).epsilon(1e-15));
  }
}

TEST_CASE("bubble of the interleaved schedule: (pp - 1) / (vp m + pp - 1) in the uniform case") {
  // Narayanan et al. 2021 (section 2.2.2): with vp chunks per rank each pass takes 1/vp of a stage's
  // time, so the bubble shrinks by vp: fraction (pp - 1) / (vp m + pp - 1) of the step, for m a
  // multiple of pp and free transfers. Again only the order of passes is given to the engine.
  for (const auto& row : std::vector<std::tuple<int, int, int>>{{2, 2, 4}, {4, 2, 8}, {4, 3, 4}}) {
    // named variables, not structured bindings: CAPTURE takes them into a lambda (clang 14 refuses bindings there)
    const int pp = std::get<0>(row);
    const int vp = std::get<1>(row);
    const int m = std::get<2>(row);
    CAPTURE(pp);
    CAPTURE(vp);
    const auto model = uniform_model(pp * vp * 2);
    const UniformLayers cost(model.vocab, pp);
    const auto plan = pipeline_plan(model, cost.cluster(), pp, vp, m);
    const auto r = sim::simulate_stages(sim::Engine(cost), sim::build_stage_graphs(model, cost.cluster(), plan));
    const double chunk_fb_us = 12.0 * 2;  // 2 layers per chunk
    CHECK(r.step_time.ps == common::Duration::from_us((vp * m + pp - 1) * chunk_fb_us).ps);
    CHECK(sim::pipeline_summary(model, plan, r).mean_bubble == doctest::Approx(static_cast<double>(pp - 1) / (vp * m + pp - 1)));
  }
}

TEST_CASE("stage graphs: every micro-batch in schedule order, one transfer per pass and direction, DP buckets at the end") {
  const auto c = test::fake_cluster();
  const auto model = uniform_model(8);
  sim::PlanInput in;
  in.tp = 2;
  in.pp = 2;
  in.dp = 2;
  in.micro_batch = 1;
  in.global_batch = 6;  // 3 micro-batches per pipeline
  in.dtype = common::DType::fp32;
  const auto plan = sim::resolve_plan(model, c, in, "test");
  const auto graphs = sim::build_stage_graphs(model, c, plan);
  REQUIRE(graphs.size() == 2);
  CHECK(graphs[1].rank == 4);  // world rank = t + tp (d + dp s): stage 1 starts at 2 x 2
  for (const auto& g : graphs) {
    CHECK(g.micro_batches == 3);
    CHECK(g.represents == 4);
    int sends = 0, recvs = 0, dp = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      const auto& t = g.tasks[i];
      if (t.op == sim::Op::pipe) (g.inputs(i).empty() ? recvs : sends) += 1;
      if (t.op == sim::Op::dp_reduce && g.groups[*t.group].name == "dp") ++dp;
    }
    // stage 0 sends 3 activations and receives 3 gradients; stage 1 the reverse
    CHECK(sends == 3);
    CHECK(recvs == 3);
    CHECK(dp >= 1);
  }
  // the tied embedding: stage 0 and stage 1 each hold it and sum its gradient in group "embd"
  for (const auto& g : graphs) CHECK(g.group_id("embd").has_value());
  // the first stage's order of passes is its schedule's: F0 F1? no - with pp = 2 stage 0 warms up one
  std::vector<std::pair<int, bool>> passes;
  for (const auto& t : graphs[0].tasks)
    if (t.micro >= 0 && (passes.empty() || passes.back().first != t.micro || passes.back().second != (t.phase == sim::Phase::fwd)))
      passes.emplace_back(t.micro, t.phase == sim::Phase::fwd);
  const std::vector<std::pair<int, bool>> expected{{0, true}, {1, true}, {0, false}, {2, true}, {1, false}, {2, false}};
  CHECK(passes == expected);
}

TEST_CASE("ZeRO-1 with pipeline stages: each stage reduce-scatters its own parameters once and gathers them back") {
  // tp 2 x dp 2 x pp 2 on 8 GPUs, 3 micro-batches per pipeline, buckets small enough that every
  // stage has several. Expected, from the distributed optimizer's definition applied per stage:
  //  - every bucket is reduce-scattered once per step (after the last micro-batch) and its updated
  //    parameters all-gathered once (at the step's start, overlap_param_gather), over the stage's DP group;
  //  - the reduce-scatters cover the stage's parameters exactly once: sum of padded bucket sizes is
  //    stage_params plus at most dp - 1 padding elements per bucket (fp32: 4 bytes each), the
  //    gathers the same elements in the activation dtype;
  //  - the optimizer steps the shards: their sum is the reduce-scattered elements / dp;
  //  - tied embeddings: the embedding group's sum runs before the reduce-scatter of the bucket
  //    holding that gradient (afterwards the full gradient is gone);
  //  - memory: the stage's optimizer state is the same plan's without ZeRO over dp, the rest equal.
  const auto c = test::fake_cluster();
  const auto model = uniform_model(8);
  sim::PlanInput in;
  in.tp = 2;
  in.pp = 2;
  in.dp = 2;
  in.micro_batch = 1;
  in.global_batch = 6;
  in.dp_bucket_mb = 0.2;
  in.zero = 1;
  const auto plan = sim::resolve_plan(model, c, in, "test");
  const auto graphs = sim::build_stage_graphs(model, c, plan);
  const sim::Shapes sh(model, plan);
  for (int s = 0; s < 2; ++s) {
    const auto& g = graphs[static_cast<std::size_t>(s)];
    INFO("stage " << s);
    int rs = 0, ag = 0;
    std::int64_t rs_elems = 0, ag_bytes = 0, opt = 0;
    std::size_t embd = g.size(), embd_rs = g.size();
    const sim::TensorId emb_grad = [&] {
      for (std::size_t x = 0; x < g.tensors.size(); ++x)
        if (g.tensors[x].role == sim::TensorRole::weight_grad && g.tensors[x].op == sim::Op::embedding) return static_cast<sim::TensorId>(x);
      return sim::TensorId{0};
    }();
    for (std::size_t i = 0; i < g.size(); ++i) {
      const auto& t = g.tasks[i];
      const auto* co = std::get_if<hardware::CollectiveOp>(&t.kind);
      if (t.group && g.groups[*t.group].name == "embd") embd = i;
      if (co && co->kind == hardware::CollectiveKind::reduce_scatter) {
        ++rs;
        CHECK(t.once_per_step);
        CHECK(g.groups[*t.group].name == "dp");
        rs_elems += static_cast<std::int64_t>(co->bytes) / 4;
        for (auto x : g.inputs(i))
          if (x == emb_grad) embd_rs = i;
      }
      if (co && co->kind == hardware::CollectiveKind::all_gather && t.op == sim::Op::param_gather) {
        ++ag;
        CHECK(t.step_start);
        ag_bytes += static_cast<std::int64_t>(co->bytes);
      }
      if (t.op == sim::Op::optimizer) opt = std::get<hardware::OptimizerOp>(t.kind).params;
    }
    const std::int64_t params = sh.stage_params(s == 0, s == 1, 4);
    CHECK(rs >= 2);
    CHECK(ag == rs);
    CHECK(rs_elems >= params);
    CHECK(rs_elems <= params + rs * (plan.dp - 1));
    CHECK(ag_bytes == rs_elems * 2);  // bf16 plan: the updated parameters gathered in bf16
    CHECK(opt * plan.dp == rs_elems);
    REQUIRE(embd < g.size());
    REQUIRE(embd_rs < g.size());
    CHECK(embd < embd_rs);
    sim::Plan q = plan;
    q.zero = 0;
    const auto z1 = sim::estimate_stage_memory(model, c, plan, s), z0 = sim::estimate_stage_memory(model, c, q, s);
    CHECK(z1.optimizer == doctest::Approx(z0.optimizer / plan.dp));
    CHECK(z1.gradients == doctest::Approx(z0.gradients));
    CHECK(z1.weights == doctest::Approx(z0.weights));
    CHECK(z1.activations == doctest::Approx(z0.activations));
  }
}

TEST_CASE("stage memory: activations of the passes in flight, read off the schedule") {
  // 1F1B with pp = 4 and m = 8: stage s holds min(pp - s, m) micro-batches' activations at its peak.
  // Stages 1 and 2 hold the same layers and the same kind of input (a received activation), so their
  // activation memory is in the ratio 3 : 2; weights are equal.
  const auto c = cluster_of(4);
  const auto model = uniform_model(8);
  const auto plan = pipeline_plan(model, c, 4, 1, 8);
  const auto graphs = sim::build_stage_graphs(model, c, plan);
  const auto m1 = sim::estimate_memory(graphs[1], c), m2 = sim::estimate_memory(graphs[2], c);
  CHECK(m1.activations == doctest::Approx(1.5 * m2.activations));
  CHECK(m1.weights == doctest::Approx(m2.weights));
  // stage 0 additionally holds the embedding (and positions), the last stage the final norm and the head
  CHECK(sim::estimate_memory(graphs[0], c).weights > m1.weights);
  CHECK(sim::estimate_memory(graphs[3], c).weights > m1.weights);
  // the closed form the tuner uses (no graph) agrees with the graphs' own tensors, stage by stage
  for (int s = 0; s < plan.pp; ++s) {
    const auto g = sim::estimate_memory(graphs[static_cast<std::size_t>(s)], c), f = sim::estimate_stage_memory(model, c, plan, s);
    CHECK(f.activations == doctest::Approx(g.activations));
    CHECK(f.weights == doctest::Approx(g.weights));
    CHECK(f.total() == doctest::Approx(g.total()));
  }
}

TEST_CASE("worst_stage_memory is the largest of every stage's own estimate, the first of equal ones") {
  // worst_stage_memory skips a 1F1B stage whose chunk has the shape of an earlier stage's (it holds
  // the same bytes for fewer passes in flight, min(pp - s, m)); the expected value here is computed
  // without that shortcut: estimate_stage_memory of every stage, the first strict maximum kept.
  const auto model = uniform_model(12);
  struct Case {
    int pp, vp, m;
    std::vector<int> split;  // empty: even
    bool interleaved;
  };
  const std::vector<Case> cases = {{4, 1, 8, {}, false},  {4, 1, 2, {}, false},         {2, 1, 1, {}, false},
                                   {4, 1, 8, {2, 4, 4, 2}, false}, {4, 1, 8, {4, 2, 2, 4}, false}, {3, 1, 5, {}, false},
                                   {2, 2, 4, {}, true},   {4, 3, 8, {}, true},          {6, 1, 3, {}, false}};
  for (const auto& k : cases) {
    const auto c = cluster_of(k.pp);
    sim::PlanInput in;
    in.tp = 1;
    in.pp = k.pp;
    in.vp = k.vp;
    in.dp = 1;
    in.micro_batch = 1;
    in.global_batch = k.m;
    in.dtype = common::DType::fp32;
    if (k.interleaved) in.schedule = sim::PipelineSchedule::interleaved;
    if (!k.split.empty()) in.pipeline_layers = k.split;
    const auto plan = sim::resolve_plan(model, c, in, "test");
    sim::MemoryEstimate expect = sim::estimate_stage_memory(model, c, plan, 0);
    for (int s = 1; s < plan.pp; ++s)
      if (const auto e = sim::estimate_stage_memory(model, c, plan, s); e.total() > expect.total()) expect = e;
    const auto got = sim::worst_stage_memory(model, c, plan);
    CAPTURE(k.pp);
    CAPTURE(k.m);
    CAPTURE(k.split.size());
    CHECK(got.total() == expect.total());
    CHECK(got.activations == expect.activations);
    CHECK(got.weights == expect.weights);
    CHECK(got.optimizer == expect.optimizer);
  }
}

TEST_CASE("stage memory composes with activation recompute: each in-flight micro-batch keeps only what recompute leaves") {
  // Full recompute of every layer (chunks of one layer) keeps, per layer and micro-batch, only the
  // layer's input: s b h elements (Korthikanti et al. 2022: 2 s b h bytes at 16 bits; this plan is
  // fp32, 4 bytes) instead of the whole layer's saved tensors; the in-flight count is the schedule's
  // either way (1F1B, pp 4, m 8: stage s holds min(pp - s, m)). So on a middle stage (no embedding,
  // no head) activations = in_flight x layers x checkpoint, and the recompute working set is one
  // layer's tensors less its input (kept anyway).
  const auto c = cluster_of(4);
  const auto model = uniform_model(8);
  auto plan = pipeline_plan(model, c, 4, 1, 8);
  plan.recompute = sim::Recompute::full;
  const auto graphs = sim::build_stage_graphs(model, c, plan);
  const sim::Shapes sh(model, plan);
  const double checkpoint = common::dtype_bytes(sh.act_dtype) * static_cast<double>(plan.micro_batch * plan.seq_len) * static_cast<double>(sh.h);  // x, [T, h]
  const auto m1 = sim::estimate_memory(graphs[1], c);  // stage 1: 2 layers, min(4 - 1, 8) = 3 micro-batches in flight
  CHECK(m1.activations == doctest::Approx(3.0 * 2.0 * checkpoint));
  CHECK(m1.recomputed == doctest::Approx(sim::layer_activation_bytes(model, plan) - checkpoint));
  // and it is less than without recompute
  auto none = plan;
  none.recompute = sim::Recompute::none;
  CHECK(m1.activations < sim::estimate_stage_memory(model, c, none, 1).activations);
  // the recompute tasks are in the graph: each backward pass re-runs its chunk's forward
  std::size_t recomputed = 0;
  for (const auto& t : graphs[1].tasks) recomputed += t.recompute && t.op == sim::Op::qkv;
  CHECK(recomputed == static_cast<std::size_t>(plan.grad_accum_steps() * 2));  // 8 micro-batches x 2 layers
}

TEST_CASE("bad pipeline plans are refused in one line naming the key") {
  // pp not dividing the GPUs (8 here), the layers without an explicit split, vp not dividing the
  // layer count, fewer micro-batches than stages in the interleaved schedule.
  const auto c = test::fake_cluster();
  const auto model = uniform_model(8);
  auto resolve = [&](const std::function<void(sim::PlanInput&)>& set) {
    sim::PlanInput in;
    in.micro_batch = 1;
    set(in);
    return error_of([&] { sim::resolve_plan(model, c, in, "plan.yaml"); });
  };
  CHECK(resolve([](auto& in) { in.pp = 3; }) == "plan.yaml: pp: pp=3 does not divide the cluster's 8 GPUs / tp=1");
  const auto m6 = uniform_model(6);
  CHECK(error_of([&] {
          sim::PlanInput in;
          in.pp = 4;
          sim::resolve_plan(m6, c, in, "plan.yaml");
        }) == "plan.yaml: pp: layers=6 is not divisible by pp=4 (give pipeline_layers for an uneven split)");
  CHECK(resolve([](auto& in) {
          in.pp = 2;
          in.vp = 3;
          in.global_batch = 8;
        }) == "plan.yaml: vp: layers=8 is not divisible by pp x vp = 2 x 3 (give pipeline_layers for an uneven split)");
  CHECK(resolve([](auto& in) {
          in.pp = 4;
          in.vp = 2;
          in.global_batch = 4;  // dp 2: 2 micro-batches per pipeline
        }) == "plan.yaml: global_batch: the interleaved schedule needs a multiple of pp=4 micro-batches per pipeline, got global_batch / "
              "(micro_batch x dp) = 4 / (1 x 2) = 2");
  CHECK(resolve([](auto& in) {
          in.pp = 2;
          in.pipeline_layers = std::vector<int>{3, 4};
        }) == "plan.yaml: pipeline_layers: the entries sum to 7 layers, the model has 8");
  CHECK(resolve([](auto& in) {
          in.pp = 2;
          in.schedule = sim::PipelineSchedule::interleaved;
        }) == "plan.yaml: vp: the interleaved schedule needs vp >= 2 model chunks per pipeline rank");
  // ZeRO-2/3 with pipeline parallelism: refused with DeepSpeed's reason (its PipelineEngine asserts
  // zero stage < 2 with "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"); ZeRO-1 runs
  CHECK(resolve([](auto& in) {
          in.pp = 2;
          in.zero = 2;
        }) == "plan.yaml: zero: zero=2 with pp=2: ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism (DeepSpeed's "
              "pipeline engine; Megatron-LM's distributed optimizer is ZeRO-1); use zero: 0 | 1 or pp: 1");
  CHECK(resolve([](auto& in) {
          in.pp = 2;
          in.zero = 1;
        }) == "no error");
  // the YAML reader: a list, each entry a positive integer
  CHECK(error_of([] { sim::parse_plan_input("pp: 2\npipeline_layers: [4, -1]\n", "p.yaml"); }) ==
        "p.yaml: pipeline_layers[1]: expected a positive integer, got -1");
  CHECK(error_of([] { sim::parse_plan_input("schedule: gpipe\n", "p.yaml"); }).find("p.yaml: schedule: expected one of 1f1b | interleaved") == 0);
}

TEST_CASE("blocking transfers: the host issues the tasks after a receive only once the GPU has drained") {
  // Megatron-LM's blocking exchange ends with torch.cuda.synchronize(): after a receive the host
  // waits until every task it issued so far has run, then issues the next task, one launch later.
  // Expected, by hand: on every stage, the task issued right after each receive starts exactly one
  // launch (2 us here, launches = 1) after the last of the tasks issued up to the receive ends -
  // its inputs (the received tensor) are ready and its stream is idle by then. With p2p_overlap the
  // host never waits: it issues every task from the step's start, so at least one such task starts
  // before that bound, and the step is shorter than the blocking one (the host is slower than the
  // GPU here: 2 us per task against 1 us per GEMM and free element-wise kernels).
  const auto model = uniform_model(8);
  const common::Duration launch = common::Duration::from_us(2.0);
  const UniformLayers cost(model.vocab, 2, launch);
  auto plan = pipeline_plan(model, cost.cluster(), 2, 1, 4);
  REQUIRE_FALSE(plan.p2p_overlap);  // Megatron-LM's default without interleaving
  const auto graphs = sim::build_stage_graphs(model, cost.cluster(), plan);
  const auto blocking = sim::simulate_stages(sim::Engine(cost, {.timeline = true}), graphs);
  int receives = 0;
  for (std::size_t s = 0; s < graphs.size(); ++s) {
    const auto& g = graphs[s];
    const auto& tl = blocking.timelines.at(s).timing;
    common::Duration drained{};
    for (std::size_t i = 0; i + 1 < g.size(); ++i) {
      drained = std::max(drained, tl[i].end);
      if (g.tasks[i].op != sim::Op::pipe || !g.inputs(i).empty()) continue;
      ++receives;
      CAPTURE(s);
      CAPTURE(i);
      REQUIRE(g.tasks[i + 1].launches == 1);
      CHECK(tl[i + 1].start.ps == (drained + launch).ps);
    }
  }
  CHECK(receives == 2 * 4);  // stage 1 receives 4 activations, stage 0 4 gradients
  plan.p2p_overlap = true;
  const auto overlap_graphs = sim::build_stage_graphs(model, cost.cluster(), plan);
  const auto overlapped = sim::simulate_stages(sim::Engine(cost, {.timeline = true}), overlap_graphs);
  bool ran_ahead = false;
  for (std::size_t s = 0; s < overlap_graphs.size(); ++s) {
    const auto& g = overlap_graphs[s];
    const auto& tl = overlapped.timelines.at(s).timing;
    common::Duration drained{};
    for (std::size_t i = 0; i + 1 < g.size(); ++i) {
      drained = std::max(drained, tl[i].end);
      if (g.tasks[i].op == sim::Op::pipe && g.inputs(i).empty() && tl[i + 1].start < drained + launch) ran_ahead = true;
    }
  }
  CHECK(ran_ahead);
  CHECK(overlapped.step_time < blocking.step_time);
}

TEST_CASE("a long pipelined step extrapolated from pp and pp + 1 micro-batches equals its whole simulation") {
  // sim::simulate_plan: the steady state repeats once per micro-batch (1F1B) or per group of pp
  // (interleaved) between a warm-up and a cool-down that do not depend on m, so the step is linear
  // in m beyond the counts it simulates. Expected: the whole simulation's step and compute busy
  // time (--all-micro-batches), to the picosecond up to rounding of the linear extrapolation.
  for (const auto& row : std::vector<std::tuple<int, int, int>>{{2, 1, 12}, {4, 1, 16}, {2, 2, 12}}) {
    // named variables, not structured bindings: CAPTURE takes them into a lambda (clang 14 refuses bindings there)
    const int pp = std::get<0>(row);
    const int vp = std::get<1>(row);
    const int m = std::get<2>(row);
    CAPTURE(pp);
    CAPTURE(vp);
    const auto model = uniform_model(8);
    const test::FakeCostModel cost(cluster_of(pp));
    const auto plan = pipeline_plan(model, cost.cluster(), pp, vp, m);
    const auto quick = sim::simulate_plan(model, cost.cluster(), plan, cost);
    const auto whole = sim::simulate_plan(model, cost.cluster(), plan, cost, {}, true);
    REQUIRE(quick.extrapolated());
    CHECK_FALSE(whole.extrapolated());
    CHECK(std::abs(quick.report.step_time.ps - whole.report.step_time.ps) <= 2);
    CHECK(std::abs(quick.report.compute.ps - whole.report.compute.ps) <= 2);
  }
}
