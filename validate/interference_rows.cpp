#include "validate/interference_rows.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <regex>

#include "common/config_reader.hpp"
#include "hardware/collective_model.hpp"
#include "hardware/cost_model.hpp"
#include "hardware/gemm_model.hpp"
#include "hardware/interference.hpp"
#include "sim/step_graph.hpp"
#include "sim/strategy.hpp"

namespace validate {

using namespace hardware;

InterferenceFigures read_interference_figures(const std::string& dir) {
  const std::string path = dir + "/interference-nvidia.md";
  const std::string text = common::read_text_file(path);
  InterferenceFigures f;
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(R"(Sequential ([0-9.]+) ms; overlapped \(NCCL SM kernels\) ([0-9.]+) ms; overlapped \(copy engine\) ([0-9.]+) ms)")))
    throw common::ConfigError(path, "row 8", "'Sequential N ms; overlapped (NCCL SM kernels) N ms; overlapped (copy engine) N ms' not found");
  f.sequential_ms = std::stod(m[1]);
  f.overlap_sm_ms = std::stod(m[2]);
  f.overlap_ce_ms = std::stod(m[3]);
  if (!std::regex_search(text, m, std::regex(R"(GEMM \*\*([0-9.]+) -> ([0-9.]+) ms)")))
    throw common::ConfigError(path, "row 1", "'GEMM **N -> N ms' not found");
  f.a100_gemm_alone_ms = std::stod(m[1]);
  f.a100_gemm_beside_ms = std::stod(m[2]);
  const std::regex ce(R"(([0-9]+) MiB: (?:NCCL )?([0-9.]+)[,/] ?(?:CE-multicast\(v4\) )?([0-9.]+))");
  const auto row10 = text.find("| 10 |");
  if (row10 == std::string::npos) throw common::ConfigError(path, "row 10", "row not found");
  const std::string r10 = text.substr(row10, text.find('\n', row10) - row10);
  for (auto it = std::sregex_iterator(r10.begin(), r10.end(), ce); it != std::sregex_iterator(); ++it) {
    f.ce_shard_mib.push_back(std::stod((*it)[1]));
    f.ce_ratio.push_back(std::stod((*it)[3]) / std::stod((*it)[2]));
  }
  if (f.ce_ratio.size() < 3) throw common::ConfigError(path, "row 10", fmt::format("expected 3 shard sizes with NCCL and CE figures, found {}", f.ce_ratio.size()));
  if (!std::regex_search(text, m, std::regex(R"(slowed on average \*\*([0-9.]+)%\*\*, max \*\*([0-9.]+)%\*\*)")))
    throw common::ConfigError(path, "2507.03114", "'slowed on average **N%**, max **N%**' not found");
  f.aggregate_mean_pct = std::stod(m[1]);
  f.aggregate_max_pct = std::stod(m[2]);
  return f;
}

namespace {
double usable_hbm(const ClusterSpec& c) { return c.gpu.hbm_bytes_per_s * c.gpu.memory_efficiency; }
CommLoad comm_load(const CollectiveCost& cost) {
  return {.seconds = cost.total().s(), .wire_bytes_per_s = cost.transfer.s() > 0 ? cost.sent_bytes / cost.transfer.s() : 0.0, .sms = cost.sms};
}
CollectiveCost all_gather(const ClusterSpec& c, double out_bytes) {
  return price_collective(c, CollectiveOp{.kind = CollectiveKind::all_gather, .bytes = static_cast<std::int64_t>(out_bytes), .ranks = 8,
                                          .dtype = common::DType::fp16});
}
}  // namespace

Row8Prediction predict_row8(const ClusterSpec& c) {
  const GemmOp gemm{.m = 8192, .n = 8192, .k = 8192, .dtype = common::DType::fp16};
  const auto e = estimate_gemm(c.gpu, gemm);
  const auto ag = all_gather(c, 8.0 * (64 << 20));
  const KernelLoad k{.seconds = e.seconds, .seconds_on_fewer = gemm_seconds_on_sms(c.gpu, gemm, c.gpu.sm_count - ag.sms), .hbm_bytes = gemm.bytes()};
  Row8Prediction p;
  p.gemm_ms = e.seconds * 1e3;
  p.all_gather_ms = ag.total().s() * 1e3;
  p.comm_sms = ag.sms;
  p.sequential_ms = p.gemm_ms + p.all_gather_ms;
  p.overlap_sm_ms = overlap(c.interference, usable_hbm(c), k, comm_load(ag), IssueOrder::comm_first, false, e.waves).total_s * 1e3;
  const CommLoad ce{.seconds = copy_engine_seconds(c.interference, ag.latency.s(), ag.transfer.s()),
                    .wire_bytes_per_s = ag.sent_bytes / ag.transfer.s() * c.interference.copy_engine_bandwidth, .sms = 0};
  p.overlap_ce_ms = overlap(c.interference, usable_hbm(c), k, ce, IssueOrder::comm_first, false, e.waves).total_s * 1e3;
  return p;
}

