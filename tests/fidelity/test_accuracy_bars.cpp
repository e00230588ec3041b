// The accuracy bars, checked against every row of data/calibration/ (the same evaluation
// `slicetune accuracy` writes to docs/accuracy.md). A bar holds for every row in it, fitted or
// predicted; which rows were fit inputs is part of the report, not of the bar.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "tests/fidelity/report.hpp"

using test::report;
using validate::RowRole;

TEST_CASE("all-reduce busbw one node: within 10 % at >= 64 MB and 25 % below (nccl-allreduce-busbw.csv)") {
  const auto& s = report().nccl;
  REQUIRE(s.rows.size() == 16);
  for (const auto& r : s.rows) {
    CAPTURE(r.label);
    CAPTURE(r.predicted);
    CAPTURE(r.measured);
    const bool large = r.label.find(" 1024 B") == std::string::npos && r.measured > 300;  // the >= 64 MB rows all measure > 300 GB/s
    CHECK(std::abs(r.error()) <= (large ? 0.10 : 0.25));
  }
  CHECK(s.bar_met());
}

TEST_CASE("ring all-reduce / all-gather / reduce-scatter on one DGX-H100 within 10 % at >= 64 MB (predicted: no constant fitted to them)") {
  const auto& s = report().nccl_ring;
  REQUIRE(s.rows.size() == 19);  // 7 all-reduce, 6 all-gather, 6 reduce-scatter rows of [TOG]
  int in_bar = 0;
  for (const auto& r : s.rows) {
    CHECK(r.role == RowRole::predicted);
    if (!r.in_bar) continue;
    ++in_bar;
    CAPTURE(r.label);
    CHECK(std::abs(r.error()) <= 0.10);
  }
  CHECK(in_bar == 10);  // all-reduce 64 MB .. 8 GB (4), all-gather and reduce-scatter 128 MB, 512 MB, 8 GB (3 + 3)
}

// The bar: the 4-node H100 all-reduce and all-gather curves within 15 % at >= 16 MB. One
// row does not meet it: the 256 MB all-reduce, which the source itself marks as a dip where NCCL
// switched algorithm or protocol (239.8 GB/s between 275 at 128 MB and 324 at 1 GB); the model's
// choice is smooth there. Every other row meets it, and that one stays within 20 %.
TEST_CASE("4-node H100 all-reduce and all-gather within 15 % at >= 16 MB, the source's marked dip within 20 %") {
  const auto& s = report().nccl_multi;
  int in_bar = 0, outside = 0;
  for (const auto& r : s.rows) {
    if (!r.in_bar) continue;
    ++in_bar;
    CAPTURE(r.label);
    CAPTURE(r.predicted);
    const bool dip = r.label.find("allreduce 268435456 B") != std::string::npos;
    CHECK(std::abs(r.error()) <= (dip ? 0.20 : 0.15));
    outside += std::abs(r.error()) > 0.15;
  }
  CHECK(in_bar == 11);  // all-reduce 16 MB .. 8 GB (6 rows), all-gather 16 MB .. 8 GB (5 rows)
  CHECK(outside <= 1);
}

TEST_CASE("GEMM TFLOP/s within 10 % for square shapes >= 2048 (gemm-h100.csv)") {
  int in_bar = 0;
  for (const auto& r : report().gemm.rows) {
    if (!r.scored()) continue;
    ++in_bar;
    CAPTURE(r.label);
    CAPTURE(r.predicted);
    CHECK(std::abs(r.error()) <= 0.10);
  }
  CHECK(in_bar == 8);  // bf16 2048..10240 (4) and fp8 2048..16384 (4)
}

TEST_CASE("FLUX README rows (8x A800 / H800, TP 8, M = 4096) within 15 % with and without overlap (issue 14)") {
  const auto& s = report().tp_overlap;
  int in_bar = 0;
  for (const auto& r : s.rows) {
    if (!r.in_bar) continue;
    ++in_bar;
    CAPTURE(r.label);
    CHECK(r.label.find("FLUX-RM") != std::string::npos);
    CHECK(std::abs(r.error()) <= 0.15);
    // the A800 rows carry the fitted A800 GEMM speed (in sample), the H800 GEMM + reduce-scatter's
    // fused row is the Hopper pull rate's one fit input; the other H800 rows are out of sample
    const bool a800 = r.label.find("A800") != std::string::npos;
    const bool pull_fit = r.label.find("H800 GEMM+RS") != std::string::npos && r.label.find("fused") != std::string::npos;
    CHECK((r.role == RowRole::fitted) == (a800 || pull_fit));
    if (pull_fit) CHECK(r.fit_of == "gpu.fused_rs_pull_gb_per_s (dgx-h100)");
  }
  CHECK(in_bar == 8);  // 2 GPUs x (all-gather + GEMM, GEMM + reduce-scatter) x (serial, fused)
  CHECK(s.bar_met());
}

