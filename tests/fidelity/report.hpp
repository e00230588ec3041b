// The accuracy report over data/calibration, evaluated once for all the fidelity tests (it simulates
// every calibration row and recomputes every fit: about ten seconds).
#pragma once
#include "validate/accuracy.hpp"

namespace test {
inline const validate::AccuracyReport& report() {
  static const validate::AccuracyReport r = validate::evaluate_accuracy(SLICETUNE_CALIBRATION_DIR);
  return r;
}
}  // namespace test
