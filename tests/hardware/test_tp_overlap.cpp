// The fused tensor-parallel GEMM + collective model (hardware/tp_overlap) against closed forms.
// With interference.hbm_amplification = 0 the transfers take no HBM from the GEMM, so both run at
// their solo speeds and the fused kernels' timelines have closed forms in their limits.
#include <doctest/doctest.h>

#include <functional>

#include "common/config_reader.hpp"
#include "common/embedded_configs.hpp"
#include "hardware/collective_model.hpp"
#include "hardware/gemm_model.hpp"
#include "hardware/interference.hpp"
#include "hardware/tp_overlap.hpp"

using namespace hardware;

namespace {

ClusterSpec no_hbm_sharing(const char* name = "dgx-h100") {
  ClusterSpec c = load_cluster(name);
  c.interference.hbm_amplification = 0;
  return c;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const common::ConfigError& e) {
    return e.what();
  }
  return "no error";
}

/// The H800 of FLUX's README: dgx-h100's GPU with 8 NVLink links, 200 GB/s each way (as
/// validate::flux_machine builds it).
ClusterSpec h800() {
  ClusterSpec c = load_cluster("dgx-h100");
  c.node.nvlink_links = 8;
  c.node.nvlink_bytes_per_s = 200e9;
  return c;
}

struct AgParts {
  double g, latency, transfer;  // one peer's GEMM rows; NCCL's latency; the copy engines' transfer
};
AgParts ag_parts(const ClusterSpec& c, const TpGemm& s) {
  const auto nccl = price_collective(c, s.collective());
  return {estimate_gemm(c.gpu, s.local_gemm()).seconds / s.tp, nccl.latency.s(),
          copy_engine_seconds(c.interference, 0, nccl.transfer.s())};
}

// the tail that sums the tp partial segments: reads `reads` segments, writes one, plus a kernel's latency
double reduce_seconds(const ClusterSpec& c, const TpGemm& s, int reads) {
  const double seg_bytes = static_cast<double>(s.m / s.tp) * s.n * 2;  // fp16
  return c.gpu.kernel_latency.s() + (reads + 1) * seg_bytes / (c.gpu.hbm_bytes_per_s * c.gpu.memory_efficiency);
}
double reduce_seconds(const ClusterSpec& c, const TpGemm& s) { return reduce_seconds(c, s, s.tp); }

// Hopper's in-kernel pull: every [M, N] fp16 output byte at gpu.fused_rs_pull_gb_per_s
double pull_seconds(const ClusterSpec& c, const TpGemm& s) {
  return static_cast<double>(s.m) * s.n * 2 / *c.gpu.fused_rs_pull_bytes_per_s;
}

}  // namespace

TEST_CASE("all-gather + GEMM, GEMM-bound: every shard lands before its rows are due, so the site takes the GEMM's time") {
  const ClusterSpec c = no_hbm_sharing();
  const TpGemm s{.kind = TpGemmKind::all_gather_gemm, .m = 4096, .k = 4096, .n = 8 * 32768, .tp = 8};
  const AgParts p = ag_parts(c, s);
  // shard j lands at latency + j x transfer / 7 and is due at j x g (the local rows first)
  REQUIRE(p.latency + p.transfer / 7 <= p.g);
  const auto t = tp_gemm_fused(c, s);
  CHECK(t.total_s == doctest::Approx(8 * p.g).epsilon(1e-9));
  CHECK(t.exposed_s() == doctest::Approx(0).epsilon(1e-9));
}

TEST_CASE("all-gather + GEMM, copy-bound: the last shard lands at latency + transfer, then its rows take one segment") {
  const ClusterSpec c = no_hbm_sharing();
  const TpGemm s{.kind = TpGemmKind::all_gather_gemm, .m = 16384, .k = 8192, .n = 8 * 128, .tp = 8};
  const AgParts p = ag_parts(c, s);
  REQUIRE(p.g <= p.transfer / 7);  // each shard's rows are done before the next shard lands
  const auto t = tp_gemm_fused(c, s);
  CHECK(t.total_s == doctest::Approx(p.latency + p.transfer + p.g).epsilon(1e-9));
  CHECK(t.comm_s == doctest::Approx(p.latency + p.transfer).epsilon(1e-9));
}

