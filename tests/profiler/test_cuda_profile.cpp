// The CUDA profiler's host half, without a GPU: what it asks the GPU to time (cuda_request) and how
// a measurement becomes the profile file's rows (cuda_profile), element-wise and optimizer rows
// included, and that the profiled cost model prices a CUDA-runnable plan's tasks from them.
#include <doctest/doctest.h>

#ifdef SLICETUNE_PROFILER_CUDA
#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <tuple>

#include "hardware/profile.hpp"
#include "hardware/profiled_cost_model.hpp"
#include "profiler/cuda_profiler.hpp"
#include "sim/model.hpp"
#include "sim/plan.hpp"
#include "sim/step_graph.hpp"
#include "sim/strategy.hpp"

namespace {

/// A bf16 step graph the CUDA executor runs (one GPU, domino 2 row slices x 2 column chunks).
sim::StepGraph cuda_graph(const std::string& model_name, hardware::ClusterSpec cluster) {
  cluster.node.gpus_per_node = 1;
  const sim::ModelSpec model = sim::load_model(model_name);
  sim::PlanInput in;
  in.tp = 1;
  in.dp = 1;
  in.micro_batch = 2;
  in.dtype = common::DType::bf16;
  in.strategy = &sim::strategy_domino();
  in.row_slices = 2;
  in.col_slices = 2;
  const sim::Plan plan = sim::resolve_plan(model, cluster, in, "test");
  return sim::build_step_graph(model, cluster, plan);
}

/// The model's shapes as cli/profile.cpp collects them: each element-wise task with its first input's rows.
void add_shapes(const sim::StepGraph& g, profiler::Options& o) {
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (const auto* op = std::get_if<hardware::ElementwiseOp>(&g.tasks[i].kind))
      o.elementwise_shapes.push_back({.op = *op, .rows = g.tensors[g.inputs(i)[0]].rows});
    else if (const auto* op = std::get_if<hardware::OptimizerOp>(&g.tasks[i].kind)) o.optimizer_params.push_back(op->params);
  }
}

/// Closed-form times of the synthetic measurement: 2 us + 0.001 us per element (kernel), 5 us + 1e-4 us
/// per parameter (AdamW). Functions of the size only, so two rows of the same size agree.
double kernel_us(std::int64_t elements) { return 2.0 + 1e-3 * static_cast<double>(elements); }
double adamw_us(std::int64_t params) { return 5.0 + 1e-4 * static_cast<double>(params); }

profiler::cuda::Result synthetic_result(const profiler::cuda::Request& req) {
  profiler::cuda::Result r;
  r.device = {.name = "NVIDIA H200", .major = 9, .sms = 132, .memory_bytes = 1.4e11, .copy_bytes_per_s = 3.7e12};
  // a GEMM grid (a profile file must have one): 1 us + the FLOPs at 500 TFLOP/s
  for (auto m : req.grid)
    for (auto n : req.grid)
      for (auto k : req.grid) r.gemm.push_back({.m = m, .n = n, .k = k, .us = 1.0 + 2.0 * m * n * k / 5e8});
  for (const auto& s : req.elementwise) r.elementwise.push_back({.shape = s, .us = kernel_us(s.elements())});
  for (auto n : req.optimizer_params) r.optimizer.push_back({.params = n, .us = adamw_us(n)});
  return r;
}

}  // namespace

