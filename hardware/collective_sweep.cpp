#include "hardware/collective_sweep.hpp"

#include <fmt/format.h>

#include <cctype>

#include "common/config_reader.hpp"

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
  std::vector<CollectiveRow> rows;
  for (std::int64_t b = req.min_bytes; b <= req.max_bytes; b *= 2) {
    CollectiveOp op{.kind = req.kind, .bytes = b, .ranks = req.gpus, .nodes = req.nodes, .dtype = common::DType::fp32};
    rows.push_back(collective_row(c, op, req.options));
  }
  return rows;
}

std::int64_t parse_bytes(const std::string& text, const std::string& flag) {
  std::size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0) throw common::ConfigError(flag, "", fmt::format("'{}': expected a byte count such as 1024, 1K, 64M or 8G", text));
  std::int64_t v = std::stoll(text.substr(0, i));
  const std::string unit = text.substr(i);
  if (unit.empty() || unit == "B") return v;
  if (unit == "K" || unit == "KB" || unit == "k") return v << 10;
  if (unit == "M" || unit == "MB") return v << 20;
  if (unit == "G" || unit == "GB") return v << 30;
  throw common::ConfigError(flag, "", fmt::format("'{}': unknown unit '{}' (expected K, M or G)", text, unit));
}

}  // namespace hardware
