#include "sim/hf_config.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <set>

#include "common/config_reader.hpp"
#include "common/strict_json.hpp"
#include "sim/plan_limits.hpp"

namespace sim {

bool is_hf_config(const std::string& name_or_path) { return name_or_path.ends_with(".json"); }

namespace {

using Json = nlohmann::json;

/// One config.json mapping, read strictly: every key is accounted for (read, not modelled,
/// ignored or unknown) and numbers are checked for type, range and integer width.
class HfReader {
 public:
  HfReader(const Json& j, std::string source, HfImport& out) : j_(j), source_(std::move(source)), out_(out) {}

  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  std::int64_t positive_int(const char* key, const char* field) {
    const Json& v = need(key);
    if (!v.is_number_integer() && !(v.is_number_float() && is_whole(v.get<double>())))
      fail(key, fmt::format("expected a positive integer, got {}", v.dump()));
    const double d = v.get<double>();
    if (!(d > 0) || d > static_cast<double>(std::numeric_limits<int>::max()))
      fail(key, fmt::format("expected a positive integer below 2^31, got {}", v.dump()));
    used(key, fmt::format("{} = {} -> {}", key, v.dump(), field));
    return static_cast<std::int64_t>(d);
  }
  std::string text(const char* key, const char* field) {
    const Json& v = need(key);
    if (!v.is_string()) fail(key, fmt::format("expected a string, got {}", v.dump()));
    used(key, fmt::format("{} = {} -> {}", key, v.dump(), field));
    return v.get<std::string>();
  }
  bool boolean_or(const char* key, bool fallback, const char* field) {
    if (!has(key)) {
      out_.read.push_back(fmt::format("{} (absent: {} default {}) -> {}", key, out_.family, fallback, field));
      seen_.insert(key);
      return fallback;
    }
    const Json& v = j_.at(key);
    if (!v.is_boolean()) fail(key, fmt::format("expected true or false, got {}", v.dump()));
    used(key, fmt::format("{} = {} -> {}", key, v.dump(), field));
    return v.get<bool>();
  }
  double number(const char* key) {
    const Json& v = need(key);
    if (!v.is_number() || !std::isfinite(v.get<double>())) fail(key, fmt::format("expected a finite number, got {}", v.dump()));
    return v.get<double>();
  }
  void not_modelled(const char* key, const std::string& why) {
    if (!j_.contains(key)) return;
    seen_.insert(key);
    out_.not_modelled.push_back(fmt::format("{} = {}: {}", key, j_.at(key).dump(), why));
  }
  void mark(const char* key, const std::string& what) {
    if (!j_.contains(key)) return;
    seen_.insert(key);
    out_.read.push_back(fmt::format("{} = {} -> {}", key, j_.at(key).dump(), what));
  }
  void finish(const std::set<std::string>& ignorable) {
    for (const auto& [k, v] : j_.items()) {
      if (seen_.count(k)) continue;
      if (ignorable.count(k) || k.ends_with("_token_id") || k.ends_with("dropout") || k.ends_with("_pdrop"))
        out_.ignored.push_back(fmt::format("{} = {}", k, v.dump()));
      else
        out_.unknown.push_back(fmt::format("{} = {}", k, v.dump()));
    }
  }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const { throw common::ConfigError(source_, key, what); }

