#include "hardware/collective_sweep.hpp"

#include <fmt/format.h>

#include <cctype>

#include "common/config_reader.hpp"
#include "common/limits.hpp"

namespace hardware {

CollectiveRow collective_row(const ClusterSpec& c, const CollectiveOp& op, const CollectiveOptions& options) {
  const CollectiveCost cost = price_collective(c, op, options);
  CollectiveRow row;
  row.bytes = op.bytes;
  row.time_us = cost.total().us();
  row.algbw_GBps = row.time_us > 0 ? static_cast<double>(op.bytes) / (row.time_us * 1e-6) / 1e9 : 0.0;
  row.busbw_GBps = row.algbw_GBps * bus_factor(op.kind, op.ranks);
  row.algo = cost.algo;
  row.proto = cost.proto;
  row.channels = cost.channels;
  return row;
}

std::vector<CollectiveRow> collective_sweep(const ClusterSpec& c, const SweepRequest& req) {
  if (req.gpus < 2) throw common::ConfigError("--gpus", "", fmt::format("{}: a collective needs at least 2 GPUs", req.gpus));
  if (req.nodes < 1 || req.gpus % req.nodes != 0)
    throw common::ConfigError("--gpus", "", fmt::format("{} GPUs do not split evenly over {} node(s)", req.gpus, req.nodes));
  if (req.gpus / req.nodes > c.node.gpus_per_node)
    throw common::ConfigError("--gpus", "", fmt::format("{} GPUs over {} node(s) of {} is more than its {} GPUs per node (use --nodes)",
                                                req.gpus, req.nodes, c.name, c.node.gpus_per_node));
  if (req.min_bytes <= 0 || req.max_bytes < req.min_bytes)
    throw common::ConfigError("--min-bytes", "", fmt::format("expected 0 < min-bytes <= max-bytes, got {} and {}", req.min_bytes, req.max_bytes));
  if (req.max_bytes > common::limits::kMaxCollectiveBytes)
    throw common::ConfigError("--max-bytes", "", fmt::format("{} bytes is more than the {} (1 TiB) one collective may move", req.max_bytes,
                                                             common::limits::kMaxCollectiveBytes));
  std::vector<CollectiveRow> rows;
  // b <= 2^40, so doubling it never overflows; the loop ends after at most 41 sizes
  for (std::int64_t b = req.min_bytes; b <= req.max_bytes; b *= 2) {
    CollectiveOp op{.kind = req.kind, .bytes = b, .ranks = req.gpus, .nodes = req.nodes, .dtype = common::DType::fp32};
    rows.push_back(collective_row(c, op, req.options));
  }
  return rows;
}

std::int64_t parse_bytes(const std::string& text, const std::string& flag) {
  const std::int64_t max = common::limits::kMaxCollectiveBytes;
  std::size_t i = 0;
  std::int64_t v = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    // digit by digit, refusing anything past the limit before it can overflow
    v = v * 10 + (text[i] - '0');
    if (v > max) throw common::ConfigError(flag, "", fmt::format("'{}': more than the {} bytes (1 TiB) one collective may move", text, max));
    ++i;
  }
  if (i == 0) throw common::ConfigError(flag, "", fmt::format("'{}': expected a byte count such as 1024, 1K, 64M or 8G", text));
  const std::string unit = text.substr(i);
  int shift = -1;
  if (unit.empty() || unit == "B") shift = 0;
  else if (unit == "K" || unit == "KB" || unit == "k") shift = 10;
  else if (unit == "M" || unit == "MB") shift = 20;
  else if (unit == "G" || unit == "GB") shift = 30;
  else if (unit == "T" || unit == "TB") shift = 40;
  if (shift < 0) throw common::ConfigError(flag, "", fmt::format("'{}': unknown unit '{}' (expected K, M, G or T)", text, unit));
  if (v > (max >> shift)) throw common::ConfigError(flag, "", fmt::format("'{}': more than the {} bytes (1 TiB) one collective may move", text, max));
  return v << shift;
}

}  // namespace hardware
