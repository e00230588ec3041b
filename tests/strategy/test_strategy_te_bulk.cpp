// Strategy te-bulk (TransformerEngine userbuffers' bulk overlap, issue 14): what it refuses (TE's and
// Megatron-LM's reasons, shared with te-pipelined) and its knob's errors; that the QKV and FC1
// backward's AllGather and ReduceScatter are single collectives on a communication stream, on
// te_bulk_sms SMs, beside the GEMM TE runs them with; timings derived by hand on the fake cost
// model; and, on the default model and cluster, a step time between a lower bound and Megatron-LM's.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>

#include "common/config_error.hpp"
#include "hardware/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/strategy.hpp"
#include "sim/target.hpp"
#include "sim/trace.hpp"
#include "tests/sim/fake_cost_model.hpp"
#include "tests/strategy/plans.hpp"
#include "tuner/evaluate.hpp"

namespace {

using test::resolve, test::error_of, test::node_of;

/// The one task of layer 0's backward (not recomputed) with this op, phase and kind; for
/// collectives also the SMs it holds (-1: NCCL's own).
std::size_t find(const sim::StepGraph& g, sim::Op op, sim::Phase ph, std::optional<hardware::CollectiveKind> coll = std::nullopt,
                 int sms = -2) {
  std::optional<std::size_t> found;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const auto& t = g.tasks[i];
    if (t.layer != 0 || t.op != op || t.phase != ph || t.recompute) continue;
    if (coll ? !t.is_collective() || std::get<hardware::CollectiveOp>(t.kind).kind != *coll || (sms != -2 && t.comm_sms != sms)
             : !std::holds_alternative<hardware::GemmOp>(t.kind))
      continue;
    REQUIRE_MESSAGE(!found, "more than one task matches");
    found = i;
  }
  REQUIRE(found);
  return *found;
}

/// Whether `to` is reachable from `from` along the graph's dependencies.
bool depends_on(const sim::StepGraph& g, std::size_t to, std::size_t from) {
  std::vector<char> seen(g.size(), 0);
  std::vector<std::size_t> todo{from};
  while (!todo.empty()) {
    const std::size_t t = todo.back();
    todo.pop_back();
    if (t == to) return true;
    const auto [first, last] = g.successors(t);
    for (auto it = first; it != last; ++it)
      if (const std::size_t s = *it; !seen[s]) {
        seen[s] = 1;
        todo.push_back(s);
      }
  }
  return false;
}

}  // namespace

