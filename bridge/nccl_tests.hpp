// defines: bridge::NcclTestsRow, NcclTestsRun, parse_nccl_tests (nccl-tests' standard text output)
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "hardware/collective_model.hpp"
#include "hardware/ops.hpp"

namespace bridge {

struct NcclTestsRow {
  std::int64_t bytes = 0;
  double time_us = 0;     ///< in-place time (nccl-tests prints out-of-place, then in-place)
  double algbw_GBps = 0;  ///< as printed (in-place)
  double busbw_GBps = 0;
  int line = 0;
};

/// @brief One nccl-tests run: the collective, its ranks and nodes, and the table rows.
struct NcclTestsRun {
  std::string source;
  hardware::CollectiveKind kind = hardware::CollectiveKind::all_reduce;
  int ranks = 0;  ///< "#  Rank N ..." lines (one per GPU)
  int nodes = 0;  ///< distinct host names in those lines
  std::string device;  ///< e.g. "NVIDIA H100 80GB HBM3"
  std::optional<hardware::CollectiveAlgo> forced_algo;  ///< "NCCL_ALGO set by environment to X" (NCCL_DEBUG=INFO)
  std::vector<NcclTestsRow> rows;
};

/// @brief Parses the text all_reduce_perf / all_gather_perf / reduce_scatter_perf print: the
/// "# nThread ... nGpus ..." header, "#  Rank ... on HOST device ..." lines, the table
/// (size count type redop root time algbw busbw #wrong, out-of-place then in-place). The
/// collective comes from "# Collective test starting: NAME" or the file name. Throws
/// common::ConfigError naming the file and line on anything malformed.
NcclTestsRun parse_nccl_tests(const std::string& text, const std::string& source);

}  // namespace bridge
