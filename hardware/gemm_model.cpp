#include "hardware/gemm_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace hardware {

double GemmEstimate::tflops() const { return seconds > 0 ? flops / seconds * 1e-12 : 0.0; }

namespace {

struct Tile {
  int m, n;
  double efficiency;  // relative to the architecture's best tile: less reuse per byte loaded
};

// CUTLASS / cuBLAS tile families: Hopper warp-specialised 128x256 and 256x128 at full speed;
// Ampere 256x128 and 128x256 (mma.sync). Smaller tiles are what the library falls back to when
// the grid would otherwise leave SMs idle.
constexpr std::array<Tile, 6> kHopperTiles{{{128, 256, 1.0}, {256, 128, 1.0}, {128, 128, 0.90}, {128, 64, 0.72}, {64, 128, 0.72}, {64, 64, 0.50}}};
constexpr std::array<Tile, 6> kAmpereTiles{{{256, 128, 1.0}, {128, 256, 1.0}, {128, 128, 0.92}, {128, 64, 0.78}, {64, 128, 0.78}, {64, 64, 0.55}}};

}  // namespace

GemmEstimate estimate_gemm(const GpuSpec& g, const GemmOp& op) {
  GemmEstimate best;
  best.flops = op.flops();
  const double per_sm = g.peak_flops(op.dtype) * g.gemm_eff(op.dtype) / g.sm_count;
  const auto& tiles = g.arch == GpuArch::ampere ? kAmpereTiles : kHopperTiles;
  double best_s = 1e300;
  for (const auto& t : tiles) {
    const double tiles_m = std::ceil(static_cast<double>(op.m) / t.m);
    const double tiles_n = std::ceil(static_cast<double>(op.n) / t.n);
    const double waves = std::ceil(tiles_m * tiles_n * static_cast<double>(op.batch) / g.sm_count);
    const double tile_s = 2.0 * t.m * t.n * static_cast<double>(op.k) / (per_sm * t.efficiency) + g.gemm_tile_overhead.s();
    const double s = waves * tile_s;
    if (s < best_s) {
      best_s = s;
      best.tile_m = t.m;
      best.tile_n = t.n;
      best.waves = waves;
    }
  }
  const double mem = op.bytes() / (g.hbm_bytes_per_s * g.memory_efficiency);
  best.memory_bound = mem > best_s;
  best.seconds = std::max(best_s, mem) + g.kernel_latency.s();
  return best;
}

}  // namespace hardware
