// Size limits: the task-count bound checked where the plan is resolved, simulated time that
// refuses to overflow, and a run that does not fit memory refused before allocating.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "common/config_reader.hpp"
#include "common/embedded_configs.hpp"
#include "common/limits.hpp"
#include "common/units.hpp"
#include "hardware/cluster.hpp"
#include "sim/plan_limits.hpp"
#include "sim/step_graph.hpp"
#include "sim/strategy.hpp"
#include "sim/target.hpp"
#include "tests/hardening/process.hpp"

using namespace hardening;

namespace {

sim::Target target(const std::string& model, const std::string& cluster, int nodes, const sim::PlanInput& flags) {
  sim::TargetInput in;
  in.model = model;
  in.cluster = cluster;
  in.nodes = nodes;
  in.flags = flags;
  return sim::resolve_target(in);
}

}  // namespace

TEST_CASE("max_tasks bounds every step graph and is exact for the fullest schedule") {
  // Fullest schedule: sequence parallelism with tp > 1 (every AllGather and ReduceScatter), dp > 1
  // with 1-byte buckets (one DP AllReduce per weight gradient), an untied LM head and learned
  // positions (the two optional gradients): the builder emits exactly the bound.
  const std::string untied =
      "name: u\nlayers: 3\nhidden: 64\nheads: 4\nffn_hidden: 256\nvocab: 256\nseq_len: 32\nnorm: layernorm\nactivation: gelu\n"
      "position: learned\ntied_embeddings: false\n";
  const sim::ModelSpec m = sim::parse_model(untied, "u.yaml");
  hardware::ClusterSpec c = hardware::load_cluster("dgx-h100");
  for (int rows : {1, 2, 4})
    for (int cols : {1, 2, 4}) {
      sim::PlanInput in;
      in.tp = 2;
      in.micro_batch = 4;
      in.sequence_parallel = true;
      in.strategy = rows * cols > 1 ? &sim::strategy_domino() : &sim::strategy_none();
      in.row_slices = rows;
      in.col_slices = cols;
      in.dp_bucket_mb = 1e-6;
      const sim::Plan p = sim::resolve_plan(m, c, in);
      const auto g = sim::build_step_graph(m, c, p);
      CAPTURE(rows);
      CAPTURE(cols);
      CHECK(static_cast<std::int64_t>(g.size()) == sim::max_tasks(m, p));
      // the memory savers add tasks (recompute re-runs the forward, ZeRO gathers parameters and
      // steps shards): the bound still holds with the most of them
      for (const int zero : {1, 3}) {
        in.recompute = sim::Recompute::full;
        in.zero = zero;
        const sim::Plan q = sim::resolve_plan(m, c, in);
        const auto gq = sim::build_step_graph(m, c, q);
        CAPTURE(zero);
        CHECK(static_cast<std::int64_t>(gq.size()) <= sim::max_tasks(m, q));
      }
    }
  // and an upper bound for the embedded models' usual plans
  for (const char* model : {"gpt3-13b", "llama2-7b", "tiny"})
    for (const char* strategy : {"none", "domino", "fused"}) {
      sim::PlanInput in;
      in.tp = 8;
      in.micro_batch = 4;
      in.strategy = &sim::find_strategy(strategy);
      if (*in.strategy == &sim::strategy_domino()) in.col_slices = 2;
      // FLUX's sites (sequence parallel) on Hopper: tp x up to 4 sub-chunks per GEMM + ReduceScatter site
      if (*in.strategy == &sim::strategy_fused()) in.sequence_parallel = true;
      sim::Target t;
      try {
        t = target(model, "dgx-h100", 1, in);
      } catch (const common::ConfigError&) {
        continue;  // tiny's 4 heads do not divide by tp 8
      }
      const auto g = sim::build_step_graph(t.model, t.cluster, t.plan);
      CAPTURE(model);
      CHECK(static_cast<std::int64_t>(g.size()) <= sim::max_tasks(t.model, t.plan));
    }
}

