// defines: sim::MemoryEstimate (bytes one GPU needs), estimate_memory (from a step graph's tensors)
#pragma once

namespace sim {

struct StepGraph;

/// @brief Bytes one GPU needs (Megatron-style mixed precision without a distributed optimizer).
struct MemoryEstimate {
  double weights = 0;      ///< low-precision weights
  double gradients = 0;    ///< fp32 main gradients
  double optimizer = 0;    ///< fp32 master weights, Adam m and v
  double activations = 0;  ///< forward tensors that backward reads, for one micro-batch in flight
  double total() const { return weights + gradients + optimizer + activations; }
};

/// @brief Sums the graph's weight, gradient and optimizer bytes and the activations a backward task reads.
MemoryEstimate estimate_memory(const StepGraph& g);

}  // namespace sim
