// defines: sim::Recompute, RecomputeMethod (activation recompute as Megatron-LM's
//          --recompute-granularity / --recompute-method / --recompute-num-layers), RecomputeChunk,
//          recompute_chunks, recompute_chunk_count, recomputed_layers
//
// Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models":
//  - selective: the attention core (softmax of Q K^T and its product with V) is not kept for the
//    backward; it is run again right before its backward (Megatron-LM's `core_attn` checkpoint).
//    It frees the score-sized tensors of an unfused kernel (a s^2 b per layer), or the log-sum-exp
//    of flash attention, for one more attention forward per layer.
//  - full: only the input of a checkpointed chunk of layers is kept; when the backward reaches the
//    chunk, its forward runs again (TP collectives included) and then its backward.
//    uniform: the stage's layers in chunks of recompute_layers, each checkpointed as one;
//    block: the first recompute_layers layers checkpointed one by one, the rest kept whole.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

namespace sim {

struct Plan;

enum class Recompute : std::uint8_t { none, selective, full };
enum class RecomputeMethod : std::uint8_t { uniform, block };
std::string_view to_string(Recompute r);
std::string_view to_string(RecomputeMethod m);
bool parse_recompute(std::string_view s, Recompute& out);
bool parse_recompute_method(std::string_view s, RecomputeMethod& out);

/// @brief Layers [first, end) of a stage whose forward is run again, together, when the backward
/// reaches layer end - 1; only layer `first`'s input is kept from the first forward.
struct RecomputeChunk {
  int first = 0, end = 0;
  int layers() const { return end - first; }
  bool operator==(const RecomputeChunk&) const = default;
};

/// @brief The checkpointed chunks of a stage of `layers` layers (the whole model until pipeline
/// parallelism: one stage) under `plan` (empty unless recompute is full), in layer order.
/// uniform: [0, k), [k, 2k), ... (the last one shorter when k does not divide the layers);
/// block: [0, 1), [1, 2), ..., [k - 1, k).
std::vector<RecomputeChunk> recompute_chunks(const Plan& plan, int layers);
/// @brief How many chunks recompute_chunks(plan, layers) has and the layers of its largest, without
/// building them (the memory model asks for every plan the tuner prices).
struct RecomputeChunks {
  int count = 0, largest = 0;
};
RecomputeChunks recompute_chunk_count(const Plan& plan, int layers);
/// @brief How many of a stage's `layers` layers run their forward twice under full recompute.
int recomputed_layers(const Plan& plan, int layers);

}  // namespace sim
