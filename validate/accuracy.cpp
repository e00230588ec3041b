#include "validate/accuracy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

#include "hardware/collective_sweep.hpp"
#include "common/config_reader.hpp"
#include "hardware/cost_model.hpp"
#include "hardware/gemm_model.hpp"
#include "hardware/interference.hpp"
#include "sim/engine.hpp"
#include "sim/step_graph.hpp"
#include "sim/strategy.hpp"

namespace validate {

using sim::ModelSpec;
using sim::Plan;
using sim::PlanInput;
using sim::StepReport;

double AccuracySection::mean_abs_error() const {
  double s = 0;
  int n = 0;
  for (const auto& r : rows)
    if (r.scored) {
      s += std::abs(absolute ? r.predicted - r.measured : r.error());
      ++n;
    }
  return n ? s / n : 0.0;
}

const AccuracyRow* AccuracySection::worst() const {
  const AccuracyRow* w = nullptr;
  auto e = [&](const AccuracyRow& r) { return std::abs(absolute ? r.predicted - r.measured : r.error()); };
  for (const auto& r : rows)
    if (r.scored && (!w || e(r) > e(*w))) w = &r;
  return w;
}

double AccuracySection::max_abs_error() const {
  const auto* w = worst();
  return w ? std::abs(absolute ? w->predicted - w->measured : w->error()) : 0.0;
}

namespace {

using common::ConfigError;

/// CSV rows (comment lines '#' and the header skipped) as string cells, with the header.
struct Csv {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string path;
  int col(const std::string& name) const {
    for (std::size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return static_cast<int>(i);
    throw ConfigError(path, name, "column missing from the header");
  }
};

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) out.push_back(cell);
  return out;
}

Csv read_csv(const std::string& path) {
  Csv csv;
  csv.path = path;
  std::istringstream in(common::read_text_file(path));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (csv.header.empty()) csv.header = split(line);
    else csv.rows.push_back(split(line));
  }
  return csv;
}

double num(const Csv& csv, const std::vector<std::string>& row, const std::string& col) {
  const auto& cell = row.at(static_cast<std::size_t>(csv.col(col)));
  try {
    return std::stod(cell);
  } catch (const std::exception&) {
    throw ConfigError(csv.path, col, fmt::format("'{}' is not a number", cell));
  }
}

// ---- all-reduce bus bandwidth -----------------------------------------------------------------
AccuracySection nccl_section(const std::string& dir) {
  AccuracySection s{.title = "NCCL all-reduce bus bandwidth (one node)", .source = "data/calibration/nccl-allreduce-busbw.csv",
                    .bar = "within 10 % for sizes >= 64 MB, within 25 % below"};
  const Csv csv = read_csv(dir + "/nccl-allreduce-busbw.csv");
  for (const auto& row : csv.rows) {
    const std::string system = row.at(static_cast<std::size_t>(csv.col("system")));
    const std::string algo = row.at(static_cast<std::size_t>(csv.col("algo")));
    const int gpus = static_cast<int>(num(csv, row, "gpus"));
    const auto bytes = static_cast<std::int64_t>(num(csv, row, "bytes"));
    auto cluster = hardware::load_cluster(system);
    hardware::CollectiveOptions opt;
    if (algo == "ring") opt.algo = hardware::CollectiveAlgo::ring;  // measured with NCCL_ALGO=Ring
    const hardware::CollectiveOp op{.kind = hardware::CollectiveKind::all_reduce, .bytes = bytes, .ranks = gpus, .nodes = 1,
                                    .dtype = common::DType::fp32};
    const auto pred = hardware::collective_row(cluster, op, opt);
    s.rows.push_back({.label = fmt::format("{} {} GPUs {} B ({})", system, gpus, bytes, algo == "ring" ? "NCCL_ALGO=Ring" : "NVLS enabled"),
                      .measured = num(csv, row, "busbw_GBps"), .predicted = pred.busbw_GBps, .unit = "GB/s",
                      .note = fmt::format("{}/{} {} ch", pred.algo, pred.proto, pred.channels)});
  }
  return s;
}

