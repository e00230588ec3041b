// defines: tuner::Evaluator (prices one plan: closed-form bounds, reduced-layer estimate, full
//          simulation), Estimate, rank_params
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string_view>
#include <tuple>
#include <vector>

#include "hardware/cost_model.hpp"
#include "sim/engine.hpp"
#include "sim/model.hpp"
#include "sim/plan.hpp"

namespace tuner {

using common::Duration;

/// @brief Parameters one rank holds (the sum of the step graph's weight tensors), closed form.
std::int64_t rank_params(const sim::ModelSpec& m, const sim::Plan& p);
/// @brief Weights + fp32 gradients + Adam state of one rank in bytes (estimate_memory without activations).
double static_memory_bytes(const sim::ModelSpec& m, const sim::Plan& p);

/// @brief Per-GPU memory of a plan without building its graph, equal to sim::estimate_memory of
/// the plan's full graph. Weights, fp32 gradients and Adam state are closed form (rank_params);
/// saved activations are token-major [tokens, width] tensors, so they are linear in the tokens of a
/// micro-batch and in the layer count and do not depend on row slicing, row axis, column chunks,
/// strategy or bucket size. The per-token bytes of one layer and of the rest of the model are
/// measured once per (tp, sequence_parallel, dtype, seq_len) from graphs of one and two layers
/// with micro-batch 1, then cached. Thread-safe.
class MemoryModel {
 public:
  MemoryModel(const sim::ModelSpec& model, const hardware::ClusterSpec& cluster) : model_(model), cluster_(cluster) {}
  sim::MemoryEstimate estimate(const sim::Plan& p) const;

 private:
  struct PerToken {
    double layer = 0, rest = 0;  ///< activation bytes per token of a micro-batch: one layer, outside the layers
  };
  PerToken per_token(const sim::Plan& p) const;
  const sim::ModelSpec& model_;
  const hardware::ClusterSpec& cluster_;
  mutable std::mutex mu_;
  mutable std::map<std::tuple<int, bool, int, std::int64_t>, PerToken> cache_;
};

/// @brief A step predicted from two simulations of the model cut to `short_layers` and
/// `short_layers + 1` layers, extrapolated linearly to the model's layer count: the layers of a
/// transformer have the same shapes, so each added layer adds the same steady-state time.
/// Memory extrapolates exactly (every layer saves the same tensors).
struct Estimate {
  Duration step_time, compute, exposed_comm, idle;
  std::vector<sim::StreamTime> streams;  ///< each stream's busy time, extrapolated
  Duration lower_bound;  ///< compute_lower_bound of the plan; step_time is never below it
  double model_flops = 0, mfu = 0, tokens_per_s = 0;
  sim::MemoryEstimate memory;
  bool extrapolated = false;  ///< false: the model was small enough to simulate whole
};

/// @brief Prices plans of one model on one cluster. Thread-safe (const; the cost model must be).
class Evaluator {
 public:
  Evaluator(const sim::ModelSpec& model, const hardware::ClusterSpec& cluster, const hardware::CostModel& cost, int short_layers = 1)
      : model_(model), cluster_(cluster), cost_(cost), short_layers_(short_layers) {}

  /// A lower bound of the step time. Per micro-batch, the engine can neither run the compute
  /// stream faster than the solo time of its kernels (one in-order stream, rates <= 1) nor start a
  /// kernel before the host has issued it (launch cost x launches, in graph order). Both sums are
  /// linear in the layer count, so they are taken from graphs of 1 and 2 layers and extrapolated,
  /// once per plan class (strategy and its knobs, tp, micro-batch, SP, sequence, dtype, stack:
  /// every dp and bucket size share the class). Bound = (accum - 1) x max(compute, host) +
  /// max(compute + optimizer, host).
  Duration compute_lower_bound(const sim::Plan& p) const;
  /// The cheaper, looser bound without any graph: solo time of the GEMMs and attention kernels
  /// only, from the layer shapes (sim/shapes.hpp, the shapes the builder emits) in closed form.
  Duration gemm_lower_bound(const sim::Plan& p) const;
  /// Reduced-layer estimate (see Estimate).
  Estimate estimate(const sim::Plan& p) const;
  /// The whole model through the step graph and the engine.
  sim::StepReport simulate(const sim::Plan& p, bool timeline = false) const;

  const sim::ModelSpec& model() const { return model_; }
  const hardware::ClusterSpec& cluster() const { return cluster_; }
  const hardware::CostModel& cost() const { return cost_; }

 private:
  const sim::ModelSpec& model_;
  const hardware::ClusterSpec& cluster_;
  const hardware::CostModel& cost_;
  int short_layers_;
  struct ClassBound {
    double compute_ps = 0, host_ps = 0;  ///< one micro-batch of the whole model
  };
  struct ClassKey {
    std::string_view strategy;  ///< its name
    int tp, micro_batch;
    bool sequence_parallel;
    std::int64_t seq_len;
    int dtype, stack;
    std::vector<int> knobs;  ///< every plan knob's value where it applies, else neutral
    auto operator<=>(const ClassKey&) const = default;
  };
  mutable std::mutex mu_;
  mutable std::map<ClassKey, ClassBound> bounds_;
};

}  // namespace tuner
