// The NCCL tuner's model (src/graph/tuning.cc) with its published constants; the two fitted
// constants live in the cluster file (nccl.call_overhead_us, nccl.nvls_efficiency).
#include "hardware/collective_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "common/config_reader.hpp"

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

// ---- NCCL's constants (tuning.cc), GB/s and microseconds -------------------------------------
int arch_index(GpuArch a) { return a == GpuArch::ampere ? 0 : a == GpuArch::blackwell ? 2 : 1; }
int node_index(int nodes) { return nodes <= 1 ? 0 : nodes == 2 ? 1 : 2; }
// per-NVLink bandwidth NCCL assumes (SM80, SM90, SM100)
constexpr std::array<double, 3> kLinkBw{20.0, 20.6, 40.1};
// [arch][1 node, 2 nodes, >= 4 nodes]
constexpr double kLLMaxBw[3][3] = {{87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
constexpr std::array<double, 3> kPerChMaxRingLL128Bw{20.0, 36.7, 40.0};
constexpr double kPerChMaxTreeLL128Bw[3][3] = {{20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
constexpr double kPerChMaxTreeBw[3][3] = {{24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
// latencies [proto]
constexpr std::array<double, 3> kBaseRing{6.6, 14.0, 8.4}, kBaseTree{6.8, 14.0, 8.4}, kBasePat{8.0, 8.0, 8.0};
constexpr std::array<double, 3> kNvlRing{0.6, 1.9, 3.4}, kNvlTree{0.6, 1.25, 4.0};
constexpr std::array<double, 3> kNetRing{2.7, 4.0, 14.0}, kNetTree{5.0, 8.5, 14.0};
constexpr double kNetNvlsTree = 20.9, kNetPat = 14.0;
constexpr std::array<double, 3> kNetOverhead{1.0, 1.0, 3.0};  // network post overhead (x3 for Simple)
// Tree bandwidth correction by log2(bytes / 64), 64 B .. 256 MB
constexpr double kTreeCorrection[3][24] = {
    {1, 1, 1, 1, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1, 1, 1, 1, 1},
    {1, 1, 1, 1, 1, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1, 1, 1},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};
// Threads per channel and the bytes per thread below which NCCL drops a channel (enqueue.cc).
constexpr std::array<int, 3> kThreads{512, 640, 512};
constexpr std::array<int, 3> kThreshold{8, 8, 64};

int max_channels(const ClusterSpec& c, CollectiveAlgo a) {
  if (a == CollectiveAlgo::nvls || a == CollectiveAlgo::nvls_tree) return c.gpu.arch == GpuArch::blackwell ? 24 : 16;
  if (a == CollectiveAlgo::p2p) return 8;
  return c.gpu.arch == GpuArch::blackwell ? 32 : 16;
}

struct Candidate {
  CollectiveAlgo algo;
  int proto;
  double latency_us = 0;
  double algbw = 0;  // bytes/s
  int channels = 1;
  std::array<double, kBuiltinLinks> raw{};  // bytes each GPU puts on each link class (LinkClass order)
};

/// Bus bandwidth (GB/s) of the links a ring runs over: NVLink inside a node; across nodes the
/// node's NICs (every channel's ring leaves and enters each node once, so a node's NICs carry
/// the bus volume together).
double ring_bus_bw(const ClusterSpec& c, int nodes) {
  const double intra = std::min(c.node.nvlink_links * kLinkBw[arch_index(c.gpu.arch)], c.node.nvlink_bytes_per_s / kGB);
  if (nodes <= 1) return intra;
  const double net = c.network.nics_per_node * c.network.nic_bytes_per_s / c.network.oversubscription / kGB;
  return std::min(intra, net);
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
      return (op.kind == CollectiveKind::all_gather || op.kind == CollectiveKind::reduce_scatter) && rpn == 1 && op.nodes > 1;
    case CollectiveAlgo::p2p: return p2p_kind && p == kSimple;
  }
  return false;
}

Candidate price(const ClusterSpec& c, const CollectiveOp& op, CollectiveAlgo a, int p, double overhead_us) {
  Candidate k{a, p};
  const int ai = arch_index(c.gpu.arch), ni = node_index(op.nodes);
  const int n = op.ranks, nodes = op.nodes, rpn = op.ranks_per_node();
  const double S = static_cast<double>(op.bytes);
  const double factor = bus_factor(op.kind, n);
  const int nch = max_channels(c, a);
  const double bw = ring_bus_bw(c, nodes);
  const double nvls_bw = c.node.nvlink_bytes_per_s / kGB * c.nccl.nvls_efficiency;
  const int nsteps = op.kind == CollectiveKind::all_reduce ? 2 * (n - 1) : std::max(1, n - 1);
  const int ninter = nodes > 1 ? (op.kind == CollectiveKind::all_reduce ? 2 * (nodes - 1) : nodes - 1) : 0;
  double bus = 0;  // GB/s
  switch (a) {
    case CollectiveAlgo::ring: {
      bus = p == kSimple ? bw : p == kLL128 ? std::min(bw * 0.92, nch * kPerChMaxRingLL128Bw[ai]) : std::min(kLLMaxBw[ai][ni], bw * 0.5);
      k.algbw = bus / factor * kGB;
      const double intra_lat = nodes > 1 ? std::max(kNvlRing[p], kNetOverhead[p]) : kNvlRing[p];
      k.latency_us = kBaseRing[p] + (nsteps - ninter) * intra_lat + ninter * kNetRing[p];
      if (nodes > 1 && p == kSimple && op.kind == CollectiveKind::all_reduce && S / (nch * n) >= 64) k.latency_us *= 1.4;
      const double volume = factor * S;
      k.raw[0] = nodes > 1 ? volume * (1.0 - 1.0 / rpn) : volume;
      k.raw[1] = nodes > 1 ? volume / rpn : 0.0;
      break;
    }
    case CollectiveAlgo::tree: {
      bus = p == kSimple ? std::min(bw * 0.92, nch * kPerChMaxTreeBw[ai][ni])
            : p == kLL128 ? std::min(bw * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), nch * kPerChMaxTreeLL128Bw[ai][ni])
                          : std::min(bw / 3.8, kLLMaxBw[ai][ni]);
      const int idx = std::clamp(static_cast<int>(std::log2(std::max(S, 64.0) / 64.0)), 0, 23);
      k.algbw = bus * 0.5 * kTreeCorrection[p][idx] * kGB;
      k.latency_us = kBaseTree[p] + 2.0 * ((rpn - 1) * kNvlTree[p] + std::log2(static_cast<double>(nodes)) * kNetTree[p]);
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
      // NVLS inside each node, a tree of nodes across the NICs (a node sends S up and S down)
      const double net = c.network.nics_per_node * c.network.nic_bytes_per_s / c.network.oversubscription / kGB * 0.92;
      k.algbw = std::min(nvls_bw, net) * kGB;
      k.latency_us = c.nccl.nvls_latency_us + 2.0 * std::log2(static_cast<double>(nodes)) * kNetNvlsTree;
      k.raw[0] = S;
      k.raw[1] = 2.0 * S / rpn;
      break;
    }
    case CollectiveAlgo::pat:
      k.algbw = bw / factor * kGB;
      k.latency_us = kBasePat[p] + std::log2(static_cast<double>(n)) * kNetPat;
      k.raw[1] = factor * S;
      break;
    case CollectiveAlgo::p2p: {
      // AllToAll / Send-Recv: direct copies over NVLink inside the node, over the NIC across nodes
      const double share_remote = op.kind == CollectiveKind::send_recv ? (nodes > 1 ? 1.0 : 0.0) : static_cast<double>(n - rpn) / n;
      const double share_local = op.kind == CollectiveKind::send_recv ? (nodes > 1 ? 0.0 : 1.0) : static_cast<double>(rpn - 1) / n;
      k.raw[0] = share_local * S;
      k.raw[1] = share_remote * S;
      const double t = std::max(k.raw[0] / (c.node.nvlink_bytes_per_s * 0.8), k.raw[1] / (link_capacity(c, LinkClass::nic) * 0.92));
      k.algbw = t > 0 ? S / t : 1e30;
      k.latency_us = kBaseRing[p] + (nodes > 1 ? kNetRing[p] : kNvlRing[p]);
      break;
    }
  }
  k.latency_us += overhead_us;
  // Small messages run on fewer channels (one CTA each): NCCL drops channels while
  // bytes < channels x threads x threshold; each channel moves its share of the bandwidth.
  int used = nch;
  while (used > 1 && S < static_cast<double>(used) * kThreads[p] * kThreshold[p]) --used;
  k.channels = used;
  k.algbw *= static_cast<double>(used) / nch;
  return k;
}

}  // namespace

CollectiveCost price_collective(const ClusterSpec& c, const CollectiveOp& op, const CollectiveOptions& options) {
  CollectiveCost none;
  none.algo = "none";
  none.proto = "none";
  none.channels = 0;
  none.sms = 0;
  if (op.ranks <= 1 || op.bytes <= 0) return none;
  std::optional<Candidate> best;
  double best_us = 0;
  for (auto a : {CollectiveAlgo::ring, CollectiveAlgo::tree, CollectiveAlgo::nvls, CollectiveAlgo::nvls_tree, CollectiveAlgo::pat,
                 CollectiveAlgo::p2p}) {
    if (options.algo && *options.algo != a) continue;
    for (int p : {kLL, kLL128, kSimple}) {
      if (options.proto && static_cast<int>(*options.proto) != p) continue;
      if (!applies(c, op, a, p)) continue;
      const Candidate k = price(c, op, a, p, c.nccl.call_overhead_us);
      const double us = k.latency_us + static_cast<double>(op.bytes) / k.algbw * 1e6;
      if (!best || us < best_us) {
        best = k;
        best_us = us;
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
  // capacity-equivalent wire bytes: scale so the busiest link is exactly full at solo speed
  double worst = 0;
  for (int l = 0; l < kBuiltinLinks; ++l) worst = std::max(worst, best->raw[l] / link_capacity(c, static_cast<LinkClass>(l)));
  if (worst > 0) {
    cost.wire_bytes.assign(kBuiltinLinks, 0.0);
    for (int l = 0; l < kBuiltinLinks; ++l) cost.wire_bytes[l] = best->raw[l] * transfer_s / worst;
  }
  return cost;
}

}  // namespace hardware