TEST_CASE("cuda_request: every CUDA element-wise kernel over the size grid, the model's shapes at their row width") {
  const auto cluster = hardware::load_cluster("dgx-h200");
  const sim::StepGraph g = cuda_graph("tiny", cluster);
  profiler::Options o{.backend = "cuda", .quick = true};
  add_shapes(g, o);
  // a kind the CUDA executor has no kernel for (the CPU profiler times it; no CUDA launch runs it)
  o.elementwise_shapes.push_back({.op = {.kind = hardware::ElementwiseKind::accumulate, .elements = 4096, .bytes = 1}, .rows = 4});
  const auto req = profiler::cuda_request(o);

  std::set<std::tuple<std::string, bool, std::int64_t, std::int64_t>> got;
  for (const auto& s : req.elementwise) got.insert({s.kind, s.backward, s.rows, s.cols});
  CHECK(got.size() == req.elementwise.size());  // each shape once
  // Expected grid (quick): 64 * 4^k elements for k = 0..7 (64 .. 2^20), rows of min(elements, 1024) columns.
  for (const auto& k : profiler::cuda::kElementwiseKernels)
    for (std::int64_t e = 64; e <= (1 << 20); e *= 4) {
      const std::int64_t cols = std::min<std::int64_t>(e, 1024);
      CAPTURE(k.kind);
      CAPTURE(e);
      CHECK(got.count({k.kind, k.backward, e / cols, cols}) == 1);
    }
  // Expected: each element-wise task of the graph at its own rows and elements / rows columns.
  int tasks = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const auto* op = std::get_if<hardware::ElementwiseOp>(&g.tasks[i].kind);
    if (!op) continue;
    ++tasks;
    const std::int64_t rows = g.tensors[g.inputs(i)[0]].rows;
    CAPTURE(hardware::to_string(op->kind));
    REQUIRE(op->elements % rows == 0);
    CHECK(got.count({std::string(hardware::to_string(op->kind)), op->backward, rows, op->elements / rows}) == 1);
  }
  CHECK(tasks > 0);
  CHECK(std::none_of(req.elementwise.begin(), req.elementwise.end(), [](const auto& s) { return s.kind == "accumulate"; }));
  // Expected optimizer sizes: 1024 * 4^k for k = 0..5 (1024 .. 2^20) plus the graph's one AdamW size.
  REQUIRE(o.optimizer_params.size() == 1);
  std::vector<std::int64_t> want{1024, 4096, 16384, 65536, 262144, 1048576};
  if (std::find(want.begin(), want.end(), o.optimizer_params[0]) == want.end()) want.push_back(o.optimizer_params[0]);
  std::sort(want.begin(), want.end());
  CHECK(req.optimizer_params == want);
}

TEST_CASE("cuda_request: the full grid reaches 2^24 elements and parameters") {
  // Expected: 64 * 4^k up to 2^24 is 10 sizes per kernel; AdamW 1024 * 4^k up to 2^24 is 8 sizes.
  const auto req = profiler::cuda_request(profiler::Options{.backend = "cuda", .quick = false});
  CHECK(req.elementwise.size() == 10 * profiler::cuda::kElementwiseKernels.size());
  CHECK(req.optimizer_params.size() == 8);
  CHECK(req.optimizer_params.back() == (1 << 24));
}

TEST_CASE("every element-wise kernel name is a hardware::ElementwiseKind name (or stream), and covers the CUDA plans' tasks") {
  // Expected: the profiled model looks rows up by to_string(ElementwiseKind), so each kernel's kind is
  // one of those names; and every element-wise task of a CUDA-runnable bf16 plan (tiny: LayerNorm, GeLU,
  // learned positions; tiny-llama: RMSNorm, SwiGLU, RoPE) has a kernel of its kind and pass.
  std::set<std::string> names{"stream"};
  for (int k = 0; k <= static_cast<int>(hardware::ElementwiseKind::accumulate); ++k)
    names.insert(std::string(hardware::to_string(static_cast<hardware::ElementwiseKind>(k))));
  for (const auto& k : profiler::cuda::kElementwiseKernels) CHECK(names.count(k.kind) == 1);
  const auto cluster = hardware::load_cluster("dgx-h200");
  for (const char* model : {"tiny", "tiny-llama"}) {
    const sim::StepGraph g = cuda_graph(model, cluster);
    for (const auto& t : g.tasks)
      if (const auto* op = std::get_if<hardware::ElementwiseOp>(&t.kind)) {
        const std::string kind(hardware::to_string(op->kind));
        CAPTURE(model);
        CAPTURE(kind);
        CHECK(std::any_of(profiler::cuda::kElementwiseKernels.begin(), profiler::cuda::kElementwiseKernels.end(),
                          [&](const auto& k) { return kind == k.kind && op->backward == k.backward; }));
      }
  }
}

