// defines: hardware::GemmEstimate, estimate_gemm (tile choice, wave quantization and per-tile
//          overhead of a cuBLAS-like GEMM on one GPU)
#pragma once
#include "hardware/cluster.hpp"
#include "hardware/ops.hpp"

namespace hardware {

/// @brief What the model thinks a GEMM library does with one shape.
struct GemmEstimate {
  double seconds = 0;       ///< kernel time, launch latency included
  int tile_m = 0, tile_n = 0;
  double waves = 0;         ///< ceil(tiles / SMs)
  bool memory_bound = false;
  double tflops() const;    ///< of the op passed in; set by estimate_gemm
  double flops = 0;
};

/// @brief Picks the output tile (from the architecture's list) that minimises
///   time = waves x (tile FLOPs / (per-SM peak x gemm_efficiency[dtype] x tile efficiency)
///                   + gemm_tile_overhead)  + kernel_latency,
/// waves = ceil(tiles_m x tiles_n x batch / SMs); then the roofline's memory bound.
/// Small tiles lose efficiency (less reuse per loaded byte); partial tiles at the edges do the
/// whole tile's work (tile quantization), a last partial wave takes a whole wave (wave quantization),
/// small K pays the fixed per-tile prologue/epilogue (small-K penalty), and a skinny N wastes
/// most of a wide tile (skinny-shape penalty).
GemmEstimate estimate_gemm(const GpuSpec& gpu, const GemmOp& op);

}  // namespace hardware
