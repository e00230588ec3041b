// defines: sim::activation_dtype, Shapes (one tensor-parallel rank's GEMM, attention and
//          element-wise shapes, weight shapes and parameter counts): the one source the builder,
//          the memory model and the tuner's lower bounds read, so that none of them can go stale
//          against the others
//
// Dimension names, here and in the builder (sim/builder.hpp):
//   B  sequences of a slice        S  positions of a slice       T  tokens of a slice = B x S
//   h  hidden size                 tp tensor-parallel size       np norm vectors (2: LayerNorm, 1: RMSNorm)
//   Q  QKV output width / tp = (h + 2 kv_dim) / tp               A  attention output width / tp = h / tp
//   F  ffn_hidden / tp             F1 FC1 output width / tp (2F for SwiGLU: gate and up)
//   V  vocab / tp                  C  column chunks of a row-parallel GEMM (out-proj, FC2)
// A GEMM m x n x k computes [m, n] = [m, k] . [k, n]. Weights are [in, out] (Y = X W), except the
// embedding and the LM head, [V, h] (logits = X W^T).
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "common/units.hpp"
#include "hardware/ops.hpp"
#include "sim/model.hpp"
#include "sim/task.hpp"

namespace sim {

struct Plan;

/// @brief The type activations, weights and their communication are kept in when GEMMs run in
/// `compute`: an fp8 GEMM reads bf16 tensors cast on the fly (TransformerEngine keeps them bf16).
common::DType activation_dtype(common::DType compute);

/// @brief One weight matrix (or norm vector set) of a rank: [rows, cols].
struct WeightShape {
  Op op;  ///< the op that reads it
  std::int64_t rows = 0, cols = 0;
  std::uint8_t variant = 0;  ///< 1: the learned position table beside the token embedding
  std::int64_t params() const { return rows * cols; }
};

/// @brief The shapes one tensor-parallel rank computes with, from the model and the plan's tp,
/// dtype and sequence length. Cheap to make (a few integer divisions).
/// On a 2D / 2.5D grid (Plan::grid_tp) every width is divided by the grid side q instead of tp -
/// tp here is Plan::tp_width() - and so is h: a rank holds [h/q, Q] blocks of the weights and
/// [T, h/q] blocks of the activations, and each GEMM below is one SUMMA step's block product
/// (a linear layer runs q of them; sim/builder_grid.cpp).
struct Shapes {
  Shapes(const ModelSpec& model, const Plan& plan);

  const ModelSpec& model;
  std::int64_t tp, h, Q, A, F, F1, V, np, seq_len;
  common::DType gemm_dtype;  ///< the plan's dtype (fp8 GEMMs stay fp8)
  common::DType act_dtype;   ///< activation_dtype(gemm_dtype)
  hardware::AttentionKernel attention_kernel;  ///< the plan's

