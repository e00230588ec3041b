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
  int global_batch = 0, threads = 0;
  long long seq_len = 0;
  std::string dtype, stack;
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
