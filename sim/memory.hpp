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
/// A pipeline stage's graph (pp > 1) holds every micro-batch: see estimate_stage_memory.
MemoryEstimate estimate_memory(const StepGraph& g);

/// @brief A pipeline stage: its weights, gradients and optimizer state, and the activations of the
/// passes it holds at once - each model chunk's saved activations of one micro-batch times the
/// passes of that chunk in flight at the stage's peak (peak_in_flight of its schedule: 1F1B holds
/// min(pp - stage, m) micro-batches, the interleaved schedule its own count). sim/pipeline_memory.cpp.
MemoryEstimate estimate_stage_memory(const StepGraph& g);

}  // namespace sim
