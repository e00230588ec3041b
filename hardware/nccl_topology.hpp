// defines: hardware::NcclTopology, nccl_topology (the channels NCCL's topology search and channel
//          setup settle on for a communicator: how many CTAs, hence SMs, a collective occupies)
#pragma once
#include "hardware/cluster.hpp"

namespace hardware {

/// @brief What NCCL 2.2x sets up for a communicator of GPUs spread over `nodes` nodes of a
/// cluster (src/graph/search.cc ncclTopoCompute + ncclTopoDupChannels, src/graph/connect.cc
/// ncclTopoPostset; MAXCHANNELS = 32). One channel is one CTA on an SM of its own.
struct NcclTopology {
  /// Rings the graph search found (after its own duplication); NCCL's tuner multiplies the
  /// per-channel bandwidth below by this count.
  int ring_graph_channels = 1;
  /// Bandwidth per ring channel NCCL's tuner assumes, GB/s: the search speed it settled on
  /// (NVLink inside a node; one NIC's share across nodes).
  double ring_channel_GBps = 0;
  /// CTAs a ring or tree collective launches at full size (comm->nChannels: the graph's
  /// channels doubled by connect.cc, doubled again on SM90 multi-node when fewer than 16).
  int coll_channels = 1;
  /// CTAs an NVLS or NVLS-tree collective launches (NCCL: "NVLS should not need more than 16
  /// channels"); 0 where the node has no NVLink SHARP.
  int nvls_channels = 0;
};

/// @brief The channel setup NCCL reaches on `cluster` for a communicator spanning `nodes` nodes.
/// Inside a node (NVSwitch): the search tries NCCL's per-architecture speeds (SM80 40, 30, 20 ...;
/// SM90 60, 50, 40, 30 ...; SM100 90, 80 ...) and keeps the largest channels x speed within the
/// GPU's NVLink bandwidth (links x NCCL's per-link figure, 20 / 20.6 / 40.1 GB/s), then duplicates
/// the channels at half speed (not on SM90+ below 50 GB/s with more than 4 channels). Across
/// nodes each ring leaves the node through one NIC at NCCL's inter-node speed (48 GB/s for a
/// 400 Gb/s NIC). CPU "GPUs" (the CPU executor's cluster) get two channels.
/// DGX-A100 and DGX-H100 come out at 24 CTAs per collective in one node and 16 across nodes,
/// as NCCL's logs show ("24 coll channels"; H800 with 8 NVLinks: 16).
NcclTopology nccl_topology(const ClusterSpec& cluster, int nodes);

/// @brief NCCL's per-link NVLink bandwidth for the GPU generation (topo.h: SM80 20.0, SM90 20.6,
/// SM100 40.1 GB/s).
double nccl_nvlink_link_GBps(GpuArch arch);

}  // namespace hardware
