// NCCL 2.2x's channel setup, reduced to the cases a DGX-style cluster reaches: one NVSwitch domain per
// node, one NIC per ring across nodes. Read from NVIDIA/nccl src/graph/search.cc (speed arrays,
// ncclTopoCompute's two passes, ncclTopoDupChannels), src/graph/connect.cc (ncclTopoPostset) and
// src/graph/topo.h (per-link NVLink bandwidth).
#include "hardware/nccl_topology.hpp"

#include <algorithm>
#include <cmath>
#include <span>

namespace hardware {
namespace {

constexpr int kMaxChannels = 32;                 // MAXCHANNELS (NCCL <= 2.27)
constexpr int kRingMaxChannels = kMaxChannels / 2;  // ringGraph->maxChannels

constexpr double kIntraSm80[] = {40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0};
constexpr double kIntraSm90[] = {60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0};
constexpr double kIntraSm100[] = {90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0};
constexpr double kInterSm80[] = {48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2};
constexpr double kInterSm90[] = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2};
constexpr double kInterSm100[] = {96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2};

struct Graph {
  int channels = 0;
  double speed = 0;
  double total() const { return channels * speed; }
};

/// ncclTopoCompute for one pattern: `fit(speed)` is how many channels the topology carries at that
/// per-channel speed. Pass 1 starts at the fastest speed the path allows and lowers it while the
/// next speed is more than 0.49 of the best found (keeping the largest channels x speed; the first
/// found on ties), stopping early when channels x speed reaches `total`; the graph is then
/// duplicated; pass 2 raises the speed back while the duplicated channel count still fits.
template <class Fit>
Graph search(std::span<const double> speeds, double max_speed, double total, bool hopper_or_later, Fit fit) {
  std::size_t i = 0;
  while (i + 1 < speeds.size() && (speeds[i] > max_speed || speeds[i] > total)) ++i;
  Graph best;
  for (std::size_t j = i; j < speeds.size(); ++j) {
    if (best.channels > 0 && speeds[j] / best.speed <= 0.49) break;
    const Graph g{std::min(kRingMaxChannels, fit(speeds[j])), speeds[j]};
    if (g.channels > 0 && g.total() > best.total() + 1e-9) best = g;
    if (best.total() >= total - 1e-9) break;
  }
  if (best.channels == 0) return {1, speeds.back()};
  // ncclTopoDupChannels: not below 25 GB/s, and on SM90+ not below 50 GB/s with more than 4 channels
  if (best.speed >= 25.0 && !(hopper_or_later && best.speed < 50.0 && best.channels > 4)) {
    const int dup = std::min(2 * best.channels, kRingMaxChannels);
    best.speed /= static_cast<double>((dup + best.channels - 1) / best.channels);
    best.channels = dup;
  }
  // pass 2: a faster speed with the same channels?
  for (std::size_t j = speeds.size(); j-- > 0;) {
    if (speeds[j] <= best.speed) continue;
    if (fit(speeds[j]) >= best.channels && best.channels * speeds[j] <= total + 1e-9) best.speed = speeds[j];
    else break;
  }
  return best;
}

}  // namespace

double nccl_nvlink_link_GBps(GpuArch arch) {
  switch (arch) {
    case GpuArch::ampere: return 20.0;
    case GpuArch::hopper: return 20.6;
    case GpuArch::blackwell: return 40.1;
    case GpuArch::cpu: return 0.0;
  }
  return 0.0;
}

NcclTopology nccl_topology(const ClusterSpec& c, int nodes) {
  NcclTopology t;
  if (c.gpu.arch == GpuArch::cpu) {
    // no NVLink: a PCIe / host system, where NCCL uses two channels (NVIDIA/nccl#689)
    t.ring_graph_channels = 1;
    t.ring_channel_GBps = c.node.nvlink_bytes_per_s / 1e9;
    t.coll_channels = 2;
    return t;
  }
  const bool hopper_or_later = c.gpu.arch == GpuArch::hopper || c.gpu.arch == GpuArch::blackwell;
  const double nvlink_total = std::min(c.node.nvlink_links * nccl_nvlink_link_GBps(c.gpu.arch), c.node.nvlink_bytes_per_s / 1e9);
  Graph g;
  if (nodes <= 1) {
    const std::span<const double> speeds = c.gpu.arch == GpuArch::ampere ? std::span<const double>(kIntraSm80)
                                           : c.gpu.arch == GpuArch::hopper ? std::span<const double>(kIntraSm90)
                                                                           : std::span<const double>(kIntraSm100);
    g = search(speeds, nvlink_total, nvlink_total, hopper_or_later,
               [&](double s) { return static_cast<int>(std::floor(nvlink_total / s + 1e-9)); });
  } else {
    // each ring leaves and enters the node through one NIC; a NIC carries as many rings as fit its speed
    const double nic = c.network.nic_bytes_per_s / 1e9;
    const std::span<const double> speeds = c.gpu.arch == GpuArch::ampere ? std::span<const double>(kInterSm80)
                                           : c.gpu.arch == GpuArch::hopper ? std::span<const double>(kInterSm90)
                                                                           : std::span<const double>(kInterSm100);
    const int nics = std::max(1, c.network.nics_per_node);
    g = search(speeds, nic, nvlink_total, hopper_or_later,
               [&](double s) { return nics * static_cast<int>(std::floor(nic / s + 1e-9)); });
  }
  t.ring_graph_channels = g.channels;
  t.ring_channel_GBps = g.speed;
  // connect.cc: rings are duplicated once more for the comm (nChannels = 2 x graph channels)
  t.coll_channels = std::min(kMaxChannels, 2 * g.channels);
  // ... and on SM90 across nodes, doubled again while fewer than 16 at more than 45 GB/s per ring
  if (c.gpu.arch == GpuArch::hopper && nodes > 1 && g.speed > 45.0 && t.coll_channels < 16)
    t.coll_channels = std::min(kMaxChannels, 2 * t.coll_channels);
  if (c.node.nvls) t.nvls_channels = c.gpu.arch == GpuArch::blackwell ? 24 : 16;
  return t;
}

}  // namespace hardware
