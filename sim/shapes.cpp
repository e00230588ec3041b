#include "sim/shapes.hpp"

#include "sim/plan.hpp"

namespace sim {

common::DType activation_dtype(common::DType compute) { return compute == common::DType::fp8 ? common::DType::bf16 : compute; }

Shapes::Shapes(const ModelSpec& m, const Plan& p)
    : model(m),
      tp(p.tp_width()),
      h(m.hidden / (p.grid_tp() ? p.tp_q : 1)),
      Q(m.qkv_out() / p.tp_width()),
      A(m.hidden / p.tp_width()),
      F(m.ffn_hidden / p.tp_width()),
      F1(m.fc1_out() / p.tp_width()),
      V(m.vocab / p.tp_width()),
      np(m.norm == Norm::layernorm ? 2 : 1),
      seq_len(p.seq_len),
      gemm_dtype(p.dtype),
      act_dtype(activation_dtype(p.dtype)),
      attention_kernel(p.attention) {}

hardware::AttentionOp Shapes::attention(std::int64_t B, std::int64_t S, std::int64_t q_offset, bool backward) const {
  return hardware::AttentionOp{.batch = B,
                               .heads = model.heads / tp,
                               .kv_heads = model.kv_heads / tp,
                               .s_q = S,
                               .s_kv = q_offset + S,
                               .head_dim = model.head_dim(),
                               .q_offset = q_offset,
                               .causal = true,
                               .backward = backward,
                               .dtype = act_dtype,
                               .kernel = attention_kernel};
}

std::array<WeightShape, 6> Shapes::layer_weights() const {
  return {{{Op::norm1, np, h}, {Op::qkv, h, Q}, {Op::out_proj, A, h}, {Op::norm2, np, h}, {Op::fc1, h, F1}, {Op::fc2, F, h}}};
}

std::int64_t Shapes::layer_params() const {
  std::int64_t n = 0;
  for (const auto& w : layer_weights()) n += w.params();
  return n;
}

std::int64_t Shapes::rank_params() const {
  std::int64_t n = embedding().params() + positions().params() + model.layers * layer_params() + final_norm().params();
  if (!model.tied_embeddings) n += lm_head().params();
  return n;
}

}  // namespace sim

namespace sim {

std::int64_t Shapes::stage_params(bool first, bool last, int layers) const {
  std::int64_t n = layers * layer_params();
  if (first) n += embedding().params() + positions().params();
  if (last) {
    n += final_norm().params();
    if (!model.tied_embeddings) n += lm_head().params();
    else if (!first) n += embedding().params();
  }
  return n;
}

}  // namespace sim
