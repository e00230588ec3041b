// defines: validate::AccuracyReport and its parts, evaluate_accuracy (every row of the calibration set
//          predicted and compared), accuracy_markdown (docs/accuracy.md)
#pragma once
#include <string>
#include <vector>

namespace validate {

/// @brief One measured row and its prediction.
struct AccuracyRow {
  std::string label;     ///< what was measured (system, shape, plan)
  double measured = 0;
  double predicted = 0;
  std::string unit;
  std::string note;      ///< chosen algorithm, or why the row is not scored
  bool scored = true;    ///< counts towards the bar
  double error() const { return measured != 0 ? (predicted - measured) / measured : 0.0; }  ///< relative
};

/// @brief A family of rows with its bar.
struct AccuracySection {
  std::string title;
  std::string source;    ///< calibration file
  std::string bar;       ///< the bar in words
  std::vector<AccuracyRow> rows;
  bool absolute = false; ///< error in points (shares, speedups), not relative
  double mean_abs_error() const;  ///< over scored rows (relative, or absolute when `absolute`)
  double max_abs_error() const;
  const AccuracyRow* worst() const;
};

struct AccuracyReport {
  AccuracySection nccl, gemm, domino, tp_share, a100;
  AccuracySection a100_pp;  ///< the A100 rows with pp > 1 (pipeline parallelism, predicted)
  int domino_micro_batch = 0;
  double tp_share_1node_comm_ms = 0, tp_share_1node_mfu = 0;  ///< the one-node share row's TP communication and MFU (notes)
};

/// @brief Predicts every row of the calibration files under `calibration_dir` (the repository's data/calibration) with the
/// embedded clusters and the analytic cost model. Throws ConfigError if a file is missing or
/// malformed. `progress`: one line per section on stderr.
AccuracyReport evaluate_accuracy(const std::string& calibration_dir, bool progress = false);

/// @brief docs/accuracy.md: summary of the bars, then every row with predicted, measured, error.
std::string accuracy_markdown(const AccuracyReport& r);

/// @brief The micro-batch assumed for the four Domino speedups and the TP-share figures.
inline constexpr int kDominoMicroBatch = 16;

}  // namespace validate