TEST_CASE("the task-count limit refuses before anything is built") {
  // GPT-3 175B, 64 row slices along the sequence x 64 column chunks: 96 x 64 x (28 + 4 x 64) + 15 x 64
  // + 6 x 96 + 6 = 1,746,438 tasks (about 350 MB) > limits::kMaxTasks
  sim::PlanInput in;
  in.strategy = &sim::strategy_domino();
  in.row_axis = sim::RowAxis::sequence;
  in.row_slices = 64;
  in.col_slices = 64;
  CHECK(error_of([&] { target("gpt3-175b", "dgx-h100", 1, in); }) ==
        "flags: row_slices: 96 layers x 64 row slices x 64 column chunks make up to 1746438 tasks per rank, more than the 1000000 "
        "slicetune builds (about 200 bytes each); use fewer slices");
  // 16 row slices x 16 chunks: 96 x 16 x 92 + 15 x 16 + 6 x 96 + 6 = 142,134 tasks: accepted
  in.row_slices = 16;
  in.col_slices = 16;
  CHECK(error_of([&] { target("gpt3-175b", "dgx-h100", 1, in); }).empty());
}

TEST_CASE("simulated time refuses NaN, infinity and overflow instead of wrapping to a negative time") {
  using common::Duration;
  // 1e18 ps (11.6 days) is the largest single duration; 2^63 ps would wrap
  CHECK(Duration::from_ns(1e9).ps == 1'000'000'000'000);
  CHECK(error_of([] { Duration::from_ns(std::nan("")); }).rfind("simulated time: a priced duration", 0) == 0);
  CHECK(error_of([] { Duration::from_ns(std::numeric_limits<double>::infinity()); }).rfind("simulated time:", 0) == 0);
  CHECK(error_of([] { Duration::from_s(2e6); }).rfind("simulated time:", 0) == 0);
  CHECK(error_of([] { Duration::from_ps(std::numeric_limits<std::int64_t>::max()) + Duration::from_ps(1); })
            .rfind("simulated time: 9223372036854775807 + 1 overflows 64 bits", 0) == 0);
  CHECK(error_of([] { Duration::from_ps(std::int64_t{1} << 40) * (std::int64_t{1} << 30); }).find("overflows 64 bits") != std::string::npos);
  // a cluster whose NVLink moves 1 byte per second: a step that takes longer than the simulator can
  // represent is refused with the reason (before: a negative or garbage step time)
  Scratch s;
  std::string text = common::resolve_config("clusters", "dgx-h100").text;
  text.replace(text.find("nvlink_gb_per_s: 450"), 20, "nvlink_gb_per_s: 1e-9");
  write_text(s / "slow.yaml", text);
  const auto r = slicetune({"simulate", "--cluster", s / "slow.yaml", "--tp", "8"});
  CHECK(r.code == 2);
  CHECK(r.err.rfind("slicetune: error: simulated time: a priced duration of", 0) == 0);
}

#ifdef SLICETUNE_HAVE_EXECUTOR
TEST_CASE("run --model gpt3-175b --tp 2 is refused at once: it cannot fit memory") {
  // fp32 weights + gradients + AdamW m, v of 174.6 B parameters over 2 ranks: 16 B x 87 B = 1.4 TB
  // per rank, more than any machine this runs on; before, it allocated for 79 s until bad_alloc
  const auto r = run(mpirun_argv(2, {"run", "--model", "gpt3-175b", "--tp", "2", "--quiet"}), 60);
  INFO(r.err);
  CHECK(r.code != 0);
  CHECK(count_lines_with(r.err, "slicetune: error: --model: gpt3-175b with this plan needs") == 1);
  CHECK(r.err.find("GB per rank on the cpu backend") != std::string::npos);
  CHECK(r.seconds < 20);
}
#endif
