// The fused tensor-parallel GEMM + collective model (hardware/tp_overlap) against closed forms.
// With interference.hbm_amplification = 0 the transfers take no HBM from the GEMM, so both run at
// their solo speeds and the fused kernels' timelines have closed forms in their limits.
#include <doctest/doctest.h>

#include "common/config_reader.hpp"
#include "hardware/collective_model.hpp"
#include "hardware/gemm_model.hpp"
#include "hardware/interference.hpp"
#include "hardware/tp_overlap.hpp"

using namespace hardware;

namespace {

ClusterSpec no_hbm_sharing() {
  ClusterSpec c = load_cluster("dgx-h100");
  c.interference.hbm_amplification = 0;
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

double reduce_seconds(const ClusterSpec& c, const TpGemm& s) {
  const double seg_bytes = static_cast<double>(s.m / s.tp) * s.n * 2;  // fp16
  return c.gpu.kernel_latency.s() + (s.tp + 1) * seg_bytes / (c.gpu.hbm_bytes_per_s * c.gpu.memory_efficiency);
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

TEST_CASE("GEMM + reduce-scatter, GEMM-bound: stores keep pace, the site is the GEMM then the reduce kernel") {
  const ClusterSpec c = no_hbm_sharing();
  const TpGemm s{.kind = TpGemmKind::gemm_reduce_scatter, .m = 4096, .k = 8 * 8192, .n = 8192, .tp = 8};
  const double G = estimate_gemm(c.gpu, s.local_gemm()).seconds;
  const double store = static_cast<double>(s.m / 8) * s.n * 2 / link_capacity(c, LinkClass::nvlink);
  REQUIRE(store <= G / 8);
  const auto t = tp_gemm_fused(c, s);
  CHECK(t.total_s == doctest::Approx(G + reduce_seconds(c, s)).epsilon(1e-9));
}

TEST_CASE("GEMM + reduce-scatter, store-bound: one segment, then seven stores back to back, then the reduce") {
  const ClusterSpec c = no_hbm_sharing();
  const TpGemm s{.kind = TpGemmKind::gemm_reduce_scatter, .m = 16384, .k = 8 * 128, .n = 8192, .tp = 8};
  const double g = estimate_gemm(c.gpu, s.local_gemm()).seconds / 8;
  const double store = static_cast<double>(s.m / 8) * s.n * 2 / link_capacity(c, LinkClass::nvlink);
  REQUIRE(store > g);
  const auto t = tp_gemm_fused(c, s);
  CHECK(t.total_s == doctest::Approx(g + 7 * store + reduce_seconds(c, s)).epsilon(1e-9));
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