TEST_CASE("FLUX's GEMM + reduce-scatter by architecture: Ampere pushes from the epilogue, Hopper pulls in the kernel, Blackwell has none") {
  // bytedance/flux at 19831ca: gemm_v3_reduce_scatter.hpp builds the sm80 epilogue (stores to the
  // peers) and the sm90 kernel with its ReduceScatterDma warps, and static_asserts any other arch
  CHECK(fused_rs_transfer(load_cluster("dgx-a100").gpu) == RsTransfer::epilogue_push);
  CHECK(fused_rs_transfer(load_cluster("tesseract-a100").gpu) == RsTransfer::epilogue_push);
  CHECK(fused_rs_transfer(load_cluster("dgx-h100").gpu) == RsTransfer::kernel_pull);
  CHECK(fused_rs_transfer(load_cluster("dgx-h200").gpu) == RsTransfer::kernel_pull);
  CHECK_THROWS_AS(fused_rs_transfer(load_cluster("gb200-nvl72").gpu), std::invalid_argument);
  const TpGemm rs{.kind = TpGemmKind::gemm_reduce_scatter, .m = 4096, .k = 8 * 8192, .n = 8192, .tp = 8};
  CHECK_THROWS_AS(tp_gemm_fused(load_cluster("gb200-nvl72"), rs), std::invalid_argument);
  // the all-gather + GEMM's copy-engine path does not depend on the architecture
  CHECK(tp_gemm_fused(load_cluster("gb200-nvl72"), TpGemm{.kind = TpGemmKind::all_gather_gemm, .m = 4096, .k = 8192, .n = 8 * 8192}).total_s > 0);
}

TEST_CASE("GEMM + reduce-scatter on Ampere, GEMM-bound: stores keep pace, the site is the GEMM then the reduce kernel") {
  const ClusterSpec c = no_hbm_sharing("dgx-a100");
  const TpGemm s{.kind = TpGemmKind::gemm_reduce_scatter, .m = 4096, .k = 8 * 8192, .n = 8192, .tp = 8};
  const double G = estimate_gemm(c.gpu, s.local_gemm()).seconds;
  const double store = static_cast<double>(s.m / 8) * s.n * 2 / link_capacity(c, LinkClass::nvlink);
  REQUIRE(store <= G / 8);
  const auto t = tp_gemm_fused(c, s);
  CHECK(t.total_s == doctest::Approx(G + reduce_seconds(c, s)).epsilon(1e-9));
}

TEST_CASE("GEMM + reduce-scatter on Ampere, store-bound: one segment, then seven stores back to back, then the reduce") {
  const ClusterSpec c = no_hbm_sharing("dgx-a100");
  const TpGemm s{.kind = TpGemmKind::gemm_reduce_scatter, .m = 16384, .k = 8 * 128, .n = 8192, .tp = 8};
  const double g = estimate_gemm(c.gpu, s.local_gemm()).seconds / 8;
  const double store = static_cast<double>(s.m / 8) * s.n * 2 / link_capacity(c, LinkClass::nvlink);
  REQUIRE(store > g);
  const auto t = tp_gemm_fused(c, s);
  CHECK(t.total_s == doctest::Approx(g + 7 * store + reduce_seconds(c, s)).epsilon(1e-9));
}

TEST_CASE("GEMM + reduce-scatter on Hopper, pull-bound: the GEMM's first wave, then the whole pull, then the reduction") {
  // the pull starts when the first tiles are computed (one wave of the GEMM) and, slower than the
  // GEMM here, runs on to its own end: total = G / waves + pull + reduce. flux#90's shape (N 8192,
  // K 28672, M 4096): 67 MB pulled at dgx-h100's 118 GB/s (0.57 ms) against a 0.33 ms GEMM
  const ClusterSpec c = no_hbm_sharing();
  const TpGemm s{.kind = TpGemmKind::gemm_reduce_scatter, .m = 4096, .k = 28672, .n = 8192, .tp = 8};
  const auto est = estimate_gemm(c.gpu, s.local_gemm());
  REQUIRE(pull_seconds(c, s) > est.seconds);
  const auto t = tp_gemm_fused(c, s);
  CHECK(t.total_s == doctest::Approx(est.seconds / est.waves + pull_seconds(c, s) + reduce_seconds(c, s)).epsilon(1e-9));
  CHECK(t.comm_s == doctest::Approx(pull_seconds(c, s) + reduce_seconds(c, s)).epsilon(1e-9));
}