  // ---- GEMMs of a slice of T tokens (forward; backward input gradient "dgrad"; weight gradient "wgrad")
  hardware::GemmOp gemm(std::int64_t m, std::int64_t n, std::int64_t k) const {
    return hardware::GemmOp{.m = m, .n = n, .k = k, .dtype = gemm_dtype};
  }
  hardware::GemmOp qkv_fwd(std::int64_t T) const { return gemm(T, Q, h); }
  hardware::GemmOp qkv_dgrad(std::int64_t T) const { return gemm(T, h, Q); }
  hardware::GemmOp qkv_wgrad(std::int64_t T) const { return gemm(h, Q, T); }
  /// Row-parallel: each of C column chunks computes h / C output columns from the A local inputs.
  hardware::GemmOp out_proj_fwd(std::int64_t T, std::int64_t C) const { return gemm(T, h / C, A); }
  hardware::GemmOp out_proj_dgrad(std::int64_t T) const { return gemm(T, A, h); }
  hardware::GemmOp out_proj_wgrad(std::int64_t T) const { return gemm(A, h, T); }
  hardware::GemmOp fc1_fwd(std::int64_t T) const { return gemm(T, F1, h); }
  hardware::GemmOp fc1_dgrad(std::int64_t T) const { return gemm(T, h, F1); }
  hardware::GemmOp fc1_wgrad(std::int64_t T) const { return gemm(h, F1, T); }
  hardware::GemmOp fc2_fwd(std::int64_t T, std::int64_t C) const { return gemm(T, h / C, F); }
  hardware::GemmOp fc2_dgrad(std::int64_t T) const { return gemm(T, F, h); }
  hardware::GemmOp fc2_wgrad(std::int64_t T) const { return gemm(F, h, T); }
  hardware::GemmOp lm_head_fwd(std::int64_t T) const { return gemm(T, V, h); }
  hardware::GemmOp lm_head_dgrad(std::int64_t T) const { return gemm(T, h, V); }
  hardware::GemmOp lm_head_wgrad(std::int64_t T) const { return gemm(V, h, T); }
  /// Causal attention of B sequences' queries at positions [q_offset, q_offset + S) over keys [0, q_offset + S).
  hardware::AttentionOp attention(std::int64_t B, std::int64_t S, std::int64_t q_offset, bool backward) const;
  /// What the attention forward keeps for its backward besides its output, per query row of each
  /// local head (rows: B x heads/tp x S): the unfused kernel its probabilities (one row of
  /// q_offset + S keys, activation dtype); flash attention the log-sum-exp (one fp32 value).
  std::int64_t attention_aux_cols(std::int64_t S, std::int64_t q_offset) const {
    return attention_kernel == hardware::AttentionKernel::flash ? 1 : q_offset + S;
  }
  common::DType attention_aux_dtype() const {
    return attention_kernel == hardware::AttentionKernel::flash ? common::DType::fp32 : act_dtype;
  }
  /// Calls f(gemm, count) for every GEMM of one layer and slice of T tokens, forward and backward,
  /// with C column chunks of each row-parallel GEMM (count: how many times it runs): what the
  /// tuner's GEMM bound sums. The builder emits exactly these (sim/builder.cpp).
  template <typename F>
  void for_each_layer_gemm(std::int64_t T, std::int64_t C, F&& f) const {
    for_each_layer_gemm(T, C, 1, 1, f);
  }
  /// The same with a strategy's token chunks (sim/strategy.hpp, TpOverlap): the AllGather sites
  /// (QKV and FC1 forward, out-proj and FC2 input gradients) cut into `ag` GEMMs of T / ag tokens,
  /// the ReduceScatter sites (out-proj and FC2 forward) into `rs`.
  template <typename F>
  void for_each_layer_gemm(std::int64_t T, std::int64_t C, std::int64_t ag, std::int64_t rs, F&& f) const {
    for_each_layer_fwd_gemm(T, C, ag, rs, f);
    f(fc2_dgrad(T / ag), ag), f(fc2_wgrad(T), 1), f(fc1_dgrad(T), 1), f(fc1_wgrad(T), 1);
    f(out_proj_dgrad(T / ag), ag), f(out_proj_wgrad(T), 1), f(qkv_dgrad(T), 1), f(qkv_wgrad(T), 1);
  }
  /// The forward GEMMs of for_each_layer_gemm alone (what full recompute runs again).
  template <typename F>
  void for_each_layer_fwd_gemm(std::int64_t T, std::int64_t C, std::int64_t ag, std::int64_t rs, F&& f) const {
    f(qkv_fwd(T / ag), ag), f(fc1_fwd(T / ag), ag), f(out_proj_fwd(T / rs, C), C * rs), f(fc2_fwd(T / rs, C), C * rs);
  }
  /// The same for the LM head (forward, input gradient, weight gradient).
  template <typename F>
  void for_each_lm_head_gemm(std::int64_t T, F&& f) const {
    f(lm_head_fwd(T), 1), f(lm_head_dgrad(T), 1), f(lm_head_wgrad(T), 1);
  }

