// defines: bridge::parse_deepspeed_config (a DeepSpeed config JSON -> ImportedPlan)
#pragma once
#include <string>

#include "bridge/imported_plan.hpp"

namespace bridge {

/// @brief Reads a DeepSpeed config (deepspeed.initialize(config=...)): train_batch_size,
/// train_micro_batch_size_per_gpu, gradient_accumulation_steps, fp16 / bf16, the ZeRO section
/// (stage 0 modelled; stages 1-3 listed as not modelled), reduce_bucket_size (dp_bucket_mb),
/// activation checkpointing (not modelled) and tensor_parallel.autotp_size (tp). Keys that do not
/// change one step's cost (optimizer, scheduler, logging) are listed as ignored, all others as
/// unknown. `world_size`, when known, turns the batch sizes into dp. Throws common::ConfigError
/// naming `source` and the dotted key on malformed values.
ImportedPlan parse_deepspeed_config(const std::string& json_text, const std::string& source);

}  // namespace bridge
