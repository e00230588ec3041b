// defines: executor::BucketLayout, bucket_layout, ShardPiece, shard_pieces, is_dp_bucket_collective
//          (where a ZeRO bucket's tensors sit in its flattened buffer and in each rank's shard)
//
// The builder's ZeRO layout (sim/zero_emit.cpp): a DP bucket's tensors (gradients for the
// ReduceScatter, weights for the parameter AllGather) flattened row-major in operand order, padded
// with zeros to a multiple of dp; DP rank r's shard holds elements [r * shard, (r + 1) * shard).
// Host-only; both backends and the gradient dump (executor/run.cpp) use it.
#pragma once
#include <cstdint>
#include <vector>

#include "sim/step_graph.hpp"

namespace executor {

struct BucketLayout {
  std::vector<sim::TensorId> tensors;  ///< in bucket order
  std::vector<std::int64_t> offsets;   ///< element offset of each in the flattened bucket
  std::int64_t elements = 0;           ///< sum of the tensors' elements (unpadded)
  std::int64_t shard = 0;              ///< elements per rank: the shard tensor's rows
};

/// @brief Whether task t is a DP bucket collective: a ReduceScatter of gradients into a shard
/// (Op::dp_reduce) or an AllGather of a parameter shard (Op::param_gather).
bool is_dp_bucket_collective(const sim::StepGraph& g, std::uint32_t t);
/// @brief The bucket of such a task: its inputs (ReduceScatter) or outputs (AllGather), the shard
/// size from its output (ReduceScatter) or input (AllGather) shard tensor.
BucketLayout bucket_layout(const sim::StepGraph& g, std::uint32_t t);

/// @brief A run of a shard that lies in one tensor: shard elements [shard_offset, + count) are
/// elements [tensor_offset, + count) of `tensor` (flattened).
struct ShardPiece {
  sim::TensorId tensor = 0;
  std::int64_t shard_offset = 0, tensor_offset = 0, count = 0;
};
/// @brief The pieces of DP rank `dp_rank`'s shard of `b` (the padding belongs to no tensor).
std::vector<ShardPiece> shard_pieces(const BucketLayout& b, const sim::StepGraph& g, int dp_rank);

}  // namespace executor