TEST_CASE("GEMM + reduce-scatter on Hopper, GEMM-bound: the pull keeps pace a wave behind, so it ends one wave's share after the GEMM") {
  // K/tp = 16384: a 1.5 ms GEMM against the same 0.57 ms pull; the last wave's tiles are pulled after the
  // GEMM: total = G + pull / waves + reduce
  const ClusterSpec c = no_hbm_sharing();
  const TpGemm s{.kind = TpGemmKind::gemm_reduce_scatter, .m = 4096, .k = 8 * 16384, .n = 8192, .tp = 8};
  const auto est = estimate_gemm(c.gpu, s.local_gemm());
  REQUIRE(pull_seconds(c, s) < est.seconds * (1 - 1 / est.waves));
  const auto t = tp_gemm_fused(c, s);
  CHECK(t.total_s == doctest::Approx(est.seconds + pull_seconds(c, s) / est.waves + reduce_seconds(c, s)).epsilon(1e-9));
}

TEST_CASE("Hopper's pull rate is the kernel's, not NVLink's: the H800 (8 links) and the H100 (18) take the same time") {
  // FLUX's README H800 GEMM+RS moves 94.5 GB/s (7/8 of 4096 x 12288 fp16 in 0.932 ms) and
  // flux#90's H100 rows 92.8-95.5 GB/s, with 2.25x the NVLink bandwidth
  const TpGemm s{.kind = TpGemmKind::gemm_reduce_scatter, .m = 4096, .k = 49152, .n = 12288, .tp = 8};
  CHECK(tp_gemm_fused(h800(), s).total_s == doctest::Approx(tp_gemm_fused(load_cluster("dgx-h100"), s).total_s).epsilon(1e-12));
  // NCCL's serial reduce-scatter does see the narrower port
  CHECK(tp_gemm_serial(h800(), s).comm_s > 1.5 * tp_gemm_serial(load_cluster("dgx-h100"), s).comm_s);
}

TEST_CASE("the reduction tail: after the kernel it reads tp segments, in the kernel (fuse_reduction) one") {
  // 19831ca ths_op/gemm_reduce_scatter.cc: local_reduction sums a [tp, M/tp, N] view; the in-kernel
  // form leaves one [M/tp, N] segment for the op to copy. The difference is (tp - 1) segments of HBM reads
  const ClusterSpec c = no_hbm_sharing();
  TpGemm s{.kind = TpGemmKind::gemm_reduce_scatter, .m = 4096, .k = 28672, .n = 8192, .tp = 8};
  const double after = tp_gemm_fused(c, s).total_s;
  s.reduction = RsReduction::in_kernel;
  const double in = tp_gemm_fused(c, s).total_s;
  CHECK(after - in == doctest::Approx(reduce_seconds(c, s, 8) - reduce_seconds(c, s, 1)).epsilon(1e-9));
  // Ampere's epilogue push is modelled with FLUX's default only; an all-gather has no reduction
  CHECK_THROWS_AS(tp_gemm_fused(load_cluster("dgx-a100"), s), std::invalid_argument);
  CHECK_THROWS_AS(tp_gemm_fused(c, TpGemm{.kind = TpGemmKind::all_gather_gemm, .m = 4096, .k = 8192, .n = 8192, .reduction = RsReduction::in_kernel}),
                  std::invalid_argument);
}

TEST_CASE("FLUX's README H800 GEMM+RS (the pull rate's one fit input) within 1 %, and flux#90's H100 rows where fusion loses predicted to lose") {
  // fit input: 8x H800, M 4096, K 49152, N 12288, flux 0.932 ms (tp-overlap-measured.csv FLUX-RM),
  // FLUX's first sm90 kernel (in-kernel reduction); the grid step of 1 GB/s leaves well under 1 %
  const TpGemm readme{.kind = TpGemmKind::gemm_reduce_scatter, .m = 4096, .k = 49152, .n = 12288, .tp = 8, .reduction = RsReduction::in_kernel};
  CHECK(1e3 * tp_gemm_fused(h800(), readme).total_s == doctest::Approx(0.932).epsilon(0.01));
  // held out: bytedance/flux#90, 8x H100, N 8192, K 28672, FLUX's default (reduction after the kernel):
  // torch / flux measured 0.857, 0.818, 0.798 at M = 4096, 16384, 32768
  const ClusterSpec h100 = load_cluster("dgx-h100");
  for (const std::int64_t m : {4096, 16384, 32768}) {
    CAPTURE(m);
    const TpGemm s{.kind = TpGemmKind::gemm_reduce_scatter, .m = m, .k = 28672, .n = 8192, .tp = 8};
    const double speedup = tp_gemm_serial(h100, s).total_s / tp_gemm_fused(h100, s).total_s;
    CHECK(speedup < 1.0);
    CHECK(speedup > 0.7);  // and no more than ~15 % below the measured 0.80-0.86
  }
}

