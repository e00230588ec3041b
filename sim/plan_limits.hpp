// defines: sim::max_tasks (closed-form bound on a plan's step-graph size), check_plan_limits
//          (the size limits of common/limits.hpp applied to a resolved plan, before any graph is built)
#pragma once
#include <cstdint>
#include <string>

#include "hardware/cluster.hpp"
#include "sim/model.hpp"
#include "sim/plan.hpp"

namespace sim {

/// @brief An upper bound on the tasks of one rank's step graph, from the builder's schedule:
/// per layer and row slice at most 28 + 4 x col_slices tasks (forward: norms, QKV, attention,
/// the two residual adds as their own tasks, FC1, activation, 2 AllGathers under SP, and per
/// column chunk the out-proj and FC2 GEMMs with their collectives; backward: 2 x 3 GEMMs,
/// attention, activation, 2 norms, 2 AllGathers and 2 collectives), 15 per row slice outside the
/// layers (embedding, final norm, LM head, loss, their backward and collectives), and once per
/// step at most one DP bucket per weight gradient (6 per layer + 4), the SP norm-gradient
/// AllReduce and the optimizer. Exact for SP with tp > 1 and buckets that each hold one gradient
/// (tests/hardening/test_limits.cpp). Recompute counts the forward twice and ZeRO up to four
/// tasks per weight (reduce-scatter, two gathers, the shard's step): an upper bound then.
std::int64_t max_tasks(const ModelSpec& m, const Plan& p);

/// @brief Refuses (common::ConfigError naming `source` and the key) a model whose sizes are beyond
/// common::limits, whatever read it: a model file checks them as it reads; a Hugging Face
/// config.json or a Megatron-LM / DeepSpeed import fills a ModelSpec directly.
void check_model_limits(const ModelSpec& m, const std::string& source);

/// @brief Refuses (common::ConfigError naming `source` and the key) a plan whose sizes are beyond
/// common::limits (and a model whose sizes are, naming the model): tokens per micro-batch and per step, GPUs, row slices, column chunks, and
/// max_tasks over limits::kMaxTasks. Cheap; resolve_plan calls it before anything is built.
void check_plan_limits(const ModelSpec& m, const hardware::ClusterSpec& c, const Plan& p, const std::string& source);

}  // namespace sim
