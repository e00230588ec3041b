#include "sim/prediction_range.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/config_reader.hpp"
#include "common/embedded_configs.hpp"
#include "common/checked.hpp"
#include "common/limits.hpp"

namespace sim {

std::vector<StepErrorBand> parse_step_error_bands(const std::string& text, const std::string& source) {
  common::ConfigReader r(common::parse_yaml(text, source), source);
  std::vector<StepErrorBand> out;
  for (const char* key : {"one_node", "across_nodes"}) {
    auto b = r.child(key);
    StepErrorBand band;
    band.kind = std::string(key) == "one_node" ? "one node" : "across nodes";
    band.low = b.number("low");
    band.high = b.number("high");
    if (!(band.low > -0.9 && band.low <= 0)) b.fail("low", "expected a relative error in (-0.9, 0]");
    if (!(band.high >= 0 && band.high < 10)) b.fail("high", "expected a relative error in [0, 10)");
    band.rows = b.int_in("rows", 1, 1 << 30);  // checked before narrowing
    band.basis = b.str("basis");
    b.finish();
    out.push_back(band);
  }
  r.finish();
  return out;
}

std::string step_error_bands_yaml(const std::vector<StepErrorBand>& bands) {
  std::string o =
      "# Out-of-sample relative errors (predicted - measured) / measured of predicted step times, by kind of plan.\n"
      "# Written by `slicetune accuracy --bands configs/accuracy/step-error-bands.yaml` from data/calibration\n"
      "# (docs/accuracy.md, \"Prediction ranges\"); simulate, tune and whatif print the range they give. Do not edit by hand.\n";
  for (const auto& b : bands)
    o += fmt::format("{}:\n  low: {:.4f}\n  high: {:.4f}\n  rows: {}\n  basis: \"{}\"\n", b.kind == "one node" ? "one_node" : "across_nodes", b.low,
                     b.high, b.rows, b.basis);
  return o;
}

const std::vector<StepErrorBand>& step_error_bands() {
  static const std::vector<StepErrorBand> bands = [] {
    const auto cfg = common::resolve_config("accuracy", "step-error-bands");
    return parse_step_error_bands(cfg.text, cfg.source);
  }();
  return bands;
}

PredictionRange prediction_range(const Plan& plan, const hardware::ClusterSpec& cluster, common::Duration predicted) {
  const auto& bands = step_error_bands();
  const bool across = plan.gpus() > cluster.node.gpus_per_node;
  PredictionRange r;
  r.band = &bands[across ? 1 : 0];
  const double p = static_cast<double>(predicted.ps);
  // the bands keep 1 + low in (0.1, 1]: the high end may be up to 10x the prediction, so it is
  // range-checked before the conversion to int64 picoseconds (past limits::kMaxDurationPs: an error)
  auto ps = [](double v) {
    if (!(v >= 0 && v <= common::limits::kMaxDurationPs)) common::duration_out_of_range(v);
    return common::Duration::from_ps(static_cast<std::int64_t>(v));
  };
  r.low = ps(p / (1.0 + r.band->high));
  r.high = ps(p / (1.0 + r.band->low));
  return r;
}

bool overlaps(const PredictionRange& a, const PredictionRange& b) { return a.low <= b.high && b.low <= a.high; }

}  // namespace sim
