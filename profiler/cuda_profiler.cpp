// The CUDA backend of the profiler, host side: runs profiler::cuda::measure and builds the Profile.
#include "profiler/cuda_profiler.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>

#include "hardware/collective_model.hpp"
#include "profiler/cuda/cuda_measure.hpp"

namespace profiler {

namespace {

double round_sig(double v) {
  if (v <= 0) return v;
  const double scale = std::pow(10.0, 3 - std::floor(std::log10(v)));
  return std::round(v * scale) / scale;
}

/// The GPU node as a configs/clusters/ mapping: peak = best measured bf16 GEMM, HBM = device copy,
/// NVLink = AllReduce busbw, latency = the smallest AllReduce; host and interference keep the
/// DGX-class defaults (not measured by this profiler yet).
YAML::Node cluster_node(const hardware::Profile& p, const cuda::DeviceInfo& d) {
  double best = 0;
  for (const auto& g : p.gemm) best = std::max(best, 2.0 * g.m * g.n * g.k / (g.us * 1e-6));
  double busbw = 0, latency = 0;
  for (const auto& c : p.collectives)
    if (c.kind == hardware::CollectiveKind::all_reduce) {
      busbw = std::max(busbw, c.busbw_gb_s());
      latency = latency == 0 ? c.us : std::min(latency, c.us);
    }
  auto num = [](double v) { return fmt::format("{}", round_sig(v)); };
  YAML::Node n;
  n["name"] = fmt::format("profiled-{}x-{}", d.ranks, d.name);
  n["gpu"]["name"] = d.name;
  n["gpu"]["arch"] = d.major >= 10 ? "blackwell" : d.major == 9 ? "hopper" : "ampere";
  for (const char* t : {"fp32", "bf16", "fp16", "fp8"}) n["gpu"]["peak_tflops"][t] = num(best / 1e12);  // only bf16 is measured
  n["gpu"]["hbm_gb_per_s"] = num(d.copy_bytes_per_s / 1e9);
  n["gpu"]["hbm_gb"] = num(d.memory_bytes / 1e9);
  n["gpu"]["sms"] = fmt::format("{}", d.sms);
  n["gpu"]["gemm_efficiency"] = "1";
  n["gpu"]["memory_efficiency"] = "1";
  n["gpu"]["gemm_tile_overhead_us"] = "1.5";
  n["gpu"]["kernel_latency_us"] = "2";
  n["node"]["gpus"] = fmt::format("{}", d.local_ranks);
  n["node"]["nvlink_gb_per_s"] = num(busbw > 0 ? busbw : 1);
  n["node"]["nvlink_links"] = "18";
  n["node"]["nvswitch"] = "true";
  n["node"]["nvls"] = "false";
  n["network"]["nics_per_node"] = "8";
  n["network"]["nic_gbit_per_s"] = "400";
  n["network"]["latency_us"] = num(latency > 0 ? latency : 3);
  n["network"]["topology"] = "rail_optimized";
  n["network"]["oversubscription"] = "1";
  n["host"]["launch_us"]["eager"] = "12";
  n["host"]["launch_us"]["cpp"] = "4";
  n["host"]["launch_us"]["cuda_graphs"] = "0.5";
  for (const char* st : {"eager", "cpp", "cuda_graphs"}) n["host"]["op_overhead_us"][st] = "0";
  n["host"]["attention"] = "flash";
  n["nccl"]["call_overhead_us"] = "10";
  n["nccl"]["nvls_efficiency"] = "0.58";
  n["nccl"]["nvls_latency_us"] = "50";
  n["interference"]["sm_contention"] = "true";
  n["interference"]["hbm_amplification"] = "2.5";
  n["interference"]["comm_slowdown"] = "0.05";
  return n;
}

}  // namespace

hardware::Profile measure_cuda(const Options& o) {
  init_mpi_if_needed();
  cuda::Request req{.quick = o.quick, .grid = {}, .extra = {}, .progress = o.progress};
  req.grid = o.quick ? std::vector<std::int64_t>{128, 512, 2048, 8192} : std::vector<std::int64_t>{128, 256, 512, 1024, 2048, 4096, 8192, 16384};
  for (const auto& g : o.gemm_shapes) req.extra.push_back({g.m, g.n, g.k});
  cuda::Result r;
  try {
    r = cuda::measure(req);
  } catch (const std::runtime_error& e) {
    throw hardware::ConfigError("--backend cuda", "", e.what());
  }
  hardware::Profile p;
  p.info.backend = "cuda";
  p.info.device = r.device.name;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  p.info.host = host;
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  p.info.date = date;
  p.info.ranks = r.device.ranks;
  p.info.quick = o.quick;
  p.info.command = o.command;
  p.info.libraries = r.device.libraries;
  p.gemm_tile_m = 128;  // cuBLASLt's common tile on Hopper; sizes are padded to it before interpolating
  p.gemm_tile_n = 128;
  p.runs_as = {{hardware::DType::fp16, hardware::DType::bf16}};
  p.grid_m = p.grid_n = p.grid_k = req.grid;
  for (const auto& g : r.gemm) p.gemm.push_back({.dtype = hardware::DType::bf16, .m = g.m, .n = g.n, .k = g.k, .us = g.us});
  const int nodes = std::max(1, r.device.ranks / r.device.local_ranks);
  for (const auto& c : r.collectives) {
    const auto kind = c.kind == cuda::Collective::all_reduce   ? hardware::CollectiveKind::all_reduce
                      : c.kind == cuda::Collective::all_gather ? hardware::CollectiveKind::all_gather
                                                               : hardware::CollectiveKind::reduce_scatter;
    p.collectives.push_back({.kind = kind, .ranks = r.device.ranks, .nodes = nodes, .bytes = c.bytes, .us = c.us});
  }
  p.cluster_node = cluster_node(p, r.device);
  p.cluster = hardware::cluster_from_node(p.cluster_node, "profile: cluster");
  return p;
}

}  // namespace profiler
