// Step graphs saved as JSON and loaded back: the same graph, the same simulation bit for bit; a
// hand edit changes what is simulated; bad input names the file and the key.
#include <doctest/doctest.h>

#include <tuple>

#include <fmt/format.h>

#include <functional>

#include "common/config_reader.hpp"
#include "common/strict_json.hpp"
#include "hardware/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/graph_json.hpp"
#include "sim/pipeline_step.hpp"
#include "sim/strategy.hpp"
#include "sim/target.hpp"

namespace {

sim::Target target(const std::string& plan_yaml, const std::string& model = "tiny-llama",
                   const std::string& cluster = "dgx-h100") {
  sim::TargetInput in{.model = model, .cluster = cluster, .nodes = 1};
  in.flags = sim::parse_plan_input(plan_yaml, "test");
  return sim::resolve_target(in);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const common::ConfigError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("a saved graph loads back to the same graph and simulates to the same picosecond") {
  for (const char* plan :
       {"tp: 2\ndp: 4\nmicro_batch: 4\nglobal_batch: 32\nsequence_parallel: true\nstrategy: domino\nrow_slices: 2\n"
        "row_axis: sequence\ncol_slices: 2\n",
        "tp: 2\nmicro_batch: 2\n",
        // FLUX's fused sites: the pieces' FusedPiece and kernel share come back, so they are priced alike
        "tp: 2\nmicro_batch: 2\nsequence_parallel: true\nstrategy: fused\n"}) {
    CAPTURE(plan);
    const auto t = target(plan);
    const auto g = sim::build_step_graph(t.model, t.cluster, t.plan);
    const auto j = sim::graph_to_json(g, t.cluster);
    const auto back = sim::load_graph(j, "g.json", t.cluster);
    CHECK(sim::graph_to_json(back, t.cluster) == j);  // everything saved comes back
    CHECK(back.plan == t.plan);
    CHECK(back.streams == g.streams);
    CHECK(back.groups == g.groups);
    auto cost = hardware::make_analytic_cost_model(t.cluster, t.plan.stack);
    const sim::Engine engine(*cost, {.timeline = true});
    const auto a = engine.simulate(g), b = engine.simulate(back);
    CHECK(a.step_time.ps == b.step_time.ps);
    CHECK(a.memory.total() == b.memory.total());
    bool same = true;
    for (std::size_t i = 0; i < g.size(); ++i) same &= a.timelines[0].timing[i].end == b.timelines[0].timing[i].end;
    CHECK(same);
  }
}

TEST_CASE("a hand-edited graph simulates what the edit says") {
  // Megatron-LM, tp 2, dp 1 (two CPU ranks): move every TP collective from tp_comm onto the
  // compute stream. Megatron waits for each of them anyway, so the step stays the same length;
  // the collectives' time moves from "exposed communication" to "compute (busy)".
  const auto t = target("tp: 2\nmicro_batch: 2\ndtype: fp32\n", "tiny", "cpu-host");
  const auto g = sim::build_step_graph(t.model, t.cluster, t.plan);
  auto j = sim::graph_to_json(g, t.cluster);
  int moved = 0;
  for (auto& task : j["tasks"])
    if (task["stream"] == "tp_comm") {
      task["stream"] = "compute";
      ++moved;
    }
  CHECK(moved > 0);
  const auto edited = sim::load_graph(j, "edited.json", t.cluster);
  auto cost = hardware::make_analytic_cost_model(t.cluster, t.plan.stack);
  const auto a = sim::Engine(*cost).simulate(g), b = sim::Engine(*cost).simulate(edited);
  CHECK(b.busy("tp_comm").ps == 0);
  CHECK(b.exposed_comm.ps == 0);
  CHECK(b.step_time.ms() == doctest::Approx(a.step_time.ms()).epsilon(1e-9));
}

TEST_CASE("bad graph files name the file and the key") {
  const auto t = target("tp: 2\nmicro_batch: 2\n");
  const auto g = sim::build_step_graph(t.model, t.cluster, t.plan);
  const auto j = sim::graph_to_json(g, t.cluster);
  auto edit = [&](const std::function<void(nlohmann::json&)>& f) {
    auto k = j;
    f(k);
    return error_of([&] { sim::load_graph(k, "g.json", t.cluster); });
  };
  CHECK(edit([](auto& k) { k["tasks"][3]["shape"]["m"] = -4; }) ==
        "g.json: tasks[3].shape.m: expected an integer in 1..1073741824, got -4");
  CHECK(edit([](auto& k) { k["tasks"][0]["stream"] = "nvlink"; }) ==
        "g.json: tasks[0].stream: no stream named 'nvlink' in \"streams\"");
  CHECK(edit([](auto& k) { k["tasks"][1]["op"] = "softmax"; }) == "g.json: tasks[1].op: unknown op");
  CHECK(edit([](auto& k) {
          k["tasks"][2]["inputs"][0] = 1u << 30;
        }).find("g.json: tasks[2].inputs[0]: expected a tensor index below") == 0);
  CHECK(edit([](auto& k) {
          k["edges"][0] = {5, 2};
        }).find("g.json: edges[0]: expected [from, to] task indices with from < to") == 0);
  CHECK(edit([](auto& k) { k["tasks"][0]["colour"] = "red"; }) == "g.json: tasks[0].colour: unknown key");
  CHECK(edit([](auto& k) { k.erase("groups"); }) == "g.json: groups: missing");
  CHECK(edit([](auto& k) { k["plan"]["tp"] = 3; }) == "g.json: plan: tp: heads=4 is not divisible by tp=3");
  CHECK(error_of([] { sim::read_graph_file("/nonexistent/g.json"); }).find("/nonexistent/g.json") == 0);
  // a fused kernel's piece (strategy fused): a known kind, on a task of its kind, with the count it is priced by
  CHECK(edit([](auto& k) { k["tasks"][3]["fused"] = "tile"; }) ==
        "g.json: tasks[3].fused: expected none | gemm | ag_copy | ag_copy_first | rs_store | rs_pull");
  CHECK(edit([](auto& k) {
          k["tasks"][3]["fused"] = "rs_pull";
          k["tasks"][3]["fused_of"] = 0;
        }) == "g.json: tasks[3].fused: a gemm piece must be a GEMM, a transfer piece a collective");
  CHECK(edit([](auto& k) {
          k["tasks"][3]["fused"] = "gemm";
          k["tasks"][3]["fused_of"] = 0;
        }) == "g.json: tasks[3].fused_of: a GEMM piece needs the kernel's chunk count (>= 1)");
}

TEST_CASE("graph files are read within the limits of common/limits.hpp") {
  // each of these was accepted before the limits (or crashed); the expected text is the refusal
  const auto t = target("tp: 2\nmicro_batch: 2\n");  // dgx-h100, 1 node: 8 GPUs
  const auto g = sim::build_step_graph(t.model, t.cluster, t.plan);
  const auto j = sim::graph_to_json(g, t.cluster);
  auto edit = [&](const std::function<void(nlohmann::json&)>& f) {
    auto k = j;
    f(k);
    return error_of([&] { sim::load_graph(k, "g.json", t.cluster); });
  };
  std::size_t collective = 0;  // the first task with a group (it has a sequence number)
  while (!j["tasks"][collective].contains("seq")) ++collective;
  // a sequence number indexes the engine's per-group table: 2^32 - 1 wrapped `seq + 1` to 0
  CHECK(edit([&](auto& k) { k["tasks"][collective]["seq"] = 4294967295u; }).find(
            fmt::format("g.json: tasks[{}].seq: expected an integer in 0..{}", collective, g.size() - 1)) == 0);
  // GEMM sizes: at most the tokens of a micro-batch (2^30), so that m x n x k stays finite and exact
  CHECK(edit([](auto& k) { k["tasks"][3]["shape"]["m"] = std::int64_t{1} << 40; }) ==
        "g.json: tasks[3].shape.m: expected an integer in 1..1073741824, got 1099511627776");
  // a rank the cluster does not have; more ranks represented than it has GPUs; a group wider than it
  CHECK(edit([](auto& k) { k["rank"] = 8; }) == "g.json: rank: expected an integer in 0..7, got 8");
  CHECK(edit([](auto& k) { k["represents"] = 2147483647; }) == "g.json: represents: expected an integer in 1..8, got 2147483647");
  CHECK(edit([](auto& k) { k["groups"][0]["nodes"] = 2; }) == "g.json: groups[0].nodes: expected an integer in 1..1, got 2");
  CHECK(edit([](auto& k) { k["groups"][0]["size"] = 9; }) == "g.json: groups[0].size: expected an integer in 1..8, got 9");
  // collective bytes: at most 1 TiB (limits::kMaxCollectiveBytes), as for `slicetune collective`
  CHECK(edit([&](auto& k) { k["tasks"][collective]["shape"]["bytes"] = std::int64_t{1} << 41; }) ==
        fmt::format("g.json: tasks[{}].shape.bytes: expected an integer in 0..1099511627776, got 2199023255552", collective));
  // a task count over the limit is refused before any task is read
  CHECK(edit([](nlohmann::json& k) { k["tasks"] = nlohmann::json::array(); k["tasks"].get_ref<nlohmann::json::array_t&>().resize(1'000'001); })
            .find("g.json: tasks: 1000001 tasks: at most 1000000 are simulated") == 0);
}

TEST_CASE("graph JSON: a key twice and deep nesting are refused with the file named") {
  // nlohmann keeps the last of two equal keys silently; a strict reader must not
  CHECK(error_of([] { common::parse_json_strict(R"({"format": "a", "format": "b"})", "g.json", "a graph"); }) ==
        "g.json: format: duplicate key");
  // 200,000 nested arrays: load_graph dumps the model and plan objects (recursively); the reader
  // stops at limits depth 64 instead of overflowing the stack
  const std::string deep = R"({"model": {"x": )" + std::string(200000, '[') + std::string(200000, ']') + "}}";
  CHECK(error_of([&] { common::parse_json_strict(deep, "g.json", "a graph"); }) == "g.json: nested deeper than 64 arrays/objects");
  const std::string ok = R"({"a": [[1]], "b": {"c": 2}})";
  CHECK(common::parse_json_strict(ok, "g.json", "a graph")["b"]["c"] == 2);
}

TEST_CASE("a pipelined step saves one graph per stage and loads back to the same simulation") {
  // 1F1B with Domino slices (blocking transfers, so the host waits at each receive) and the
  // interleaved schedule: the stages' graphs written by graphs_to_json and read by load_graphs
  // are the same graphs (the JSON again, byte for byte) and simulate together to the same
  // picosecond as the graphs built from the plan.
  for (const auto& row : std::vector<std::pair<const char*, const char*>>{
           {"tp: 2\npp: 2\nmicro_batch: 2\nglobal_batch: 8\nstrategy: domino\nrow_slices: 2\n", "tiny-llama"},
           {"tp: 2\npp: 2\nvp: 2\nmicro_batch: 1\nglobal_batch: 4\nseq_len: 256\n", "gpt3-2.7b"}}) {
    // named variables, not structured bindings: CAPTURE takes them into a lambda (clang 14 refuses bindings there)
    const char* const plan = std::get<0>(row);
    const char* const model = std::get<1>(row);
    CAPTURE(plan);
    const auto t = target(plan, model);
    REQUIRE(t.plan.pp == 2);
    const auto graphs = sim::build_stage_graphs(t.model, t.cluster, t.plan);
    const auto j = sim::graphs_to_json(graphs, t.cluster);
    CHECK(j["format"] == "slicetune-pipeline-step-graphs");
    REQUIRE(j["stages"].size() == 2);
    const auto back = sim::load_graphs(j, "p.json", t.cluster);
    REQUIRE(back.size() == 2);
    CHECK(sim::graphs_to_json(back, t.cluster) == j);
    auto cost = hardware::make_analytic_cost_model(t.cluster, t.plan.stack);
    const sim::Engine engine(*cost);
    CHECK(sim::simulate_stages(engine, back).step_time.ps == sim::simulate_stages(engine, graphs).step_time.ps);
  }
}

TEST_CASE("bad pipelined graph files name the file and the key") {
  const auto t = target("tp: 2\npp: 2\nmicro_batch: 1\nglobal_batch: 8\n");  // dp 2 on 8 GPUs: 4 micro-batches
  REQUIRE(t.plan.grad_accum_steps() == 4);
  const auto j = sim::graphs_to_json(sim::build_stage_graphs(t.model, t.cluster, t.plan), t.cluster);
  auto edit = [&](const std::function<void(nlohmann::json&)>& f) {
    auto k = j;
    f(k);
    return error_of([&] { sim::load_graphs(k, "p.json", t.cluster); });
  };
  CHECK(edit([](auto& k) { k["stages"].erase(1); }) == "p.json: stages: expected pp=2 graphs (one per stage), got 1");
  CHECK(edit([](auto& k) { std::swap(k["stages"][0], k["stages"][1]); }) ==
        "p.json: stages[0].rank: expected 0 (stage 0's first rank: tp rank 0, dp rank 0), got 4");
  CHECK(edit([](auto& k) { k["stages"][1]["micro_batches"] = 3; }) ==
        "p.json: stages[1]: micro_batches: expected the plan's 4 micro-batches per pipeline, got 3");
  CHECK(edit([](auto& k) { k["stages"][0]["tasks"][0]["micro"] = 4; }) ==
        "p.json: stages[0]: tasks[0].micro: expected an integer in -1..3, got 4");
  CHECK(edit([](auto& k) { k["stages"][1]["plan"]["micro_batch"] = 2; }).find("p.json: stages[1]") == 0);
  // one stage's graph on its own is not a step
  CHECK(error_of([&] { sim::load_graph(j["stages"][0], "s.json", t.cluster); }).find("s.json: plan.pp: pp=2: a pipelined step has one graph") == 0);
}
