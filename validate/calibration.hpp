// defines: validate::Csv, read_csv, csv_number, csv_int, csv_int64 (the calibration files' CSV reader), NcclMeasurement,
//          read_nccl_measurements (every nccl-tests row of data/calibration as one list), predict_nccl,
//          NcclScaling, read_rs_node_scaling (nccl-notes.md row 11)
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hardware/collective_sweep.hpp"
#include "hardware/ops.hpp"

namespace validate {

/// @brief CSV rows (comment lines '#' and the header skipped) as string cells, with the header.
struct Csv {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string path;
  int col(const std::string& name) const;
  const std::string& cell(const std::vector<std::string>& row, const std::string& name) const;
};
/// @brief Reads `path`; throws common::ConfigError if it cannot be read.
Csv read_csv(const std::string& path);
/// @brief The cell as a finite number; throws common::ConfigError naming the file and column.
double csv_number(const Csv& csv, const std::vector<std::string>& row, const std::string& col);
/// @brief The cell as a whole number in [0, 2^31 - 1] (counts, sizes in files that fit an int), checked
/// before narrowing; throws common::ConfigError naming the file and column.
int csv_int(const Csv& csv, const std::vector<std::string>& row, const std::string& col);
/// @brief The cell as a whole number in [0, 2^53] (byte counts, GEMM sizes); throws common::ConfigError.
std::int64_t csv_int64(const Csv& csv, const std::vector<std::string>& row, const std::string& col);

/// @brief Which published set an nccl-tests row comes from (they are fitted and scored apart).
enum class NcclSet : std::uint8_t {
  nvls_one_node,   ///< nccl-allreduce-busbw.csv: Azure ND H100 v5 (NVLS on) and NVIDIA's ring figures
  ring_one_node,   ///< nccl-h100-busbw-1and4node.csv [TOG]: ring all-reduce / all-gather / reduce-scatter, 8x H100
  four_node,       ///< nccl-h100-busbw-1and4node.csv [VP]: 4x DGX-H100 (8x 400G IB), NCCL's default choice
};

/// @brief One nccl-tests row: what ran and the bus bandwidth measured.
struct NcclMeasurement {
  NcclSet set = NcclSet::nvls_one_node;
  std::string cluster;  ///< embedded cluster file it runs on
  hardware::CollectiveKind kind = hardware::CollectiveKind::all_reduce;
  int gpus = 8, nodes = 1;
  std::int64_t bytes = 0;
  std::optional<hardware::CollectiveAlgo> forced;  ///< NCCL_ALGO=Ring where the row says so
  double busbw_GBps = 0;
  std::string label;  ///< "dgx-h100 8 GPUs 1048576 B (NVLS enabled)"
  std::string file;   ///< data/calibration/...
};

/// @brief Every H100 nccl-tests row of nccl-allreduce-busbw.csv and nccl-h100-busbw-1and4node.csv
/// (rows without a bus bandwidth, the README summary and the B200 shape reference are left out).
std::vector<NcclMeasurement> read_nccl_measurements(const std::string& calibration_dir);

/// @brief What the collective model predicts for the row on `cluster` (its node count set to the row's).
hardware::CollectiveRow predict_nccl(hardware::ClusterSpec cluster, const NcclMeasurement& m);

/// @brief nccl-notes.md row 11: reduce-scatter bus bandwidth on an H100 cluster at 4 .. 128 nodes
/// (approximate, message size not stated).
struct NcclScaling {
  std::vector<int> nodes;
  std::vector<double> busbw_GBps;
};
NcclScaling read_rs_node_scaling(const std::string& calibration_dir);

/// @brief nccl-notes.md row 3: what a 400 Gb/s NDR NIC reaches per NIC in NCCL (46-48 GB/s).
struct NicRate {
  double low_GBps = 0, high_GBps = 0;
};
NicRate read_nic_rate(const std::string& calibration_dir);

}  // namespace validate
