// defines: bridge::ExportInput, export_plan (a resolved plan as a framework's own launch script)
#pragma once
#include <string>

#include "bridge/framework.hpp"
#include "hardware/cluster.hpp"
#include "sim/model.hpp"
#include "sim/plan.hpp"

namespace bridge {

struct ExportInput {
  const sim::ModelSpec& model;
  const hardware::ClusterSpec& cluster;
  const sim::Plan& plan;
  std::string headline;  ///< first comment line (what produced the plan, its predicted step time)
};

/// @brief The plan as a bash launch script for `f`: the environment it needs (export lines), the
/// framework's arguments one per line in a bash array with a comment saying what each does, and the
/// launcher line. Megatron-LM and DeepSpeed-Domino: `torchrun` / `deepspeed` + the argument names
/// of megatron/training/arguments.py and domino/arguments.py; NeMo: Hydra overrides of
/// megatron_gpt_config.yaml keys for megatron_gpt_pretraining.py. A plan key the framework cannot
/// express is said in a comment, and kept in a `# slicetune: key=value` line that
/// parse_megatron_args reads back, so export + import gives back the same plan.
std::string export_plan(Framework f, const ExportInput& in);

}  // namespace bridge