// ---- GEMM ---------------------------------------------------------------------------------------
AccuracySection gemm_section(const std::string& dir) {
  AccuracySection s{.title = "GEMM throughput, one H100 SXM", .source = "data/calibration/gemm-h100.csv",
                    .bar = "within 10 % for square shapes >= 2048"};
  const Csv csv = read_csv(dir + "/gemm-h100.csv");
  const auto cluster = hardware::load_cluster("dgx-h100");
  for (const auto& row : csv.rows) {
    const std::string dt = row.at(static_cast<std::size_t>(csv.col("dtype")));
    common::DType dtype;
    if (!common::parse_dtype(dt, dtype)) throw ConfigError(csv.path, "dtype", fmt::format("'{}' is not a dtype", dt));
    const auto m = static_cast<std::int64_t>(num(csv, row, "m")), n = static_cast<std::int64_t>(num(csv, row, "n")),
               k = static_cast<std::int64_t>(num(csv, row, "k"));
    const std::string note = row.size() > static_cast<std::size_t>(csv.col("note")) ? row[static_cast<std::size_t>(csv.col("note"))] : "";
    if (m == 0) {
      // the best shape a search found: the input gemm_efficiency[dtype] was fitted to, not a prediction
      s.rows.push_back({.label = fmt::format("{} best shape (MAMF)", dt), .measured = num(csv, row, "tflops"),
                        .predicted = cluster.gpu.peak_flops(dtype) * cluster.gpu.gemm_eff(dtype) / 1e12, .unit = "TFLOP/s",
                        .note = "fit input (gemm_efficiency), not scored", .scored = false});
      continue;
    }
    const auto e = hardware::estimate_gemm(cluster.gpu, hardware::GemmOp{.m = m, .n = n, .k = k, .dtype = dtype});
    const bool square = m == n && n == k;
    s.rows.push_back({.label = fmt::format("{} {}x{}x{} ({})", dt, m, n, k, note), .measured = num(csv, row, "tflops"),
                      .predicted = e.tflops(), .unit = "TFLOP/s",
                      .note = fmt::format("tile {}x{}, {} waves{}{}", e.tile_m, e.tile_n, e.waves, e.memory_bound ? ", memory-bound" : "",
                                          square && m >= 2048 ? "" : "; outside the bar"),
                      .scored = square && m >= 2048});
  }
  return s;
}

// ---- step-level -------------------------------------------------------------------------------
StepReport simulate_plan(const ModelSpec& m, const hardware::ClusterSpec& c, const PlanInput& in) {
  const Plan p = sim::resolve_plan(m, c, in, "accuracy");
  auto cost = hardware::make_analytic_cost_model(c);
  sim::Engine engine(*cost);
  return engine.simulate(sim::build_step_graph(m, c, p));
}

