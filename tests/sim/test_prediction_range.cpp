// Prediction ranges (sim/prediction_range): closed forms over the bands file.
#include <doctest/doctest.h>

#include "common/config_reader.hpp"
#include "hardware/cluster.hpp"
#include "sim/prediction_range.hpp"

namespace {
const char* kBands = R"(one_node: {low: -0.10, high: 0.25, rows: 3, basis: "test"}
across_nodes: {low: -0.20, high: 0.25, rows: 4, basis: "test"}
)";
}  // namespace

TEST_CASE("a range is predicted / (1 + high) .. predicted / (1 + low)") {
  // 100 ms predicted, errors -10 % .. +25 %: the true time is 100 / 1.25 = 80 .. 100 / 0.9 = 111.1 ms
  const auto bands = sim::parse_step_error_bands(kBands, "b.yaml");
  REQUIRE(bands.size() == 2);
  CHECK(bands[0].kind == "one node");
  CHECK(bands[1].low == doctest::Approx(-0.20));
  // the embedded file has both bands too, each with a basis
  const auto& embedded = sim::step_error_bands();
  REQUIRE(embedded.size() == 2);
  for (const auto& b : embedded) {
    CHECK(b.low <= 0);
    CHECK(b.high >= 0);
    CHECK_FALSE(b.basis.empty());
  }
  // round trip through the writer
  const auto again = sim::parse_step_error_bands(sim::step_error_bands_yaml(bands), "w.yaml");
  CHECK(again[1].low == doctest::Approx(-0.20));
  CHECK(again[0].rows == 3);
}

TEST_CASE("the band follows the plan's kind: across nodes when its GPUs span more than one node") {
  auto c = hardware::load_cluster("dgx-h100");
  sim::Plan one;
  one.tp = 8;
  sim::Plan two = one;
  two.dp = 2;
  const auto d = common::Duration::from_us(100000);
  CHECK(sim::prediction_range(one, c, d).band->kind == "one node");
  CHECK(sim::prediction_range(two, c, d).band->kind == "across nodes");
  const auto r = sim::prediction_range(one, c, d);
  CHECK(r.low.ms() == doctest::Approx(100.0 / (1 + r.band->high)).epsilon(1e-6));
  CHECK(r.high.ms() == doctest::Approx(100.0 / (1 + r.band->low)).epsilon(1e-6));
}

TEST_CASE("two plans are indistinguishable when their ranges overlap") {
  sim::PredictionRange a{common::Duration::from_us(80), common::Duration::from_us(111)}, b{common::Duration::from_us(105), common::Duration::from_us(140)},
      c{common::Duration::from_us(120), common::Duration::from_us(150)};
  CHECK(sim::overlaps(a, b));
  CHECK(sim::overlaps(b, a));
  CHECK_FALSE(sim::overlaps(a, c));
}

TEST_CASE("a malformed bands file names the key") {
  CHECK_THROWS_WITH_AS(sim::parse_step_error_bands("one_node: {low: 0.1, high: 0.2, rows: 1, basis: x}\n", "b.yaml"),
                       "b.yaml: one_node.low: expected a relative error in (-0.9, 0]", common::ConfigError);
}
