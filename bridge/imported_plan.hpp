// defines: bridge::ImportedPlan (a plan read from another framework's arguments or config),
//          ImportedFlag, ModelOverrides, apply_model, import_report, resolve_imported
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hardware/cluster.hpp"
#include "sim/model.hpp"
#include "sim/plan.hpp"
#include "sim/target.hpp"

namespace bridge {

/// @brief One flag or key as given, and what became of it.
struct ImportedFlag {
  std::string name;   ///< "--recompute-granularity", "zero_optimization.stage"
  std::string value;  ///< as written ("" for a switch)
  std::string what;   ///< the plan or model field it set, or why it is not modelled / ignored
};

/// @brief Model shape given by the framework's own flags (each unset when not given).
struct ModelOverrides {
  std::optional<int> layers, heads, kv_heads;
  std::optional<std::int64_t> hidden, ffn_hidden, vocab, max_positions;
  std::optional<sim::Norm> norm;
  std::optional<sim::Activation> activation;
  std::optional<sim::Position> position;
  std::optional<bool> tied_embeddings;
  bool any() const;
  /// All of layers, hidden, heads and vocab given: enough to describe a model without --model.
  bool complete() const { return layers && hidden && heads && vocab; }
};

/// @brief What an importer read. Nothing is dropped silently: every flag lands in exactly one of
/// modelled / not_modelled / ignored / unknown.
struct ImportedPlan {
  std::string source;
  sim::PlanInput plan;
  ModelOverrides model;
  std::optional<int> world_size;      ///< GPUs in the job (launcher: nproc x nnodes, or WORLD_SIZE)
  std::optional<int> nodes;           ///< launcher --nnodes
  std::optional<int> pp;              ///< pipeline stages as given (also in plan.pp)
  std::optional<int> layers_per_virtual_stage;  ///< Megatron-LM's --num-layers-per-virtual-pipeline-stage (vp from the model's layers)
  std::vector<ImportedFlag> modelled;      ///< set a plan or model field
  std::vector<ImportedFlag> not_modelled;  ///< change the step but slicetune cannot model them yet (recompute, ...)
  std::vector<ImportedFlag> ignored;       ///< do not change one step's cost (learning rate, data paths, ...)
  std::vector<ImportedFlag> unknown;       ///< not recognised at all
  std::map<std::string, std::string> env;    ///< VAR=value set in the script (export lines)
  std::map<std::string, std::string> flags;  ///< every flag as given (name -> value), for preflight rules

  bool has_flag(const std::string& name) const { return flags.count(name) > 0; }
  /// Merges `other` (e.g. a DeepSpeed config beside Megatron-style arguments): its plan fields
  /// replace ours where set, its lists and maps are appended.
  void merge(const ImportedPlan& other);
};

/// @brief `base` with the overrides applied (a field given by the framework replaces the model's).
/// Throws common::ConfigError naming `source` when the result is not a valid model.
sim::ModelSpec apply_model(const sim::ModelSpec& base, const ModelOverrides& o, const std::string& source);
/// @brief A model made from the overrides alone (complete() must hold); seq_len from `seq_len`.
sim::ModelSpec model_from_overrides(const ModelOverrides& o, std::int64_t seq_len, const std::string& name, const std::string& source);

/// @brief Human-readable account of an import: one line per flag, grouped.
std::string import_report(const ImportedPlan& p);

/// @brief The target of an import: the model (`--model` if given, with the import's shape flags
/// applied, else the shape flags alone), the cluster (node count from the launcher's --nnodes /
/// world size unless `nodes` is given) and the plan (the import's, then `flags` over it).
sim::Target resolve_imported(const ImportedPlan& imp, const sim::TargetInput& in, bool check = true);

}  // namespace bridge