PlanInput megatron(int tp, int mb, std::int64_t seq) {
  PlanInput in;
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

// GPT-3 13B as DeepSpeed-Domino's released example runs it (DeepSpeedExamples
// training/DeepSpeed-Domino/pretrain_gpt3_13b.sh: 40 layers, hidden 5120, 64 attention heads,
// seq 1024, micro-batch 16 = global batch 16, fp16, TP = 8): 64 heads of 80, not GPT-3's 40 of 128
// (same FLOPs in the GEMMs; the unfused attention's score matrix is 64/40 larger). 64 also divides
// the TP sizes 16 and 32 of the share rows.
ModelSpec domino_13b() {
  ModelSpec m = sim::load_model("gpt3-13b");
  m.heads = m.kv_heads = 64;
  return m;
}

AccuracySection domino_section(const std::string& dir, AccuracyReport& report) {
  AccuracySection& share = report.tp_share;
  AccuracySection s{.title = fmt::format("Domino speedup over Megatron-LM, 8x H100, TP=8 (micro-batch {}, 2 row slices; Megatron eager, Domino cuda_graphs)",
                                         kDominoMicroBatch),
                    .source = "data/calibration/domino-h100.md", .bar = "within +-0.05", .absolute = true};
  share = AccuracySection{.title = fmt::format("GPT-3 13B Megatron-LM TP-communication share of the step (micro-batch {}, seq 1024, eager)", kDominoMicroBatch),
                          .source = "data/calibration/domino-h100.md", .bar = "within +-5 points", .absolute = true};
  const std::string path = dir + "/domino-h100.md";
  const std::string text = common::read_text_file(path);
  const std::regex speed_row(R"(\|\s*GPT-3 ([0-9.]+B)\s*\|\s*([0-9.]+)\s*\|\s*([0-9.]+)\s*\|)");
  const auto h100 = hardware::load_cluster("dgx-h100");
  // Megatron-LM runs eagerly; DeepSpeed-Domino's published runs use CUDA graphs and torch.compile
  // (its blog, "Implementation and Optimization"): the cuda_graphs stack.
  auto domino = [](PlanInput in) {
    in.strategy = &sim::strategy_domino();
    in.row_slices = 2;
    in.stack = hardware::Stack::cuda_graphs;
    return in;
  };
  for (auto it = std::sregex_iterator(text.begin(), text.end(), speed_row); it != std::sregex_iterator(); ++it) {
    const std::string size = (*it)[1];
    std::string name = "gpt3-" + size;
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return std::tolower(ch); });
    const ModelSpec m = name == "gpt3-13b" ? domino_13b() : sim::load_model(name);
    for (int col = 0; col < 2; ++col) {
      const std::int64_t seq = col == 0 ? 512 : 1024;
      const PlanInput base = megatron(8, kDominoMicroBatch, seq);
      const double tm = simulate_plan(m, h100, base).step_time.ms();
      const double td = simulate_plan(m, h100, domino(base)).step_time.ms();
      s.rows.push_back({.label = fmt::format("GPT-3 {} seq {}", size, seq), .measured = std::stod((*it)[2 + col]), .predicted = tm / td,
                        .unit = "x", .note = fmt::format("Megatron {:.1f} ms, Domino {:.1f} ms", tm, td)});
    }
  }
  if (s.rows.size() != 4) throw ConfigError(path, "speedup table", fmt::format("expected 4 speedups, found {}", s.rows.size()));
  // The released example's own iteration time: the fit input of host.kernel_efficiency.cuda_graphs.
  const std::regex example(R"(about\s+([0-9.]+)-([0-9.]+)\s+ms\s+per\s+iteration)");
  std::smatch em;
  if (!std::regex_search(text, em, example)) throw ConfigError(path, "example iteration time", "line 'about N-N ms per iteration' not found");
  {
    const double lo = std::stod(em[1]), hi = std::stod(em[2]);
    const double td = simulate_plan(domino_13b(), h100, domino(megatron(8, kDominoMicroBatch, 1024))).step_time.ms();
    s.rows.push_back({.label = "released example, GPT-3 13B seq 1024, Domino iteration time", .measured = (lo + hi) / 2, .predicted = td,
                      .unit = "ms", .note = fmt::format("published {:g}-{:g} ms; fit input (kernel_efficiency.cuda_graphs)", lo, hi), .scored = false});
  }
  const std::regex share_line(R"(GPT-3 13B: 1 node ([0-9.]+) %, 2 nodes ([0-9.]+) %, 4 nodes ([0-9.]+) %)");
  std::smatch sm;
  if (!std::regex_search(text, sm, share_line)) throw ConfigError(path, "TP share", "line 'GPT-3 13B: 1 node N %, 2 nodes N %, 4 nodes N %' not found");
  const ModelSpec m13 = domino_13b();
  for (int i = 0; i < 3; ++i) {
    const int nodes = 1 << i;
    auto c = h100;
    c.nodes = nodes;
    const auto r = simulate_plan(m13, c, megatron(8 * nodes, kDominoMicroBatch, 1024));
    if (i == 0) {
      report.tp_share_1node_comm_ms = r.busy("tp_comm").ms();
      report.tp_share_1node_mfu = r.mfu;
    }
    share.rows.push_back({.label = fmt::format("{} node{} (TP={})", nodes, nodes > 1 ? "s" : "", 8 * nodes), .measured = std::stod(sm[1 + i]),
                          .predicted = 100.0 * r.busy("tp_comm").ms() / r.step_time.ms(), .unit = "%",
                          .note = fmt::format("step {:.1f} ms, TP comm {:.1f} ms", r.step_time.ms(), r.busy("tp_comm").ms())});
  }
  return s;
}

