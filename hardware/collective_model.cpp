// The NCCL tuner's model (src/graph/tuning.cc) with its published constants; the two fitted
// constants live in the cluster file (nccl.call_overhead_us, nccl.nvls_efficiency).
#include "hardware/collective_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "common/config_reader.hpp"
#include "hardware/nccl_topology.hpp"

namespace hardware {

std::string_view to_string(CollectiveAlgo a) {
  switch (a) {
    case CollectiveAlgo::ring: return "ring";
    case CollectiveAlgo::tree: return "tree";
    case CollectiveAlgo::nvls: return "nvls";
    case CollectiveAlgo::nvls_tree: return "nvls_tree";
    case CollectiveAlgo::pat: return "pat";
    case CollectiveAlgo::p2p: return "p2p";
  }
  return "?";
}

std::string_view to_string(CollectiveProto p) {
  switch (p) {
    case CollectiveProto::ll: return "ll";
    case CollectiveProto::ll128: return "ll128";
    case CollectiveProto::simple: return "simple";
  }
  return "?";
}

bool parse_collective_algo(std::string_view s, CollectiveAlgo& out) {
  for (auto a : {CollectiveAlgo::ring, CollectiveAlgo::tree, CollectiveAlgo::nvls, CollectiveAlgo::nvls_tree, CollectiveAlgo::pat,
                 CollectiveAlgo::p2p})
    if (to_string(a) == s) {
      out = a;
      return true;
    }
  return false;
}

bool parse_collective_proto(std::string_view s, CollectiveProto& out) {
  for (auto p : {CollectiveProto::ll, CollectiveProto::ll128, CollectiveProto::simple})
    if (to_string(p) == s) {
      out = p;
      return true;
    }
  return false;
}

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

double link_capacity(const ClusterSpec& c, LinkClass l) {
  switch (l) {
    case LinkClass::nvlink: return c.node.nvlink_bytes_per_s;
    case LinkClass::nic:
      return c.network.nic_bytes_per_s * c.network.nics_per_node / c.node.gpus_per_node / c.network.oversubscription;
  }
  return 1.0;
}

namespace {

constexpr int kLL = 0, kLL128 = 1, kSimple = 2;
constexpr int kBuiltinLinks = 2;  // LinkClass::nvlink, LinkClass::nic
constexpr double kGB = 1e9;

// ---- NCCL's constants (tuning.cc, NCCL 2.2x), GB/s and microseconds ----------------------------
int arch_index(GpuArch a) { return a == GpuArch::ampere ? 0 : a == GpuArch::blackwell ? 2 : 1; }
int node_index(int nodes) { return nodes <= 1 ? 0 : nodes == 2 ? 1 : 2; }
// LL bandwidth ceiling. One node: by GPU generation (SM80, SM90, SM100). Across nodes NCCL looks at
// the host CPU instead: Intel rows {39, 39, 20.4}, AMD rows {87.7, 22.5, 19.0}; DGX A100 hosts are
// AMD EPYC, DGX H100/H200 and GB200 hosts are Intel/Grace (NCCL's Intel row).
constexpr double kLLMaxBw[3][3] = {{87.7, 22.5, 19.0}, {141.0, 39.0, 20.4}, {282.0, 39.0, 20.4}};
constexpr std::array<double, 3> kPerChMaxRingLL128Bw{20.0, 36.7, 40.0};
constexpr double kPerChMaxTreeLL128Bw[3][3] = {{20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
constexpr double kPerChMaxTreeBw[3][3] = {{24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
// latencies [proto]
constexpr std::array<double, 3> kBaseRing{6.6, 14.0, 8.4}, kBaseTree{6.8, 14.0, 8.4}, kBasePat{8.0, 8.0, 8.0};
constexpr std::array<double, 3> kNvlRing{0.6, 1.9, 3.4}, kNvlTree{0.6, 1.25, 4.0};
constexpr std::array<double, 3> kNetOverhead{1.0, 1.0, 3.0};  // network post overhead (x3 for Simple)
// Tree bandwidth correction by log2(bytes / 64), 64 B .. 256 MB
constexpr double kTreeCorrection[3][24] = {
    {1, 1, 1, 1, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1, 1, 1, 1, 1},
    {1, 1, 1, 1, 1, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1, 1, 1},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};
// Threads per channel and the bytes per thread below which NCCL drops a channel (enqueue.cc;
// the ring LL threshold is multiplied by the rank count, tuning.cc).
constexpr std::array<int, 3> kThreads{512, 640, 512};
constexpr std::array<int, 3> kThreshold{8, 8, 64};

struct Candidate {
  CollectiveAlgo algo;
  int proto;
  double latency_us = 0;
  double algbw = 0;  // bytes/s
  int channels = 1;
  std::array<double, kBuiltinLinks> raw{};  // bytes each GPU puts on each link class (LinkClass order)
};

/// Bus bandwidth (GB/s) a ring reaches over NVLink: the GPU's links at NCCL's per-link figure
/// (18 x 20.6 = 370.8 GB/s on H100, NVIDIA's "~370 GB/s effective").
double nvlink_bus_bw(const ClusterSpec& c) {
  return std::min(c.node.nvlink_links * nccl_nvlink_link_GBps(c.gpu.arch), c.node.nvlink_bytes_per_s / kGB);
}

/// Bytes/s (GB/s) the NICs a communicator with `rpn` ranks per node can use, at the fraction of
/// line rate a NCCL channel reaches on one NIC: each GPU has its share of the node's NICs.
double net_bw(const ClusterSpec& c, int rpn) {
  const double per_gpu = c.network.nic_bytes_per_s * c.network.nics_per_node / c.node.gpus_per_node;
  return per_gpu * rpn * c.network.nic_efficiency / c.network.oversubscription / kGB;
}

/// Bus bandwidth (GB/s) of the links a ring runs over: NVLink inside a node; across nodes the NICs
/// of the node's ranks (every channel's ring leaves and enters each node once, so a node's NICs
/// carry the bus volume together).
double ring_bus_bw(const ClusterSpec& c, int nodes, int rpn) {
  const double intra = c.gpu.arch == GpuArch::cpu ? c.node.nvlink_bytes_per_s / kGB : nvlink_bus_bw(c);
  if (nodes <= 1) return intra;
  return std::min(intra, net_bw(c, rpn));
}

bool applies(const ClusterSpec& c, const CollectiveOp& op, CollectiveAlgo a, int p) {
  const bool ar = op.kind == CollectiveKind::all_reduce;
  const bool p2p_kind = op.kind == CollectiveKind::all_to_all || op.kind == CollectiveKind::send_recv;
  const int rpn = op.ranks_per_node();
  switch (a) {
    case CollectiveAlgo::ring: return !p2p_kind;
    case CollectiveAlgo::tree: return ar;
    case CollectiveAlgo::nvls: return ar && p == kSimple && c.node.nvls && op.nodes == 1 && op.ranks > 2;
    case CollectiveAlgo::nvls_tree: return ar && p == kSimple && c.node.nvls && op.nodes > 1 && rpn > 1;
    case CollectiveAlgo::pat:
      return (op.kind == CollectiveKind::all_gather || op.kind == CollectiveKind::reduce_scatter) && rpn == 1 && op.nodes > 1 &&
             p == kSimple;
    case CollectiveAlgo::p2p: return p2p_kind && p == kSimple;
  }
  return false;
}

Candidate price(const ClusterSpec& c, const NcclTopology& topo, const CollectiveOp& op, CollectiveAlgo a, int p) {
  Candidate k{a, p};
  const int ai = arch_index(c.gpu.arch), ni = node_index(op.nodes);
  const int n = op.ranks, nodes = op.nodes, rpn = op.ranks_per_node();
  const double S = static_cast<double>(op.bytes);
  const double factor = bus_factor(op.kind, n);
  const bool nvls_family = a == CollectiveAlgo::nvls || a == CollectiveAlgo::nvls_tree;
  const int nch = nvls_family ? topo.nvls_channels : a == CollectiveAlgo::p2p ? std::min(8, topo.coll_channels) : topo.coll_channels;
  const int graph_ch = topo.ring_graph_channels;
  const double bw = ring_bus_bw(c, nodes, rpn);
  const double nvls_bw = c.node.nvlink_bytes_per_s / kGB * c.nccl.nvls_efficiency;
  // one inter-node step as measured (network.latency_us), whatever the protocol: NCCL's tuner
  // assumes 2.7 / 4 / 14 us (LL / LL128 / Simple) and 20.9 us per NVLS-tree level, but on the
  // 4-node H100 curves every protocol's mid-size time needs about the same step cost
  const double net_step = c.network.latency.us();
  const int nsteps = op.kind == CollectiveKind::all_reduce ? 2 * (n - 1) : std::max(1, n - 1);
  const int ninter = nodes > 1 ? (op.kind == CollectiveKind::all_reduce ? 2 * (nodes - 1) : nodes - 1) : 0;
  const double levels = std::log2(static_cast<double>(nodes));
  double bus = 0;  // GB/s
  switch (a) {
    case CollectiveAlgo::ring: {
      bus = p == kSimple    ? bw
            : p == kLL128   ? std::min(bw * 0.92, graph_ch * kPerChMaxRingLL128Bw[ai])
                            : std::min(kLLMaxBw[ai][ni], bw * 0.5);
      k.algbw = bus / factor * kGB;
      const double intra_lat = nodes > 1 ? std::max(kNvlRing[p], kNetOverhead[p]) : kNvlRing[p];
      k.latency_us = kBaseRing[p] + (nsteps - ninter) * intra_lat + ninter * net_step;
      // NCCL's "plateau effect of ring" on multi-node Simple all-reduce (tuning.cc: x1.4 on SM80+)
      if (nodes > 1 && p == kSimple && op.kind == CollectiveKind::all_reduce && S / (nch * n) >= 64) k.latency_us *= 1.4;
      const double volume = factor * S;
      k.raw[0] = nodes > 1 ? volume * (1.0 - 1.0 / rpn) : volume;
      k.raw[1] = nodes > 1 ? volume / rpn : 0.0;
      break;
    }
    case CollectiveAlgo::tree: {
      const double tree_bw = nodes <= 2 ? nvlink_bus_bw(c) : bw;
      bus = p == kSimple ? std::min(tree_bw * 0.92, graph_ch * kPerChMaxTreeBw[ai][ni])
            : p == kLL128 ? std::min(tree_bw * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), graph_ch * kPerChMaxTreeLL128Bw[ai][ni])
                          : std::min(tree_bw / 3.8, kLLMaxBw[ai][ni]);
      if (nodes > 1) bus = std::min(bus, net_bw(c, rpn));
      const int idx = std::clamp(static_cast<int>(std::log2(std::max(S, 64.0) / 64.0)), 0, 23);
      k.algbw = bus * 0.5 * kTreeCorrection[p][idx] * kGB;
      k.latency_us = kBaseTree[p] + 2.0 * ((rpn - 1) * kNvlTree[p] + levels * net_step);
      k.raw[0] = rpn > 1 ? 2.0 * S : 0.0;
      k.raw[1] = nodes > 1 ? 2.0 * S / rpn : 0.0;
      break;
    }
    case CollectiveAlgo::nvls:
      k.algbw = nvls_bw * kGB;
      k.latency_us = c.nccl.nvls_latency_us;
      k.raw[0] = S;
      break;
    case CollectiveAlgo::nvls_tree: {
      // NVLS inside each node (each GPU ends with 1/rpn of the node's sum), a tree of nodes across
      // the NICs on those shares: a NIC sends and receives its share once on two nodes, twice (up
      // and down a tree level) on more (tuning.cc: bwInter halved beyond two nodes).
      const double net = net_bw(c, rpn) / (nodes > 2 ? 2.0 : 1.0);
      k.algbw = std::min(nvls_bw, net) * kGB;
      k.latency_us = c.nccl.nvls_latency_us + 2.0 * levels * net_step;
      k.raw[0] = S;
      k.raw[1] = (nodes > 2 ? 2.0 : 1.0) * S / rpn;
      break;
    }
    case CollectiveAlgo::pat:
      // one GPU per node: log-depth exchanges over the NIC (tuning.cc: bus x 0.75; latency
      // log2(nodes) x interLat / 3.5 + 2.8 us per rank)
      k.algbw = bw * 0.75 / factor * kGB;
      k.latency_us = kBasePat[p] + levels * net_step / 3.5 + n * 2.8;
      k.raw[1] = factor * S;
      break;
    case CollectiveAlgo::p2p: {
      // AllToAll / Send-Recv: direct copies over NVLink inside the node, over the NIC across nodes
      const double share_remote = op.kind == CollectiveKind::send_recv ? (nodes > 1 ? 1.0 : 0.0) : static_cast<double>(n - rpn) / n;
      const double share_local = op.kind == CollectiveKind::send_recv ? (nodes > 1 ? 0.0 : 1.0) : static_cast<double>(rpn - 1) / n;
      k.raw[0] = share_local * S;
      k.raw[1] = share_remote * S;
      const double t = std::max(k.raw[0] / (c.node.nvlink_bytes_per_s * 0.8), k.raw[1] / (net_bw(c, 1) * kGB));
      k.algbw = t > 0 ? S / t : 1e30;
      k.latency_us = kBaseRing[p] + (nodes > 1 ? net_step : kNvlRing[p]);
      break;
    }
  }
  k.latency_us += c.nccl.call_overhead_us;
  // Small messages run on fewer channels (one CTA each): NCCL drops channels while
  // bytes < channels x threads x threshold; each channel moves its share of the bandwidth.
  int used = nch;
  if (!nvls_family) {
    const double threshold = kThreshold[p] * (a == CollectiveAlgo::ring && p == kLL ? n : 1);
    while (used > 1 && S < static_cast<double>(used) * kThreads[p] * threshold) --used;
  }
  k.channels = used;
  k.algbw *= static_cast<double>(used) / nch;
  return k;
}

// ---- NCCL's own estimate, by which it chooses (tuning.cc of NCCL 2.24, the version of the 4-node
// H100 curves) --------------------------------------------------------------------------------------
// Across nodes NCCL picks the (algorithm, protocol) its tuner estimates fastest, and its estimate
// is not the time the choice then takes: on 4 DGX-H100 nodes it puts ring/Simple ahead of
// NVLS-tree from about 260 MB (its NVLS-tree bandwidth halves beyond two nodes, its ring latency
// is 62 steps x 3.4 us x 1.4), while the ring really runs slower there than NVLS-tree: the dip of
// the measured curve at 256 MB. Latencies in us [proto], NCCL's hwLat for the network and NVLS.
constexpr std::array<double, 3> kNetRing{2.7, 4.0, 14.0}, kNetTree{5.0, 8.5, 14.0};
constexpr double kNetNvlsTree = 14.0, kNvlNvlsTree = 25.0;

int log2i(double x) { return x >= 1 ? static_cast<int>(std::floor(std::log2(x))) : 0; }

/// NCCL's estimate (us) of (a, p) for `op` on a communicator spanning nodes, from the graphs its
/// search settles on (nccl_topology: ring and tree graphs of ring_graph_channels at
/// ring_channel_GBps; the NVLS graph one channel per GPU of the node at the same NIC speed, the
/// graph's extra inter-node latency 0). None where NCCL does not tune (p2p) or disables the pair.
std::optional<double> nccl_tuner_us(const ClusterSpec& c, const NcclTopology& topo, const CollectiveOp& op, CollectiveAlgo a, int p) {
  if (op.nodes <= 1 || a == CollectiveAlgo::p2p || a == CollectiveAlgo::nvls) return std::nullopt;
  const bool ar = op.kind == CollectiveKind::all_reduce;
  const int ai = arch_index(c.gpu.arch), ni = node_index(op.nodes);
  const int n = op.ranks, nodes = op.nodes, rpn = op.ranks_per_node();
  const double S = static_cast<double>(op.bytes);
  const int nsteps = ar ? 2 * (n - 1) : n - 1;
  const int ninter = ar ? 2 * (nodes - 1) : nodes - 1;
  const double speed = topo.ring_channel_GBps;
  int nch = topo.ring_graph_channels;
  double bw = speed;
  if (a == CollectiveAlgo::nvls_tree) {
    nch = rpn;
    bw = std::min(speed, nodes <= 2 ? speed : speed / 2);
  }
  double bus = nch * bw;
  if (a == CollectiveAlgo::ring && p == kLL) bus = std::min(kLLMaxBw[ai][ni], bus * 0.5);
  if (a == CollectiveAlgo::ring && p == kLL128) bus = std::min(bus * 0.92, nch * kPerChMaxRingLL128Bw[ai]);
  if (a == CollectiveAlgo::tree) bus = std::min(bus * 0.92, nch * kPerChMaxTreeBw[ai][ni]);
  if (a == CollectiveAlgo::tree && p == kLL) bus = std::min(bus / 3.8, kLLMaxBw[ai][ni]);
  if (a == CollectiveAlgo::tree && p == kLL128) bus = std::min(bus * 120.0 / 128.0, nch * kPerChMaxTreeLL128Bw[ai][ni]);
  if (a == CollectiveAlgo::pat) bus *= 0.75;
  // bus to algorithm bandwidth (AllGather / ReduceScatter off the ring keep the bus figure)
  if (a == CollectiveAlgo::ring) bus *= static_cast<double>(n) / nsteps;
  else if (a == CollectiveAlgo::nvls_tree) bus *= 5.0 / 6.0;
  else if (ar) bus *= 0.5;
  double lat = 0;
  switch (a) {
    case CollectiveAlgo::ring: {
      const double intra = std::max(kNvlRing[p], kNetOverhead[p]);
      lat = kBaseRing[p] + (nsteps - ninter) * intra + ninter * (rpn == 1 ? kNetTree[p] : kNetRing[p]);
      if (ar && p == kSimple && S / (topo.coll_channels * n) >= 64) lat *= 1.4;  // "plateau effect of ring"
      break;
    }
    case CollectiveAlgo::tree: lat = kBaseTree[p] + 2.0 * ((rpn - 1) * kNvlTree[p] + log2i(nodes) * kNetTree[p]); break;
    case CollectiveAlgo::nvls_tree: lat = kNvlNvlsTree + 2.0 * log2i(nodes) * kNetNvlsTree; break;
    case CollectiveAlgo::pat: lat = kBasePat[p] + log2i(nodes) * kNetTree[p] / 3.5 + n * 2.8; break;
    default: return std::nullopt;
  }
  if (a == CollectiveAlgo::tree) {
    const int idx = log2i(S / 64.0);
    if (idx < 23) bus *= kTreeCorrection[p][idx];
  }
  if (!(bus > 0)) return std::nullopt;
  return lat + S / (1000.0 * bus);
}

}  // namespace

CollectiveCost price_collective(const ClusterSpec& c, const CollectiveOp& op, const CollectiveOptions& options) {
  CollectiveCost none;
  none.algo = "none";
  none.proto = "none";
  none.channels = 0;
  none.sms = 0;
  if (op.ranks <= 1 || op.bytes <= 0) return none;
  const NcclTopology topo = nccl_topology(c, op.nodes);
  // Inside a node the fastest candidate wins (NCCL's estimate and the model agree on the choice
  // there); across nodes the one NCCL's own estimate ranks first (nccl_tuner_us), priced by the model.
  std::optional<Candidate> best;
  double best_us = 0;
  bool by_tuner = false;  // best was ranked by NCCL's estimate
  for (auto a : {CollectiveAlgo::ring, CollectiveAlgo::tree, CollectiveAlgo::nvls, CollectiveAlgo::nvls_tree, CollectiveAlgo::pat,
                 CollectiveAlgo::p2p}) {
    if (options.algo && *options.algo != a) continue;
    for (int p : {kLL, kLL128, kSimple}) {
      if (options.proto && static_cast<int>(*options.proto) != p) continue;
      if (!applies(c, op, a, p)) continue;
      const Candidate k = price(c, topo, op, a, p);
      const auto tuner = nccl_tuner_us(c, topo, op, a, p);
      const double us = tuner ? *tuner : k.latency_us + static_cast<double>(op.bytes) / k.algbw * 1e6;
      if (!best || (tuner && !by_tuner) || (tuner.has_value() == by_tuner && us < best_us)) {
        best = k;
        best_us = us;
        by_tuner = tuner.has_value();
      }
    }
  }
  if (!best)
    throw common::ConfigError("--algo/--proto", options.algo ? std::string(to_string(*options.algo)) : "proto",
                      fmt::format("does not apply to {} over {} GPUs on {} node(s) of {}", to_string(op.kind), op.ranks, op.nodes, c.name));
  CollectiveCost cost;
  cost.algo = to_string(best->algo);
  cost.proto = to_string(static_cast<CollectiveProto>(best->proto));
  cost.channels = best->channels;
  cost.sms = best->channels;
  cost.latency = common::Duration::from_us(best->latency_us);
  const double transfer_s = static_cast<double>(op.bytes) / best->algbw;
  cost.transfer = common::Duration::from_s(transfer_s);
  cost.sent_bytes = best->raw[0] + best->raw[1];
  // capacity-equivalent wire bytes: scale so the busiest link is exactly full at solo speed
  double worst = 0;
  for (int l = 0; l < kBuiltinLinks; ++l) worst = std::max(worst, best->raw[l] / link_capacity(c, static_cast<LinkClass>(l)));
  if (worst > 0) {
    cost.wire_bytes.assign(kBuiltinLinks, 0.0);
    for (int l = 0; l < kBuiltinLinks; ++l) cost.wire_bytes[l] = best->raw[l] * transfer_s / worst;
  }
  return cost;
}

double nccl_buffer_bytes(const ClusterSpec& c, int ranks, int nodes) {
  if (ranks <= 1) return 0.0;
  // NCCL init.cc: DEFAULT_LL_BUFFSIZE = 8 lines x 512 threads x 8 steps x 16 B; DEFAULT_LL128_BUFFSIZE
  // = 120 elements x 640 threads x 8 steps x 8 B; DEFAULT_BUFFSIZE = 4 MiB (Simple)
  constexpr double kPerPeer = 8.0 * 512 * 8 * 16 + 120.0 * 640 * 8 * 8 + 4194304.0;
  const NcclTopology topo = nccl_topology(c, nodes);  // the channels NCCL sets up for this communicator
  const int ring_channels = topo.coll_channels;
  double bytes = ring_channels * kPerPeer;                     // ring: the receive side of one peer per channel
  if (nodes > 1) bytes += 3.0 * ring_channels * kPerPeer;      // tree: parent and two children
  if (nodes == 1 && c.node.nvls && ranks > 2) bytes += topo.nvls_channels * 2.0 * 4194304.0;
  return bytes;
}

}  // namespace hardware
