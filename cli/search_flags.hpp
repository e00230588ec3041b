// defines: cli::SearchFlags (flags tune and whatif share), add_search_flags, SearchSetup, search_setup
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "cli/command.hpp"
#include "hardware/cluster.hpp"
#include "sim/model.hpp"
#include "tuner/space.hpp"

namespace cli {

/// @brief The target and search-space flags of `tune` and `whatif`.
struct SearchFlags {
  TargetFlags target;
  long long global_batch = 0, threads = 0, seq_len = 0;  // range-checked in search_setup
  std::string dtype, stack, tp_layouts;
  CLI::App* cmd = nullptr;
};
void add_search_flags(CLI::App* cmd, SearchFlags& f);

struct SearchSetup {
  sim::ModelSpec model;
  hardware::ClusterSpec cluster;
  tuner::SearchSpace space;
};
/// @brief Model, cluster (the profile's machine when --profile and no --cluster) and search space
/// from the flags; one-line errors for bad values.
SearchSetup search_setup(const SearchFlags& f);

}  // namespace cli
