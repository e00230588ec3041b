// The launch plan's GEMM calls (transposes, leading dimensions, column-chunk offsets, = or +=)
// compute the layer math the step graph means. Checked on random data with the CPU GEMM
// (OpenBLAS, same row-major GemmCall the CUDA backend hands to cuBLASLt) against naive loops.
#include <doctest/doctest.h>

#if defined(SLICETUNE_HAVE_CUDA_BACKEND) && __has_include("executor/cpu/kernels.hpp")
#include <cmath>
#include <random>

#include "executor/cpu/kernels.hpp"
#include "executor/cuda/launch_plan.hpp"
#include "sim/strategy.hpp"

namespace {

/// Naive reference from the step graph's semantics (weights [in, out], Y = X W; chunk c of a
/// row-parallel output = columns [c n, (c + 1) n); LM head tied: logits = X W^T, W [vocab/tp, h]).
std::vector<float> reference(const sim::StepGraph& g, std::size_t t, const std::vector<std::vector<float>>& data) {
  const auto& task = g.tasks[t];
  const auto in = g.inputs(t);
  const auto out = g.outputs(t);
  const auto& C = g.tensors[out[0]];
  std::vector<float> c = data[out[0]];
  const auto at = [&](sim::TensorId id, std::int64_t r, std::int64_t col) {
    return static_cast<double>(data[id][static_cast<std::size_t>(r * g.tensors[id].cols + col)]);
  };
  const bool lm = task.op == sim::Op::lm_head;
  for (std::int64_t i = 0; i < C.rows; ++i)
    for (std::int64_t j = 0; j < C.cols; ++j) {
      double s = 0;
      if (task.phase == sim::Phase::fwd) {
        const auto& X = g.tensors[in[0]];
        const std::int64_t off = task.chunk >= 0 ? task.chunk * C.cols : 0;
        for (std::int64_t k = 0; k < X.cols; ++k) s += at(in[0], i, k) * (lm ? at(in[1], j, k) : at(in[1], k, off + j));
      } else if (task.phase == sim::Phase::bwd_dgrad) {
        const auto& dY = g.tensors[in[0]];
        for (std::int64_t k = 0; k < dY.cols; ++k) s += at(in[0], i, k) * (lm ? at(in[1], k, j) : at(in[1], j, k));
      } else {  // wgrad: inputs {dY, X} (LM head: {dlogits, X}); dW += X^T dY (LM head: dlogits^T X)
        const auto& dY = g.tensors[in[0]];
        for (std::int64_t r = 0; r < dY.rows; ++r) s += lm ? at(in[0], r, i) * at(in[1], r, j) : at(in[1], r, i) * at(in[0], r, j);
        s += c[static_cast<std::size_t>(i * C.cols + j)];
      }
      c[static_cast<std::size_t>(i * C.cols + j)] = static_cast<float>(s);
    }
  return c;
}

}  // namespace

TEST_CASE("every GEMM call of a tp 2, 2-column-chunk plan computes its layer math") {
  // Expected: GemmCall through cblas_sgemm equals the naive loops to fp32 rounding (relative 1e-5).
  for (const char* model : {"tiny", "tiny-llama"}) {
    CAPTURE(model);
    auto m = sim::load_model(model);
    auto cl = hardware::load_cluster("dgx-h200");
    cl.node.gpus_per_node = 2;
    sim::PlanInput in;
    in.tp = 2;
    in.micro_batch = 2;
    in.strategy = &sim::strategy_domino();
    in.row_slices = 1;
    in.col_slices = 2;
    in.dtype = common::DType::fp32;
    const auto plan = sim::resolve_plan(m, cl, in);
    const auto g = sim::build_step_graph(m, cl, plan);
    const auto p = executor::cuda::plan_launches(g);
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<std::vector<float>> data(g.tensors.size());
    for (std::size_t i = 0; i < g.tensors.size(); ++i) {
      data[i].resize(static_cast<std::size_t>(g.tensors[i].rows * g.tensors[i].cols));
      for (auto& v : data[i]) v = u(rng);
    }
    int checked = 0;
    for (std::size_t t = 0; t < g.size(); ++t) {
      if (!p.launches[t].gemm) continue;
      const auto& c = *p.launches[t].gemm;
      CAPTURE(g.task_name(t));
      const auto want = reference(g, t, data);
      auto got = data[c.c];
      executor::cpu::gemm(c.trans_a, c.trans_b, c.m, c.n, c.k, 1.0f, data[c.a].data(), c.lda, data[c.b].data() + c.b_offset, c.ldb,
                          c.accumulate ? 1.0f : 0.0f, got.data(), c.ldc);
      double worst = 0;
      for (std::size_t i = 0; i < want.size(); ++i)
        worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]) / (1.0 + std::abs(static_cast<double>(want[i]))));
      CHECK(worst < 1e-5);
      ++checked;
    }
    // 2 layers x (qkv, out_proj x 2 chunks, fc1, fc2 x 2 chunks fwd; 4 dgrad; 4 wgrad) + LM head fwd, dgrad, wgrad
    CHECK(checked == 2 * (6 + 4 + 4) + 3);
  }
}
#endif
