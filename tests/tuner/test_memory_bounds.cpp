// Closed-form memory and the lower bound against the step graph and the engine.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>

#include "hardware/cost_model.hpp"
#include "sim/step_graph.hpp"
#include "tests/tuner/toy.hpp"
#include "tuner/evaluate.hpp"
#include "tuner/space.hpp"
#include "sim/strategy.hpp"

namespace {

sim::Plan plan(int tp, int dp, int mb, int gb, bool sp, const sim::Strategy* st, int rs, sim::RowAxis ax, int cs, std::int64_t seq) {
  sim::Plan p;
  p.tp = tp;
  p.dp = dp;
  p.micro_batch = mb;
  p.global_batch = gb;
  p.seq_len = seq;
  p.sequence_parallel = sp;
  p.strategy = st;
  p.row_slices = rs;
  p.row_axis = ax;
  p.col_slices = cs;
  return p;
}

}  // namespace

TEST_CASE("toy model: memory worked out by hand") {
  // Toy (tests/tuner/toy.hpp): L=4, h=256, ffn=1024, V=1024, S=128, LayerNorm (2h params per
  // norm), learned positions, tied embeddings, tp=1, bf16.
  // params = V h + S h + L (2*2h + 3h^2 + h^2 + 2 h ffn) + 2h = 262144 + 32768 + 4*787456 + 512 = 3,445,248
  // static bytes = 18 B per parameter (2 bf16 weight + 4 fp32 grad + 12 Adam) = 62,014,464
  // saved activations per token: per layer x, norm1, ctx, x_mid, norm2 (h each), qkv (3h),
  // fc1 out and activation (ffn each) = 8h + 2 ffn = 4096 elements; outside the layers the last
  // residual and the final-norm output (2h) -> 2 B * (4*4096 + 512) = 33,792 B per token.
  const auto m = toy::model();
  const auto c = toy::cluster(1, 1e12);
  const tuner::MemoryModel mem(m, c);
  for (int mb : {1, 4, 8}) {
    const auto p = plan(1, 1, mb, 8, false, &sim::strategy_none(), 1, sim::RowAxis::batch, 1, 128);
    CHECK(tuner::rank_params(m, p) == 3445248);
    const auto e = mem.estimate(p);
    CHECK(e.weights + e.gradients + e.optimizer == doctest::Approx(62014464.0));
    CHECK(e.activations == doctest::Approx(33792.0 * 128 * mb));
  }
}

TEST_CASE("closed-form memory equals estimate_memory of the full graph") {
  // The closed form claims exactness (same tensors, linear in tokens and layers) for every
  // slicing; compare with the graph-based estimate over a spread of plans.
  const auto m = sim::load_model("gpt3-13b");
  auto c = hardware::load_cluster("dgx-h100");
  c.nodes = 2;
  const tuner::MemoryModel mem(m, c);
  const sim::Strategy* const none = &sim::strategy_none();
  const sim::Strategy* const domino = &sim::strategy_domino();
  using A = sim::RowAxis;
  const std::vector<sim::Plan> plans{
      plan(8, 2, 4, 64, false, none, 1, A::batch, 1, 2048),     plan(8, 2, 4, 64, true, domino, 2, A::batch, 2, 2048),
      plan(4, 4, 2, 64, false, domino, 4, A::sequence, 1, 2048), plan(8, 2, 2, 16, true, domino, 2, A::sequence, 4, 1024),
      plan(2, 8, 1, 64, false, domino, 1, A::batch, 2, 2048)};
  for (const auto& p : plans) {
    CAPTURE(sim::describe(p));
    REQUIRE_FALSE(sim::check_plan(m, c, p));
    const auto g = sim::estimate_memory(sim::build_step_graph(m, c, p));
    const auto e = mem.estimate(p);
    CHECK(e.weights == doctest::Approx(g.weights).epsilon(1e-12));
    CHECK(e.gradients == doctest::Approx(g.gradients).epsilon(1e-12));
    CHECK(e.optimizer == doctest::Approx(g.optimizer).epsilon(1e-12));
    CHECK(e.activations == doctest::Approx(g.activations).epsilon(1e-12));
  }
}

TEST_CASE("the lower bound never exceeds the simulated step, and the reduced-layer estimate tracks it") {
  // Lower bound: solo time of GEMMs and attention only; the engine runs compute at most at solo
  // speed on one in-order stream, so bound <= step time for every plan. The estimate simulates 2
  // and 3 layers and extrapolates; the engine is periodic per layer, so we expect < 1 % error.
  const auto m = sim::load_model("gpt3-13b");
  auto c = hardware::load_cluster("dgx-h100");
  c.nodes = 2;
  auto cost = hardware::make_analytic_cost_model(c, hardware::Stack::eager);
  const tuner::Evaluator ev(m, c, *cost);
  const sim::Strategy* const none = &sim::strategy_none();
  const sim::Strategy* const domino = &sim::strategy_domino();
  using A = sim::RowAxis;
  const std::vector<sim::Plan> plans{
      plan(8, 2, 4, 64, false, none, 1, A::batch, 1, 2048),    plan(8, 2, 4, 64, true, domino, 2, A::batch, 2, 2048),
      plan(4, 4, 2, 64, false, domino, 4, A::sequence, 1, 2048), plan(8, 2, 2, 16, true, domino, 2, A::sequence, 4, 1024),
      plan(8, 2, 8, 16, false, domino, 4, A::batch, 2, 2048),   plan(4, 4, 1, 32, true, none, 1, A::batch, 1, 2048)};
  double worst = 0;
  for (const auto& p : plans) {
    CAPTURE(sim::describe(p));
    const auto full = ev.simulate(p);
    const auto est = ev.estimate(p);
    CHECK(ev.compute_lower_bound(p) <= full.step_time);
    const double err = std::abs(est.step_time.s() - full.step_time.s()) / full.step_time.s();
    worst = std::max(worst, err);
    CHECK(err < 0.01);
    CHECK(est.memory.total() == doctest::Approx(full.memory.total()).epsilon(1e-9));
  }
  MESSAGE("max reduced-layer estimate error over " << plans.size() << " plans: " << 100 * worst << " %");
}