TEST_CASE("te-bulk is refused as TE refuses it, and its knob is checked") {
  const auto one = node_of(2);
  CHECK(error_of([&] { resolve("tp: 2\nstrategy: te-bulk\n", one); }) ==
        "plan.yaml: strategy: strategy te-bulk: Tensor parallel communication/GEMM overlap can happen only when sequence "
        "parallelism is enabled (Megatron-LM's check of --tp-comm-overlap); add --sequence-parallel");
  CHECK(error_of([&] { resolve("tp: 1\nstrategy: te-bulk\n", one); }).find("tp=1 has no tensor-parallel communication") !=
        std::string::npos);
  CHECK(error_of([&] { resolve("tp: 4\nsequence_parallel: true\nstrategy: te-bulk\n", node_of(2, 2)); }) ==
        "plan.yaml: strategy: strategy te-bulk: tp=4 spans 2 nodes of 2 GPUs: TE's userbuffers need the tensor-parallel GPUs on "
        "a single node, connected over NVLink/NVSwitch (CUDA IPC / multicast handles do not cross nodes)");
  auto cpu = one;
  cpu.gpu.arch = hardware::GpuArch::cpu;
  CHECK(error_of([&] { resolve("tp: 2\nsequence_parallel: true\nstrategy: te-bulk\n", cpu); }).find("bulk overlap needs CUDA GPUs") !=
        std::string::npos);
  // SMs: at least one, and fewer than the GPU's (the fake has 100)
  CHECK(error_of([&] { resolve("tp: 2\nsequence_parallel: true\nstrategy: te-bulk\nte_bulk_sms: 0\n", one); }) ==
        "plan.yaml: strategy: strategy te-bulk: te_bulk_sms=0: TE's bulk AllGather / ReduceScatter kernels need at least one SM");
  CHECK(error_of([&] { resolve("tp: 2\nsequence_parallel: true\nstrategy: te-bulk\nte_bulk_sms: 100\n", one); }) ==
        "plan.yaml: strategy: strategy te-bulk: te_bulk_sms=100 leaves no SMs to the GEMMs of fake-gpu (100 SMs)");
  CHECK(error_of([&] { resolve("tp: 2\nsequence_parallel: true\nstrategy: te-bulk\nte_bulk_sms: 99\n", one); }) == "no error");
  // the YAML value is range-checked as read (the knob's 0..256)
  CHECK(error_of([&] { resolve("tp: 2\nsequence_parallel: true\nstrategy: te-bulk\nte_bulk_sms: 300\n", one); })
            .find("te_bulk_sms") != std::string::npos);
  CHECK(error_of([&] { resolve("tp: 2\nsequence_parallel: true\nstrategy: te-bulk\nte_bulk_sms: 300\n", one); }) != "no error");
  // the flag's parser: the knob's range and integers only
  const sim::Knob* k = sim::strategy_te_bulk().knob("te_bulk_sms");
  REQUIRE(k);
  CHECK(k->flag == "--te-bulk-sms");
  CHECK(k->parse("24") == 24);
  CHECK(!k->parse("257"));
  CHECK(!k->parse("-1"));
  CHECK(!k->parse("8sm"));
  CHECK(k->expected() == "an integer in 0..256");
  // the knob is te-bulk's: another strategy's plan holds it neutral
  CHECK(error_of([&] { resolve("tp: 2\nsequence_parallel: true\nte_bulk_sms: 8\n", one); }) ==
        "plan.yaml: strategy: te_bulk_sms=8 needs strategy te-bulk (strategy none has no te_bulk_sms)");
  CHECK(error_of([&] { resolve("tp: 2\nsequence_parallel: true\nstrategy: te-pipelined\nte_bulk_sms: 8\n", one); }) ==
        "plan.yaml: strategy: te_bulk_sms=8 needs strategy te-bulk (strategy te-pipelined has no te_bulk_sms)");
  const sim::Plan p = resolve("tp: 2\nsequence_parallel: true\nstrategy: te-bulk\n", one);
  CHECK(p.te_bulk_sms == 16);  // TE's default num_sm outside ring_exchange (initialize_ub)
  CHECK(p.num_sm == 0);        // te-pipelined's knob stays neutral
  CHECK(sim::describe(p) == "tp2 dp1 mb1 sp te-bulk 16sm");
  CHECK(resolve(sim::plan_to_yaml(p), one) == p);
  // `run` refuses it with a reason; the tuner searches it
  CHECK(!sim::strategy_te_bulk().not_executed.empty());
  CHECK(sim::strategy_te_bulk().searched);
  CHECK(&sim::find_strategy("te-bulk") == &sim::strategy_te_bulk());
}

TEST_CASE("te-bulk's graph: the backward's AllGather and ReduceScatter whole, on its SMs, beside the GEMMs") {
  const auto c = node_of(2);
  const auto model = sim::load_model("tiny");
  const sim::Plan bulk = resolve("tp: 2\nmicro_batch: 2\nsequence_parallel: true\nstrategy: te-bulk\nte_bulk_sms: 5\n", c);
  const sim::Plan none = resolve("tp: 2\nmicro_batch: 2\nsequence_parallel: true\n", c);
  const auto gb = sim::build_step_graph(model, c, bulk);
  const auto gn = sim::build_step_graph(model, c, none);
  // the same tasks as Megatron-LM (nothing is cut)
  CHECK(gb.size() == gn.size());
  using hardware::CollectiveKind;
  using sim::Op, sim::Phase;
  for (const auto& site : {std::pair(Op::mlp_comm, Op::fc1), std::pair(Op::attn_comm, Op::qkv)}) {
    const Op comm = site.first, gemm = site.second;  // not structured bindings: CAPTURE uses a lambda (clang 14)
    const int gemm_op = static_cast<int>(gemm);
    CAPTURE(gemm_op);
    const std::size_t ag = find(gb, comm, Phase::bwd_dgrad, CollectiveKind::all_gather, 5);
    const std::size_t rs = find(gb, comm, Phase::bwd_dgrad, CollectiveKind::reduce_scatter, 5);
    const std::size_t dgrad = find(gb, gemm, Phase::bwd_dgrad);
    const std::size_t wgrad = find(gb, gemm, Phase::bwd_wgrad);
    for (std::size_t t : {ag, rs}) {
      CHECK(gb.streams[gb.tasks[t].stream].kind == sim::StreamKind::comm);
      CHECK(gb.tasks[t].launches == 0);  // launched by TE's GEMM call
      CHECK(std::get<hardware::CollectiveOp>(gb.tasks[t].kind).ranks == 2);
    }
    CHECK(gb.on_compute(dgrad));
    // AllGather beside dgrad: neither waits for the other; wgrad reads the gathered input
    CHECK(!depends_on(gb, dgrad, ag));
    CHECK(!depends_on(gb, ag, dgrad));
    CHECK(depends_on(gb, wgrad, ag));
    // ReduceScatter of dgrad's output beside wgrad: wgrad does not wait for it
    CHECK(depends_on(gb, rs, dgrad));
    CHECK(!depends_on(gb, wgrad, rs));
    // Megatron-LM (none): the weight-gradient GEMM waits for the same ReduceScatter, on NCCL's SMs
    const std::size_t rs_n = find(gn, comm, Phase::bwd_dgrad, CollectiveKind::reduce_scatter, -1);
    CHECK(depends_on(gn, find(gn, gemm, Phase::bwd_wgrad), rs_n));
  }
  // the gathered output gradients of out-proj and FC2 (not bulk sites) keep NCCL's SMs
  int nccl_ag = 0;
  for (const auto& t : gb.tasks)
    nccl_ag += t.layer == 0 && t.phase == Phase::bwd_dgrad && t.is_collective() && t.comm_sms == -1 &&
               std::get<hardware::CollectiveOp>(t.kind).kind == CollectiveKind::all_gather;
  CHECK(nccl_ag == 2);
}

