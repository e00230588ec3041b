#include "hardware/collective_model.hpp"

#include <algorithm>
#include <cmath>

namespace hardware {

double bus_factor(CollectiveKind kind, int ranks) {
  const double n = ranks;
  switch (kind) {
    case CollectiveKind::all_reduce: return 2.0 * (n - 1) / n;
    case CollectiveKind::all_gather:
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::all_to_all: return (n - 1) / n;
    case CollectiveKind::broadcast:
    case CollectiveKind::reduce:
    case CollectiveKind::send_recv: return 1.0;
  }
  return 1.0;
}

namespace {

// Per-NVLink-link bandwidth NCCL assumes per channel (GB/s): SM80 20.0, SM90 20.6, SM100 40.1.
double nccl_link_bw(GpuArch a) {
  switch (a) {
    case GpuArch::ampere: return 20.0e9;
    case GpuArch::hopper: return 20.6e9;
    case GpuArch::blackwell: return 40.1e9;
    case GpuArch::cpu: return 10.0e9;
  }
  return 20.0e9;
}

int ring_steps(CollectiveKind kind, int n) {
  return kind == CollectiveKind::all_reduce ? 2 * (n - 1) : std::max(1, n - 1);
}

CollectiveCost ring(const ClusterSpec& c, const CollectiveOp& op) {
  CollectiveCost cost;
  cost.algo = op.nodes > 1 ? "ring(hier)" : "ring";
  cost.proto = "simple";
  const int n = op.ranks;
  const int rpn = op.ranks_per_node();
  const double factor = bus_factor(op.kind, n);
  const double volume = factor * static_cast<double>(op.bytes);  // bytes each rank sends
  // Bandwidth: NVLink ring bandwidth as NCCL models it (links x per-link bw), capped by the port.
  const double nvlink_bw = std::min(c.node.nvlink_links * nccl_link_bw(c.gpu.arch), c.node.nvlink_bytes_per_s);
  const double nic_bw_per_gpu = c.network.nic_bytes_per_s * c.network.nics_per_node / c.node.gpus_per_node;
  double nvl_bytes = op.nodes > 1 ? volume * (1.0 - 1.0 / rpn) : volume;
  double nic_bytes = op.nodes > 1 ? volume / rpn : 0.0;
  double t = 0;
  if (nvl_bytes > 0) t = std::max(t, nvl_bytes / nvlink_bw);
  if (nic_bytes > 0) t = std::max(t, nic_bytes / (0.92 * nic_bw_per_gpu / c.network.oversubscription));
  cost.wire_bytes[static_cast<int>(LinkClass::nvlink)] = nvl_bytes;
  cost.wire_bytes[static_cast<int>(LinkClass::nic)] = nic_bytes;
  cost.transfer = Duration::from_s(t);
  // Latency (Simple protocol): base + per-step hop latency; network hops priced separately.
  const int steps = ring_steps(op.kind, n);
  const int inter = op.nodes > 1 ? (op.kind == CollectiveKind::all_reduce ? 2 * (op.nodes - 1) : op.nodes - 1) : 0;
  const double lat_us = 8.4 + (steps - inter) * 3.4 + inter * (14.0 + c.network.latency.us());
  cost.latency = Duration::from_us(lat_us);
  cost.channels = std::clamp(c.node.nvlink_links, 1, 32);
  cost.sms = cost.channels;
  return cost;
}

// NVLink SHARP: in-switch reduction. AllReduce moves S per rank each way instead of 2(n-1)/n S.
CollectiveCost nvls(const ClusterSpec& c, const CollectiveOp& op) {
  CollectiveCost cost;
  cost.algo = "nvls";
  cost.proto = "simple";
  const double eff = c.gpu.arch == GpuArch::blackwell ? 0.74 : 0.85;
  const int channels = 16;
  const double bw = c.node.nvlink_bytes_per_s * eff * (channels - 1) / channels;
  const double bytes = static_cast<double>(op.bytes);
  cost.wire_bytes[static_cast<int>(LinkClass::nvlink)] = bytes;
  cost.transfer = Duration::from_s(bytes / bw);
  cost.latency = Duration::from_us(25.0);
  cost.channels = channels;
  cost.sms = channels;
  return cost;
}

}  // namespace

CollectiveCost price_collective(const ClusterSpec& c, const CollectiveOp& op) {
  if (op.ranks <= 1 || op.bytes <= 0) {
    CollectiveCost none;
    none.algo = "none";
    none.channels = 0;
    none.sms = 0;
    return none;
  }
  CollectiveCost best = ring(c, op);
  if (c.node.nvls && op.nodes == 1 && op.ranks > 2 && op.kind == CollectiveKind::all_reduce) {
    CollectiveCost alt = nvls(c, op);
    if (alt.total() < best.total()) best = alt;
  }
  return best;
}

}  // namespace hardware
