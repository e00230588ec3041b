#include "sim/model.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>

#include "common/config_reader.hpp"
#include "common/embedded_configs.hpp"
#include "common/limits.hpp"
#include "sim/hf_config.hpp"

namespace sim {

std::int64_t ModelSpec::params(std::int64_t seq) const {
  std::int64_t p = vocab * hidden + position_params(seq) + layers * layer_params() + norm_params();
  if (!tied_embeddings) p += vocab * hidden;
  return p;
}

double ModelSpec::training_flops(std::int64_t sequences, std::int64_t seq) const {
  const double tokens = static_cast<double>(sequences) * seq;
  const double pairs = 0.5 * static_cast<double>(seq) * static_cast<double>(seq + 1);  // causal
  const double attn_fwd = 4.0 * pairs * static_cast<double>(head_dim()) * heads * sequences * layers;
  return 6.0 * static_cast<double>(matmul_params()) * tokens + 3.0 * attn_fwd;
}

ModelSpec parse_model(const std::string& yaml_text, const std::string& source) {
  common::ConfigReader r(common::parse_yaml(yaml_text, source), source);
  ModelSpec m;
  m.source = source;
  m.name = r.str("name");
  namespace lim = common::limits;
  m.layers = r.int_in("layers", 1, lim::kMaxLayers);
  m.hidden = r.positive_integer("hidden", lim::kMaxHidden);
  m.heads = r.int_in("heads", 1, lim::kMaxHeads);
  m.kv_heads = r.has("kv_heads") ? r.int_in("kv_heads", 1, lim::kMaxHeads) : m.heads;
  m.ffn_hidden = r.positive_integer("ffn_hidden", lim::kMaxFfnHidden);
  m.vocab = r.positive_integer("vocab", lim::kMaxVocab);
  m.seq_len = r.positive_integer("seq_len", lim::kMaxSeqLen);
  m.norm = r.choice("norm", {"layernorm", "rmsnorm"}) == "layernorm" ? Norm::layernorm : Norm::rmsnorm;
  m.activation = r.choice("activation", {"gelu", "swiglu"}) == "gelu" ? Activation::gelu : Activation::swiglu;
  m.position = r.choice("position", {"learned", "rope"}) == "learned" ? Position::learned : Position::rope;
  m.tied_embeddings = r.boolean("tied_embeddings");
  if (m.hidden % m.heads != 0)
    r.fail("heads", fmt::format("hidden={} is not divisible by heads={}", m.hidden, m.heads));
  if (m.kv_heads <= 0 || m.heads % m.kv_heads != 0)
    r.fail("kv_heads", fmt::format("heads={} is not divisible by kv_heads={}", m.heads, m.kv_heads));
  if (m.position == Position::rope && m.head_dim() % 2 != 0)
    r.fail("position", fmt::format("rope needs an even head_dim, got {}", m.head_dim()));
  r.finish();
  return m;
}

HfImport load_hf_config(const std::string& path) {
  // a file on disk first, then the embedded configs/hf/<path> (so `meta-llama-3-8b/config.json` works anywhere)
  std::string text, source = path;
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    std::fclose(f);
    text = common::read_text_file(path);
  } else {
    const std::string key = "hf/" + path;
    for (const auto& c : common::embedded_configs())
      if (key == c.key) {
        text = c.text;
        source = "configs/" + key + " (embedded)";
      }
    if (text.empty()) {
      std::vector<std::string> known;
      for (const auto& c : common::embedded_configs())
        if (std::string_view(c.key).starts_with("hf/")) known.push_back(std::string(c.key).substr(3));
      throw common::ConfigError(path, "", fmt::format("cannot read this config.json (no such file; embedded: {})", fmt::join(known, ", ")));
    }
  }
  // the model's name: the folder holding config.json ("meta-llama-3-8b"), else the file name
  std::string name = path;
  if (const auto slash = name.rfind('/'); slash != std::string::npos) {
    const std::string file = name.substr(slash + 1);
    name = name.substr(0, slash);
    if (const auto up = name.rfind('/'); up != std::string::npos) name = name.substr(up + 1);
    if (name.empty() || name == ".") name = file;
  }
  if (name.ends_with(".json")) name.resize(name.size() - 5);
  return parse_hf_config(text, source, name);
}

ModelSpec load_model(const std::string& name_or_path) {
  if (is_hf_config(name_or_path)) return load_hf_config(name_or_path).model;
  auto cfg = common::resolve_config("models", name_or_path);
  return parse_model(cfg.text, cfg.source);
}

}  // namespace sim
