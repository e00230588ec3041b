// defines: sim::Target (model + cluster + resolved plan), TargetInput, resolve_target
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "hardware/cluster.hpp"
#include "sim/model.hpp"
#include "sim/plan.hpp"

namespace sim {

/// @brief What a command was asked about, before resolution.
struct TargetInput {
  std::string model;       ///< name or path
  std::string cluster;     ///< name or path
  std::optional<hardware::ClusterSpec> cluster_spec;  ///< given: used instead of loading `cluster` (a profile's machine)
  std::optional<std::int64_t> nodes;  ///< checked by hardware::set_nodes
  std::string plan_file;   ///< empty: plan from flags only
  PlanInput flags;         ///< override the plan file
};

struct Target {
  ModelSpec model;
  hardware::ClusterSpec cluster;
  Plan plan;
  std::string plan_source;
};

/// @brief Loads model and cluster, sets the node count, reads the plan file, applies the flags and
/// resolves the plan (check = false: fill_plan, the defaults without resolve_plan's feasibility
/// checks, for commands that report on plans that may not run). Throws common::ConfigError (file,
/// key, reason) on any problem.
Target resolve_target(const TargetInput& in, bool check = true);

}  // namespace sim