TEST_CASE("cuda_profile: element-wise and optimizer rows are written, read back, and price the plan's tasks") {
  const auto cluster = hardware::load_cluster("dgx-h200");
  const sim::StepGraph g = cuda_graph("tiny", cluster);
  profiler::Options o{.backend = "cuda", .quick = true, .command = "slicetune profile --backend cuda --quick"};
  add_shapes(g, o);
  const auto req = profiler::cuda_request(o);
  const auto r = synthetic_result(req);
  const hardware::Profile p = profiler::cuda_profile(o, req, r);
  // Expected: one row per measurement, elements = rows x cols (ElementwisePoint's convention).
  REQUIRE(p.elementwise.size() == r.elementwise.size());
  for (std::size_t i = 0; i < p.elementwise.size(); ++i) {
    CHECK(p.elementwise[i].kind == r.elementwise[i].shape.kind);
    CHECK(p.elementwise[i].backward == r.elementwise[i].shape.backward);
    CHECK(p.elementwise[i].elements == r.elementwise[i].shape.rows * r.elementwise[i].shape.cols);
  }
  REQUIRE(p.optimizer.size() == req.optimizer_params.size());

  // Written and parsed back: the same rows.
  const hardware::Profile q = hardware::parse_profile(hardware::format_profile(p), "cuda-test.yaml");
  CHECK(q.info.backend == "cuda");
  REQUIRE(q.elementwise.size() == p.elementwise.size());
  for (std::size_t i = 0; i < q.elementwise.size(); ++i) {
    CHECK(q.elementwise[i].kind == p.elementwise[i].kind);
    CHECK(q.elementwise[i].elements == p.elementwise[i].elements);
    CHECK(q.elementwise[i].us == p.elementwise[i].us);  // written as the shortest text that reads back the same double
  }
  REQUIRE(q.optimizer.size() == p.optimizer.size());

  // The profiled model prices every element-wise and optimizer task of the graph from these rows, as
  // for a CPU profile: exactly the closed form at each task's size (each was measured exactly), and
  // no fallback note.
  std::ostringstream notes;
  auto cost = hardware::make_profiled_cost_model(q.cluster, q, &notes);
  int priced = 0;
  for (const auto& t : g.tasks) {
    if (const auto* op = std::get_if<hardware::ElementwiseOp>(&t.kind)) {
      CAPTURE(hardware::to_string(op->kind));
      CHECK(cost->elementwise(*op).time.us() == doctest::Approx(kernel_us(op->elements)).epsilon(1e-3));
      ++priced;
    } else if (const auto* op = std::get_if<hardware::OptimizerOp>(&t.kind)) {
      CHECK(cost->optimizer(*op).time.us() == doctest::Approx(adamw_us(op->params)).epsilon(1e-3));
      ++priced;
    }
  }
  CHECK(priced > 0);
  CHECK(notes.str().empty());
  // Between grid sizes the table interpolates log-linearly: 2048 elements of RMSNorm (not a kind of the
  // tiny model, so only grid rows) lie halfway (in log) between 1024 (3.024 us) and 4096 (6.096 us):
  // sqrt(3.024 x 6.096) = 4.2935 us.
  const hardware::ElementwiseOp norm{.kind = hardware::ElementwiseKind::rmsnorm, .elements = 2048, .bytes = 8192};
  CHECK(cost->elementwise(norm).time.us() == doctest::Approx(std::sqrt(kernel_us(1024) * kernel_us(4096))).epsilon(1e-3));
}
#endif  // SLICETUNE_PROFILER_CUDA
