// defines: sim::ModelSpec (a GPT-style transformer's shape), load_model, load_hf_config
#pragma once
#include <cstdint>
#include <string>

namespace sim {

enum class Norm : std::uint8_t { layernorm, rmsnorm };
enum class Activation : std::uint8_t { gelu, swiglu };
enum class Position : std::uint8_t { learned, rope };

/// @brief A decoder-only transformer. No linear biases (modern practice; < 0.1 % of parameters).
struct ModelSpec {
  std::string name;
  std::string source;
  int layers = 0;
  std::int64_t hidden = 0;      ///< h
  int heads = 0;                ///< query heads
  int kv_heads = 0;             ///< K/V heads (== heads without grouped-query attention)
  std::int64_t ffn_hidden = 0;  ///< MLP inner size (per branch for SwiGLU)
  std::int64_t vocab = 0;
  std::int64_t seq_len = 0;     ///< default (training) sequence length
  Norm norm = Norm::layernorm;
  Activation activation = Activation::gelu;
  Position position = Position::learned;
  bool tied_embeddings = true;

  std::int64_t head_dim() const { return hidden / heads; }
  std::int64_t kv_dim() const { return head_dim() * kv_heads; }
  /// QKV projection output width (all TP ranks): h + 2 * kv_dim.
  std::int64_t qkv_out() const { return hidden + 2 * kv_dim(); }
  /// FC1 output width (all ranks): 2 * ffn for SwiGLU (gate and up), ffn for GeLU.
  std::int64_t fc1_out() const { return activation == Activation::swiglu ? 2 * ffn_hidden : ffn_hidden; }
  /// Matmul weights of one layer (all TP ranks together).
  std::int64_t layer_matmul_params() const { return hidden * qkv_out() + hidden * hidden + hidden * fc1_out() + ffn_hidden * hidden; }
  std::int64_t norm_params() const { return norm == Norm::layernorm ? 2 * hidden : hidden; }
  std::int64_t layer_params() const { return layer_matmul_params() + 2 * norm_params(); }
  std::int64_t position_params(std::int64_t seq) const { return position == Position::learned ? seq * hidden : 0; }
  /// Every parameter (embedding, positions for `seq`, layers, final norm, untied LM head).
  std::int64_t params(std::int64_t seq) const;
  /// Parameters that take part in a matmul per token: layers' weights and the LM head.
  /// 6 x this x tokens is the closed-form training FLOPs without attention.
  std::int64_t matmul_params() const { return layers * layer_matmul_params() + vocab * hidden; }
  /// Closed-form model FLOPs of one training step over `sequences` sequences of `seq` tokens:
  /// 6 x matmul params x tokens + 3 x (causal attention: 2 matmuls x 2 FLOP x pairs x head_dim x heads) x layers.
  double training_flops(std::int64_t sequences, std::int64_t seq) const;
};

/// @brief Loads NAME (embedded configs/models/NAME.yaml), a path to a YAML file (unknown keys are
/// refused) or a Hugging Face config.json (a path, or one embedded under configs/hf/: see sim/hf_config.hpp).
ModelSpec load_model(const std::string& name_or_path);
ModelSpec parse_model(const std::string& yaml_text, const std::string& source);
struct HfImport;
/// @brief Reads a Hugging Face config.json: a file, else the one embedded as configs/hf/<path>.
HfImport load_hf_config(const std::string& path);

}  // namespace sim
