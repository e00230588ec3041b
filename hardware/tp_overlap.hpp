// defines: hardware::TpGemmKind, TpGemm, TpGemmTiming, tp_gemm_serial, tp_gemm_fused (one
//          tensor-parallel GEMM and its collective on one node, run one after the other or fused
//          FLUX-style: the kernel-level rows of tp-overlap-measured.csv)
#pragma once
#include <cstdint>

#include "hardware/cluster.hpp"
#include "hardware/ops.hpp"

namespace hardware {

/// @brief The two sites of a sequence-parallel tensor-parallel layer.
enum class TpGemmKind : std::uint8_t {
  all_gather_gemm,      ///< column-parallel: all-gather the [M/tp, K] input shards, then [M, K] x [K, N/tp]
  gemm_reduce_scatter,  ///< row-parallel: [M, K/tp] x [K/tp, N], then reduce-scatter the [M, N] partial sums
};

/// @brief One site, named by the global shape as FLUX's benchmarks do (M tokens, K in, N out).
struct TpGemm {
  TpGemmKind kind = TpGemmKind::all_gather_gemm;
  std::int64_t m = 0, k = 0, n = 0;
  int tp = 8;
  common::DType dtype = common::DType::fp16;

  /// The GEMM each rank runs: AG [M, K] x [K, N/tp]; RS [M, K/tp] x [K/tp, N].
  GemmOp local_gemm() const;
  /// The collective (one node): AG of the [M, K] input, RS of the [M, N] output; bytes of the whole tensor.
  CollectiveOp collective() const;
};

/// @brief When a site is done, and its parts alone.
struct TpGemmTiming {
  double gemm_s = 0;   ///< the GEMM alone (estimate_gemm)
  double comm_s = 0;   ///< the collective alone: NCCL's (serial) or the fused scheme's transfers
  double total_s = 0;  ///< the site end to end
  /// What the site costs beyond its GEMM: FLUX's "exposed communication".
  double exposed_s() const { return total_s > gemm_s ? total_s - gemm_s : 0.0; }
};

/// @brief The GEMM, then NCCL's collective (price_collective), nothing overlapped: FLUX's "torch"
/// baseline (a NCCL all-gather then torch.matmul, or torch.matmul then a NCCL reduce-scatter).
TpGemmTiming tp_gemm_serial(const ClusterSpec& cluster, const TpGemm& site);

/// @brief FLUX's fused kernels inside one node (bytedance/flux, src/all_gather and
/// src/reduce_scatter; the transfer path read at a1880fc: transfers.hpp issues one
/// cudaMemcpyAsync per peer on a separate stream, so the copy engines move the data and the GEMM
/// keeps every SM):
///  - all-gather + GEMM: the tp - 1 remote shards are pulled by copy engines, one after another,
///    taking copy_engine_seconds of NCCL's all-gather in all (shard j lands at j / (tp - 1) of the
///    transfer); the GEMM computes the local shard's rows first, then each shard's rows as it lands;
///  - GEMM + reduce-scatter: the GEMM computes the rows each peer owns first, its epilogue storing
///    them into that peer's buffer over NVLink (one GPU's port, link_capacity), then its own rows;
///    a reduce kernel then sums the tp partial segments (reads tp, writes one: HBM-bound).
/// While transfers and the GEMM run together, both move through HBM: rates_beside with no SMs taken
/// (hbm_amplification x the wire bytes). Everything else is the serial model's (estimate_gemm,
/// price_collective). One node only: throws std::invalid_argument when tp exceeds a node.
TpGemmTiming tp_gemm_fused(const ClusterSpec& cluster, const TpGemm& site);

}  // namespace hardware