TEST_CASE("gpu.fused_rs_pull_gb_per_s: a positive finite rate, for Hopper only; a Hopper GPU without it cannot price the fused GEMM + RS") {
  const std::string h100(common::resolve_config("clusters", "dgx-h100").text);
  auto with = [&](const std::string& value) {
    std::string t = h100;
    const auto at = t.find("  fused_rs_pull_gb_per_s: ");
    REQUIRE(at != std::string::npos);
    t.replace(at, t.find('\n', at) - at, value.empty() ? std::string() : "  fused_rs_pull_gb_per_s: " + value);
    return t;
  };
  CHECK(parse_cluster(with("250"), "c.yaml").gpu.fused_rs_pull_bytes_per_s == doctest::Approx(250e9));
  CHECK(error_of([&] { parse_cluster(with("0"), "c.yaml"); }) == "c.yaml: gpu.fused_rs_pull_gb_per_s: expected a positive number up to 10000000, got 0");
  CHECK(error_of([&] { parse_cluster(with(".nan"), "c.yaml"); }) == "c.yaml: gpu.fused_rs_pull_gb_per_s: expected a finite number, got '.nan'");
  std::string a100(common::resolve_config("clusters", "dgx-a100").text);
  a100.insert(a100.find("  kernel_latency_us:"), "  fused_rs_pull_gb_per_s: 100\n");
  CHECK(error_of([&] { parse_cluster(a100, "a.yaml"); }) ==
        "a.yaml: gpu.fused_rs_pull_gb_per_s: only arch hopper reads it (FLUX's sm90 in-kernel pull), not ampere");
  const ClusterSpec without = parse_cluster(with(""), "c.yaml");
  CHECK_FALSE(without.gpu.fused_rs_pull_bytes_per_s.has_value());
  const TpGemm rs{.kind = TpGemmKind::gemm_reduce_scatter, .m = 4096, .k = 28672, .n = 8192, .tp = 8};
  CHECK(error_of([&] { tp_gemm_fused(without, rs); }).find("c.yaml: gpu.fused_rs_pull_gb_per_s: missing") == 0);
  CHECK(tp_gemm_serial(without, rs).total_s > 0);  // NCCL after cuBLAS needs no pull rate
}

TEST_CASE("sharing HBM with the transfers only slows the fused site; on FLUX's README shape it still beats the serial one") {
  const ClusterSpec shared = load_cluster("dgx-h100");  // hbm_amplification 3 (NVIDIA/nccl#1428)
  const ClusterSpec apart = no_hbm_sharing();
  for (const auto kind : {TpGemmKind::all_gather_gemm, TpGemmKind::gemm_reduce_scatter}) {
    const TpGemm s = kind == TpGemmKind::all_gather_gemm ? TpGemm{.kind = kind, .m = 4096, .k = 12288, .n = 49152}
                                                         : TpGemm{.kind = kind, .m = 4096, .k = 49152, .n = 12288};
    const auto a = tp_gemm_fused(apart, s), b = tp_gemm_fused(shared, s);
    CHECK(b.total_s >= a.total_s);
    CHECK(b.total_s < tp_gemm_serial(shared, s).total_s);
    CHECK(b.total_s >= b.gemm_s);  // never faster than its own GEMM
  }
}

TEST_CASE("a site across nodes or with a shape tp does not divide is refused") {
  const ClusterSpec c = load_cluster("dgx-h100");
  CHECK_THROWS_AS(tp_gemm_fused(c, TpGemm{.m = 4096, .k = 4096, .n = 4096, .tp = 16}), std::invalid_argument);
  CHECK_THROWS_AS(tp_gemm_serial(c, TpGemm{.m = 4100, .k = 4096, .n = 4096, .tp = 8}), std::invalid_argument);
}
