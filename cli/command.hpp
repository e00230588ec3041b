// defines: cli::register_command (each cli/*.cpp adds its subcommand), TargetFlags, add_target_flags,
//          fail (one-line errors)
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <string>

#include "bridge/imported_plan.hpp"
#include "hardware/cost_model.hpp"
#include "sim/target.hpp"

namespace cli {

/// @brief Declares one subcommand's flags and callback on `cmd`, which cli::run created with the
/// name and description given to register_command.
using CommandSetup = std::function<void(CLI::App* cmd)>;
/// @brief A subcommand: its name and one-line description (all that `slicetune --help` lists) and
/// how to declare its flags. cli::run declares the flags of the invoked subcommand only.
struct Command {
  std::string name;
  std::string description;
  CommandSetup setup;
};
/// @brief Registers a subcommand (from a static initializer). `order` sorts `slicetune --help`.
bool register_command(int order, std::string name, std::string description, CommandSetup setup);

/// @brief The flags every command that takes a plan shares (simulate, tune, run, validate).
struct TargetFlags {
  std::string model = "gpt3-13b";
  std::string profile;  ///< --profile FILE: profiled cost model; its machine is the cluster unless --cluster is given
  std::string cluster = "dgx-h100";
  // integers are read 64 bits wide and range-checked (common/limits.hpp) before they are narrowed
  long long nodes = 0;
  std::string plan;
  std::string tp_layout, tp_grid_order;
  long long tp_q = 0, tp_d = 0;
  long long tp = 0, dp = 0, pp = 0, vp = 0, micro_batch = 0, global_batch = 0;
  std::string schedule, pipeline_layers, p2p_overlap;
  long long seq_len = 0;
  std::string dtype, strategy, stack;
  std::map<std::string, std::string, std::less<>> knobs;  ///< flag -> text, one per registered knob (sim/strategy.hpp)
  bool sequence_parallel = false;
  double dp_bucket_mb = 0;
  std::string recompute, recompute_method, attention, overlap_grad_reduce, overlap_param_gather;
  long long recompute_layers = 0, zero = 0;
  std::string megatron_args, megatron_args_file, deepspeed_config;  ///< plan sources in other frameworks' terms
  CLI::App* cmd = nullptr;

  /// Converts what was given on the command line into a TargetInput (unset flags stay unset).
  sim::TargetInput input() const;
  /// The plan read from --megatron-args / --megatron-args-file / --deepspeed-config, if any was given.
  std::optional<bridge::ImportedPlan> imported() const;
  /// Resolves the target: from the flags and --plan, or from the imported arguments with the flags
  /// over them (then --model is optional when the arguments describe the model).
  sim::Target resolve(bool check = true) const;
  /// The cost model for a resolved target on its stack: analytic, or profiled with --profile.
  std::unique_ptr<hardware::CostModel> cost_model(const hardware::ClusterSpec& cluster, hardware::Stack stack) const;
};
/// @brief What `--help` says the plan defaults are: the simulator's (bf16, micro-batch 1, eager) or
/// a command's own (run and validate: the executor's).
struct PlanDefaultsHelp {
  std::string micro_batch = "1";
  std::string dtype = "bf16";
  std::string stack = "eager";
};
void add_target_flags(CLI::App* cmd, TargetFlags& f, bool with_plan = true, const PlanDefaultsHelp& defaults = {});
/// @brief The run / validate defaults (executor::resolve_run_target), as --help states them.
PlanDefaultsHelp executor_defaults_help();

/// @brief A command that ran and found the answer is "no" (check: the framework would refuse the
/// plan): main prints the message and exits 1 (bad input exits 2).
struct CommandFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// @brief JSON outputs carry this as "schema_version"; it changes when a field changes meaning.
inline constexpr int kJsonSchemaVersion = 1;

/// @brief This process's rank in an mpirun / srun job, read from the launcher's environment
/// (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID) without starting MPI; 0 otherwise.
/// Errors every rank finds alike are printed by rank 0 only.
int launcher_rank();

/// @brief What simulate, tune and whatif say under --help about the range beside a step time.
inline constexpr const char* kRangeHelp =
    "Step-time range: where the true step time lies if the prediction errs as the model's out-of-sample step predictions did"
    " (predicted / (1 + high) .. predicted / (1 + low)), with the error band of plans of its kind: one node, or across nodes"
    " (configs/accuracy/step-error-bands.yaml, written by slicetune accuracy --bands; how the bands are computed: docs/accuracy.md,"
    " \"Prediction ranges\"). Shown for the analytic cost model on GPU clusters. Plans whose ranges overlap are indistinguishable"
    " within the model's error; errors of plans of one model are correlated, so their order is firmer than either range.";

/// @brief How often each flag ("--tp") was given to a command, as cmd->count(flag) says it. CLI11
/// finds an option by comparing the name with every option's (~15,000 instructions a call: 0.47 M
/// of `simulate`'s 5.5 M for TargetFlags::input's 30 flags); this looks the names up in a table of
/// the command's long names, built once. For a parsed command; holds pointers to its options.
class GivenFlags {
 public:
  explicit GivenFlags(const CLI::App* cmd);
  std::size_t operator()(std::string_view flag) const;

 private:
  const CLI::App* cmd_;
  std::map<std::string, const CLI::Option*, std::less<>> by_name_;
};

/// @brief Throws common::ConfigError for a bad flag value.
[[noreturn]] void bad_flag(const std::string& flag, const std::string& what);
/// @brief `v` if it is in [lo, hi]; else bad_flag naming `flag` and the range.
long long int_flag(const std::string& flag, long long v, long long lo, long long hi);
/// @brief `v` if it is finite and in [lo, hi] (lo_open: (lo, hi]); else bad_flag naming `flag`.
double number_flag(const std::string& flag, double v, double lo, double hi, bool lo_open = false);

}  // namespace cli