double predict_row1(const ClusterSpec& c) {
  const auto ag = all_gather(c, 8.0 * (64 << 20));
  const double hbm = usable_hbm(c);
  const KernelLoad streaming{.seconds = 1e-3, .seconds_on_fewer = 1e-3, .hbm_bytes = hbm * 1e-3};
  return 1.0 / rates_beside(c.interference, hbm, streaming, comm_load(ag)).compute;
}

double predict_ce_ratio(const ClusterSpec& c, double shard_mib) {
  const auto ag = all_gather(c, 8.0 * shard_mib * (1 << 20));
  return ag.total().s() / copy_engine_seconds(c.interference, ag.latency.s(), ag.transfer.s());
}

namespace {
double layer_slowdown(const std::string& model, const std::string& cluster, int tp, int micro_batch) {
  auto c = load_cluster(cluster);
  c.node.gpus_per_node = tp;
  const auto m = sim::load_model(model);
  sim::PlanInput in;
  in.tp = tp;
  in.dp = 1;
  in.micro_batch = micro_batch;
  in.global_batch = micro_batch;
  in.strategy = &sim::strategy_domino();
  in.row_slices = 2;
  const auto plan = sim::resolve_plan(m, c, in, "interference aggregate");
  const auto g = sim::build_step_graph(m, c, plan);
  const auto cost = make_analytic_cost_model(c, plan.stack);
  const double hbm = usable_hbm(c);
  std::optional<CollectiveCost> coll;  // the layer's first TP all-reduce: one slice's attention output
  for (const auto& t : g.tasks)
    if (t.layer == 1 && t.is_collective()) {
      coll = cost->collective(std::get<CollectiveOp>(t.kind));
      break;
    }
  if (!coll) return 0.0;
  const CommLoad cl = comm_load(*coll);
  const int left = c.gpu.sm_count - cl.sms;
  double alone = 0, beside = 0;
  for (const auto& t : g.tasks) {
    if (t.layer != 1 || t.is_collective()) continue;
    KernelLoad k;
    std::visit([&](const auto& op) {
      using T = std::decay_t<decltype(op)>;
      if constexpr (std::is_same_v<T, GemmOp>) {
        const auto cc = cost->gemm(op);
        // the stack's GEMM time scaled by the library's slowdown on the SMs left, as the engine does
        // (sim/interference_model.cpp): the stack's own losses (gemm_efficiency below 1) do not hide the SMs taken
        const double lib = estimate_gemm(c.gpu, op).seconds;
        const double ratio = lib > 0 ? std::max(1.0, gemm_seconds_on_sms(c.gpu, op, left) / lib) : 1.0;
        k = KernelLoad{.seconds = cc.time.s(), .seconds_on_fewer = cc.time.s() * ratio, .hbm_bytes = cc.hbm_bytes};
      } else if constexpr (std::is_same_v<T, AttentionOp> || std::is_same_v<T, ElementwiseOp>) {
        ComputeCost cc;
        if constexpr (std::is_same_v<T, AttentionOp>) cc = cost->attention(op);
        else cc = cost->elementwise(op);
        // its SM-bound share (1 - its HBM share alone) slows with the SMs taken
        k = KernelLoad{.seconds = cc.time.s(),
                       .seconds_on_fewer = seconds_on_fewer_sms(cc.time.s(), cc.hbm_bytes / cc.time.s() / hbm, c.gpu.sm_count, cl.sms),
                       .hbm_bytes = cc.hbm_bytes};
      }
    }, t.kind);
    if (k.seconds <= 0) continue;
    alone += k.seconds;
    beside += k.seconds / rates_beside(c.interference, hbm, k, cl).compute;
  }
  return alone > 0 ? beside / alone - 1 : 0.0;
}
}  // namespace

InterferenceAggregate predict_aggregate() {
  InterferenceAggregate a;
  for (const char* cl : {"dgx-a100", "dgx-h100"})
    for (const char* model : {"gpt3-2.7b", "gpt3-6.7b", "llama2-7b", "llama2-13b"})
      for (int mb : {2, 8}) {
        const double s = layer_slowdown(model, cl, 4, mb);
        a.mean += s;
        ++a.workloads;
        if (s > a.max) {
          a.max = s;
          a.worst = fmt::format("{} {} mb{}", cl, model, mb);
        }
      }
  a.mean /= a.workloads;
  return a;
}

}  // namespace validate
