// defines: hardware::price_collective (NCCL-style choice of algorithm, protocol and channels, and
//          the cost of the choice), CollectiveAlgo, CollectiveProto, CollectiveOptions, bus_factor,
//          link_capacity
#pragma once
#include <optional>
#include <string_view>

#include "hardware/cluster.hpp"
#include "hardware/cost_model.hpp"
#include "hardware/ops.hpp"

namespace hardware {

/// @brief NCCL's algorithms (NCCL_ALGO), plus `p2p` for AllToAll and Send/Recv (not tuned by NCCL).
enum class CollectiveAlgo : std::uint8_t { ring, tree, nvls, nvls_tree, pat, p2p };
/// @brief NCCL's protocols (NCCL_PROTO).
enum class CollectiveProto : std::uint8_t { ll, ll128, simple };
std::string_view to_string(CollectiveAlgo a);
std::string_view to_string(CollectiveProto p);
bool parse_collective_algo(std::string_view s, CollectiveAlgo& out);
bool parse_collective_proto(std::string_view s, CollectiveProto& out);

/// @brief Restricts the choice, as NCCL_ALGO / NCCL_PROTO do. Unset: NCCL's own choice.
struct CollectiveOptions {
  std::optional<CollectiveAlgo> algo;
  std::optional<CollectiveProto> proto;
};

/// @brief nccl-tests' bus-bandwidth factor: busbw = algbw x bus_factor (2(n-1)/n for AllReduce,
/// (n-1)/n for AllGather / ReduceScatter / AllToAll, 1 for Broadcast / Reduce / SendRecv).
double bus_factor(CollectiveKind kind, int ranks);

/// @brief Bytes/s of one GPU's share of a link class: its NVLink port (one direction), or its
/// share of the node's NICs divided by the fabric's oversubscription.
double link_capacity(const ClusterSpec& cluster, LinkClass l);

/// @brief Bytes of channel buffers one rank holds for a NCCL communicator of `ranks` GPUs over
/// `nodes` nodes, at NCCL's defaults (init.cc): per channel and connected peer the LL (512 KiB),
/// LL128 (4.69 MiB) and Simple (NCCL_BUFFSIZE, 4 MiB) buffers; a ring connects one peer per
/// channel, a tree (communicators spanning nodes) three more, NVLS (one node, NVSwitch SHARP)
/// two 4 MiB buffers per NVLS channel; channels as NCCL sets them up (nccl_topology). 0 for one rank.
double nccl_buffer_bytes(const ClusterSpec& cluster, int ranks, int nodes);

/// @brief Prices one collective on `cluster` the way NCCL's tuner picks it (see
/// docs/cost-models.md): every (algorithm, protocol) that applies is priced as
/// latency + bytes / algorithm bandwidth; inside a node the fastest wins, across nodes the one
/// NCCL 2.24's own estimate (tuning.cc, its constants and the graphs of nccl_topology) ranks first,
/// even where the model prices another faster (the 4-node all-reduce dip at 256 MB: NCCL moves to
/// ring/Simple there); channels shrink for small messages.
/// `wire_bytes` are capacity-equivalent: the bottleneck link is exactly saturated at solo speed,
/// so that two equal collectives on one link each get half. Returns algo "none" when nothing moves.
/// Throws common::ConfigError when `options` force an algorithm that does not apply.
CollectiveCost price_collective(const ClusterSpec& cluster, const CollectiveOp& op, const CollectiveOptions& options = {});

}  // namespace hardware
