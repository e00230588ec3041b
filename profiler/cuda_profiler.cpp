// The CUDA backend of the profiler, host side: runs profiler::cuda::measure and builds the Profile.
#include "profiler/cuda_profiler.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <set>
#include <tuple>

#include "hardware/collective_model.hpp"
#include "common/config_reader.hpp"
#include "common/embedded_configs.hpp"

namespace profiler {

namespace {

double round_sig(double v) {
  if (v <= 0) return v;
  const double scale = std::pow(10.0, 3 - std::floor(std::log10(v)));
  return std::round(v * scale) / scale;
}

/// The GPU node as a configs/clusters/ mapping: the embedded cluster of the same GPU generation
/// (dgx-a100, dgx-h100, gb200-nvl72) with what this profiler measures put in its place — bf16/fp16
/// peak = best measured GEMM (so gemm_efficiency 1), HBM = device copy bandwidth (memory_efficiency
/// 1), capacity, SMs, GPUs per node, NVLink = AllReduce busbw. The rest (network, host,
/// interference, NCCL constants) stays the generation's cluster file, which documents its sources.
common::YamlNode cluster_node(const hardware::Profile& p, const cuda::DeviceInfo& d) {
  double best = 0;
  for (const auto& g : p.gemm) best = std::max(best, 2.0 * g.m * g.n * g.k / (g.us * 1e-6));
  double busbw = 0;
  for (const auto& c : p.collectives)
    if (c.kind == hardware::CollectiveKind::all_reduce) busbw = std::max(busbw, c.busbw_gb_s());
  auto num = [](double v) { return fmt::format("{}", round_sig(v)); };
  const char* base = d.major >= 10 ? "gb200-nvl72" : d.major == 9 ? "dgx-h100" : "dgx-a100";
  const auto cfg = common::resolve_config("clusters", base);
  common::YamlNode n = common::parse_yaml(cfg.text, cfg.source);
  n.set("name", fmt::format("profiled-{}x-{}", d.ranks, d.name));
  auto gpu = n.child_map("gpu");
  gpu.set("name", d.name);
  if (best > 0)
    for (const char* t : {"bf16", "fp16"}) gpu.child_map("peak_tflops").set(t, num(best / 1e12));  // measured in bf16
  gpu.set("gemm_efficiency", "1");
  gpu.set("hbm_gb_per_s", num(d.copy_bytes_per_s / 1e9));
  gpu.set("memory_efficiency", "1");
  gpu.set("hbm_gb", num(d.memory_bytes / 1e9));
  gpu.set("sms", fmt::format("{}", d.sms));
  auto node = n.child_map("node");
  node.set("gpus", fmt::format("{}", d.local_ranks));
  if (busbw > 0) node.set("nvlink_gb_per_s", num(busbw));
  return n;
}

}  // namespace

cuda::Request cuda_request(const Options& o) {
  cuda::Request req{.quick = o.quick, .progress = o.progress};
  req.grid = o.quick ? std::vector<std::int64_t>{128, 512, 2048, 8192} : std::vector<std::int64_t>{128, 256, 512, 1024, 2048, 4096, 8192, 16384};
  for (const auto& g : o.gemm_shapes) req.extra.push_back({g.m, g.n, g.k});
  // the executor's CUDA attention runs s_q = s_kv slices (row axis batch); GQA shapes are timed with
  // as many K/V heads as query heads (the kernels expand K and V per query head before the GEMMs)
  for (const auto& a : o.attention_shapes)
    if (a.s_q == a.s_kv && a.q_offset == 0 && a.causal) req.attention.push_back({a.batch, a.heads, a.s_q, a.head_dim});
  const std::int64_t max_elements = o.quick ? (std::int64_t{1} << 20) : (std::int64_t{1} << 24);
  std::set<std::tuple<std::string, bool, std::int64_t, std::int64_t>> ew;  // kind, backward, rows, cols
  for (const auto& k : cuda::kElementwiseKernels)
    for (std::int64_t e = 64; e <= max_elements; e *= 4) {
      const std::int64_t cols = std::min<std::int64_t>(e, 1024);
      ew.insert({k.kind, k.backward, e / cols, cols});
    }
  for (const auto& s : o.elementwise_shapes) {
    const std::string kind(hardware::to_string(s.op.kind));
    const bool cuda_kernel = std::any_of(cuda::kElementwiseKernels.begin(), cuda::kElementwiseKernels.end(),
                                         [&](const cuda::ElementwiseKernel& k) { return kind == k.kind && s.op.backward == k.backward; });
    if (!cuda_kernel || s.op.elements <= 0) continue;  // accumulate, concat, rope: no CUDA launch runs them
    // the row width the kernel sees; one row of all the elements if the rows do not divide them
    const std::int64_t rows = s.rows > 0 && s.op.elements % s.rows == 0 ? s.rows : 1;
    ew.insert({kind, s.op.backward, rows, s.op.elements / rows});
  }
  for (const auto& [kind, backward, rows, cols] : ew) req.elementwise.push_back({.kind = kind, .backward = backward, .rows = rows, .cols = cols});
  std::set<std::int64_t> params;
  for (std::int64_t n = 1024; n <= max_elements; n *= 4) params.insert(n);
  for (auto n : o.optimizer_params)
    if (n > 0) params.insert(n);
  req.optimizer_params.assign(params.begin(), params.end());
  return req;
}

hardware::Profile measure_cuda(const Options& o) {
  init_mpi_if_needed();
  const cuda::Request req = cuda_request(o);
  cuda::Result r;
  try {
    r = cuda::measure(req);
  } catch (const std::runtime_error& e) {
    throw common::ConfigError("--backend cuda", "", e.what());
  }
  return cuda_profile(o, req, r);
}

hardware::Profile cuda_profile(const Options& o, const cuda::Request& req, const cuda::Result& r) {
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
  p.runs_as = {{common::DType::fp16, common::DType::bf16}};
  p.grid_m = p.grid_n = p.grid_k = req.grid;
  for (const auto& g : r.gemm) p.gemm.push_back({.dtype = common::DType::bf16, .m = g.m, .n = g.n, .k = g.k, .us = g.us});
  for (const auto& a : r.attention)
    p.attention.push_back({.dtype = common::DType::bf16, .backward = a.backward, .batch = a.shape.batch, .heads = a.shape.heads,
                           .s = a.shape.s, .head_dim = a.shape.head_dim, .us = a.us});
  for (const auto& e : r.elementwise)
    p.elementwise.push_back({.kind = e.shape.kind, .backward = e.shape.backward, .elements = e.shape.elements(), .us = e.us});
  for (const auto& e : r.optimizer) p.optimizer.push_back({.params = e.params, .us = e.us});
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