AccuracySection a100_section(const std::string& dir) {
  AccuracySection s{.title = "Megatron-DeepSpeed iteration time, A100-SXM4-80GB, one node", .source = "data/calibration/a100-megatron-1node-2and4gpu.csv",
                    .bar = "mean absolute error <= 8 % over the rows with pp = 1"};
  const Csv csv = read_csv(dir + "/a100-megatron-1node-2and4gpu.csv");
  const auto a100 = hardware::load_cluster("dgx-a100");
  for (const auto& row : csv.rows) {
    const int gpus = static_cast<int>(num(csv, row, "gpus")), gb = static_cast<int>(num(csv, row, "global_batch")),
              mb = static_cast<int>(num(csv, row, "micro_batch")), heads = static_cast<int>(num(csv, row, "heads")),
              layers = static_cast<int>(num(csv, row, "layers")), tp = static_cast<int>(num(csv, row, "tp")),
              dp = static_cast<int>(num(csv, row, "dp")), pp = static_cast<int>(num(csv, row, "pp"));
    const auto hidden = static_cast<std::int64_t>(num(csv, row, "hidden")), seq = static_cast<std::int64_t>(num(csv, row, "seq_len"));
    AccuracyRow out{.label = fmt::format("{} GPUs h{} L{} gb{} mb{} tp{} dp{} pp{}", gpus, hidden, layers, gb, mb, tp, dp, pp),
                    .measured = num(csv, row, "iter_ms"), .unit = "ms"};
    if (pp != 1) {
      out.scored = false;
      out.note = "pp > 1: not modelled yet (pipeline parallelism)";
      s.rows.push_back(out);
      continue;
    }
    ModelSpec m{.name = fmt::format("gpt-h{}-L{}", hidden, layers), .source = "calibration row", .layers = layers, .hidden = hidden,
                .heads = heads, .kv_heads = heads, .ffn_hidden = 4 * hidden, .vocab = 51200, .seq_len = seq};
    auto c = a100;
    c.node.gpus_per_node = gpus;  // the GPUs used, inside one DGX node
    PlanInput in = megatron(tp, mb, seq);
    in.dp = dp;
    in.global_batch = gb;
    const auto r = simulate_plan(m, c, in);
    out.predicted = r.step_time.ms();
    out.note = fmt::format("{} micro-batches, MFU {:.0f} %", gb / (mb * dp), 100 * r.mfu);
    s.rows.push_back(out);
  }
  return s;
}

std::string pct(double e) { return fmt::format("{:+.1f} %", 100 * e); }

void section_md(std::string& md, const AccuracySection& s) {
  md += fmt::format("## {}\n\nSource: `{}`. Bar: {}.\n\n", s.title, s.source, s.bar);
  md += "| measured row | measured | predicted | error | note |\n|---|---:|---:|---:|---|\n";
  for (const auto& r : s.rows) {
    const std::string err = r.predicted == 0 && !r.scored ? "–"
                            : s.absolute                 ? fmt::format("{:+.3g} {}", r.predicted - r.measured, r.unit == "%" ? "pt" : r.unit)
                                                         : pct(r.error());
    md += fmt::format("| {} | {:.4g} {} | {} | {} | {}{} |\n", r.label, r.measured, r.unit,
                      r.predicted == 0 && !r.scored ? "–" : fmt::format("{:.4g} {}", r.predicted, r.unit), err, r.note,
                      r.scored ? "" : " (not scored)");
  }
  md += "\n";
}

}  // namespace

AccuracyReport evaluate_accuracy(const std::string& calibration_dir, bool progress) {
  AccuracyReport r;
  r.domino_micro_batch = kDominoMicroBatch;
  auto say = [&](const char* what) {
    if (progress) fmt::print(stderr, "accuracy: {}\n", what);
  };
  say("NCCL all-reduce");
  r.nccl = nccl_section(calibration_dir);
  say("GEMM");
  r.gemm = gemm_section(calibration_dir);
  say("Domino speedups and TP-communication shares (H100)");
  r.domino = domino_section(calibration_dir, r);
  say("A100 Megatron iteration times (400 simulated steps)");
  r.a100 = a100_section(calibration_dir);
  return r;
}

