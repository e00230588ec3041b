// defines: sim::MemoryEstimate (what one GPU holds, line by line, against its capacity and the
//          fragmentation reserve), MemoryStage, whole_model, estimate_memory, layer_activation_bytes,
//          saved_activation_bytes, recompute_working_bytes
//
// The memory model (docs/cost-models.md, "Memory"). Per GPU, in bytes, for one rank of a plan:
//   weights          parameters in the activation dtype (ZeRO-3: this rank's 1/dp shard)
//   gathered weights ZeRO-3: the units gathered at once (the root unit and two layers)
//   gradients        fp32 main gradients (ZeRO-2/3: the 1/dp shard)
//   optimizer        fp32 master weights (none when the weights are fp32) and Adam m, v (ZeRO >= 1: 1/dp)
//   activations      what the forward keeps for the backward, times the micro-batches in flight
//                    (Korthikanti et al. 2022 per recompute mode, sequence parallelism, attention kernel)
//   recomputed       activations a recomputed chunk (full) or attention (selective) holds during its backward
//   temporaries      the largest single op's transient buffers (loss logits and their gradient, the
//                    unfused attention's score matrices, flash attention's fp32 dQ accumulator, the MLP's gradients)
//   DP buckets       ZeRO-2/3: full-size gradient buckets in flight before they are reduce-scattered
//   NCCL buffers     channel buffers of the rank's communicators (NCCL's default buffer sizes)
//   CUDA context     the cluster file's memory.cuda_context_gb
// and the plan fits when their sum is at most (1 - memory.fragmentation_reserve) x HBM.
//
// A pipeline stage plugs in through MemoryStage: which layers it holds, whether it holds the
// embedding and the head, and how many micro-batches' activations it keeps at once.
#pragma once
#include <array>
#include <vector>
#include <cstdint>

#include "hardware/cluster.hpp"

namespace sim {

struct Plan;
struct ModelSpec;
struct StepGraph;

/// @brief The part of the model one GPU holds and the activations it keeps at once.
struct MemoryStage {
  int layers = 0;           ///< transformer layers of the stage
  bool embedding = true;    ///< holds the token (and position) embedding
  bool head = true;         ///< holds the final norm and the LM head (and computes the loss)
  int in_flight = 1;        ///< micro-batches whose activations are kept at once (1 without pipeline parallelism)
};
/// @brief The whole model on every GPU, one micro-batch in flight (no pipeline parallelism).
MemoryStage whole_model(const ModelSpec& m);

/// @brief Bytes one GPU needs, by line (see the file comment).
struct MemoryEstimate {
  double weights = 0, gathered_weights = 0, gradients = 0, optimizer = 0;
  double activations = 0, recomputed = 0, temporaries = 0;
  double dp_buckets = 0, nccl = 0, cuda_context = 0;
  double capacity = 0;          ///< the GPU's HBM
  double reserve_fraction = 0;  ///< cluster memory.fragmentation_reserve

  /// Weights, gradients and optimizer state (the part that does not depend on the micro-batch).
  double model_state() const { return weights + gathered_weights + gradients + optimizer; }
  double total() const {
    return model_state() + activations + recomputed + temporaries + dp_buckets + nccl + cuda_context;
  }
  double reserve() const { return capacity * reserve_fraction; }
  /// What a plan may use: capacity minus the fragmentation reserve.
  double usable() const { return capacity - reserve(); }
  bool fits() const { return total() <= usable(); }
  /// By how much the plan is over what it may use (negative: room left).
  double over() const { return total() - usable(); }
};

/// @brief The memory model in closed form for `plan` (resolved) on `cluster`: the bytes of the
/// tensors build_step_graph makes (a test checks that they agree), without building it. Cheap
/// (a few multiplications per row slice): the tuner calls it for every plan. Pipelined plans
/// (pp > 1): the stage that needs the most (worst_stage_memory).
MemoryEstimate estimate_memory(const ModelSpec& model, const hardware::ClusterSpec& cluster, const Plan& plan);
MemoryEstimate estimate_memory(const ModelSpec& model, const hardware::ClusterSpec& cluster, const Plan& plan, const MemoryStage& stage);

/// @brief The closed form split in two: what depends on the plan alone (shapes, per-layer
/// activation bytes, transient and communication buffers), computed once, and each MemoryStage's
/// arithmetic on it (stage). estimate_memory(model, cluster, plan, stage) is
/// PlanMemory(model, cluster, plan).stage(stage); a pipelined plan's stages share one. Keeps
/// references to `model` and `plan`: they must outlive it.
class PlanMemory {
 public:
  PlanMemory(const ModelSpec& model, const hardware::ClusterSpec& cluster, const Plan& plan);
  MemoryEstimate stage(const MemoryStage& stage) const;
  /// The same shared part for `plan`, which differs from the plan this was built for at most in
  /// its memory savers (the fields memory_key_without_savers leaves out: ZeRO, recompute and the
  /// bucket size): none of those enters the constructor's work. Keeps a reference to `plan`.
  PlanMemory for_savers(const Plan& plan) const {
    PlanMemory r = *this;
    r.p_ = &plan;
    return r;
  }
  const ModelSpec& model() const { return *m_; }
  const Plan& plan() const { return *p_; }

