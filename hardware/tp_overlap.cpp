#include "hardware/tp_overlap.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "common/config_error.hpp"
#include "hardware/collective_model.hpp"
#include "hardware/gemm_model.hpp"
#include "hardware/interference.hpp"

namespace hardware {

GemmOp TpGemm::local_gemm() const {
  if (kind == TpGemmKind::all_gather_gemm) return GemmOp{.m = m, .n = n / tp, .k = k, .dtype = dtype};
  return GemmOp{.m = m, .n = n, .k = k / tp, .dtype = dtype};
}

CollectiveOp TpGemm::collective() const {
  const std::int64_t elems = kind == TpGemmKind::all_gather_gemm ? m * k : m * n;
  return CollectiveOp{.kind = kind == TpGemmKind::all_gather_gemm ? CollectiveKind::all_gather : CollectiveKind::reduce_scatter,
                      .bytes = elems * common::dtype_bytes(dtype),
                      .ranks = tp,
                      .nodes = 1,
                      .dtype = dtype};
}

namespace {

void check_site(const ClusterSpec& cluster, const TpGemm& s) {
  if (s.tp < 2 || s.tp > cluster.node.gpus_per_node)
    throw std::invalid_argument("tp_gemm: tp must be 2 .. GPUs per node (FLUX's intra-node kernels)");
  if (s.m <= 0 || s.k <= 0 || s.n <= 0 || s.m % s.tp != 0 || (s.kind == TpGemmKind::all_gather_gemm ? s.n : s.k) % s.tp != 0)
    throw std::invalid_argument("tp_gemm: M and the split dimension must be positive multiples of tp");
  if (s.kind == TpGemmKind::all_gather_gemm && s.reduction != RsReduction::after_kernel)
    throw std::invalid_argument("tp_gemm: `reduction` belongs to a GEMM + reduce-scatter, not an all-gather + GEMM");
}

double usable_hbm(const GpuSpec& gpu) { return gpu.hbm_bytes_per_s * gpu.memory_efficiency; }

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Bytes of one rank's [M/tp, N] output segment.
double segment_bytes(const TpGemm& s) {
  return static_cast<double>(s.m / s.tp) * static_cast<double>(s.n) * common::dtype_bytes(s.dtype);
}

// GEMM + reduce-scatter, Ampere: the tp - 1 peers' segments first, each stored over NVLink by the
// epilogue once computed; then the reduce kernel over the tp segments.
TpGemmTiming rs_epilogue_push(const ClusterSpec& cluster, const TpGemm& site, double G, const KernelLoad& kernel) {
  if (site.reduction != RsReduction::after_kernel)
    throw std::invalid_argument("tp_gemm_fused: the in-kernel reduction (fuse_reduction) is modelled for Hopper's pull only");
  const int tp = site.tp;
  const double seg = G / tp;  // one peer's rows of the GEMM
  const double hbm = usable_hbm(cluster.gpu);
  const double seg_bytes = segment_bytes(site);
  const double port = link_capacity(cluster, LinkClass::nvlink);
  const double store = seg_bytes / port;
  const CommLoad stores{.seconds = store * (tp - 1), .wire_bytes_per_s = port, .sms = 0};
  const ConcurrentRates both = rates_beside(cluster.interference, hbm, kernel, stores);
  double t = 0, progress = 0, stored = 0;  // seconds into the current segment / store
  int computed = 0, sent = 0;
  while (computed < tp || sent < tp - 1) {
    const bool computing = computed < tp;
    const bool storing = sent < tp - 1 && sent < computed;
    const double rg = computing && storing ? both.compute : 1.0, rc = computing && storing ? both.comm : 1.0;
    const double dt_g = computing ? (seg - progress) / rg : kInf;
    const double dt_c = storing ? (store - stored) / rc : kInf;
    const double dt = std::min(dt_g, dt_c);
    if (dt == kInf) break;
    t += dt;
    if (computing) {
      if (dt == dt_g) {
        ++computed;
        progress = 0;
      } else {
        progress += rg * dt;
      }
    }
    if (storing) {
      if (dt == dt_c) {
        ++sent;
        stored = 0;
      } else {
        stored += rc * dt;
      }
    }
  }
  const double reduce = cluster.gpu.kernel_latency.s() + (tp + 1) * seg_bytes / hbm;
  TpGemmTiming out{.gemm_s = G};
  out.comm_s = store * (tp - 1) + reduce;
  out.total_s = t + reduce;
  return out;
}

// GEMM + reduce-scatter, Hopper: every output tile pulled through the kernel's fetch pipeline at
// `rate`, a tile once it is computed; then the reduction tail.
TpGemmTiming rs_kernel_pull(const ClusterSpec& cluster, const TpGemm& site, const GemmEstimate& gemm, const KernelLoad& kernel) {
  if (!cluster.gpu.fused_rs_pull_bytes_per_s)
    throw common::ConfigError(cluster.source, "gpu.fused_rs_pull_gb_per_s",
                              "missing: a Hopper GPU's fused GEMM + reduce-scatter needs the rate of FLUX's in-kernel pull (dgx-h100 holds the fitted one)");
  const double rate = *cluster.gpu.fused_rs_pull_bytes_per_s;
  const double G = gemm.seconds;
  const double hbm = usable_hbm(cluster.gpu);
  const double pull = static_cast<double>(site.m) * static_cast<double>(site.n) * common::dtype_bytes(site.dtype) / rate;  // alone
  const double waves = std::max(1.0, gemm.waves);
  const double lead = 1.0 / waves;  // fraction of the GEMM done when its first tiles are: the pull's head start
  const CommLoad pulling{.seconds = pull, .wire_bytes_per_s = rate, .sms = 0};
  const ConcurrentRates both = rates_beside(cluster.interference, hbm, kernel, pulling);
  // GEMM alone for its first wave, then beside the pull until done; the pull moves at its share of
  // `rate` but never past the tiles computed (p <= g - lead), then finishes alone
  const double t_first = lead * G;
  const double t_gemm = t_first + (1.0 - lead) * G / both.compute;
  const double pulled = std::min((t_gemm - t_first) * both.comm / pull, 1.0 - lead);
  const double seg_bytes = segment_bytes(site);
  const double reads = site.reduction == RsReduction::after_kernel ? site.tp : 1;  // segments the tail reads
  const double tail = cluster.gpu.kernel_latency.s() + (reads + 1) * seg_bytes / hbm;
  TpGemmTiming out{.gemm_s = G};
  out.comm_s = pull + tail;
  out.total_s = t_gemm + (1.0 - pulled) * pull + tail;
  return out;
}

}  // namespace

RsTransfer fused_rs_transfer(const GpuSpec& gpu) {
  switch (gpu.arch) {
    case GpuArch::ampere: return RsTransfer::epilogue_push;
    case GpuArch::hopper: return RsTransfer::kernel_pull;
    case GpuArch::blackwell:
    case GpuArch::cpu: break;
  }
  throw std::invalid_argument(fmt::format("tp_gemm_fused: no FLUX GEMM + reduce-scatter for arch {} (bytedance/flux at 19831ca builds it for sm80 and sm90)",
                                          to_string(gpu.arch)));
}

TpGemmTiming tp_gemm_serial(const ClusterSpec& cluster, const TpGemm& site) {
  check_site(cluster, site);
  TpGemmTiming t;
  t.gemm_s = estimate_gemm(cluster.gpu, site.local_gemm()).seconds;
  t.comm_s = price_collective(cluster, site.collective()).total().s();
  t.total_s = t.gemm_s + t.comm_s;
  return t;
}

TpGemmTiming tp_gemm_fused(const ClusterSpec& cluster, const TpGemm& site) {
  check_site(cluster, site);
  const GemmOp gemm = site.local_gemm();
  const GemmEstimate est = estimate_gemm(cluster.gpu, gemm);
  const double G = est.seconds;
  const int tp = site.tp;
  const double seg = G / tp;  // one peer's rows of the GEMM
  const KernelLoad kernel{.seconds = G, .seconds_on_fewer = G, .hbm_bytes = gemm.bytes()};
  const double hbm = usable_hbm(cluster.gpu);
  TpGemmTiming out;
  out.gemm_s = G;

  if (site.kind == TpGemmKind::all_gather_gemm) {
    const CollectiveCost nccl = price_collective(cluster, site.collective());
    const double latency = nccl.latency.s();
    const double transfer = copy_engine_seconds(cluster.interference, 0.0, nccl.transfer.s());  // the copy engines' pace
    const CommLoad comm{
        .seconds = latency + transfer, .wire_bytes_per_s = transfer > 0 ? nccl.sent_bytes / transfer : 0.0, .sms = 0};
    const ConcurrentRates both = rates_beside(cluster.interference, hbm, kernel, comm);
    const int shards = tp - 1;
    // rows are computed a peer's segment at a time (the local one first); the copy engines pull the
    // shards one after another
    double t = 0, progress = 0, latency_left = latency, moved = 0;  // seconds into the current segment / shard
    int computed = 0, landed = 0;
    while (computed < tp) {
      const bool computing = computed < 1 + landed;
      const bool moving = latency_left <= 0 && landed < shards;
      const double rg = computing && moving ? both.compute : 1.0, rc = computing && moving ? both.comm : 1.0;
      const double shard = transfer / shards;
      const double dt_g = computing ? (seg - progress) / rg : kInf;
      const double dt_c = latency_left > 0 ? latency_left : moving ? (shard - moved) / rc : kInf;
      const double dt = std::min(dt_g, dt_c);
      if (dt == kInf) break;  // cannot happen: either rows are available or a shard is on its way
      t += dt;
      if (computing) {
        if (dt == dt_g) {
          ++computed;
          progress = 0;
        } else {
          progress += rg * dt;
        }
      }
      if (latency_left > 0) {
        latency_left = dt == dt_c ? 0 : latency_left - dt;
      } else if (moving) {
        if (dt == dt_c) {
          ++landed;
          moved = 0;
        } else {
          moved += rc * dt;
        }
      }
    }
    out.comm_s = latency + transfer;
    out.total_s = t;
    return out;
  }

  return fused_rs_transfer(cluster.gpu) == RsTransfer::epilogue_push ? rs_epilogue_push(cluster, site, G, kernel)
                                                                      : rs_kernel_pull(cluster, site, est, kernel);
}

}  // namespace hardware
