// defines: bridge::Framework (the training frameworks slicetune imports from and exports to),
//          kFrameworks, parse_framework, to_string, display_name
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace bridge {

/// @brief Megatron-LM (megatron/training/arguments.py), DeepSpeed-Domino (DeepSpeedExamples
/// training/DeepSpeed-Domino, launched by `deepspeed`), NeMo (megatron_gpt_config.yaml keys).
enum class Framework : std::uint8_t { megatron, deepspeed_domino, nemo };
std::string_view to_string(Framework f);
/// @brief The framework's own name: "Megatron-LM", "DeepSpeed-Domino", "NeMo".
std::string_view display_name(Framework f);
/// @brief Every framework, in declaration order.
inline constexpr Framework kFrameworks[] = {Framework::megatron, Framework::deepspeed_domino, Framework::nemo};
/// @brief "megatron" | "deepspeed-domino" (also "deepspeed", "domino") | "nemo"; throws
/// common::ConfigError naming `flag` otherwise.
Framework parse_framework(const std::string& s, const std::string& flag);

}  // namespace bridge