 private:
  const ModelSpec* m_;
  const Plan* p_;
  double capacity_ = 0, reserve_fraction_ = 0, cuda_context_ = 0;
  double e_ = 0;  ///< bytes per activation element
  bool fp32_ = false;
  double layer_params_ = 0, embedding_params_ = 0, final_norm_params_ = 0, lm_head_params_ = 0;
  double layer_ = 0, checkpoint_ = 0, aux_ = 0, ctx_aux_max_ = 0;  ///< per layer, all row slices
  double temporaries_[2] = {0, 0};   ///< [holds the head]
  double grid_buffers_[2] = {0, 0};  ///< SUMMA's double buffers [holds the head]
  double nccl_ = 0;
};

/// @brief The Plan fields estimate_memory(model, cluster, plan) reads, and only those: plans with
/// equal keys need the same memory (the strategy, its knobs but row slicing, column chunks, the
/// stack and the grid order do not change it; the bucket size only under ZeRO-2). The tuner prices
/// each distinct key once (tests/tuner check that every field left out leaves the estimate as it is).
struct MemoryKey {
  std::array<std::int64_t, 21> fields{};
  std::vector<int> pipeline_layers;
  bool operator==(const MemoryKey&) const = default;
};
MemoryKey memory_key(const Plan& plan);
/// @brief memory_key with the memory savers set to one value (ZeRO stage, recompute mode, method
/// and layers, bucket size): plans with equal keys share a PlanMemory (PlanMemory::for_savers).
MemoryKey memory_key_without_savers(const Plan& plan);
/// @brief For plans with equal memory_key_without_savers: whether their memory_key are equal too -
/// the savers memory_key reads (ZeRO, recompute mode, method and layers; the bucket size only
/// where it sizes memory), compared without making the keys.
bool same_memory_savers(const Plan& a, const Plan& b);
/// @brief estimate_memory(model, cluster, shared.plan()) from a PlanMemory built already (the
/// tuner shares one among plans that differ only in their savers).
MemoryEstimate estimate_memory(const PlanMemory& shared);
struct MemoryKeyHash {
  std::size_t operator()(const MemoryKey& k) const;
};

/// @brief Saved-activation bytes of one transformer layer for one micro-batch as the plan runs it
/// without recompute: its input and the attention residual's output, both norm outputs
/// (sequence-sharded under SP), QKV, the attention output and what the attention kernel keeps
/// (probabilities or log-sum-exp), FC1's output and the activation's output; summed over row slices.
double layer_activation_bytes(const ModelSpec& model, const Plan& plan);

/// @brief From a graph, per tensor: 1 where an activation tensor is written by a forward task (not a
/// recompute) and read by a backward or recompute task - what stays allocated from the forward to
/// the backward; 0 elsewhere.
std::vector<char> saved_activations(const StepGraph& g);
/// @brief The bytes of saved_activations.
double saved_activation_bytes(const StepGraph& g);
/// @brief From a graph: bytes of the activations recompute tasks write that backward tasks read, for
/// the largest recomputed chunk (full: the chunk of the first layer it holds; selective: a layer),
/// all row slices together.
double recompute_working_bytes(const StepGraph& g);

/// @brief What the engine reports for one rank's graph: the closed form with the activations and
/// the recompute working set the graph's own tensors hold (pp = 1), or estimate_stage_memory.
MemoryEstimate estimate_memory(const StepGraph& g, const hardware::ClusterSpec& c);

/// @brief Pipeline stage `stage` of a pipelined plan (sim/pipeline_memory.cpp): the closed form for
/// the layers of its model chunks (weights, gradients, optimizer state, temporaries, buffers as
/// estimate_memory has them for those layers, the embedding on virtual stage 0, the final norm and
/// head on the last), and the activations of the passes it holds at once - each model chunk's saved
/// activations of one micro-batch (under the plan's recompute mode) times the passes of that chunk
/// in flight at the stage's peak (peak_in_flight of its schedule: 1F1B holds min(pp - stage, m)
/// micro-batches, the interleaved schedule its own count).
MemoryEstimate estimate_stage_memory(const ModelSpec& model, const hardware::ClusterSpec& cluster, const Plan& plan, int stage);
/// @brief The stage of a pipelined plan whose estimate_stage_memory total is largest (the first on ties).
MemoryEstimate worst_stage_memory(const ModelSpec& model, const hardware::ClusterSpec& cluster, const Plan& plan);
MemoryEstimate worst_stage_memory(const PlanMemory& shared);
/// @brief A pipeline stage's graph: estimate_stage_memory with each chunk's saved activations read
/// off the graph's tensors of micro-batch 0 (what a forward writes and a backward or a recompute reads).
MemoryEstimate estimate_stage_memory(const StepGraph& g, const hardware::ClusterSpec& cluster);

}  // namespace sim