 private:
  static bool is_whole(double d) { return std::isfinite(d) && d == std::floor(d); }
  const Json& need(const char* key) {
    if (!has(key)) fail(key, fmt::format("missing (a {} config.json has it)", out_.family));
    return j_.at(key);
  }
  void used(const char* key, std::string line) {
    seen_.insert(key);
    out_.read.push_back(std::move(line));
  }
  const Json& j_;
  std::string source_;
  HfImport& out_;
  std::set<std::string> seen_;
};

// Keys every family may carry that do not change the cost of a training step.
const std::set<std::string> kIgnorable{
    "architectures", "torch_dtype", "transformers_version", "use_cache", "initializer_range", "initializer_factor",
    "pretraining_tp", "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "model_type", "_name_or_path",
    "bos_token_id", "eos_token_id", "pad_token_id", "output_attentions", "output_hidden_states", "return_dict",
    "task_specific_params", "summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels",
    "summary_first_dropout", "scale_attn_weights", "reorder_and_upcast_attn", "scale_attn_by_inverse_layer_idx",
    "rope_theta", "rotary_emb_base", "mlp_bias", "use_sliding_window", "max_window_layers", "n_ctx", "resid_pdrop",
    "embd_pdrop", "attn_pdrop", "hidden_dropout", "attention_dropout", "classifier_dropout", "is_decoder",
    "tokenizer_class", "prefix", "id2label", "label2id", "problem_type", "use_parallel_residual"};

HfImport read_llama_like(const Json& j, const std::string& source, HfImport out) {
  HfReader r(j, source, out);
  ModelSpec& m = out.model;
  m.layers = static_cast<int>(r.positive_int("num_hidden_layers", "layers"));
  m.hidden = r.positive_int("hidden_size", "hidden");
  m.heads = static_cast<int>(r.positive_int("num_attention_heads", "heads"));
  if (r.has("num_key_value_heads")) m.kv_heads = static_cast<int>(r.positive_int("num_key_value_heads", "kv_heads"));
  else {
    m.kv_heads = m.heads;
    out.read.push_back("num_key_value_heads (absent: = num_attention_heads) -> kv_heads");
  }
  m.ffn_hidden = r.positive_int("intermediate_size", "ffn_hidden (per branch of the gated MLP)");
  m.vocab = r.positive_int("vocab_size", "vocab");
  m.seq_len = r.positive_int("max_position_embeddings", "seq_len (the default training sequence length)");
  const std::string act = r.text("hidden_act", "activation swiglu (gated MLP: act(gate) x up)");
  if (act != "silu" && act != "swish")
    r.fail("hidden_act", fmt::format("'{}': slicetune models the gated MLP with SiLU (SwiGLU); expected silu", act));
  m.activation = Activation::swiglu;
  m.norm = Norm::rmsnorm;
  r.mark("rms_norm_eps", "norm rmsnorm");
  m.position = Position::rope;
  r.mark("rope_theta", "position rope (theta does not change the cost)");
  m.tied_embeddings = r.boolean_or("tie_word_embeddings", false, "tied_embeddings");  // transformers: LlamaConfig, MistralConfig, Qwen2Config default False
  if (r.has("head_dim")) {
    const auto hd = r.positive_int("head_dim", "head_dim (checked)");
    if (hd * m.heads != m.hidden)
      r.fail("head_dim", fmt::format("{} x {} heads != hidden {}: slicetune assumes head_dim = hidden / heads", hd, m.heads, m.hidden));
  }
  if (r.has("attention_bias") && j.at("attention_bias").is_boolean() && j.at("attention_bias").get<bool>())
    r.not_modelled("attention_bias", "Q/K/V biases (slicetune models no linear biases; < 0.1 % of the FLOPs)");
  else r.mark("attention_bias", "none (as modelled)");
  if (out.family == "qwen2")
    out.not_modelled.push_back("model_type qwen2: its Q/K/V projections carry biases (slicetune models none; < 0.1 % of the FLOPs)");
  if (r.has("rope_scaling")) r.not_modelled("rope_scaling", "long-context RoPE scaling changes no step cost; read and set aside");
  else r.mark("rope_scaling", "none");
  if (r.has("sliding_window"))
    r.not_modelled("sliding_window", "sliding-window attention is priced as full causal attention (an upper bound when seq_len > window)");
  else r.mark("sliding_window", "none");
  if (r.has("num_experts") || r.has("num_local_experts"))
    r.fail(r.has("num_experts") ? "num_experts" : "num_local_experts", "mixture-of-experts models are not modelled yet");
  r.finish(kIgnorable);
  return out;
}

HfImport read_gpt2(const Json& j, const std::string& source, HfImport out) {
  HfReader r(j, source, out);
  ModelSpec& m = out.model;
  m.layers = static_cast<int>(r.positive_int("n_layer", "layers"));
  m.hidden = r.positive_int("n_embd", "hidden");
  m.heads = static_cast<int>(r.positive_int("n_head", "heads"));
  m.kv_heads = m.heads;
  if (r.has("n_inner")) m.ffn_hidden = r.positive_int("n_inner", "ffn_hidden");
  else {
    m.ffn_hidden = 4 * m.hidden;
    r.mark("n_inner", "null: 4 x n_embd -> ffn_hidden");
    if (!j.contains("n_inner")) out.read.push_back("n_inner (absent: 4 x n_embd) -> ffn_hidden");
  }
  m.vocab = r.positive_int("vocab_size", "vocab");
  m.seq_len = r.positive_int("n_positions", "seq_len and learned positions");
  std::string act = "gelu_new";
  if (r.has("activation_function")) act = r.text("activation_function", "activation gelu");
  if (act.rfind("gelu", 0) != 0) r.fail("activation_function", fmt::format("'{}': expected a gelu variant", act));
  m.activation = Activation::gelu;
  m.norm = Norm::layernorm;
  r.mark("layer_norm_epsilon", "norm layernorm");
  m.position = Position::learned;
  m.tied_embeddings = r.boolean_or("tie_word_embeddings", true, "tied_embeddings");
  r.finish(kIgnorable);
  return out;
}

HfImport read_neox(const Json& j, const std::string& source, HfImport out) {
  HfReader r(j, source, out);
  ModelSpec& m = out.model;
  m.layers = static_cast<int>(r.positive_int("num_hidden_layers", "layers"));
  m.hidden = r.positive_int("hidden_size", "hidden");
  m.heads = static_cast<int>(r.positive_int("num_attention_heads", "heads"));
  m.kv_heads = m.heads;
  m.ffn_hidden = r.positive_int("intermediate_size", "ffn_hidden");
  m.vocab = r.positive_int("vocab_size", "vocab");
  m.seq_len = r.positive_int("max_position_embeddings", "seq_len");
  const std::string act = r.has("hidden_act") ? r.text("hidden_act", "activation gelu") : "gelu";
  if (act.rfind("gelu", 0) != 0) r.fail("hidden_act", fmt::format("'{}': expected a gelu variant", act));
  m.activation = Activation::gelu;
  m.norm = Norm::layernorm;
  r.mark("layer_norm_eps", "norm layernorm");
  m.position = Position::rope;
  if (r.has("rotary_pct") && r.number("rotary_pct") != 1.0)
    r.not_modelled("rotary_pct", "partial rotary embedding (RoPE is element-wise; priced over the whole head)");
  else r.mark("rotary_pct", "position rope");
  r.mark("use_parallel_residual", "parallel attention + MLP residual: the same GEMMs and collectives, not reordered in the graph");
  m.tied_embeddings = r.boolean_or("tie_word_embeddings", false, "tied_embeddings");
  r.finish(kIgnorable);
  return out;
}

}  // namespace

HfImport parse_hf_config(const std::string& json_text, const std::string& source, const std::string& name) {
  Json j;
  try {
    j = common::parse_json_strict(json_text, source, "a JSON config.json");  // duplicate keys, deep nesting refused
  } catch (const Json::exception& e) {
    throw common::ConfigError(source, "", fmt::format("not a JSON config.json: {}", e.what()));
  }
  if (!j.is_object()) throw common::ConfigError(source, "", "expected a JSON object (a Hugging Face config.json)");
  if (!j.contains("model_type") || !j.at("model_type").is_string())
    throw common::ConfigError(source, "model_type", "missing (a Hugging Face config.json names its model_type)");
  HfImport out;
  out.family = j.at("model_type").get<std::string>();
  out.model.name = name;
  out.model.source = source;
  if (out.family == "llama" || out.family == "mistral" || out.family == "qwen2" || out.family == "qwen3")
    out = read_llama_like(j, source, std::move(out));
  else if (out.family == "gpt2")
    out = read_gpt2(j, source, std::move(out));
  else if (out.family == "gpt_neox")
    out = read_neox(j, source, std::move(out));
  else
    throw common::ConfigError(source, "model_type",
                              fmt::format("'{}' is not read (expected llama | mistral | qwen2 | qwen3 | gpt2 | gpt_neox)", out.family));
  const ModelSpec& m = out.model;
  check_model_limits(m, source);  // the sizes a model file may have (common/limits.hpp)
  if (m.hidden % m.heads != 0)
    throw common::ConfigError(source, "num_attention_heads", fmt::format("hidden={} is not divisible by heads={}", m.hidden, m.heads));
  if (m.kv_heads <= 0 || m.heads % m.kv_heads != 0)
    throw common::ConfigError(source, "num_key_value_heads", fmt::format("heads={} is not divisible by kv_heads={}", m.heads, m.kv_heads));
  if (m.position == Position::rope && m.head_dim() % 2 != 0)
    throw common::ConfigError(source, "hidden_size", fmt::format("RoPE needs an even head_dim, got {}", m.head_dim()));
  return out;
}

}  // namespace sim
