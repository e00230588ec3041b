#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "hardware/collective_model.hpp"
#include "hardware/cost_model.hpp"

namespace hardware {

std::string_view to_string(ElementwiseKind k) {
  switch (k) {
    case ElementwiseKind::embedding: return "embedding";
    case ElementwiseKind::layernorm: return "layernorm";
    case ElementwiseKind::rmsnorm: return "rmsnorm";
    case ElementwiseKind::rope: return "rope";
    case ElementwiseKind::gelu: return "gelu";
    case ElementwiseKind::swiglu: return "swiglu";
    case ElementwiseKind::residual_add: return "residual";
    case ElementwiseKind::cross_entropy: return "cross_entropy";
    case ElementwiseKind::concat: return "concat";
    case ElementwiseKind::accumulate: return "accumulate";
  }
  return "?";
}

std::string_view to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::all_reduce: return "allreduce";
    case CollectiveKind::all_gather: return "allgather";
    case CollectiveKind::reduce_scatter: return "reducescatter";
    case CollectiveKind::broadcast: return "broadcast";
    case CollectiveKind::reduce: return "reduce";
    case CollectiveKind::all_to_all: return "alltoall";
    case CollectiveKind::send_recv: return "sendrecv";
  }
  return "?";
}

bool parse_collective_kind(std::string_view s, CollectiveKind& out) {
  for (auto k : {CollectiveKind::all_reduce, CollectiveKind::all_gather, CollectiveKind::reduce_scatter,
                 CollectiveKind::broadcast, CollectiveKind::reduce, CollectiveKind::all_to_all,
                 CollectiveKind::send_recv}) {
    if (to_string(k) == s) {
      out = k;
      return true;
    }
  }
  return false;
}

double CostModel::link_capacity(LinkClass l) const {
  const auto& c = cluster();
  switch (l) {
    case LinkClass::nvlink: return c.node.nvlink_bytes_per_s;
    case LinkClass::nic:
      return c.network.nic_bytes_per_s * c.network.nics_per_node / c.node.gpus_per_node / c.network.oversubscription;
  }
  return 1.0;
}

namespace {

struct Tile {
  int m, n;
  double efficiency;  // relative to the best tile: smaller tiles reuse less and issue more
};

class AnalyticCostModel final : public CostModel {
 public:
  explicit AnalyticCostModel(ClusterSpec c) : cluster_(std::move(c)) {}

  // Roofline with tile and wave quantization: the library picks the tile that minimises time;
  // the grid runs in ceil(tiles / SMs) waves, each as long as one tile's K-loop.
  ComputeCost gemm(const GemmOp& op) const override {
    const auto& g = cluster_.gpu;
    const double peak = g.peak_flops(op.dtype) * g.gemm_efficiency;
    static constexpr std::array<Tile, 5> hopper_tiles{{{128, 256, 1.0}, {256, 128, 1.0}, {128, 128, 0.93}, {128, 64, 0.82}, {64, 64, 0.62}}};
    static constexpr std::array<Tile, 5> ampere_tiles{{{256, 128, 1.0}, {128, 256, 1.0}, {128, 128, 0.95}, {128, 64, 0.85}, {64, 64, 0.65}}};
    const auto& tiles = g.arch == GpuArch::ampere ? ampere_tiles : hopper_tiles;
    const double per_sm = peak / g.sm_count;
    double best = 1e300;
    for (const auto& t : tiles) {
      const double tiles_m = std::ceil(static_cast<double>(op.m) / t.m);
      const double tiles_n = std::ceil(static_cast<double>(op.n) / t.n);
      const double waves = std::ceil(tiles_m * tiles_n * op.batch / g.sm_count);
      // small K: the prologue/epilogue of each tile is not amortised over a long K loop
      const double k_eff = static_cast<double>(op.k) / (static_cast<double>(op.k) + 128.0);
      const double tile_time = 2.0 * t.m * t.n * static_cast<double>(op.k) / (per_sm * t.efficiency * k_eff);
      best = std::min(best, waves * tile_time);
    }
    const double mem = op.bytes() / (g.hbm_bytes_per_s * g.memory_efficiency);
    return {Duration::from_s(std::max(best, mem)) + g.kernel_latency, op.bytes()};
  }

  // Flash-style attention: compute-bound at a fraction of GEMM efficiency, tiles of 128 queries.
  ComputeCost attention(const AttentionOp& op) const override {
    const auto& g = cluster_.gpu;
    const double eff = op.backward ? 0.55 : 0.65;
    const double flops = op.executed_flops();
    const double compute = flops / (g.peak_flops(op.dtype) * g.gemm_efficiency * eff);
    const double mem = op.bytes() / (g.hbm_bytes_per_s * g.memory_efficiency);
    return {Duration::from_s(std::max(compute, mem)) + g.kernel_latency, op.bytes()};
  }

  ComputeCost elementwise(const ElementwiseOp& op) const override {
    const auto& g = cluster_.gpu;
    return {Duration::from_s(op.bytes / (g.hbm_bytes_per_s * g.memory_efficiency)) + g.kernel_latency, op.bytes};
  }

  ComputeCost optimizer(const OptimizerOp& op) const override {
    const auto& g = cluster_.gpu;
    return {Duration::from_s(op.bytes() / (g.hbm_bytes_per_s * g.memory_efficiency)) + g.kernel_latency, op.bytes()};
  }

  CollectiveCost collective(const CollectiveOp& op) const override { return price_collective(cluster_, op); }

  const ClusterSpec& cluster() const override { return cluster_; }
  std::string describe() const override { return "analytic"; }

 private:
  ClusterSpec cluster_;
};

}  // namespace

std::unique_ptr<CostModel> make_analytic_cost_model(const ClusterSpec& cluster) {
  return std::make_unique<AnalyticCostModel>(cluster);
}

}  // namespace hardware
