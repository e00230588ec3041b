// defines: cli::register_command (each cli/*.cpp adds its subcommand), TargetFlags, add_target_flags,
//          fail (one-line errors)
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <string>

#include "hardware/cost_model.hpp"
#include "sim/target.hpp"

namespace cli {

/// @brief Adds one subcommand (with its callback) to the app. `order` sorts `slicetune --help`.
using CommandSetup = std::function<void(CLI::App& app)>;
bool register_command(int order, CommandSetup setup);

/// @brief The flags every command that takes a plan shares (simulate, tune, run, validate).
struct TargetFlags {
  std::string model = "gpt3-13b";
  std::string profile;  ///< --profile FILE: profiled cost model; its machine is the cluster unless --cluster is given
  std::string cluster = "dgx-h100";
  // integers are read 64 bits wide and range-checked (common/limits.hpp) before they are narrowed
  long long nodes = 0;
  std::string plan;
  long long tp = 0, dp = 0, micro_batch = 0, global_batch = 0;
  long long seq_len = 0;
  std::string dtype, strategy, stack;
  std::map<std::string, std::string, std::less<>> knobs;  ///< flag -> text, one per registered knob (sim/strategy.hpp)
  bool sequence_parallel = false;
  double dp_bucket_mb = 0;
  CLI::App* cmd = nullptr;

  /// Converts what was given on the command line into a TargetInput (unset flags stay unset).
  sim::TargetInput input() const;
  /// The cost model for a resolved target: analytic, or profiled with --profile.
  std::unique_ptr<hardware::CostModel> cost_model(const hardware::ClusterSpec& cluster) const;
};
void add_target_flags(CLI::App* cmd, TargetFlags& f, bool with_plan = true);

/// @brief This process's rank in an mpirun / srun job, read from the launcher's environment
/// (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID) without starting MPI; 0 otherwise.
/// Errors every rank finds alike are printed by rank 0 only.
int launcher_rank();

/// @brief Throws common::ConfigError for a bad flag value.
[[noreturn]] void bad_flag(const std::string& flag, const std::string& what);
/// @brief `v` if it is in [lo, hi]; else bad_flag naming `flag` and the range.
long long int_flag(const std::string& flag, long long v, long long lo, long long hi);
/// @brief `v` if it is finite and in [lo, hi] (lo_open: (lo, hi]); else bad_flag naming `flag`.
double number_flag(const std::string& flag, double v, double lo, double hi, bool lo_open = false);

}  // namespace cli
