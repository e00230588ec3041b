// defines: validate::FitParameter, Fit, grid_least_squares (a small least-squares fit of cluster-file
//          constants over measured rows), fit_constants (every fit the cluster files' fitted
//          constants come from), LeaveGroupOut, leave_group_out (fit on one group, predict another)
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace validate {

/// @brief One constant a fit sets: its cluster-file key, the value the file holds and the grid searched.
struct FitParameter {
  std::string key;        ///< "network.nic_efficiency"
  double file_value = 0;  ///< what configs/clusters/<cluster>.yaml holds
  double lo = 0, hi = 0, step = 0;
  double fitted = 0;      ///< the least-squares optimum on the grid
};

/// @brief A fit of some cluster-file constants over published rows, by least squares on the log of
/// predicted / measured (relative errors weigh the same at every size).
struct Fit {
  std::string name;     ///< what it calibrates ("collectives across nodes")
  std::string cluster;  ///< the cluster file whose constants it sets
  std::string inputs;   ///< the fit inputs: which file, which rows
  std::vector<FitParameter> params;
  int rows = 0;
  double rms_log_error = 0;  ///< at the fitted values
};

/// @brief (predicted, measured) for every row, at the given parameter values.
using RowsAt = std::function<std::vector<std::pair<double, double>>(const std::vector<double>& values)>;

/// @brief Exhaustive grid search (every combination of every parameter's grid) for the values with
/// the smallest sum of squared log errors; ties keep the first found (lowest grid values). Fills
/// `fit.params[i].fitted`, `fit.rows` and `fit.rms_log_error`.
void grid_least_squares(Fit& fit, const RowsAt& rows_at);

/// @brief Coordinate descent on the same grids: each parameter in turn swept over its grid with the
/// others held, from the file values, `rounds` times (for fits whose rows are simulated steps, where
/// the full grid would cost minutes). Finds the grid optimum when the parameters act nearly
/// independently; docs/accuracy.md names which fits use it.
void coordinate_least_squares(Fit& fit, const RowsAt& rows_at, int rounds = 2);

/// @brief Root mean square of log(predicted / measured) over the rows, as a relative error.
double rms_log_error(const std::vector<std::pair<double, double>>& rows);

/// @brief Every fit behind a fitted constant of the embedded cluster files, recomputed from the
/// calibration files: the file values must equal the fitted ones (tests/fidelity checks it).
std::vector<Fit> fit_constants(const std::string& calibration_dir);

/// @brief Fit on one group of rows, predict another: how the model does where it was not fitted.
struct LeaveGroupOut {
  std::string fitted_on;   ///< the group the constants were refitted to
  std::string predicts;    ///< the group scored
  std::string constants;   ///< which constants, at which refitted values
  int rows_fitted = 0, rows_predicted = 0;
  double in_sample_error = 0;      ///< mean |relative error| on the fitted group
  double out_of_sample_error = 0;  ///< mean |relative error| on the predicted group
  double out_of_sample_worst = 0;  ///< largest |relative error| on the predicted group
  std::vector<double> out_of_sample_errors;  ///< step-time rows: each predicted row's relative error (prediction ranges)
};
std::vector<LeaveGroupOut> leave_group_out(const std::string& calibration_dir);

}  // namespace validate
