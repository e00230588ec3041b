#include "bridge/framework.hpp"

#include "common/config_reader.hpp"

namespace bridge {

std::string_view to_string(Framework f) {
  switch (f) {
    case Framework::megatron: return "megatron";
    case Framework::deepspeed_domino: return "deepspeed-domino";
    case Framework::nemo: return "nemo";
  }
  return "?";
}

std::string_view display_name(Framework f) {
  switch (f) {
    case Framework::megatron: return "Megatron-LM";
    case Framework::deepspeed_domino: return "DeepSpeed-Domino";
    case Framework::nemo: return "NeMo";
  }
  return "?";
}

Framework parse_framework(const std::string& s, const std::string& flag) {
  if (s == "megatron" || s == "megatron-lm") return Framework::megatron;
  if (s == "deepspeed-domino" || s == "deepspeed" || s == "domino") return Framework::deepspeed_domino;
  if (s == "nemo") return Framework::nemo;
  throw common::ConfigError(flag, "", "expected megatron | deepspeed-domino | nemo, got '" + s + "'");
}

}  // namespace bridge
