#include "validate/step_rows.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <regex>

#include "common/config_reader.hpp"
#include "hardware/cost_model.hpp"
#include "sim/step_graph.hpp"
#include "sim/strategy.hpp"
#include "validate/calibration.hpp"

namespace validate {

sim::StepReport simulate_plan(const sim::ModelSpec& m, const hardware::ClusterSpec& c, const sim::PlanInput& in) {
  const sim::Plan p = sim::resolve_plan(m, c, in, "accuracy");
  auto cost = hardware::make_analytic_cost_model(c, p.stack);
  sim::Engine engine(*cost);
  return engine.simulate(sim::build_step_graph(m, c, p));
}

sim::PlanInput megatron_plan(int tp, int mb, std::int64_t seq) {
  sim::PlanInput in;
  in.tp = tp;
  in.dp = 1;
  in.micro_batch = mb;
  in.global_batch = mb;
  in.seq_len = seq;
  in.dtype = common::DType::fp16;
  in.strategy = &sim::strategy_none();
  in.stack = hardware::Stack::eager;
  return in;
}

sim::PlanInput domino_plan(sim::PlanInput in) {
  in.strategy = &sim::strategy_domino();
  in.row_slices = 2;
  in.stack = hardware::Stack::cuda_graphs;
  return in;
}

sim::ModelSpec domino_13b() {
  sim::ModelSpec m = sim::load_model("gpt3-13b");
  m.heads = m.kv_heads = 64;
  return m;
}

DominoFigures read_domino_figures(const std::string& dir) {
  const std::string path = dir + "/domino-h100.md";
  const std::string text = common::read_text_file(path);
  DominoFigures d;
  const std::regex speed_row(R"(\|\s*GPT-3 ([0-9.]+B)\s*\|\s*([0-9.]+)\s*\|\s*([0-9.]+)\s*\|)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), speed_row); it != std::sregex_iterator(); ++it)
    for (int col = 0; col < 2; ++col) d.speedups.push_back({(*it)[1], col == 0 ? 512 : 1024, std::stod((*it)[2 + col])});
  if (d.speedups.size() != 4) throw common::ConfigError(path, "speedup table", fmt::format("expected 4 speedups, found {}", d.speedups.size()));
  const std::regex example(R"(about\s+([0-9.]+)-([0-9.]+)\s+ms\s+per\s+iteration)");
  std::smatch em;
  if (!std::regex_search(text, em, example)) throw common::ConfigError(path, "example iteration time", "line 'about N-N ms per iteration' not found");
  d.example_lo_ms = std::stod(em[1]);
  d.example_hi_ms = std::stod(em[2]);
  d.example_ms = (d.example_lo_ms + d.example_hi_ms) / 2;
  const std::regex share_line(R"(GPT-3 13B: 1 node ([0-9.]+) %, 2 nodes ([0-9.]+) %, 4 nodes ([0-9.]+) %)");
  std::smatch sm;
  if (!std::regex_search(text, sm, share_line)) throw common::ConfigError(path, "TP share", "line 'GPT-3 13B: 1 node N %, 2 nodes N %, 4 nodes N %' not found");
  for (int i = 1; i <= 3; ++i) d.tp_share_pct.push_back(std::stod(sm[i]));
  return d;
}

SpeedupPrediction domino_speedup(const hardware::ClusterSpec& h100, const DominoSpeedup& row) {
  std::string name = "gpt3-" + row.size;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return std::tolower(ch); });
  const sim::ModelSpec m = name == "gpt3-13b" ? domino_13b() : sim::load_model(name);
  const sim::PlanInput base = megatron_plan(8, kDominoMicroBatchSize, row.seq);
  SpeedupPrediction p;
  p.megatron_ms = simulate_plan(m, h100, base).step_time.ms();
  p.domino_ms = simulate_plan(m, h100, domino_plan(base)).step_time.ms();
  p.speedup = p.megatron_ms / p.domino_ms;
  return p;
}

std::vector<A100Row> read_a100_rows(const std::string& dir) {
  const Csv csv = read_csv(dir + "/a100-megatron-1node-2and4gpu.csv");
  std::vector<A100Row> out;
  for (const auto& row : csv.rows) {
    A100Row r;
    r.gpus = csv_int(csv, row, "gpus");
    r.global_batch = csv_int(csv, row, "global_batch");
    r.micro_batch = csv_int(csv, row, "micro_batch");
    r.heads = csv_int(csv, row, "heads");
    r.layers = csv_int(csv, row, "layers");
    r.tp = csv_int(csv, row, "tp");
    r.dp = csv_int(csv, row, "dp");
    r.pp = csv_int(csv, row, "pp");
    r.hidden = csv_int64(csv, row, "hidden");
    r.seq_len = csv_int64(csv, row, "seq_len");
    r.measured_ms = csv_number(csv, row, "iter_ms");
    r.label = fmt::format("{} GPUs h{} L{} gb{} mb{} tp{} dp{} pp{}", r.gpus, r.hidden, r.layers, r.global_batch, r.micro_batch, r.tp, r.dp, r.pp);
    out.push_back(r);
  }
  return out;
}

sim::StepReport predict_a100(const hardware::ClusterSpec& a100, const A100Row& r) {
  sim::ModelSpec m{.name = fmt::format("gpt-h{}-L{}", r.hidden, r.layers), .source = "calibration row", .layers = r.layers, .hidden = r.hidden,
                   .heads = r.heads, .kv_heads = r.heads, .ffn_hidden = 4 * r.hidden, .vocab = 51200, .seq_len = r.seq_len};
  auto c = a100;
  c.node.gpus_per_node = r.gpus;  // the GPUs used, inside one DGX node
  sim::PlanInput in = megatron_plan(r.tp, r.micro_batch, r.seq_len);
  in.dp = r.dp;
  in.global_batch = r.global_batch;
  return simulate_plan(m, c, in);
}

PipelinedPrediction predict_a100_pipelined(const hardware::ClusterSpec& a100, const A100Row& r) {
  PipelinedPrediction out;
  out.model = {.name = fmt::format("gpt-h{}-L{}", r.hidden, r.layers), .source = "calibration row", .layers = r.layers, .hidden = r.hidden,
               .heads = r.heads, .kv_heads = r.heads, .ffn_hidden = 4 * r.hidden, .vocab = 51200, .seq_len = r.seq_len};
  auto c = a100;
  c.node.gpus_per_node = r.gpus;  // the GPUs used, inside one DGX node
  sim::PlanInput in = megatron_plan(r.tp, r.micro_batch, r.seq_len);
  in.dp = r.dp;
  in.global_batch = r.global_batch;
  in.pp = r.pp;
  in.schedule = sim::PipelineSchedule::one_f_one_b;
  in.p2p_overlap = false;  // Megatron-DeepSpeed's default: blocking send / receive between stages
  out.plan = sim::resolve_plan(out.model, c, in, "accuracy");
  auto cost = hardware::make_analytic_cost_model(c, out.plan.stack);
  out.simulated = sim::simulate_plan(out.model, c, out.plan, *cost);
  return out;
}

double domino_example_ms(const hardware::ClusterSpec& h100) {
  return simulate_plan(domino_13b(), h100, domino_plan(megatron_plan(8, kDominoMicroBatchSize, 1024))).step_time.ms();
}

}  // namespace validate
