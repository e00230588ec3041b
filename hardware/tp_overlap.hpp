// defines: hardware::TpGemmKind, RsReduction, TpGemm, TpGemmTiming, RsTransfer, fused_rs_transfer,
//          tp_gemm_serial, tp_gemm_fused (one tensor-parallel GEMM and its collective on one node,
//          run one after the other or fused FLUX-style: the kernel-level rows of
//          tp-overlap-measured.csv)
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

/// @brief Where FLUX's Hopper GEMM + reduce-scatter sums the tp partial outputs (its
/// `fuse_reduction` option; bytedance/flux at 19831ca, src/gemm_rs/sm90_reduce_scatter_utils.hpp
/// reduce() and ths_op/gemm_reduce_scatter.cc forward_reduce_scatter_impl).
enum class RsReduction : std::uint8_t {
  /// fuse_reduction off (the default of test/python/gemm_rs/test_gemm_rs.py): the kernel gathers
  /// every rank's partial sums of this rank's [M/tp, N] rows into a [tp, M/tp, N] buffer;
  /// local_reduction (torch's sum over the tp segments) then reads tp segments and writes one
  after_kernel,
  /// fuse_reduction on, and the only sm90 form when FLUX's README table was published (775e061):
  /// the reduce warp adds each fetched tile into a [M/tp, N] buffer; the op's sum over its one
  /// segment then reads one segment and writes one
  in_kernel,
};

/// @brief One site, named by the global shape as FLUX's benchmarks do (M tokens, K in, N out).
struct TpGemm {
  TpGemmKind kind = TpGemmKind::all_gather_gemm;
  std::int64_t m = 0, k = 0, n = 0;
  int tp = 8;
  common::DType dtype = common::DType::fp16;
  RsReduction reduction = RsReduction::after_kernel;  ///< GEMM + reduce-scatter on Hopper only

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

/// @brief How FLUX's fused GEMM + reduce-scatter moves the partial sums, by GPU architecture.
enum class RsTransfer : std::uint8_t {
  epilogue_push,  ///< sm80 (gemm_v2): the GEMM's epilogue stores each peer's rows into that peer's buffer over NVLink
  kernel_pull,    ///< sm90 (gemm_v3): the epilogue stores locally and flags each tile; producer warps of each CTA pull the peers' tiles with TMA
};
/// @brief Ampere: epilogue_push; Hopper: kernel_pull. Throws std::invalid_argument for other
/// architectures (FLUX at 19831ca builds its GEMM + reduce-scatter for sm80 and sm90 only).
RsTransfer fused_rs_transfer(const GpuSpec& gpu);

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
///  - GEMM + reduce-scatter, Ampere (epilogue_push): the GEMM computes the rows each peer owns
///    first, its epilogue storing them into that peer's buffer over NVLink (one GPU's port,
///    link_capacity), then its own rows; a reduce kernel then sums the tp partial segments (reads
///    tp, writes one: HBM-bound). `reduction` must be after_kernel;
///  - GEMM + reduce-scatter, Hopper (kernel_pull; bytedance/flux at 19831ca,
///    src/gemm_rs/sm90_gemm_tma_warpspecialized_cooperative_reduce_scatter.hpp and
///    sm90_reduce_scatter_utils.hpp): the GEMM's epilogue stores every tile locally and flags it;
///    for each tile a CTA computes (rows some rank r owns), its ReduceScatterFetch warp waits for
///    rank r's tile of this rank's rows at the same place, pulls it with TMA into shared memory,
///    and its ReduceScatterReduce warp writes it to the reduce buffer. All [M, N] output bytes pass
///    that pipeline, at GpuSpec::fused_rs_pull_bytes_per_s (gpu.fused_rs_pull_gb_per_s): the
///    kernel's own rate (one DMA stage per CTA for 16-bit outputs, gemm_v3_reduce_scatter.hpp
///    get_dma_stages), not the NVLink port's. A tile can be pulled once computed, so the pull
///    starts after the GEMM's first wave and never passes it. Then the reduction tail of
///    `reduction` plus kernel_latency (HBM-bound).
/// While transfers and the GEMM run together, both move through HBM: rates_beside with no SMs taken
/// (hbm_amplification x the wire bytes). Everything else is the serial model's (estimate_gemm,
/// price_collective). One node only: throws std::invalid_argument when tp exceeds a node, for a
/// GEMM + reduce-scatter on an architecture fused_rs_transfer refuses, or with in_kernel reduction
/// on Ampere; common::ConfigError naming the cluster file when a Hopper GPU has no
/// gpu.fused_rs_pull_gb_per_s.
TpGemmTiming tp_gemm_fused(const ClusterSpec& cluster, const TpGemm& site);

}  // namespace hardware
