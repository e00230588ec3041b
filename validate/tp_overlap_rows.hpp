// defines: validate::FluxRow, read_flux_kernel_rows (the kernel-level FLUX rows of
//          tp-overlap-measured.csv), flux_machine (the cluster each row ran on), FluxPrediction,
//          predict_flux_row (hardware/tp_overlap against them)
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "hardware/cluster.hpp"
#include "hardware/tp_overlap.hpp"

namespace validate {

/// @brief One kernel-level FLUX row: a tensor-parallel GEMM site with and without overlap.
struct FluxRow {
  std::string source;                                  ///< FLUX-RM (the README table), FLUX-90 (bytedance/flux#90) or FLUX-100 (bytedance/flux#100)
  std::string gpu;                                     ///< A800, H800, H100
  std::string label;                                   ///< "8x H800 AG+GEMM M=4096 K=12288 N=49152"
  hardware::TpGemm site;                               ///< valid when `listed_why` is empty
  std::string listed_why;                              ///< why the row cannot be predicted (the shape is not stated)
  std::optional<double> baseline_ms;                   ///< "torch": NCCL's collective and the GEMM one after the other (FLUX-100's tuning log has none)
  double overlap_ms = 0;                               ///< FLUX's fused kernel
  std::optional<double> torch_gemm_ms, torch_nccl_ms;  ///< the baseline's parts, where the notes give them
  std::optional<double> flux_exposed_ms;               ///< FLUX's exposed communication, where the notes give it
};

/// @brief The FLUX-RM, FLUX-90 and FLUX-100 rows of `calibration_dir`/tp-overlap-measured.csv whose
/// shape names an all-gather + GEMM or a GEMM + reduce-scatter (the MoE and L20 rows are left out).
/// A row whose K or N is not stated (or stated as approximate, '~') is returned with `listed_why`.
/// The README's H800 GEMM + reduce-scatter ran FLUX's first sm90 kernel, which adds the pulled tiles
/// in the kernel (RsReduction::in_kernel); the flux#90 and flux#100 rows ran FLUX's default, the
/// reduction after it. Throws common::ConfigError naming the file and column if a cell is malformed.
std::vector<FluxRow> read_flux_kernel_rows(const std::string& calibration_dir);

/// @brief The machine a row ran on: A800 = dgx-a100 with 8 NVLink links (400 GB/s both directions:
/// 200 GB/s each way, the export variant), H800 = dgx-h100 with the same 8 links / 200 GB/s each way
/// (its compute and HBM are H100 SXM's), H100 = dgx-h100. Throws common::ConfigError for another GPU.
hardware::ClusterSpec flux_machine(const std::string& gpu);

struct FluxPrediction {
  hardware::TpGemmTiming serial, fused;
};
FluxPrediction predict_flux_row(const FluxRow& row);

}  // namespace validate