TEST_CASE("te-bulk derived by hand on the fake cost model") {
  // tiny (h 64, ffn 256), tp 2 with SP, micro-batch 2 x 32 tokens: T = 64 rows. Fake costs
  // (tests/sim/fake_cost_model.hpp): a GEMM of m rows m us (FC1 dgrad T x h x F1: 64 us; FC1
  // wgrad h x F1 x T: h = 64 us; QKV likewise 64 and 64 us); a collective 1 ns per byte on NCCL's 10
  // SMs, no latency, no interference, no launch cost. The bulk AllGather and ReduceScatter move
  // T x h x 2 bytes = 8192 bytes: 8.192 us on 10 SMs, 10 / sms times longer on fewer.
  const auto c = node_of(2);
  const test::FakeCostModel cost(c);
  const auto model = sim::load_model("tiny");
  auto run = [&](const std::string& strategy) {
    const sim::Plan p = resolve("tp: 2\nmicro_batch: 2\nsequence_parallel: true\n" + strategy, c);
    auto g = sim::build_step_graph(model, c, p);
    auto r = sim::Engine(cost, {.timeline = true}).simulate(g);
    return std::pair(std::move(g), std::move(r));
  };
  using hardware::CollectiveKind;
  using sim::Op, sim::Phase;
  // each site from its input-gradient GEMM's start to the norm backward that reads the
  // reduce-scattered input gradient (an element-wise kernel: found by op)
  auto norm_start = [](const sim::StepGraph& g, const sim::StepReport& r, Op op) {
    for (std::size_t i = 0; i < g.size(); ++i)
      if (g.tasks[i].layer == 0 && g.tasks[i].op == op && g.tasks[i].phase == Phase::bwd_dgrad && !g.tasks[i].recompute)
        return r.timelines.at(0).timing[i].start.us();
    FAIL("no norm backward");
    return 0.0;
  };
  auto from_dgrad = [&](const sim::StepGraph& g, const sim::StepReport& r, Op gemm, Op norm) {
    return norm_start(g, r, norm) - r.timelines.at(0).timing[find(g, gemm, Phase::bwd_dgrad)].start.us();
  };
  const double xfer = 8192e-3;  // us on NCCL's 10 SMs
  const auto [gn, rn] = run("");
  const auto [g5, r5] = run("strategy: te-bulk\nte_bulk_sms: 5\n");
  const auto [g1, r1] = run("strategy: te-bulk\nte_bulk_sms: 1\n");
  for (const auto& site : {std::pair(Op::fc1, Op::norm2), std::pair(Op::qkv, Op::norm1)}) {
    const Op gemm = site.first, norm = site.second;  // not structured bindings: CAPTURE uses a lambda (clang 14)
    const int gemm_op = static_cast<int>(gemm);
    CAPTURE(gemm_op);
    // none: dgrad (64), its ReduceScatter (8.192), then wgrad (64) - it waits for the collective
    CHECK(from_dgrad(gn, rn, gemm, norm) == doctest::Approx(64 + xfer + 64).epsilon(1e-9));
    // te-bulk on 5 SMs: the ReduceScatter (16.384 us) runs under wgrad (64 us): dgrad + wgrad
    CHECK(from_dgrad(g5, r5, gemm, norm) == doctest::Approx(64 + 64).epsilon(1e-9));
    // and its AllGather starts with dgrad (TE's stream wait), takes 16.384 us under it
    const auto& t5 = r5.timelines.at(0).timing;
    const std::size_t ag = find(g5, gemm == Op::fc1 ? Op::mlp_comm : Op::attn_comm, Phase::bwd_dgrad, CollectiveKind::all_gather, 5);
    const std::size_t dg = find(g5, gemm, Phase::bwd_dgrad);
    CHECK(t5[ag].start.us() == doctest::Approx(t5[dg].start.us()).epsilon(1e-12));
    CHECK((t5[ag].end - t5[ag].start).us() == doctest::Approx(2 * xfer).epsilon(1e-9));
    const std::size_t rs = find(g5, gemm == Op::fc1 ? Op::mlp_comm : Op::attn_comm, Phase::bwd_dgrad, CollectiveKind::reduce_scatter, 5);
    const std::size_t wg = find(g5, gemm, Phase::bwd_wgrad);
    CHECK(t5[rs].start.us() == doctest::Approx(t5[wg].start.us()).epsilon(1e-12));
    CHECK(t5[rs].end < t5[wg].end);
    // te-bulk on 1 SM: each collective takes 81.92 us, longer than the GEMM beside it, and both are
    // on the TP stream in order: the AllGather from dgrad's start, the ReduceScatter after it
    CHECK(from_dgrad(g1, r1, gemm, norm) == doctest::Approx(2 * 10 * xfer).epsilon(1e-9));
  }
  // the trace shows it: FC1's bulk ReduceScatter on the TP stream's track, with its 5 SMs, within
  // the weight-gradient GEMM on the compute track
  {
    const auto trace = nlohmann::json::parse(sim::ChromeTrace(&cost).add("predicted", g5, r5.timelines.at(0).timing).json());
    const std::size_t rs = find(g5, Op::mlp_comm, Phase::bwd_dgrad, CollectiveKind::reduce_scatter, 5);
    const std::size_t wg = find(g5, Op::fc1, Phase::bwd_wgrad);
    const nlohmann::json *ev_rs = nullptr, *ev_wg = nullptr;
    for (const auto& e : trace["traceEvents"])
      if (e.value("ph", "") == "X") {
        if (e["args"]["task"] == rs) ev_rs = &e;
        if (e["args"]["task"] == wg) ev_wg = &e;
      }
    REQUIRE(ev_rs);
    REQUIRE(ev_wg);
    CHECK((*ev_rs)["args"]["comm_sms"] == 5);
    CHECK((*ev_rs)["tid"] != (*ev_wg)["tid"]);
    CHECK((*ev_rs)["ts"].get<double>() >= (*ev_wg)["ts"].get<double>() - 1e-3);
    CHECK((*ev_rs)["ts"].get<double>() + (*ev_rs)["dur"].get<double>() <= (*ev_wg)["ts"].get<double>() + (*ev_wg)["dur"].get<double>());
  }
  // over the step, 5 SMs hide communication that Megatron-LM exposes
  CHECK(r5.exposed_comm < rn.exposed_comm);
  CHECK(r5.step_time < rn.step_time);
  CHECK(r1.step_time > r5.step_time);
}

