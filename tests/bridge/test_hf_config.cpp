// Hugging Face config.json as a model (issue 16: import).
#include <doctest/doctest.h>

#include "common/config_reader.hpp"
#include "sim/hf_config.hpp"
#include "sim/model.hpp"

TEST_CASE("the embedded Llama 3 8B config.json has the model card's shape and parameter count") {
  const sim::ModelSpec m = sim::load_model("meta-llama-3-8b/config.json");
  // Meta's Llama 3 8B model card / config.json
  CHECK(m.name == "meta-llama-3-8b");
  CHECK(m.layers == 32);
  CHECK(m.hidden == 4096);
  CHECK(m.heads == 32);
  CHECK(m.kv_heads == 8);
  CHECK(m.ffn_hidden == 14336);
  CHECK(m.vocab == 128256);
  CHECK(m.seq_len == 8192);
  CHECK(m.norm == sim::Norm::rmsnorm);
  CHECK(m.activation == sim::Activation::swiglu);
  CHECK(m.position == sim::Position::rope);
  CHECK_FALSE(m.tied_embeddings);
  // 8,030,261,248 parameters (Hugging Face's count for Meta-Llama-3-8B): 2 x 128256 x 4096 (embedding + untied
  // head) + 32 x (4096 x 6144 + 4096^2 + 4096 x 28672 + 14336 x 4096 + 2 x 4096) + 4096
  CHECK(m.params(m.seq_len) == 8030261248LL);
  // the same file by its path
  const sim::ModelSpec again = sim::load_model(std::string(SLICETUNE_SOURCE_DIR) + "/configs/hf/meta-llama-3-8b/config.json");
  CHECK(again.params(again.seq_len) == m.params(m.seq_len));
}

TEST_CASE("a GPT-2 config.json: learned positions, LayerNorm, GeLU, tied, n_inner null = 4 x n_embd") {
  const std::string gpt2 = R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "n_inner": null,
    "n_positions": 1024, "n_ctx": 1024, "vocab_size": 50257, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05,
    "resid_pdrop": 0.1, "architectures": ["GPT2LMHeadModel"], "bos_token_id": 50256, "eos_token_id": 50256, "some_new_key": 3})";
  const auto imp = sim::parse_hf_config(gpt2, "gpt2.json", "gpt2");
  const auto& m = imp.model;
  CHECK(m.ffn_hidden == 3072);
  CHECK(m.position == sim::Position::learned);
  CHECK(m.norm == sim::Norm::layernorm);
  CHECK(m.tied_embeddings);
  // GPT-2 small has 124,439,808 parameters; less its 12 x (2304 + 768 + 3072 + 768) = 82,944 linear biases, which
  // slicetune does not model: 124,356,864
  CHECK(m.params(m.seq_len) == 124356864LL);
  // the unknown key is listed, not dropped
  REQUIRE(imp.unknown.size() == 1);
  CHECK(imp.unknown[0].find("some_new_key") != std::string::npos);
}

TEST_CASE("Qwen2's Q/K/V biases are said, its tie flag read; Mistral's sliding window is said") {
  const auto q = sim::parse_hf_config(R"({"model_type":"qwen2","hidden_size":896,"num_hidden_layers":24,"num_attention_heads":14,
    "num_key_value_heads":2,"intermediate_size":4864,"vocab_size":151936,"max_position_embeddings":32768,"hidden_act":"silu",
    "tie_word_embeddings":true})",
                                      "qwen.json", "qwen2-0.5b");
  CHECK(q.model.tied_embeddings);  // Qwen2-0.5B's config.json says tie_word_embeddings: true
  CHECK(q.not_modelled.size() == 1);
  const auto mi = sim::parse_hf_config(R"({"model_type":"mistral","hidden_size":4096,"num_hidden_layers":32,"num_attention_heads":32,
    "num_key_value_heads":8,"intermediate_size":14336,"vocab_size":32000,"max_position_embeddings":32768,"hidden_act":"silu",
    "sliding_window":4096,"tie_word_embeddings":false})",
                                       "mistral.json", "mistral-7b");
  CHECK(mi.model.kv_heads == 8);
  REQUIRE(mi.not_modelled.size() == 1);
  CHECK(mi.not_modelled[0].find("sliding_window") != std::string::npos);
}

TEST_CASE("bad config.json values name the file and the key") {
  auto error_of = [](const std::string& text) {
    try {
      sim::parse_hf_config(text, "bad.json", "bad");
    } catch (const common::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string base = R"("model_type":"llama","hidden_size":4096,"num_attention_heads":32,"intermediate_size":11008,"vocab_size":32000,"max_position_embeddings":4096,"hidden_act":"silu")";
  CHECK(error_of("{" + base + R"(,"num_hidden_layers":-3})") == "bad.json: num_hidden_layers: expected a positive integer below 2^31, got -3");
  CHECK(error_of("{" + base + R"(,"num_hidden_layers":"32"})") == "bad.json: num_hidden_layers: expected a positive integer, got \"32\"");
  CHECK(error_of("{" + base + R"(,"num_hidden_layers":32,"head_dim":256})").find("head_dim") != std::string::npos);
  CHECK(error_of(R"({"model_type":"t5"})").find("model_type: 't5' is not read") != std::string::npos);
  CHECK(error_of("{" + base + "}") == "bad.json: num_hidden_layers: missing (a llama config.json has it)");
}
