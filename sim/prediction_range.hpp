// defines: sim::StepErrorBand, step_error_bands (configs/accuracy/step-error-bands.yaml: the
//          out-of-sample error spread of predicted step times, written by slicetune accuracy),
//          PredictionRange, prediction_range (the range a true step time lies in, given a
//          prediction), overlaps (whether two plans are within each other's range)
#pragma once
#include <string>
#include <vector>

#include "common/units.hpp"
#include "hardware/cluster.hpp"
#include "sim/plan.hpp"

namespace sim {

/// @brief Relative errors (predicted - measured) / measured of step times the model predicted
/// without being fitted to them, for one kind of plan: the band's `low` and `high` ends.
struct StepErrorBand {
  std::string kind;   ///< "one node" | "across nodes"
  double low = 0;     ///< most negative error kept (predictions too fast)
  double high = 0;    ///< most positive error kept (too slow)
  int rows = 0;       ///< out-of-sample rows behind it
  std::string basis;  ///< which rows and which statistic
};

/// @brief The bands for "one node" and "across nodes", read once from the embedded
/// configs/accuracy/step-error-bands.yaml (throws common::ConfigError if it is malformed).
const std::vector<StepErrorBand>& step_error_bands();
/// @brief Parses a bands file (what `slicetune accuracy --bands` writes).
std::vector<StepErrorBand> parse_step_error_bands(const std::string& yaml_text, const std::string& source);
/// @brief The file `slicetune accuracy --bands` writes for these bands.
std::string step_error_bands_yaml(const std::vector<StepErrorBand>& bands);

/// @brief Where the true step time lies given the predicted one: predicted / (1 + high) ..
/// predicted / (1 + low), with the band of the plan's kind (across nodes when its GPUs span more
/// than one node of the cluster).
struct PredictionRange {
  common::Duration low, high;
  const StepErrorBand* band = nullptr;
};
PredictionRange prediction_range(const Plan& plan, const hardware::ClusterSpec& cluster, common::Duration predicted);

/// @brief Whether two predictions are within each other's range (indistinguishable within the
/// model's error): the faster one's range reaches the slower one's.
bool overlaps(const PredictionRange& a, const PredictionRange& b);

}  // namespace sim
