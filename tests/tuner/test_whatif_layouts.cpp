// whatif --by-layout (issue 15): the best plan of each tensor-parallel layout at every point of a
// GPU-count sweep, strong scaling (fixed global batch) and weak scaling (global_batch_per_gpu).
// The sweeps are tiny (the toy model, 4 and 8 GPUs) so that the sanitizer builds run them quickly.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/config_reader.hpp"
#include "hardware/cost_model.hpp"
#include "tests/tuner/cli_run.hpp"
#include "tests/tuner/toy.hpp"
#include "tuner/compare.hpp"
#include "tuner/whatif.hpp"

namespace {

/// The toy model's space, narrowed (one bucket size, no pipeline, no memory savers: 80 GB fits
/// everything) so that the sanitizer builds run it quickly; every layout still has plans at 4 GPUs
/// (2D [2,2]) and 8 GPUs (2D [2,2] dp 2, 2.5D [2,2,2]), and 1D several strategies.
tuner::SearchSpace toy_space() {
  tuner::SearchSpace s;
  s.dp_bucket_mb = {25.0};
  s.max_micro_batch = 16;
  s.pp = {1};
  s.zero = {0};
  s.recompute = {sim::Recompute::none};
  return s;
}

/// Step time (ms) of the best plan of each layout as `tune` on that cluster alone reports it: the
/// rows of its "best plan of each strategy" table (compare_strategies), at tune's default options
/// (top 5), the 1D row being the fastest 1D strategy; -1 where a layout has no row.
struct TuneBests {
  double one_d = -1, megatron = -1, two_d = -1, two_five_d = -1;
  int global_batch = 0;
};
TuneBests tune_alone(const hardware::ClusterSpec& c, tuner::SearchSpace s) {
  const auto m = toy::model();
  auto cost = hardware::make_analytic_cost_model(c, s.stack);
  tuner::SearchOptions o;  // tune's: top 5, 3 extra whole simulations, pruning
  o.threads = 2;
  const auto r = tuner::search(m, c, *cost, s, o);
  const tuner::Evaluator ev(m, c, *cost);
  TuneBests t;
  for (const auto& row : tuner::compare_strategies(r, ev, 2)) {
    if (!row.best) continue;
    const double ms = row.best->report.step_time.ms();
    if (row.layout == sim::TpLayout::two_d) t.two_d = ms;
    else if (row.layout == sim::TpLayout::two_five_d) t.two_five_d = ms;
    else if (t.one_d < 0 || ms < t.one_d) t.one_d = ms;
  }
  if (r.baseline) t.megatron = r.baseline->report.step_time.ms();
  if (!r.top.empty()) t.global_batch = r.top.front().plan.global_batch;
  return t;
}

double ms_of(const tuner::LayoutBest& l) { return l.best ? l.best->report.step_time.ms() : -1; }

}  // namespace

