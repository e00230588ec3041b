// The accuracy bars of issue 3, checked against every row of data/calibration/ (the same
// evaluation `slicetune accuracy` writes to docs/accuracy.md).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "validate/accuracy.hpp"

namespace {
const validate::AccuracyReport& report() {
  static const validate::AccuracyReport r = validate::evaluate_accuracy(SLICETUNE_CALIBRATION_DIR);
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
  int scored = 0;
  for (const auto& r : s.rows) {
    if (!r.scored) continue;
    ++scored;
    CAPTURE(r.label);
    CAPTURE(r.predicted);
    CHECK(r.unit == "x");
    CHECK(std::abs(r.predicted - r.measured) <= 0.05);
  }
  CHECK(scored == 4);  // 6.7B and 13B at seq 512 and 1024 (domino-h100.md)
}

// The released example's iteration time fixed host.kernel_efficiency.cuda_graphs: the fit must keep
// it inside the published 521-529 ms (domino-h100.md), or the speedups and shares rest on a stale fit.
TEST_CASE("Domino example iteration time (fit input) stays within the published 521-529 ms") {
  const auto& rows = report().domino.rows;
  const auto it = std::find_if(rows.begin(), rows.end(), [](const auto& r) { return r.unit == "ms"; });
  REQUIRE(it != rows.end());
  CHECK_FALSE(it->scored);
  CHECK(it->measured == doctest::Approx(525.0));
  CHECK(it->predicted >= 521.0);
  CHECK(it->predicted <= 529.0);
}

// Published: 16 / 29 / 43 % at 1 / 2 / 4 nodes (domino-h100.md). Megatron on the eager stack; the
// share follows from host.kernel_efficiency (fitted to the speedups' mean and the example's time,
// not to the shares) and NCCL's price of the TP AllReduces.
TEST_CASE("GPT-3 13B Megatron TP-communication share within +-5 points at 1, 2 and 4 nodes") {
  const auto& s = report().tp_share;
  REQUIRE(s.rows.size() == 3);
  for (const auto& r : s.rows) {
    CAPTURE(r.label);
    CAPTURE(r.predicted);
    CHECK(std::abs(r.predicted - r.measured) <= 5.0);
  }
  CHECK(s.rows[0].predicted < s.rows[1].predicted);  // grows as the TP group crosses nodes
  CHECK(s.rows[1].predicted < s.rows[2].predicted);
}

TEST_CASE("A100 one-node Megatron iteration times (pp = 1): mean absolute error <= 8 %") {
  const auto& s = report().a100;
  int scored = 0;
  for (const auto& r : s.rows) scored += r.scored;
  CHECK(scored == 400);  // every pp = 1 row of a100-megatron-1node-2and4gpu.csv
  CAPTURE(s.worst()->label);
  CHECK(s.mean_abs_error() <= 0.08);
}