// Issue 14's second half: where fusion loses on bytedance/flux#90's 8x H100 GEMM + reduce-scatter
// (torch / flux 0.857, 0.818, 0.798 at M = 4096, 16384, 32768), the model has it lose. These rows
// are held out: the pull rate is fitted to the README's H800 row alone.
TEST_CASE("flux#90's H100 GEMM + reduce-scatter: fusion predicted to lose at all three M, as measured (held out, in the bar by direction)") {
  const auto& s = report().tp_overlap;
  int losing = 0;
  for (const auto& r : s.rows) {
    if (r.unit != "x" || r.label.find("FLUX-90") == std::string::npos || r.label.find("GEMM+RS") == std::string::npos) continue;
    ++losing;
    CAPTURE(r.label);
    CAPTURE(r.predicted);
    CHECK(r.role == RowRole::predicted);
    CHECK(r.measured < 1);
    CHECK(r.direction_in_bar);
    CHECK(r.direction_right());
    CHECK(r.predicted < 1);
    CHECK(r.note.find("direction right") == 0);  // computed from the two numbers, not written by hand
  }
  CHECK(losing == 3);
  for (const auto& r : s.rows)
    if (r.label.find("FLUX-90") != std::string::npos && r.label.find("GEMM+RS") != std::string::npos && r.unit == "ms" &&
        r.label.find("fused") != std::string::npos) {
      CAPTURE(r.label);
      CHECK(r.role == RowRole::predicted);
      CHECK(std::abs(r.error()) <= 0.15);  // the fused times themselves, held out
    }
}

// flux#90's all-gather + GEMM rows (shape inferred from the tuning configs: K 8192, N 57344)
// and flux#100's tuned GEMM + reduce-scatter are predicted and shown, outside the bar.
TEST_CASE("flux#90's H100 all-gather + GEMM and flux#100's tuned GEMM + RS: predicted, not in the bar") {
  const auto& s = report().tp_overlap;
  int ag = 0, tuned = 0;
  for (const auto& r : s.rows) {
    if (r.label.find("FLUX-90") != std::string::npos && r.label.find("AG+GEMM") != std::string::npos && r.unit == "x") {
      ++ag;
      CAPTURE(r.label);
      CHECK(r.role == RowRole::predicted);
      CHECK_FALSE(r.direction_in_bar);  // fusion wins here (1.17-1.29x): the bar is about where it loses
      CHECK_FALSE(r.in_bar);
    }
    if (r.label.find("FLUX-100") != std::string::npos) {
      ++tuned;
      CHECK(r.role == RowRole::predicted);
      CHECK_FALSE(r.in_bar);
    }
  }
  CHECK(ag == 5);     // M = 1024, 4096, 8192, 16384, 32768
  // the inferred shape (K 8192, N 57344) has to fit what was measured without fusion: NCCL then
  // cuBLAS within 10 % at every M (+7.5, -2.6, -2.8, -4.2, -7.0 % when written)
  int serial = 0;
  for (const auto& r : s.rows)
    if (r.label.find("FLUX-90") != std::string::npos && r.label.find("AG+GEMM") != std::string::npos && r.label.find("serial") != std::string::npos) {
      ++serial;
      CAPTURE(r.label);
      CHECK(std::abs(r.error()) <= 0.10);
    }
  CHECK(serial == 5);
  CHECK(tuned == 1);  // the fused time only: the tuning log has no torch baseline
  for (const auto& r : s.rows) CHECK(r.role != RowRole::listed);  // every FLUX row now has a shape
}

TEST_CASE("bytedance/flux#90's unfused H100 GEMM + reduce-scatter (NCCL after cuBLAS) within 5 %: predicted, not in a bar") {
  const auto& s = report().tp_overlap;
  int rows = 0;
  for (const auto& r : s.rows) {
    const bool rs_serial = r.label.find("FLUX-90") != std::string::npos && r.label.find("GEMM+RS") != std::string::npos &&
                           r.label.find("serial") != std::string::npos;
    if (!rs_serial) continue;
    ++rows;
    CAPTURE(r.label);
    CHECK(r.role == RowRole::predicted);
    CHECK(std::abs(r.error()) <= 0.05);  // -1.6, -0.5, -1.5 % when written
  }
  CHECK(rows == 3);  // M = 4096, 16384, 32768
}

