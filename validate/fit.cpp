#include "validate/fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/config_error.hpp"
#include "common/config_reader.hpp"
#include "hardware/cluster.hpp"
#include "hardware/gemm_model.hpp"
#include "hardware/tp_overlap.hpp"
#include "validate/calibration.hpp"
#include "validate/interference_rows.hpp"
#include "validate/step_rows.hpp"
#include "validate/tp_overlap_rows.hpp"

namespace validate {

double rms_log_error(const std::vector<std::pair<double, double>>& rows) {
  if (rows.empty()) return 0.0;
  double s = 0;
  for (const auto& [p, m] : rows) {
    const double e = std::log(p / m);
    s += e * e;
  }
  return std::expm1(std::sqrt(s / static_cast<double>(rows.size())));
}

void grid_least_squares(Fit& fit, const RowsAt& rows_at) {
  const std::size_t n = fit.params.size();
  std::vector<int> steps(n), at(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& p = fit.params[i];
    if (!(p.step > 0) || p.hi < p.lo) throw std::invalid_argument("grid_least_squares: bad grid for " + p.key);
    steps[i] = static_cast<int>(std::floor((p.hi - p.lo) / p.step + 1e-9)) + 1;
  }
  std::vector<double> values(n), best(n);
  double best_cost = std::numeric_limits<double>::infinity();
  int best_rows = 0;
  for (;;) {
    for (std::size_t i = 0; i < n; ++i) values[i] = fit.params[i].lo + at[i] * fit.params[i].step;
    const auto rows = rows_at(values);
    double cost = 0;
    for (const auto& [p, m] : rows) {
      const double e = std::log(p / m);
      cost += e * e;
    }
    if (cost < best_cost - 1e-12) {
      best_cost = cost;
      best = values;
      best_rows = static_cast<int>(rows.size());
    }
    std::size_t i = 0;
    while (i < n && ++at[i] == steps[i]) at[i++] = 0;
    if (i == n) break;
  }
  for (std::size_t i = 0; i < n; ++i) fit.params[i].fitted = best[i];
  fit.rows = best_rows;
  fit.rms_log_error = best_rows > 0 ? std::expm1(std::sqrt(best_cost / best_rows)) : 0.0;
}

void coordinate_least_squares(Fit& fit, const RowsAt& rows_at, int rounds) {
  const std::size_t n = fit.params.size();
  std::vector<double> values(n);
  auto snap = [](const FitParameter& p, double v) {
    const double i = std::round((std::clamp(v, p.lo, p.hi) - p.lo) / p.step);
    return p.lo + i * p.step;
  };
  for (std::size_t i = 0; i < n; ++i) values[i] = snap(fit.params[i], fit.params[i].file_value);
  auto cost_of = [&](const std::vector<double>& v, int* rows) {
    const auto r = rows_at(v);
    double c = 0;
    for (const auto& [p, m] : r) {
      const double e = std::log(p / m);
      c += e * e;
    }
    if (rows) *rows = static_cast<int>(r.size());
    return c;
  };
  int nrows = 0;
  double best = cost_of(values, &nrows);
  for (int round = 0; round < rounds; ++round)
    for (std::size_t i = 0; i < n; ++i) {
      const auto& p = fit.params[i];
      const int steps = static_cast<int>(std::floor((p.hi - p.lo) / p.step + 1e-9)) + 1;
      std::vector<double> trial = values;
      for (int s = 0; s < steps; ++s) {
        trial[i] = p.lo + s * p.step;
        const double c = cost_of(trial, nullptr);
        if (c < best - 1e-12) {
          best = c;
          values = trial;
        }
      }
    }
  for (std::size_t i = 0; i < n; ++i) fit.params[i].fitted = values[i];
  fit.rows = nrows;
  fit.rms_log_error = nrows > 0 ? std::expm1(std::sqrt(best / nrows)) : 0.0;
}

namespace {

using hardware::ClusterSpec;

// ---- collectives across nodes ------------------------------------------------------------------
// network.nic_efficiency and network.latency_us of dgx-h100, over the 4-node rows >= 16 MB (the
// sizes the bar covers; below, LL / LL128 latencies dominate and NCCL's choice is not reproduced).
bool four_node_fit_row(const NcclMeasurement& m) { return m.set == NcclSet::four_node && m.bytes >= (std::int64_t{16} << 20); }

Fit network_fit(const std::vector<NcclMeasurement>& all, const std::function<bool(const NcclMeasurement&)>& use, std::string inputs) {
  const ClusterSpec base = hardware::load_cluster("dgx-h100");
  Fit f{.name = "collectives across nodes", .cluster = "dgx-h100", .inputs = std::move(inputs)};
  f.params = {{.key = "network.nic_efficiency", .file_value = base.network.nic_efficiency, .lo = 0.60, .hi = 1.00, .step = 0.01},
              {.key = "network.latency_us", .file_value = base.network.latency.us(), .lo = 1, .hi = 80, .step = 1}};
  std::vector<NcclMeasurement> rows;
  for (const auto& m : all)
    if (use(m)) rows.push_back(m);
  grid_least_squares(f, [&](const std::vector<double>& v) {
    ClusterSpec c = base;
    c.network.nic_efficiency = v[0];
    c.network.latency = common::Duration::from_us(v[1]);
    std::vector<std::pair<double, double>> out;
    for (const auto& m : rows) out.emplace_back(predict_nccl(c, m).busbw_GBps, m.busbw_GBps);
    return out;
  });
  return f;
}

// nccl.nvls_efficiency and nccl.nvls_latency_us of dgx-h100, over the 8-GPU NVLS rows >= 64 MB.
Fit nvls_fit(const std::vector<NcclMeasurement>& all) {
  const ClusterSpec base = hardware::load_cluster("dgx-h100");
  Fit f{.name = "NVLS all-reduce in one node", .cluster = "dgx-h100",
        .inputs = "nccl-allreduce-busbw.csv: dgx-h100, 8 GPUs, NVLS enabled, 64 MB .. 8 GB"};
  f.params = {{.key = "nccl.nvls_efficiency", .file_value = base.nccl.nvls_efficiency, .lo = 0.40, .hi = 0.80, .step = 0.01},
              {.key = "nccl.nvls_latency_us", .file_value = base.nccl.nvls_latency_us, .lo = 5, .hi = 150, .step = 5}};
  std::vector<NcclMeasurement> rows;
  for (const auto& m : all)
    if (m.set == NcclSet::nvls_one_node && m.cluster == "dgx-h100" && m.gpus == 8 && !m.forced && m.bytes >= (std::int64_t{64} << 20))
      rows.push_back(m);
  grid_least_squares(f, [&](const std::vector<double>& v) {
    ClusterSpec c = base;
    c.nccl.nvls_efficiency = v[0];
    c.nccl.nvls_latency_us = v[1];
    std::vector<std::pair<double, double>> out;
    for (const auto& m : rows) out.emplace_back(predict_nccl(c, m).busbw_GBps, m.busbw_GBps);
    return out;
  });
  return f;
}

// nccl.call_overhead_us of dgx-h100: the 1 KB all-reduce (one published figure).
Fit call_overhead_fit(const std::vector<NcclMeasurement>& all) {
  const ClusterSpec base = hardware::load_cluster("dgx-h100");
  Fit f{.name = "collective call overhead", .cluster = "dgx-h100",
        .inputs = "nccl-allreduce-busbw.csv: dgx-h100, 8 GPUs, 1024 B (a single published figure)"};
  f.params = {{.key = "nccl.call_overhead_us", .file_value = base.nccl.call_overhead_us, .lo = 0, .hi = 30, .step = 0.5}};
  std::vector<NcclMeasurement> rows;
  for (const auto& m : all)
    if (m.set == NcclSet::nvls_one_node && m.cluster == "dgx-h100" && m.bytes <= 1024) rows.push_back(m);
  grid_least_squares(f, [&](const std::vector<double>& v) {
    ClusterSpec c = base;
    c.nccl.call_overhead_us = v[0];
    std::vector<std::pair<double, double>> out;
    for (const auto& m : rows) out.emplace_back(predict_nccl(c, m).busbw_GBps, m.busbw_GBps);
    return out;
  });
  return f;
}

// ---- GEMM --------------------------------------------------------------------------------------
struct GemmRow {
  hardware::GemmOp op;
  double tflops = 0;
};
std::vector<GemmRow> square_gemms(const std::string& dir, bool bf16_only) {
  const Csv csv = read_csv(dir + "/gemm-h100.csv");
  std::vector<GemmRow> out;
  for (const auto& row : csv.rows) {
    common::DType dt;
    if (!common::parse_dtype(csv.cell(row, "dtype"), dt)) throw common::ConfigError(csv.path, "dtype", "not a dtype");
    const auto m = csv_int64(csv, row, "m"), n = csv_int64(csv, row, "n"),
               k = csv_int64(csv, row, "k");
    if (!(m == n && n == k && m >= 2048)) continue;
    if (bf16_only && dt != common::DType::bf16) continue;
    out.push_back({hardware::GemmOp{.m = m, .n = n, .k = k, .dtype = dt}, csv_number(csv, row, "tflops")});
  }
  return out;
}

Fit tile_fit(const std::vector<GemmRow>& rows, std::string inputs) {
  const ClusterSpec base = hardware::load_cluster("dgx-h100");
  Fit f{.name = "GEMM tile overhead", .cluster = "dgx-h100", .inputs = std::move(inputs)};
  f.params = {{.key = "gpu.gemm_tile_overhead_us", .file_value = base.gpu.gemm_tile_overhead.us(), .lo = 0, .hi = 5, .step = 0.1}};
  grid_least_squares(f, [&](const std::vector<double>& v) {
    hardware::GpuSpec g = base.gpu;
    g.gemm_tile_overhead = common::Duration::from_us(v[0]);
    std::vector<std::pair<double, double>> out;
    for (const auto& r : rows) out.emplace_back(hardware::estimate_gemm(g, r.op).tflops(), r.tflops);
    return out;
  });
  return f;
}

double mean_abs(const std::vector<std::pair<double, double>>& rows, double* worst = nullptr) {
  double s = 0, w = 0;
  for (const auto& [p, m] : rows) {
    const double e = std::abs(p - m) / m;
    s += e;
    w = std::max(w, e);
  }
  if (worst) *worst = w;
  return rows.empty() ? 0.0 : s / static_cast<double>(rows.size());
}

std::vector<std::pair<double, double>> nccl_rows(const ClusterSpec& c, const std::vector<NcclMeasurement>& all,
                                                 const std::function<bool(const NcclMeasurement&)>& use) {
  std::vector<std::pair<double, double>> out;
  for (const auto& m : all)
    if (use(m)) out.emplace_back(predict_nccl(c, m).busbw_GBps, m.busbw_GBps);
  return out;
}

// ---- interference -----------------------------------------------------------------------------
// interference.sm_comm_slowdown over row 8's overlapped time on NCCL's SM kernels, then
// interference.copy_engine_bandwidth over its overlapped time with copy engines (one figure each).
std::vector<Fit> interference_fits(const std::string& dir) {
  const ClusterSpec base = hardware::load_cluster("dgx-h100");
  const InterferenceFigures f = read_interference_figures(dir);
  Fit sm{.name = "collective beside compute", .cluster = "dgx-h100",
         .inputs = "interference-nvidia.md row 8: 8192^3 GEMM beside a 64 MiB all-gather on NCCL's SM kernels, 2.02 ms (a single published figure)"};
  sm.params = {{.key = "interference.sm_comm_slowdown", .file_value = base.interference.sm_comm_slowdown, .lo = 0, .hi = 0.9, .step = 0.01}};
  grid_least_squares(sm, [&](const std::vector<double>& v) {
    ClusterSpec c = base;
    c.interference.sm_comm_slowdown = v[0];
    return std::vector<std::pair<double, double>>{{predict_row8(c).overlap_sm_ms, f.overlap_sm_ms}};
  });
  Fit ce{.name = "copy-engine transfers", .cluster = "dgx-h100",
         .inputs = "interference-nvidia.md row 8: the same overlap with copy-engine transfers, 1.77 ms (a single published figure)"};
  ce.params = {{.key = "interference.copy_engine_bandwidth", .file_value = base.interference.copy_engine_bandwidth, .lo = 0.3, .hi = 1.0, .step = 0.01}};
  grid_least_squares(ce, [&](const std::vector<double>& v) {
    ClusterSpec c = base;
    c.interference.copy_engine_bandwidth = v[0];
    return std::vector<std::pair<double, double>>{{predict_row8(c).overlap_ce_ms, f.overlap_ce_ms}};
  });
  return {sm, ce};
}

// ---- H100 software stacks ------------------------------------------------------------------------
// host.stacks.eager.gemm_efficiency (which cuda_graphs shares: the same PyTorch and cuBLAS) over the
// released Domino example's iteration time (cuda_graphs has no op overhead: its graph replays the
// kernels back to back), then host.stacks.eager.op_overhead_us over the four Domino speedups.
ClusterSpec with_pytorch_gemms(ClusterSpec c, double gemm) {
  c.host.stacks[static_cast<int>(hardware::Stack::eager)].gemm_efficiency = gemm;
  c.host.stacks[static_cast<int>(hardware::Stack::cuda_graphs)].gemm_efficiency = gemm;
  return c;
}

std::vector<Fit> stack_fits(const std::string& dir) {
  const ClusterSpec base = hardware::load_cluster("dgx-h100");
  const DominoFigures d = read_domino_figures(dir);
  const auto& eager = base.host.stack(hardware::Stack::eager);
  Fit gemm{.name = "PyTorch stacks' GEMMs", .cluster = "dgx-h100",
           .inputs = "domino-h100.md: the released Domino example's 521-529 ms (a single published figure)"};
  gemm.params = {{.key = "host.stacks.eager.gemm_efficiency (= cuda_graphs')", .file_value = eager.gemm_efficiency, .lo = 0.50, .hi = 1.00, .step = 0.01}};
  grid_least_squares(gemm, [&](const std::vector<double>& v) {
    return std::vector<std::pair<double, double>>{{domino_example_ms(with_pytorch_gemms(base, v[0])), d.example_ms}};
  });
  Fit over{.name = "eager op overhead", .cluster = "dgx-h100", .inputs = "domino-h100.md: the four Domino speedups (6.7B, 13B at seq 512, 1024)"};
  over.params = {{.key = "host.stacks.eager.op_overhead_us", .file_value = eager.op_overhead.us(), .lo = 0, .hi = 150, .step = 1}};
  grid_least_squares(over, [&](const std::vector<double>& v) {
    ClusterSpec c = with_pytorch_gemms(base, gemm.params[0].fitted);
    c.host.stacks[static_cast<int>(hardware::Stack::eager)].op_overhead = common::Duration::from_us(v[0]);
    std::vector<std::pair<double, double>> out;
    for (const auto& sp : d.speedups) out.emplace_back(domino_speedup(c, sp).speedup, sp.measured);
    return out;
  });
  return {gemm, over};
}

// ---- A100 -------------------------------------------------------------------------------------
// gpu.gemm_efficiency of dgx-a100 (the library's best-shape speed) over FLUX's unfused A800 GEMMs
// (tp-overlap-measured.csv, FLUX-RM: torch.matmul alone, 2.438 and 2.453 ms; A800 = A100 compute).
Fit a100_gemm_fit(const std::string& dir) {
  const ClusterSpec base = hardware::load_cluster("dgx-a100");
  std::vector<FluxRow> rows;
  for (auto& r : read_flux_kernel_rows(dir))
    if (r.gpu == "A800" && r.listed_why.empty() && r.torch_gemm_ms) rows.push_back(std::move(r));
  Fit f{.name = "A100 GEMM library speed", .cluster = "dgx-a100",
        .inputs = "tp-overlap-measured.csv FLUX-RM: the two unfused A800 GEMMs (torch: gemm 2.438 and 2.453 ms)"};
  f.params = {{.key = "gpu.gemm_efficiency", .file_value = base.gpu.gemm_eff(common::DType::fp16), .lo = 0.50, .hi = 1.00, .step = 0.01}};
  grid_least_squares(f, [&](const std::vector<double>& v) {
    std::vector<std::pair<double, double>> out;
    for (const auto& r : rows) {
      ClusterSpec c = flux_machine(r.gpu);
      for (auto& e : c.gpu.gemm_efficiency) e = v[0];
      out.emplace_back(1e3 * hardware::estimate_gemm(c.gpu, r.site.local_gemm()).seconds, *r.torch_gemm_ms);
    }
    return out;
  });
  return f;
}

// gpu.fused_rs_pull_gb_per_s of dgx-h100 (FLUX's Hopper GEMM + reduce-scatter: the rate of its
// in-kernel pull) over one row: the README's H800 GEMM+RS, fused (flux 0.932 ms). The flux#90 H100
// rows are held out: docs/accuracy.md predicts them.
Fit flux_pull_fit(const std::string& dir) {
  const ClusterSpec base = hardware::load_cluster("dgx-h100");
  std::vector<FluxRow> rows;
  for (auto& r : read_flux_kernel_rows(dir))
    if (r.source == "FLUX-RM" && r.gpu == "H800" && r.listed_why.empty() && r.site.kind == hardware::TpGemmKind::gemm_reduce_scatter)
      rows.push_back(std::move(r));
  if (rows.size() != 1)
    throw common::ConfigError(dir + "/tp-overlap-measured.csv", "FLUX-RM",
                              fmt::format("expected the one H800 GEMM+RS row of FLUX's README, found {}", rows.size()));
  Fit f{.name = "FLUX Hopper GEMM + reduce-scatter pull rate", .cluster = "dgx-h100",
        .inputs = "tp-overlap-measured.csv FLUX-RM: the H800 GEMM+RS fused row (flux 0.932 ms; a single published figure)"};
  f.params = {{.key = "gpu.fused_rs_pull_gb_per_s", .file_value = base.gpu.fused_rs_pull_bytes_per_s.value_or(0) / 1e9, .lo = 20, .hi = 400, .step = 1}};
  grid_least_squares(f, [&](const std::vector<double>& v) {
    std::vector<std::pair<double, double>> out;
    for (const auto& r : rows) {
      ClusterSpec c = flux_machine(r.gpu);
      c.gpu.fused_rs_pull_bytes_per_s = v[0] * 1e9;
      out.emplace_back(1e3 * hardware::tp_gemm_fused(c, r.site).total_s, r.overlap_ms);
    }
    return out;
  });
  return f;
}

// host.stacks.eager.gemm_efficiency (= cuda_graphs': the same PyTorch), launch_us and op_overhead_us
// of dgx-a100 over the Megatron-DeepSpeed iteration times (rows with pp = 1, optionally only those
// `use` keeps), by coordinate descent (each row is a simulated step); the library speed
// (gpu.gemm_efficiency) is a100_gemm_fit's.
ClusterSpec a100_with(ClusterSpec c, const std::vector<double>& v) {
  c.host.stacks[static_cast<int>(hardware::Stack::eager)].gemm_efficiency = v[0];
  c.host.stacks[static_cast<int>(hardware::Stack::cuda_graphs)].gemm_efficiency = v[0];
  auto& eager = c.host.stacks[static_cast<int>(hardware::Stack::eager)];
  eager.launch = common::Duration::from_us(v[1]);
  eager.op_overhead = common::Duration::from_us(v[2]);
  return c;
}

Fit a100_fit(const std::vector<A100Row>& rows, std::string inputs) {
  const ClusterSpec base = hardware::load_cluster("dgx-a100");
  const auto& eager = base.host.stack(hardware::Stack::eager);
  Fit f{.name = "Megatron-DeepSpeed on A100", .cluster = "dgx-a100", .inputs = std::move(inputs)};
  f.params = {{.key = "host.stacks.eager.gemm_efficiency (= cuda_graphs')", .file_value = eager.gemm_efficiency, .lo = 0.50, .hi = 1.00, .step = 0.01},
              {.key = "host.stacks.eager.launch_us", .file_value = eager.launch.us(), .lo = 60, .hi = 240, .step = 10},
              {.key = "host.stacks.eager.op_overhead_us", .file_value = eager.op_overhead.us(), .lo = 20, .hi = 100, .step = 5}};
  coordinate_least_squares(f, [&](const std::vector<double>& v) {
    const ClusterSpec c = a100_with(base, v);
    std::vector<std::pair<double, double>> out;
    for (const auto& r : rows) out.emplace_back(predict_a100(c, r).step_time.ms(), r.measured_ms);
    return out;
  });
  return f;
}

std::vector<A100Row> a100_rows(const std::string& dir, int gpus = 0) {
  std::vector<A100Row> out;
  for (const auto& r : read_a100_rows(dir))
    if (r.pp == 1 && (gpus == 0 || r.gpus == gpus)) out.push_back(r);
  return out;
}

}  // namespace

std::vector<Fit> fit_constants(const std::string& dir) {
  const auto nccl = read_nccl_measurements(dir);
  std::vector<Fit> fits;
  fits.push_back(call_overhead_fit(nccl));
  fits.push_back(nvls_fit(nccl));
  fits.push_back(network_fit(nccl, four_node_fit_row,
                             "nccl-h100-busbw-1and4node.csv [VP]: 4x DGX-H100, all-reduce and all-gather, 16 MB .. 8 GB"));
  fits.push_back(tile_fit(square_gemms(dir, false), "gemm-h100.csv: bf16 and fp8 square shapes 2048 .. 16384"));
  for (auto& f : interference_fits(dir)) fits.push_back(std::move(f));
  for (auto& f : stack_fits(dir)) fits.push_back(std::move(f));
  fits.push_back(flux_pull_fit(dir));
  fits.push_back(a100_gemm_fit(dir));
  fits.push_back(a100_fit(a100_rows(dir), "a100-megatron-1node-2and4gpu.csv: every row with pp = 1 (coordinate descent)"));
  return fits;
}

std::vector<LeaveGroupOut> leave_group_out(const std::string& dir) {
  const auto nccl = read_nccl_measurements(dir);
  std::vector<LeaveGroupOut> out;
  const ClusterSpec h100 = hardware::load_cluster("dgx-h100");
  auto is_kind = [](hardware::CollectiveKind k) {
    return [k](const NcclMeasurement& m) { return four_node_fit_row(m) && m.kind == k; };
  };
  // collectives across nodes: refit on one collective, predict the other
  for (const auto& [fit_kind, pred_kind] : {std::pair{hardware::CollectiveKind::all_gather, hardware::CollectiveKind::all_reduce},
                                            std::pair{hardware::CollectiveKind::all_reduce, hardware::CollectiveKind::all_gather}}) {
    const Fit f = network_fit(nccl, is_kind(fit_kind), "");
    ClusterSpec c = h100;
    c.network.nic_efficiency = f.params[0].fitted;
    c.network.latency = common::Duration::from_us(f.params[1].fitted);
    LeaveGroupOut l{.fitted_on = fmt::format("4-node H100 {} >= 16 MB", to_string(fit_kind)),
                    .predicts = fmt::format("4-node H100 {} >= 16 MB", to_string(pred_kind)),
                    .constants = fmt::format("nic_efficiency {:.2f}, latency_us {:g}", f.params[0].fitted, f.params[1].fitted)};
    const auto in = nccl_rows(c, nccl, is_kind(fit_kind)), pred = nccl_rows(c, nccl, is_kind(pred_kind));
    l.rows_fitted = static_cast<int>(in.size());
    l.rows_predicted = static_cast<int>(pred.size());
    l.in_sample_error = mean_abs(in);
    l.out_of_sample_error = mean_abs(pred, &l.out_of_sample_worst);
    out.push_back(l);
  }
  // no multi-node data at all: NVIDIA's per-NIC rate and NCCL's own Simple network step
  {
    const NicRate nic = read_nic_rate(dir);
    ClusterSpec c = h100;
    c.network.nic_efficiency = (nic.low_GBps + nic.high_GBps) / 2 / (c.network.nic_bytes_per_s / 1e9);
    c.network.latency = common::Duration::from_us(14.0);
    LeaveGroupOut l{.fitted_on = "nothing across nodes (NVIDIA's 46-48 GB/s per NIC, NCCL's 14 us Simple network step)",
                    .predicts = "4-node H100 all-reduce and all-gather >= 16 MB",
                    .constants = fmt::format("nic_efficiency {:.2f}, latency_us 14", c.network.nic_efficiency)};
    const auto pred = nccl_rows(c, nccl, four_node_fit_row);
    l.rows_predicted = static_cast<int>(pred.size());
    l.out_of_sample_error = mean_abs(pred, &l.out_of_sample_worst);
    out.push_back(l);
  }
  // step times on A100: refit on one GPU count, predict the other
  for (const auto& [fit_gpus, pred_gpus] : {std::pair{2, 4}, std::pair{4, 2}}) {
    const auto in_rows = a100_rows(dir, fit_gpus), out_rows = a100_rows(dir, pred_gpus);  // coordinate descent from the file values
    const Fit f = a100_fit(in_rows, "");
    const ClusterSpec c = a100_with(hardware::load_cluster("dgx-a100"), {f.params[0].fitted, f.params[1].fitted, f.params[2].fitted});
    std::vector<std::pair<double, double>> in, pred;
    for (const auto& r : in_rows) in.emplace_back(predict_a100(c, r).step_time.ms(), r.measured_ms);
    for (const auto& r : out_rows) pred.emplace_back(predict_a100(c, r).step_time.ms(), r.measured_ms);
    LeaveGroupOut l{.fitted_on = fmt::format("A100 Megatron-DeepSpeed, {}-GPU rows", fit_gpus),
                    .predicts = fmt::format("A100 Megatron-DeepSpeed, {}-GPU rows", pred_gpus),
                    .constants = fmt::format("eager gemm_efficiency {:g}, launch_us {:g}, op_overhead_us {:g}", f.params[0].fitted, f.params[1].fitted,
                                             f.params[2].fitted)};
    l.rows_fitted = static_cast<int>(in.size());
    l.rows_predicted = static_cast<int>(pred.size());
    l.in_sample_error = mean_abs(in);
    l.out_of_sample_error = mean_abs(pred, &l.out_of_sample_worst);
    for (const auto& [p, m] : pred) l.out_of_sample_errors.push_back(p / m - 1);
    out.push_back(l);
  }
  // GEMM: tile overhead from bf16 squares, predicting fp8
  {
    const Fit f = tile_fit(square_gemms(dir, true), "");
    hardware::GpuSpec g = h100.gpu;
    g.gemm_tile_overhead = common::Duration::from_us(f.params[0].fitted);
    std::vector<std::pair<double, double>> in, pred;
    for (const auto& r : square_gemms(dir, false))
      (r.op.dtype == common::DType::bf16 ? in : pred).emplace_back(hardware::estimate_gemm(g, r.op).tflops(), r.tflops);
    LeaveGroupOut l{.fitted_on = "H100 bf16 square GEMMs", .predicts = "H100 fp8 square GEMMs",
                    .constants = fmt::format("gemm_tile_overhead_us {:g}", f.params[0].fitted)};
    l.rows_fitted = static_cast<int>(in.size());
    l.rows_predicted = static_cast<int>(pred.size());
    l.in_sample_error = mean_abs(in);
    l.out_of_sample_error = mean_abs(pred, &l.out_of_sample_worst);
    out.push_back(l);
  }
  // Domino on H100: the eager stack's op overhead refitted on one model's two speedups (seq 512 and
  // 1024), predicting the other model's two (gemm_efficiency as the file holds it: fitted to the
  // example's time, which no speedup row enters)
  {
    const DominoFigures d = read_domino_figures(dir);
    const double file_us = h100.host.stack(hardware::Stack::eager).op_overhead.us();
    for (const auto& [fit_size, pred_size] : {std::pair<std::string, std::string>{"6.7B", "13B"}, {"13B", "6.7B"}}) {
      std::vector<DominoSpeedup> fit_rows, pred_rows;
      for (const auto& sp : d.speedups) (sp.size == fit_size ? fit_rows : pred_rows).push_back(sp);
      Fit f{.name = "eager op overhead", .cluster = "dgx-h100"};
      f.params = {{.key = "host.stacks.eager.op_overhead_us", .file_value = file_us, .lo = 0, .hi = 60, .step = 1}};  // the full fit's 0 .. 150 us lands at a fraction of 60
      auto with = [&](double us) {
        ClusterSpec c = h100;
        c.host.stacks[static_cast<int>(hardware::Stack::eager)].op_overhead = common::Duration::from_us(us);
        return c;
      };
      grid_least_squares(f, [&](const std::vector<double>& v) {
        const ClusterSpec c = with(v[0]);
        std::vector<std::pair<double, double>> rows;
        for (const auto& sp : fit_rows) rows.emplace_back(domino_speedup(c, sp).speedup, sp.measured);
        return rows;
      });
      const ClusterSpec c = with(f.params[0].fitted);
      std::vector<std::pair<double, double>> in, pred;
      for (const auto& sp : fit_rows) in.emplace_back(domino_speedup(c, sp).speedup, sp.measured);
      for (const auto& sp : pred_rows) pred.emplace_back(domino_speedup(c, sp).speedup, sp.measured);
      LeaveGroupOut l{.fitted_on = fmt::format("Domino speedups, GPT-3 {} (8x H100)", fit_size),
                      .predicts = fmt::format("Domino speedups, GPT-3 {} (8x H100)", pred_size),
                      .constants = fmt::format("eager op_overhead_us {:g}", f.params[0].fitted)};
      l.rows_fitted = static_cast<int>(in.size());
      l.rows_predicted = static_cast<int>(pred.size());
      l.in_sample_error = mean_abs(in);
      l.out_of_sample_error = mean_abs(pred, &l.out_of_sample_worst);
      out.push_back(l);
    }
  }
  return out;
}

}  // namespace validate
