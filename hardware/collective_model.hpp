// defines: hardware::price_collective (NCCL-style algorithm choice and cost), bus_factor
#pragma once
#include "hardware/cluster.hpp"
#include "hardware/cost_model.hpp"
#include "hardware/ops.hpp"

namespace hardware {

/// @brief nccl-tests' bus-bandwidth factor: busbw = algbw x bus_factor (2(n-1)/n for AllReduce,
/// (n-1)/n for AllGather / ReduceScatter / AllToAll, 1 for Broadcast / Reduce / SendRecv).
double bus_factor(CollectiveKind kind, int ranks);

/// @brief Prices one collective on `cluster` the way NCCL's tuner would pick it
/// (see shared/reference/nccl-cost-model.md), lowest modelled time over the candidate algorithms.
CollectiveCost price_collective(const ClusterSpec& cluster, const CollectiveOp& op);

}  // namespace hardware