std::string accuracy_markdown(const AccuracyReport& r) {
  std::string md =
      "# Prediction accuracy\n\n"
      "Generated by `slicetune accuracy --out docs/accuracy.md` from every row of `data/calibration/`"
      " (analytic cost model, embedded cluster files). Do not edit by hand.\n\n## Summary\n\n"
      "| what | rows scored | mean abs error | worst row | worst error | bar |\n|---|---:|---:|---|---:|---|\n";
  for (const AccuracySection* s : {&r.nccl, &r.gemm, &r.domino, &r.tp_share, &r.a100}) {
    int n = 0;
    for (const auto& row : s->rows) n += row.scored;
    const auto* w = s->worst();
    const std::string unit = s->absolute ? (s == &r.tp_share ? " pt" : "") : "";
    auto fmt_err = [&](double e) { return s->absolute ? fmt::format("{:.3f}{}", e, unit) : fmt::format("{:.1f} %", 100 * e); };
    md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", s->title, n, fmt_err(s->mean_abs_error()), w ? w->label : "–",
                      w ? fmt_err(s->absolute ? w->predicted - w->measured : w->error()) : "–", s->bar);
  }
  md += "\n";
  const auto h = hardware::load_cluster("dgx-h100"), a = hardware::load_cluster("dgx-a100");
  using common::DType;
  using hardware::Stack;
  md += "## Fitted constants\n\nEverything else is a datasheet figure or NCCL's own tuner constant"
        " (`hardware/collective_model.cpp`). No per-row corrections.\n\n"
        "| constant (cluster file key) | H100 | A100 | fitted to |\n|---|---:|---:|---|\n";
  md += fmt::format("| `nccl.call_overhead_us` | {} | {} | H100 1 KB all-reduce time beyond NCCL's modelled latency |\n",
                    h.nccl.call_overhead_us, a.nccl.call_overhead_us);
  md += fmt::format("| `nccl.nvls_efficiency` | {} | – | H100 NVLS busbw, 64 MB .. 8 GB |\n", h.nccl.nvls_efficiency);
  md += fmt::format("| `nccl.nvls_latency_us` | {} | – | same (NCCL's tuner assumes 25 us) |\n", h.nccl.nvls_latency_us);
  md += fmt::format("| `gpu.gemm_efficiency` (fp16 / fp8) | {} / {} | {} / – | H100: best shape measured (MAMF); A100: the iteration times |\n",
                    h.gpu.gemm_eff(DType::fp16), h.gpu.gemm_eff(DType::fp8), a.gpu.gemm_eff(DType::fp16));
  md += fmt::format("| `gpu.gemm_tile_overhead_us` | {} | {} | H100 square GEMMs |\n", h.gpu.gemm_tile_overhead.us(), a.gpu.gemm_tile_overhead.us());
  md += fmt::format("| `host.kernel_efficiency.eager` (kernel speed in a step / modelled) | {} | {} | H100: the mean of the four Domino speedups"
                    " (Megatron-LM's stack); A100: not used, 1 (its eager losses are in gemm_efficiency and op_overhead_us) |\n",
                    h.host.kernel_efficiency_for(Stack::eager), a.host.kernel_efficiency_for(Stack::eager));
  md += fmt::format("| `host.kernel_efficiency.cuda_graphs` | {} | {} | H100: the released Domino example's iteration time (521-529 ms) |\n",
                    h.host.kernel_efficiency_for(Stack::cuda_graphs), a.host.kernel_efficiency_for(Stack::cuda_graphs));
  md += fmt::format("| `host.launch_us.eager` (host time per task) | {} | {} | A100: the iteration times; H100: not constrained (no scored row is"
                    " host-bound) |\n",
                    h.host.launch_for(Stack::eager).us(), a.host.launch_for(Stack::eager).us());
  md += fmt::format("| `host.op_overhead_us.eager` (GPU time per task) | {} | {} | A100 iteration times |\n\n",
                    h.host.op_overhead_for(Stack::eager).us(), a.host.op_overhead_for(Stack::eager).us());
  const auto& sh = r.tp_share.rows;
  const auto& ex = r.domino.rows.back();
  const double f1 = sh[0].measured / 100, s13 = r.domino.rows[3].measured;  // one-node share, 13B seq 1024 speedup
  md += fmt::format(
      "## Notes\n\n"
      "- Domino: one micro-batch for all four figures, {} (the released example's: DeepSpeedExamples"
      " `training/DeepSpeed-Domino/pretrain_gpt3_13b.sh` sets micro-batch 16 = global batch 16), seq 512 / 1024, 2 row slices on the batch axis,"
      " fp16, dgx-h100. GPT-3 13B as that script runs it: 64 attention heads of 80 (the share rows too; 64 also divides TP = 16 and 32).\n"
      "- Stacks: Megatron-LM on the eager stack, Domino on cuda_graphs - the Domino blog says its runs use CUDA graphs, multiple streams"
      " and torch.compile. The published figures need that difference: if Domino only hid communication, a 16 % share would cap its"
      " gain at 1 / (1 - {:.2f}) = {:.2f}x, yet {:.2f}x is published. With the example's {:.0f} ms, Megatron takes {:.2f} x {:.0f} = {:.0f} ms,"
      " {:.0f} % of it ({:.0f} ms) TP communication - NCCL's price for its TP AllReduces is {:.0f} ms here - leaving {:.0f} ms of"
      " Megatron compute against at most {:.0f} ms for Domino's (about {:.0f} % faster kernels). So two constants, one per stack:"
      " `host.kernel_efficiency` eager {} and cuda_graphs {} (fraction of the modelled, isolated-kernel speed reached in a step);"
      " the three shares and each speedup are then predictions (only the speedups' mean was fitted).\n"
      "- The H100 steps are {:.0f}-{:.0f} % slower than the isolated-kernel model (MFU about {:.0f} % for Megatron here): the framework"
      " runs its kernels at {:.2f}-{:.2f} of their microbenchmark speed. The GEMM rows above stay at microbenchmark speed (gemm_efficiency).\n"
      "- A100 rows with pp > 1 are listed but not scored until pipeline parallelism exists.\n"
      "- Interference (no calibration file; defaults from `docs/cost-models.md`): beside an NVLS all-reduce on H100"
      " (16 of 132 SMs, the NVLink port full) a compute-bound GEMM takes {:+.0f} % longer and a memory-bound kernel {:+.0f} %;"
      " published: +18.9 % on average, +40 % at most (arXiv 2507.03114).\n\n",
      kDominoMicroBatch, f1, 1 / (1 - f1), s13, ex.measured, s13, ex.measured, s13 * ex.measured, 100 * f1, f1 * s13 * ex.measured,
      r.tp_share_1node_comm_ms, (1 - f1) * s13 * ex.measured, ex.measured, 100 * (1 - ex.measured / ((1 - f1) * s13 * ex.measured)),
      h.host.kernel_efficiency_for(Stack::eager), h.host.kernel_efficiency_for(Stack::cuda_graphs),
      100 * (1 / h.host.kernel_efficiency_for(Stack::cuda_graphs) - 1), 100 * (1 / h.host.kernel_efficiency_for(Stack::eager) - 1),
      100 * r.tp_share_1node_mfu, h.host.kernel_efficiency_for(Stack::eager), h.host.kernel_efficiency_for(Stack::cuda_graphs),
      100 * (1 / hardware::compute_rate_beside_comm(h.interference, h.gpu.hbm_bytes_per_s, 0.0, 16.0 / h.gpu.sm_count, h.node.nvlink_bytes_per_s) - 1),
      100 * (1 / hardware::compute_rate_beside_comm(h.interference, h.gpu.hbm_bytes_per_s, 1.0, 16.0 / h.gpu.sm_count, h.node.nvlink_bytes_per_s) - 1));
  for (const AccuracySection* s : {&r.nccl, &r.gemm, &r.domino, &r.tp_share, &r.a100}) section_md(md, *s);
  return md;
}

}  // namespace validate
