#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "common/thread_front.hpp"
#include "hardware/collective_model.hpp"
#include "hardware/cost_model.hpp"
#include "hardware/gemm_model.hpp"

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

std::string_view to_string(AttentionKernel k) {
  switch (k) {
    case AttentionKernel::flash: return "flash";
    case AttentionKernel::unfused: return "unfused";
    case AttentionKernel::unfused_compiled: return "unfused_compiled";
  }
  return "?";
}

bool parse_attention_kernel(std::string_view s, AttentionKernel& out) {
  for (auto k : {AttentionKernel::flash, AttentionKernel::unfused, AttentionKernel::unfused_compiled})
    if (to_string(k) == s) {
      out = k;
      return true;
    }
  return false;
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

double CostModel::link_capacity(LinkClass l) const { return hardware::link_capacity(cluster(), l); }

std::uint64_t CostModel::next_pricing_id() { return common::unique_id(); }

std::vector<LinkSpec> CostModel::links() const {
  return {{.name = "nvlink", .bytes_per_s = link_capacity(LinkClass::nvlink)}, {.name = "nic", .bytes_per_s = link_capacity(LinkClass::nic)}};
}

namespace {

class AnalyticCostModel final : public CostModel {
 public:
  AnalyticCostModel(ClusterSpec c, Stack s) : cluster_(std::move(c)), stack_(s), spec_(cluster_.host.stack(s)), gpu_(cluster_.gpu) {
    // the stack's tensor-core kernels (GEMMs, attention) at its fraction of the best-shape speed
    for (auto& e : gpu_.gemm_efficiency) e *= spec_.gemm_efficiency;
  }

  ComputeCost gemm(const GemmOp& op) const override {
    const auto e = estimate_gemm(gpu_, op);
    return {common::Duration::from_s(e.seconds), op.bytes()};
  }

  ComputeCost attention(const AttentionOp& op) const override {
    return op.kernel == AttentionKernel::flash ? flash_attention(op) : unfused_attention(op);
  }

  // Flash attention: the executed FLOPs (backward: 5 matmuls, the probabilities recomputed) at a
  // fraction of the best-shape GEMM speed - forward 0.65, backward 0.55 of gpu.gemm_efficiency,
  // i.e. 0.52 / 0.44 of the H100's dense peak. Measured references (docs/cost-models.md):
  // FlashAttention-2 reaches 50-73 % of A100 peak (Dao 2023, arXiv:2307.08691); on H100 at head
  // dim 128, sequence 2k, FlashAttention-2 runs its forward at 362 TFLOP/s (0.37 of peak) and
  // FlashAttention-3 at 625 (0.63) (Shah et al. 2024, arXiv:2407.08608, Fig. 5); backward kernels
  // reach less than forward ones in both papers. Never faster than streaming Q, K, V, O once.
  ComputeCost flash_attention(const AttentionOp& op) const {
    const auto& g = gpu_;
    const double eff = op.backward ? 0.55 : 0.65;
    const double flops = op.executed_flops();
    const double compute = flops / (g.peak_flops(op.dtype) * g.gemm_eff(op.dtype) * eff);
    const double mem = op.bytes() / (g.hbm_bytes_per_s * g.memory_efficiency);
    return {common::Duration::from_s(std::max(compute, mem)) + g.kernel_latency, op.bytes()};
  }

  // Megatron's unfused core attention: batched GEMMs over (batch x heads) and memory-bound passes
  // over the full s_q x s_kv score matrix (the causal mask is applied, not skipped).
  // Forward: S = Q K^T; fused scale-mask-softmax (read S, write P); dropout (read P, write P' and
  // a 1-byte mask); O = P' V. Backward: dV = P'^T dO, dP' = dO V^T, dropout backward (read
  // dP', mask; write dP), softmax backward (read P, dP; write dS), dQ = dS K, dK = dS^T Q.
  ComputeCost unfused_attention(const AttentionOp& op) const {
    const auto& g = gpu_;
    const std::int64_t bh = op.batch * op.heads, sq = op.s_q, sk = op.s_kv, d = op.head_dim;
    auto gemm_s = [&](std::int64_t m, std::int64_t n, std::int64_t k) {
      return estimate_gemm(g, GemmOp{.m = m, .n = n, .k = k, .dtype = op.dtype, .batch = bh}).seconds;
    };
    const double elems = static_cast<double>(bh) * static_cast<double>(sq) * static_cast<double>(sk);
    const double e = common::dtype_bytes(op.dtype);
    double s = 0, pass_bytes = 0;
    const bool one_pass = op.kernel == AttentionKernel::unfused_compiled;  // softmax and dropout in one kernel each way
    if (!op.backward) {
      s = gemm_s(sq, sk, d) + gemm_s(sq, d, sk);
      pass_bytes = one_pass ? elems * (2 * e + 1) : elems * (2 * e) + elems * (2 * e + 1);
    } else {
      s = gemm_s(sk, d, sq) + gemm_s(sq, sk, d) + gemm_s(sq, d, sk) + gemm_s(sk, d, sq);
      pass_bytes = one_pass ? elems * (3 * e + 1) : elems * (2 * e + 1) + elems * (3 * e);
    }
    const double passes = one_pass ? 1 : 2;  // kernels besides the GEMMs
    s += pass_bytes / (g.hbm_bytes_per_s * g.memory_efficiency) + passes * g.kernel_latency.s();
    return {common::Duration::from_s(s), pass_bytes + op.bytes()};
  }

  ComputeCost elementwise(const ElementwiseOp& op) const override {
    // fused into a neighbouring kernel by this stack: no kernel and no HBM round trip of its own
    if (spec_.fuses(op.kind)) return {common::Duration::from_ps(0), 0.0};
    const auto& g = cluster_.gpu;
    return {common::Duration::from_s(op.bytes / (g.hbm_bytes_per_s * g.memory_efficiency)) + g.kernel_latency, op.bytes};
  }

  ComputeCost optimizer(const OptimizerOp& op) const override {
    const auto& g = cluster_.gpu;
    return {common::Duration::from_s(op.bytes() / (g.hbm_bytes_per_s * g.memory_efficiency)) + g.kernel_latency, op.bytes()};
  }

  CollectiveCost collective(const CollectiveOp& op) const override { return price_collective(cluster_, op); }

  const ClusterSpec& cluster() const override { return cluster_; }
  Stack stack() const override { return stack_; }
  std::string describe() const override { return "analytic"; }

 private:
  ClusterSpec cluster_;
  Stack stack_;
  StackSpec spec_;
  GpuSpec gpu_;  // the GPU as this stack's kernels see it
};

}  // namespace

std::unique_ptr<CostModel> make_analytic_cost_model(const ClusterSpec& cluster, Stack stack) {
  return std::make_unique<AnalyticCostModel>(cluster, stack);
}

}  // namespace hardware
