// defines: validate::RowRole, AccuracyRow, AccuracySection, AccuracyReport, evaluate_accuracy (every
//          row of the calibration set predicted and compared, fitted rows kept apart from predicted
//          ones), accuracy_markdown (docs/accuracy.md)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sim/prediction_range.hpp"
#include "validate/fit.hpp"

namespace validate {

/// @brief What a measured row is to the model.
enum class RowRole : std::uint8_t {
  predicted,  ///< no constant was fitted to it: an out-of-sample prediction
  fitted,     ///< a fit input of some constant (in sample); its error says how well the fit holds
  listed,     ///< shown with the reason it is not predicted (the model lacks what it needs)
};

/// @brief One measured row and its prediction.
struct AccuracyRow {
  std::string label;     ///< what was measured (system, shape, plan)
  double measured = 0;
  double predicted = 0;
  std::string unit;
  std::string note;      ///< chosen algorithm, or why the row is listed only
  RowRole role = RowRole::predicted;
  bool in_bar = true;    ///< counts towards the section's bar (listed rows never do)
  /// A speedup row (unit "x") whose bar is its direction only: predicted and measured on the same
  /// side of 1 (the overlap wins, or loses, as measured). Such a row has in_bar false: its error
  /// stays out of the section's error figures.
  bool direction_in_bar = false;
  std::string fit_of;    ///< fitted rows: the constant(s) fitted to it
  double error() const { return measured != 0 ? (predicted - measured) / measured : 0.0; }  ///< relative
  bool scored() const { return role != RowRole::listed && in_bar; }
  /// Whether the prediction has the measured direction: both above 1 or both at most 1.
  bool direction_right() const { return (predicted > 1) == (measured > 1); }
};

/// @brief A family of rows with its bar.
struct AccuracySection {
  std::string title;
  std::string source;    ///< calibration file
  std::string bar;       ///< the bar in words (empty: no bar, the rows are informative)
  std::vector<AccuracyRow> rows;
  bool absolute = false; ///< error in points (shares, speedups), not relative
  double bar_limit = 0;  ///< |error| each row in the bar must stay within (0: see `mean_bar`)
  double mean_bar = 0;   ///< or: mean |error| over the rows in the bar must stay within this

  double abs_error(const AccuracyRow& r) const;
  /// Mean |error| over rows of `role` (relative, or absolute when `absolute`); bar_only: rows in the bar.
  double mean_abs_error(RowRole role, bool bar_only = false) const;
  const AccuracyRow* worst(RowRole role, bool bar_only = false) const;
  int count(RowRole role, bool bar_only = false) const;
  /// Whether every row in the bar (fitted and predicted) meets it, and every direction_in_bar row
  /// has the measured direction.
  bool bar_met() const;
};

struct AccuracyReport {
  AccuracySection nccl;          ///< one node: Azure NVLS curve, NVIDIA's ring figures
  AccuracySection nccl_ring;     ///< one node: ring all-reduce / all-gather / reduce-scatter curves [TOG]
  AccuracySection nccl_multi;    ///< 4 nodes: all-reduce / all-gather curves [VP]
  AccuracySection nccl_scaling;  ///< reduce-scatter from 4 to 128 nodes (approximate)
  AccuracySection gemm;
  AccuracySection interference;  ///< kernel-level rows of interference-nvidia.md and the aggregate
  AccuracySection tp_overlap;    ///< FLUX's fused all-gather + GEMM and GEMM + reduce-scatter, with and without overlap
  AccuracySection async_tp;      ///< torchtitan's Llama 3 runs with vanilla and async tensor parallelism (FSDP + TP, end to end)
  AccuracySection domino;
  AccuracySection tp_share;
  AccuracySection tp_hidden;     ///< share of TP communication Domino hides (nanotron, profiled)
  AccuracySection a100;
  AccuracySection a100_pp;       ///< the A100 rows with pp > 1 (pipeline parallelism, 1F1B; predicted)
  AccuracySection bloom;         ///< BLOOM-176B topology sweeps (listed until recompute / ZeRO-1 land)
  AccuracySection pipeline_other;///< other pipeline measurements: 1F1B vs interleaved, zero-bubble (listed)
  AccuracySection megatron_core; ///< Megatron-Core + TransformerEngine throughput (listed until the distributed optimizer / ZeRO lands)
  AccuracySection tesseract;     ///< Tesseract's 2.5D over 2D efficiency ratio (issue 15; the paper's machine assumed)
  std::vector<Fit> fits;
  std::vector<LeaveGroupOut> leave_group_out;
  std::vector<sim::StepErrorBand> step_error_bands;  ///< one node, across nodes: configs/accuracy/step-error-bands.yaml
  int domino_micro_batch = 0;
  double tp_share_1node_comm_ms = 0, tp_share_1node_mfu = 0;  ///< the one-node share row's TP communication and MFU (notes)

  std::vector<const AccuracySection*> sections() const {
    return {&nccl, &nccl_ring, &nccl_multi, &nccl_scaling, &gemm, &interference, &tp_overlap, &domino, &tp_share, &tp_hidden, &a100, &a100_pp, &bloom, &pipeline_other, &megatron_core, &async_tp, &tesseract};
  }
};

/// @brief Predicts every row of the calibration files under `calibration_dir` (the repository's data/calibration) with the
/// embedded clusters and the analytic cost model, recomputes every fit and the leave-group-out
/// refits. Throws ConfigError if a file is missing or malformed. `progress`: one line per section on stderr.
AccuracyReport evaluate_accuracy(const std::string& calibration_dir, bool progress = false);

/// @brief The spread of out-of-sample step-time errors behind the prediction ranges (docs/accuracy.md,
/// "Prediction ranges"): one node = the 10th to 90th percentile of the A100 step rows predicted by
/// constants refitted on the other GPU count, with the H100 one-node Megatron step (its error implied
/// by its TP share); across nodes = that band widened to the H100 2- and 4-node Megatron steps.
std::vector<sim::StepErrorBand> compute_step_error_bands(const AccuracyReport& r);

/// @brief docs/accuracy.md: summary of the bars (predicted rows apart from fitted ones), the fitted
/// constants with their fit inputs, the leave-group-out refits, then every row.
std::string accuracy_markdown(const AccuracyReport& r);

/// @brief The micro-batch assumed for the four Domino speedups and the TP-share figures.
inline constexpr int kDominoMicroBatch = 16;

}  // namespace validate