TEST_CASE("torchtitan's vanilla-TP Llama 3 runs (FSDP x TP 8 on 64 / 256 H100) predicted within 20 % (no bar: informative rows)") {
  const auto& s = report().async_tp;
  int vanilla = 0;
  for (const auto& r : s.rows) {
    if (r.label.find("vanilla TP") == std::string::npos) continue;
    ++vanilla;
    CAPTURE(r.label);
    CHECK(r.role == RowRole::predicted);
    CHECK(std::abs(r.error()) <= 0.20);  // -9.1 % (70B, 256 GPUs) and +13.0 % (8B, 64 GPUs) when written
  }
  CHECK(vanilla == 2);  // the two bf16 rows; the float8 and approximate rows are listed
  for (const auto& r : s.rows)
    if (r.label.find("float8") != std::string::npos) CHECK(r.role == RowRole::listed);
}

TEST_CASE("Domino speedup over Megatron on 8x H100 within +-0.05 of the four published figures (micro-batch 16)") {
  const auto& s = report().domino;
  int in_bar = 0;
  for (const auto& r : s.rows) {
    if (!r.scored()) continue;
    ++in_bar;
    CAPTURE(r.label);
    CAPTURE(r.predicted);
    CHECK(r.unit == "x");
    CHECK(std::abs(r.predicted - r.measured) <= 0.05);
  }
  CHECK(in_bar == 4);  // 6.7B and 13B at seq 512 and 1024 (domino-h100.md)
}

// The released example's iteration time fixed host.kernel_efficiency.cuda_graphs: the fit must keep
// it inside the published 521-529 ms (domino-h100.md), or the speedups and shares rest on a stale fit.
TEST_CASE("Domino example iteration time (fit input) stays within the published 521-529 ms") {
  const auto& rows = report().domino.rows;
  const auto it = std::find_if(rows.begin(), rows.end(), [](const auto& r) { return r.unit == "ms"; });
  REQUIRE(it != rows.end());
  CHECK(it->role == RowRole::fitted);
  CHECK(it->measured == doctest::Approx(525.0));
  CHECK(it->predicted >= 521.0);
  CHECK(it->predicted <= 529.0);
}

// Published: 16 / 29 / 43 % at 1 / 2 / 4 nodes (domino-h100.md). Megatron on the eager stack; no
// constant is fitted to the shares. The 4-node row prices its 168 MB all-reduces (TP = 32) with the
// network constants fitted to the 4-node nccl-tests curves of another DGX-H100 cluster (VP: about
// 260-280 GB/s busbw at this size) and lands about 8 points high: docs/accuracy.md shows that bar
// unmet. Checked here: 1 and 2 nodes within the bar, the order, and 4 nodes not drifting further.
TEST_CASE("GPT-3 13B Megatron TP-communication share within +-5 points at 1 and 2 nodes; grows with nodes") {
  const auto& s = report().tp_share;
  REQUIRE(s.rows.size() == 3);
  for (int i = 0; i < 2; ++i) {
    CAPTURE(s.rows[i].label);
    CAPTURE(s.rows[i].predicted);
    CHECK(std::abs(s.rows[i].predicted - s.rows[i].measured) <= 5.0);
  }
  CHECK(s.rows[0].predicted < s.rows[1].predicted);  // grows as the TP group crosses nodes
  CHECK(s.rows[1].predicted < s.rows[2].predicted);
  CHECK(std::abs(s.rows[2].predicted - s.rows[2].measured) <= 10.0);
}

TEST_CASE("A100 one-node Megatron iteration times (pp = 1): mean absolute error <= 8 %") {
  const auto& s = report().a100;
  CHECK(s.count(RowRole::fitted) == 400);  // every pp = 1 row of a100-megatron-1node-2and4gpu.csv
  CAPTURE(s.worst(RowRole::fitted)->label);
  CHECK(s.mean_abs_error(RowRole::fitted) <= 0.08);
  CHECK(s.bar_met());
}

TEST_CASE("the report keeps fitted rows apart from predicted rows and lists what it cannot predict") {
  const auto& r = report();
  // every Megatron-Core row is listed with what it waits for (pipeline parallelism, ZeRO, experts)
  REQUIRE_FALSE(r.megatron_core.rows.empty());
  for (const auto& row : r.megatron_core.rows) {
    CHECK(row.role == RowRole::listed);
    CHECK(row.note.rfind("needs ", 0) == 0);
  }
  // each fitted row names the constant it was a fit input of
  for (const auto* s : r.sections())
    for (const auto& row : s->rows)
      if (row.role == RowRole::fitted) CHECK_FALSE(row.fit_of.empty());
  const std::string md = validate::accuracy_markdown(r);
  CHECK(md.find("## Summary: predicted rows (out of sample)") != std::string::npos);
  CHECK(md.find("## Summary: fitted rows (in sample)") != std::string::npos);
  CHECK(md.find("## Leave-group-out") != std::string::npos);
}
