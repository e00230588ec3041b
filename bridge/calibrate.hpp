// defines: bridge::CalibrationRow, Calibration, calibrate_nccl, calibrated_cluster_yaml
//          (the cluster file's fitted NCCL constants from nccl-tests output)
#pragma once
#include <string>
#include <vector>

#include "bridge/nccl_tests.hpp"
#include "hardware/cluster.hpp"

namespace bridge {

struct CalibrationRow {
  std::string source;
  int line = 0;
  hardware::CollectiveKind kind = hardware::CollectiveKind::all_reduce;
  int ranks = 0, nodes = 0;
  std::int64_t bytes = 0;
  double measured_us = 0, measured_busbw = 0;
  double before_us = 0, after_us = 0;  ///< the model with the cluster file's constants, and with the fitted ones
  std::string algo;                    ///< the model's algorithm (fitted constants)
  std::string used_for;                ///< "call_overhead_us", "nvls", or "" (reported only)
  double after_busbw() const;
};

struct Calibration {
  hardware::NcclSpec before, after;
  std::vector<CalibrationRow> rows;
  int overhead_rows = 0, nvls_rows = 0;
};

/// @brief Fits nccl.call_overhead_us, nccl.nvls_efficiency and nccl.nvls_latency_us of `cluster`:
/// (1) call_overhead_us = the median, over latency-bound rows (the model's transfer time < 10 % of
/// its time), of measured time - the model's time without the overhead; (2) with that overhead,
/// nvls_efficiency and nvls_latency_us minimise the squared bus-bandwidth error (GB/s, nccl-tests'
/// own figure) over the one-node AllReduce rows the model prices as NVLS; (2) is repeated until the
/// set of NVLS rows stops changing. Multi-node rows and rows with a forced NCCL_ALGO the model does
/// not pick are reported, not fitted. Throws common::ConfigError when no row can inform a constant.
Calibration calibrate_nccl(const hardware::ClusterSpec& cluster, const std::vector<NcclTestsRun>& runs);

/// @brief The cluster file `yaml_text` with the three nccl constants replaced by `fitted` (comments
/// say where they came from); everything else unchanged.
std::string calibrated_cluster_yaml(const std::string& yaml_text, const hardware::NcclSpec& fitted, const std::string& note);

/// @brief Per-row table: file, collective, GPUs, bytes, measured and modelled busbw, error, use.
std::string calibration_table(const Calibration& c);

}  // namespace bridge