TEST_CASE("strong scaling: each layout's best at each point is what tune on that point alone finds") {
  // toy model on 1 and 2 nodes of 4 GPUs, global batch 16 at both (strong scaling). whatif tunes
  // with top 1; tune's table (top 5) must give each layout the same best, step time for step time.
  const auto c = toy::cluster(4, 80e9);
  auto s = toy_space();
  s.global_batch = 16;
  const auto pts = tuner::whatif(toy::model(), c, s, {tuner::parse_sweep("nodes=1,2")},
                                 tuner::SearchOptions{.threads = 2, .top_k = 1, .prune = true, .extra_full = 3, .progress = {}, .distribution = {}});
  REQUIRE(pts.size() == 2);
  for (int i = 0; i < 2; ++i) {
    const int nodes = i + 1;
    CAPTURE(nodes);
    const auto& p = pts[i];
    CHECK(p.gpus == 4 * nodes);
    CHECK(p.global_batch == 16);
    auto ci = c;
    hardware::set_nodes(ci, nodes, "test");
    const TuneBests t = tune_alone(ci, s);
    const auto rows = tuner::layout_bests(p);
    REQUIRE(rows.size() == 4);
    CHECK(rows[0].name == "1d");
    CHECK(rows[1].name == "1d megatron");
    CHECK(rows[2].name == "2d");
    CHECK(rows[3].name == "2.5d");
    // every layout has a plan here, except 2.5D on 4 GPUs (q^2 x d = 4 needs d = 1: that is 2D)
    REQUIRE(rows[0].best);
    REQUIRE(rows[1].best);
    REQUIRE(rows[2].best);
    CHECK(rows[2].best->plan.tp_layout == sim::TpLayout::two_d);
    CHECK(ms_of(rows[0]) == doctest::Approx(t.one_d).epsilon(1e-12));
    CHECK(ms_of(rows[1]) == doctest::Approx(t.megatron).epsilon(1e-12));
    CHECK(ms_of(rows[2]) == doctest::Approx(t.two_d).epsilon(1e-12));
    if (nodes == 1) {
      CHECK(rows[3].best == nullptr);
      CHECK(t.two_five_d < 0);
    } else {
      REQUIRE(rows[3].best);
      CHECK(rows[3].best->plan.tp_layout == sim::TpLayout::two_five_d);
      CHECK(ms_of(rows[3]) == doctest::Approx(t.two_five_d).epsilon(1e-12));
    }
    // 1d is the fastest 1D plan of any strategy, so never slower than Megatron-LM without overlap
    CHECK(ms_of(rows[0]) <= ms_of(rows[1]));
    // the winner is the fastest of 1d, 2d and 2.5d
    const auto w = tuner::layout_winners(rows);
    REQUIRE(!w.empty());
    double fastest = ms_of(rows[0]);
    for (std::size_t k : {2u, 3u})
      if (rows[k].best) fastest = std::min(fastest, ms_of(rows[k]));
    for (std::size_t k : w) CHECK(ms_of(rows[k]) == fastest);
  }
  CHECK(tuner::scaling_of(pts) == "strong scaling: global batch 16");
  const std::string table = tuner::whatif_layout_table(pts);
  CHECK(table.find("where each layout wins:\nnodes=1 (4 GPUs, global batch 16): ") != std::string::npos);
  CHECK(table.find("\nnodes=2 (8 GPUs, global batch 16): ") != std::string::npos);
  // CSV: a header and four rows per point, a grid plan's label quoted (it has commas)
  const std::string csv = tuner::whatif_layout_csv(pts);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 1 + 4 * 2);
  CHECK(csv.rfind("nodes,gpus,global_batch,layout,wins,", 0) == 0);
  CHECK(csv.find(",\"tp2d[2,2] ") != std::string::npos);
}

TEST_CASE("weak scaling: global_batch_per_gpu makes each point's global batch per-GPU x its GPUs") {
  // 2 sequences per GPU on 1 and 2 nodes of 4 GPUs: global batch 8, then 16; the plans the search
  // returns carry that batch, and the 2-node point is the same search as a fixed batch of 16.
  const auto c = toy::cluster(4, 80e9);
  const auto s = toy_space();
  const auto pts = tuner::whatif(toy::model(), c, s, {tuner::parse_sweep("nodes=1,2"), tuner::parse_sweep("global_batch_per_gpu=2")},
                                 tuner::SearchOptions{.threads = 2, .top_k = 1, .prune = true, .extra_full = 3, .progress = {}, .distribution = {}});
  REQUIRE(pts.size() == 2);
  CHECK(pts[0].global_batch == 8);
  CHECK(pts[1].global_batch == 16);
  for (const auto& p : pts) {
    const int gb = p.global_batch;
    CAPTURE(gb);
    for (const auto& l : tuner::layout_bests(p))
      if (l.best) CHECK(l.best->plan.global_batch == 2 * p.gpus);
  }
  CHECK(tuner::scaling_of(pts) == "weak scaling: 2 sequences per GPU");
  auto c2 = c;
  hardware::set_nodes(c2, 2, "test");
  auto s16 = s;
  s16.global_batch = 16;
  const TuneBests t = tune_alone(c2, s16);
  const auto rows = tuner::layout_bests(pts[1]);
  CHECK(ms_of(rows[0]) == doctest::Approx(t.one_d).epsilon(1e-12));
  CHECK(ms_of(rows[2]) == doctest::Approx(t.two_d).epsilon(1e-12));
  CHECK(ms_of(rows[3]) == doctest::Approx(t.two_five_d).epsilon(1e-12));
  CHECK(t.global_batch == 16);
}