TEST_CASE("te-bulk on the default model and cluster: between a lower bound and Megatron-LM's step") {
  // gpt3-13b on one DGX-H100, analytic cost model, tp 4 with SP, micro-batch 4, TE's default 16 SMs.
  const auto cluster = hardware::load_cluster("dgx-h100");
  const auto model = sim::load_model("gpt3-13b");
  const auto cost = hardware::make_analytic_cost_model(cluster, hardware::Stack::eager);
  const auto plan = [&](const std::string& s) {
    return sim::resolve_plan(model, cluster, sim::parse_plan_input("tp: 4\nmicro_batch: 4\nsequence_parallel: true\n" + s, "p"), "p");
  };
  const auto sim_of = [&](const sim::Plan& p) { return sim::Engine(*cost).simulate(sim::build_step_graph(model, cluster, p)); };
  const auto none = sim_of(plan(""));
  const sim::Plan bp = plan("strategy: te-bulk\n");
  const auto bulk = sim_of(bp);
  // the ReduceScatters of the QKV and FC1 input gradients go under the weight-gradient GEMMs
  CHECK(bulk.step_time < none.step_time);
  CHECK(bulk.exposed_comm < none.exposed_comm);
  // never below the tuner's bound (the compute stream's kernels at solo speed, the host's issue)
  const tuner::Evaluator ev(model, cluster, *cost);
  CHECK(bulk.step_time >= ev.compute_lower_bound(bp));
  // the SMs the collectives hold slow the GEMMs beside them: more compute than Megatron-LM's
  CHECK(bulk.compute > none.compute);
}
