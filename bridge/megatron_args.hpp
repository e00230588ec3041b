// defines: bridge::parse_megatron_args (a Megatron-LM / DeepSpeed-Domino launch line or argument
//          list -> ImportedPlan)
#pragma once
#include <string>

#include "bridge/imported_plan.hpp"

namespace bridge {

/// @brief Reads Megatron-LM's own argument names (megatron/training/arguments.py; DeepSpeed-Domino's
/// domino/arguments.py uses the same names): model shape, parallel sizes, micro / global batch,
/// precision, sequence parallelism, DDP bucket, CUDA graphs — and the launcher in front of the
/// script (torchrun --nproc-per-node / --nnodes, deepspeed --num_gpus / --num_nodes) for the world
/// size. Accepts a bare argument list, a command line or a whole launch script (quotes, comments,
/// `\` continuations, bash arrays, `export VAR=...`). Flags it cannot model yet (recompute,
/// distributed optimizer, pipeline stages, TE communication overlap, ...) are listed as such;
/// flags it does not know are listed as unknown — none is dropped. Comment lines
/// `# slicetune: key=value ...` (written by `--export`) carry the plan keys the framework cannot
/// express. Framework defaults apply where a flag is absent (no --bf16/--fp16: fp32; with shape
/// flags: LayerNorm, GeLU, learned positions, tied embeddings). Throws common::ConfigError naming
/// `source` and the flag on malformed values.
ImportedPlan parse_megatron_args(const std::string& text, const std::string& source);

}  // namespace bridge
