// defines: sim::HfImport, parse_hf_config (a Hugging Face transformers config.json -> ModelSpec)
#pragma once
#include <string>
#include <vector>

#include "sim/model.hpp"

namespace sim {

/// @brief A model read from a Hugging Face `config.json`, with what could not be carried over.
struct HfImport {
  ModelSpec model;
  std::string family;                   ///< the config's model_type: llama, mistral, qwen2, qwen3, gpt2, gpt_neox
  std::vector<std::string> read;        ///< "key = value -> field" for every key that set a ModelSpec field
  std::vector<std::string> not_modelled;///< keys that change the model but slicetune cannot represent (why)
  std::vector<std::string> ignored;     ///< keys that do not change one training step's cost (token ids, dtype, ...)
  std::vector<std::string> unknown;     ///< keys this reader does not know
};

/// @brief Reads the shape of a Llama / Mistral / Qwen2 / Qwen3 / GPT-2 / GPT-NeoX config.json:
/// hidden, layers, heads, KV heads, FFN, vocab, norm, activation, position (RoPE or learned),
/// tied embeddings; seq_len is max_position_embeddings (n_positions). `name` names the model
/// (e.g. the folder). Throws common::ConfigError naming `source` and the key on missing or
/// malformed values and on shapes slicetune cannot represent (head_dim != hidden / heads).
HfImport parse_hf_config(const std::string& json_text, const std::string& source, const std::string& name);

/// @brief True if `name_or_path` names a Hugging Face config (ends in .json).
bool is_hf_config(const std::string& name_or_path);

}  // namespace sim