TEST_CASE("global_batch_per_gpu: bad combinations are refused before any point is tuned") {
  const auto c = toy::cluster(4, 80e9);
  auto s = toy_space();
  std::size_t tuned = 0;
  const auto count = [&](std::size_t, std::size_t) { ++tuned; };
  const tuner::SearchOptions o{.threads = 1, .top_k = 1, .prune = true, .extra_full = 0, .progress = {}, .distribution = {}};
  // the global batch set twice: swept, or given with --global-batch
  CHECK_THROWS_WITH_AS(tuner::whatif(toy::model(), c, s, {tuner::parse_sweep("global_batch=8"), tuner::parse_sweep("global_batch_per_gpu=2")}, o, count),
                       "--sweep: global_batch_per_gpu: sets each point's global batch; sweep it or global_batch, not both", common::ConfigError);
  s.global_batch = 64;
  CHECK_THROWS_WITH_AS(tuner::whatif(toy::model(), c, s, {tuner::parse_sweep("global_batch_per_gpu=2")}, o, count),
                       "--sweep: global_batch_per_gpu: sets each point's global batch, but --global-batch 64 was given too; drop one",
                       common::ConfigError);
  s.global_batch = 0;
  // 1 node is fine, 131072 nodes of 4 GPUs x 64 per GPU = 2^25 sequences is over the 2^24 limit:
  // refused with the arithmetic before the 1-node point is tuned
  CHECK_THROWS_WITH_AS(tuner::whatif(toy::model(), c, s, {tuner::parse_sweep("nodes=1,131072"), tuner::parse_sweep("global_batch_per_gpu=64")}, o, count),
                       "--sweep: global_batch_per_gpu: 64 sequences per GPU x 524288 GPUs = 33554432 sequences per step, more than 16777216",
                       common::ConfigError);
  CHECK(tuned == 0);
  CHECK_THROWS_AS(tuner::parse_sweep("global_batch_per_gpu=0"), common::ConfigError);
  CHECK_THROWS_AS(tuner::parse_sweep("global_batch_per_gpu=1.5"), common::ConfigError);
}

TEST_CASE("layout winners and scaling, on reports set by hand") {
  tuner::WhatIfPoint p;
  p.gpus = 8;
  p.global_batch = 64;
  auto ranked = [](sim::TpLayout l, double ms) {
    tuner::RankedPlan r;
    r.plan.tp_layout = l;
    r.report.step_time = common::Duration::from_us(ms * 1e3);
    return r;
  };
  // 2d and 2.5d equal (2.5D [q,q,d] dp D is 2D [q,q] dp d x D: the same step), 1d slower
  p.result.per_strategy = {ranked(sim::TpLayout::two_d, 90), ranked(sim::TpLayout::two_five_d, 90), ranked(sim::TpLayout::one_d, 100)};
  p.result.baseline = ranked(sim::TpLayout::one_d, 120);
  const auto rows = tuner::layout_bests(p);
  CHECK(ms_of(rows[0]) == doctest::Approx(100));
  CHECK(ms_of(rows[1]) == doctest::Approx(120));
  CHECK(tuner::layout_winners(rows) == std::vector<std::size_t>{2, 3});
  // the megatron row is one of the 1d plans: it never wins on its own, even when fastest
  p.result.per_strategy = {ranked(sim::TpLayout::one_d, 100)};
  p.result.baseline = ranked(sim::TpLayout::one_d, 50);
  CHECK(tuner::layout_winners(tuner::layout_bests(p)) == std::vector<std::size_t>{0});
  // layouts left out of the search say so
  p.tp_layouts = {sim::TpLayout::one_d};
  const auto only1d = tuner::layout_bests(p);
  CHECK_FALSE(only1d[2].searched);
  CHECK(only1d[0].searched);
  // scaling: one GPU count is no scaling; neither batch nor batch per GPU fixed: none named
  tuner::WhatIfPoint a, b;
  a.gpus = 8;
  a.global_batch = 64;
  b.gpus = 16;
  b.global_batch = 96;
  CHECK(tuner::scaling_of({a, a}) == "");
  CHECK(tuner::scaling_of({a, b}) == "");
  b.global_batch = 128;
  CHECK(tuner::scaling_of({a, b}) == "weak scaling: 8 sequences per GPU");
  b.global_batch = 64;
  CHECK(tuner::scaling_of({a, b}) == "strong scaling: global batch 64");
}

