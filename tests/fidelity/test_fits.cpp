// Every fitted cluster-file constant is the least-squares optimum of its fit inputs: the fits are
// recomputed from data/calibration here (as `slicetune accuracy --fit` prints them), so a constant
// tuned by hand, or left stale when the model moves, fails.
#include <doctest/doctest.h>

#include <cmath>

#include "tests/fidelity/report.hpp"
#include "validate/fit.hpp"

TEST_CASE("grid least squares: the optimum of a closed form") {
  // predicted = 2 x value for two rows measured 3 and 3: log error zero at value 1.5
  validate::Fit f{.name = "toy"};
  f.params = {{.key = "k", .lo = 1.0, .hi = 2.0, .step = 0.05}};
  validate::grid_least_squares(f, [](const std::vector<double>& v) {
    return std::vector<std::pair<double, double>>{{2 * v[0], 3.0}, {2 * v[0], 3.0}};
  });
  CHECK(f.params[0].fitted == doctest::Approx(1.5));
  CHECK(f.rows == 2);
  CHECK(f.rms_log_error == doctest::Approx(0.0).epsilon(1e-9));
}

TEST_CASE("the cluster files hold the fitted values (within half a grid step)") {
  const auto& fits = test::report().fits;  // validate::fit_constants, as evaluate_accuracy recomputes them
  REQUIRE(fits.size() >= 5);
  for (const auto& f : fits) {
    CHECK_FALSE(f.inputs.empty());
    CHECK(f.rows > 0);
    for (const auto& p : f.params) {
      CAPTURE(p.key);
      CAPTURE(f.cluster);
      CAPTURE(p.fitted);
      CHECK(std::abs(p.file_value - p.fitted) <= p.step / 2 + 1e-9);
    }
  }
}

TEST_CASE("leave-group-out: each refit predicts rows it was not fitted to") {
  const auto& l = test::report().leave_group_out;
  REQUIRE(l.size() >= 3);
  for (const auto& g : l) {
    CAPTURE(g.fitted_on);
    CHECK(g.rows_predicted > 0);
    CHECK(g.out_of_sample_error >= 0);
    CHECK(g.fitted_on != g.predicts);
  }
}

TEST_CASE("configs/accuracy/step-error-bands.yaml holds the bands the calibration set gives (slicetune accuracy --bands)") {
  const auto& computed = test::report().step_error_bands;
  const auto& embedded = sim::step_error_bands();
  REQUIRE(computed.size() == embedded.size());
  for (std::size_t i = 0; i < computed.size(); ++i) {
    CAPTURE(computed[i].kind);
    CHECK(embedded[i].kind == computed[i].kind);
    CHECK(embedded[i].low == doctest::Approx(computed[i].low).epsilon(1e-3));
    CHECK(embedded[i].high == doctest::Approx(computed[i].high).epsilon(1e-3));
    CHECK(embedded[i].rows == computed[i].rows);
  }
  // the one-node band rests on the A100 rows predicted with constants refitted on the other GPU count (400) and the H100 one-node step
  CHECK(computed[0].rows == 401);
}
