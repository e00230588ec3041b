// defines: hardware::CollectiveRow, collective_sweep (an nccl-tests-style sweep of the collective
//          model over message sizes), parse_bytes ("64M" -> 67108864)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hardware/collective_model.hpp"

namespace hardware {

/// @brief One line of an nccl-tests table, as the model predicts it.
struct CollectiveRow {
  std::int64_t bytes = 0;
  double time_us = 0;
  double algbw_GBps = 0;  ///< bytes / time
  double busbw_GBps = 0;  ///< algbw x bus_factor
  std::string algo, proto;
  int channels = 0;
};

struct SweepRequest {
  CollectiveKind kind = CollectiveKind::all_reduce;
  int gpus = 8;
  int nodes = 1;
  std::int64_t min_bytes = 1024, max_bytes = std::int64_t{8} << 30;
  CollectiveOptions options;
};

/// @brief Sizes min_bytes, 2 x min_bytes, ... up to max_bytes (as nccl-tests -f 2). Throws
/// common::ConfigError naming the flag when the GPU count does not fit the cluster.
std::vector<CollectiveRow> collective_sweep(const ClusterSpec& cluster, const SweepRequest& req);

/// @brief One size: what `slicetune collective` prints for it.
CollectiveRow collective_row(const ClusterSpec& cluster, const CollectiveOp& op, const CollectiveOptions& options = {});

/// @brief "1024", "1K", "64M", "8G" (powers of 1024) -> bytes; throws common::ConfigError naming `flag`.
std::int64_t parse_bytes(const std::string& text, const std::string& flag);

}  // namespace hardware