TEST_CASE("the per-layout chart: x is the GPU count of a nodes sweep, one line per layout, user text quoted") {
  // two points (1 and 2 nodes of 8 GPUs) with 1d at 10 / 18 thousand tokens/s, megatron 9 / 15,
  // 2d 5 / 12, and no 2.5d plan at 8 GPUs (NaN: a gap in its line), 11 at 16
  auto point = [](int nodes, double t1, double tm, double t2, double t25) {
    tuner::WhatIfPoint p;
    p.settings = {{"nodes", std::to_string(nodes)}};
    p.gpus = 8 * nodes;
    auto r = [](sim::TpLayout l, double tps) {
      tuner::RankedPlan x;
      x.plan.tp_layout = l;
      x.report.tokens_per_s = tps * 1e3;
      x.report.step_time = common::Duration::from_us(1e6 / tps);
      return x;
    };
    p.result.per_strategy = {r(sim::TpLayout::one_d, t1), r(sim::TpLayout::two_d, t2)};
    if (t25 > 0) p.result.per_strategy.push_back(r(sim::TpLayout::two_five_d, t25));
    p.result.baseline = r(sim::TpLayout::one_d, tm);
    return p;
  };
  const std::vector<tuner::WhatIfPoint> pts{point(1, 10, 9, 5, -1), point(2, 18, 15, 12, 11)};
  const auto c = tuner::whatif_layout_chart(pts, "it's \"x\"\nsystem 'rm'", "o.svg", "d.dat");
  // data: x = GPUs (8, 16), then 1d, 1d megatron, 2d, 2.5d in thousand tokens/s
  CHECK(c.data == "# series 0: nodes\n8 10 9 5 NaN\n16 18 15 12 11\n");
  CHECK(c.script.find("set xlabel 'GPUs (nodes x GPUs per node)'") != std::string::npos);
  CHECK(c.script.find("set xtics noenhanced ('8' 8, '16' 16)") != std::string::npos);
  // the title: single quotes doubled, the newline a space - one gnuplot string, nothing executed
  CHECK(c.script.find("set title 'it''s \"x\" system ''rm''' noenhanced\n") != std::string::npos);
  for (int col = 2; col <= 5; ++col) CHECK(c.script.find("index 0 using 1:" + std::to_string(col) + " ") != std::string::npos);
  CHECK(c.script.find("title '2.5d: best SUMMA q x q x d grid'\n") != std::string::npos);  // the last line ends the plot command
}

namespace {

using tuner_test::Run;
Run slicetune(const std::string& args) { return tuner_test::run_slicetune(args, true); }

}  // namespace

TEST_CASE("whatif --by-layout end to end: weak scaling in JSON, CSV rows per layout, a chart") {
  // the tiny model on 1 and 2 DGX-H100 nodes, 1 sequence per GPU: global batch 8, then 16
  const auto r = slicetune("whatif --model tiny --sweep nodes=1,2 --sweep global_batch_per_gpu=1 --threads 2 --json");
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));  // stderr's progress lines come first
  CHECK(j["scaling"] == "weak scaling: 1 sequence per GPU");
  REQUIRE(j["points"].size() == 2);
  for (int i = 0; i < 2; ++i) {
    const auto& p = j["points"][i];
    const int gpus = 8 * (i + 1);
    CAPTURE(gpus);
    CHECK(p["gpus"] == gpus);
    CHECK(p["global_batch"] == gpus);
    REQUIRE(p["layouts"].size() == 4);
    for (const auto& l : p["layouts"])
      if (!l["best"].is_null()) CHECK(l["best"]["plan"]["global_batch"] == gpus);
    CHECK(!p["winners"].empty());
  }
  // --global-batch fixes the batch that global_batch_per_gpu would set: refused, one line
  const auto both = slicetune("whatif --model tiny --sweep nodes=1,2 --sweep global_batch_per_gpu=1 --global-batch 64");
  CHECK(both.rc == 2);
  CHECK(both.out == "slicetune: error: --sweep: global_batch_per_gpu: sets each point's global batch, but --global-batch 64 was given too; drop one\n");
  const std::string dir = std::filesystem::temp_directory_path().string() + "/slicetune-test-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const bool gnuplot = std::system("command -v gnuplot >/dev/null 2>&1") == 0;
  const auto t = slicetune("whatif --model tiny --sweep nodes=1,2 --global-batch 16 --threads 2 --by-layout --csv " + dir + "/l.csv" +
                           (gnuplot ? " --plot " + dir + "/l.png" : std::string()));
  REQUIRE(t.rc == 0);
  CHECK(t.out.find("best plan of each TP layout, strong scaling: global batch 16") != std::string::npos);
  std::ifstream f(dir + "/l.csv");
  std::string csv((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 1 + 4 * 2);  // a header, four layouts per point
  if (gnuplot) {
    std::ifstream png(dir + "/l.png", std::ios::binary);
    std::string img((std::istreambuf_iterator<char>(png)), std::istreambuf_iterator<char>());
    REQUIRE(img.size() > 8);
    CHECK(img.substr(1, 3) == "PNG");
  }
  std::filesystem::remove_all(dir);
}