  // ---- element-wise kernels of a slice of T tokens and R rows (R = T / tp under sequence
  // parallelism: the norms and residuals run on the sequence shard), as the builder emits them
  // (sim/builder.cpp; a grid's are its own: sim/builder_grid.cpp)
  hardware::ElementwiseOp elementwise(hardware::ElementwiseKind k, std::int64_t elements, double bytes_per_element,
                                      bool backward = false) const {
    return hardware::ElementwiseOp{
        .kind = k, .elements = elements, .bytes = static_cast<double>(elements) * bytes_per_element, .backward = backward};
  }
  hardware::ElementwiseKind norm_kind() const {
    return model.norm == Norm::layernorm ? hardware::ElementwiseKind::layernorm : hardware::ElementwiseKind::rmsnorm;
  }
  hardware::ElementwiseKind activation_kind() const {
    return model.activation == Activation::gelu ? hardware::ElementwiseKind::gelu : hardware::ElementwiseKind::swiglu;
  }
  int bpe() const { return common::dtype_bytes(act_dtype); }  ///< bytes of an activation element
  hardware::ElementwiseOp norm_fwd(std::int64_t R) const { return elementwise(norm_kind(), R * h, 2.0 * bpe()); }
  hardware::ElementwiseOp norm_bwd(std::int64_t R) const { return elementwise(norm_kind(), R * h, 4.0 * bpe(), true); }
  hardware::ElementwiseOp final_norm_bwd(std::int64_t R) const { return elementwise(norm_kind(), R * h, 3.0 * bpe(), true); }
  hardware::ElementwiseOp residual(std::int64_t R) const { return elementwise(hardware::ElementwiseKind::residual_add, R * h, 3.0 * bpe()); }
  hardware::ElementwiseOp activation_fwd(std::int64_t T) const {
    return elementwise(activation_kind(), T * F, (model.fc1_out() / model.ffn_hidden + 1.0) * bpe());
  }
  hardware::ElementwiseOp activation_bwd(std::int64_t T) const {
    return elementwise(activation_kind(), T * F, (2.0 * F1 / F + 1.0) * bpe(), true);
  }
  /// vocab-parallel cross-entropy: the local max, sum-exp and target logit; then the loss and the logits' gradient
  hardware::ElementwiseOp loss_stats(std::int64_t T) const { return elementwise(hardware::ElementwiseKind::cross_entropy, T * V, 4.0); }
  hardware::ElementwiseOp loss(std::int64_t T) const { return elementwise(hardware::ElementwiseKind::cross_entropy, T * V, 8.0); }
  hardware::ElementwiseOp embedding_fwd(std::int64_t T) const { return elementwise(hardware::ElementwiseKind::embedding, T * h, 2.0 * bpe()); }
  hardware::ElementwiseOp embedding_bwd(std::int64_t T) const {
    return elementwise(hardware::ElementwiseKind::embedding, T * h, bpe() + 8.0, true);
  }
  /// Calls f(op) for every element-wise kernel the builder's layer pieces emit for one slice
  /// (Builder::emit_attn_fwd, emit_attn_residual, emit_mlp_fwd, emit_mlp_residual, then the
  /// backward emit_mlp_bwd, emit_mlp_norm_bwd, emit_attn_norm_bwd: op.backward): the norms,
  /// residual adds and activation. Not the additions some strategies add where they split a GEMM.
  template <typename Fn>
  void for_each_layer_elementwise(std::int64_t T, std::int64_t R, Fn&& f) const {
    f(norm_fwd(R)), f(residual(R)), f(norm_fwd(R)), f(activation_fwd(T)), f(residual(R));
    f(activation_bwd(T)), f(norm_bwd(R)), f(norm_bwd(R));
  }
  /// The same for the head side (Builder::emit_head_fwd, emit_loss, emit_final_norm_bwd).
  template <typename Fn>
  void for_each_head_elementwise(std::int64_t T, std::int64_t R, Fn&& f) const {
    f(norm_fwd(R)), f(loss_stats(T)), f(loss(T)), f(final_norm_bwd(R));
  }
  /// The same for the embedding (Builder::emit_embedding, emit_embedding_bwd).
  template <typename Fn>
  void for_each_embedding_elementwise(std::int64_t T, Fn&& f) const {
    f(embedding_fwd(T)), f(embedding_bwd(T));
  }

  // ---- weights and parameters of this rank
  /// One layer's weights in the order the builder creates them: norm1, qkv, out_proj, norm2, fc1, fc2.
  std::array<WeightShape, 6> layer_weights() const;
  WeightShape embedding() const { return {Op::embedding, V, h, 0}; }
  /// Learned position table [seq_len, h] (the embedding's variant 1); 0 parameters with RoPE.
  WeightShape positions() const { return {Op::embedding, model.position == Position::learned ? seq_len : 0, h, 1}; }
  WeightShape final_norm() const { return {Op::final_norm, np, h, 0}; }
  WeightShape lm_head() const { return {Op::lm_head, V, h, 0}; }
  std::int64_t layer_params() const;
  /// Every parameter the rank holds: embedding, positions, layers, final norm, untied LM head.
  std::int64_t rank_params() const;
  /// A pipeline stage's parameters: `layers` layers, the embedding and positions if it holds the
  /// first virtual stage, the final norm and the head if it holds the last - with tied embeddings
  /// a copy of the embedding when the first is elsewhere (sim/builder.cpp, emit_weights).
  std::int64_t stage_params(bool first, bool last, int layers) const;
};

}  // namespace sim
