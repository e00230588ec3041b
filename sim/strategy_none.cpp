// Strategy none: Megatron-LM's 1D tensor parallelism without overlap (Shoeybi et al. 2019). One
// slice, one column chunk; every layer's blocks in data order; in backward the weight-gradient GEMM
// waits for the input-gradient collective before it, as Megatron-LM issues them on one stream
// (CUDA_DEVICE_MAX_CONNECTIONS=1), so nothing overlaps the TP communication. The tuner's baseline.
#include <fmt/format.h>

#include "sim/builder.hpp"
#include "sim/strategy.hpp"

namespace sim {

namespace {

/// The weight-gradient GEMM waits for the collective issued before it.
void serialize(Builder& b, const BackwardTasks& t) {
  if (t.collective) b.edge(*t.collective, t.wgrad);
}

void schedule(Builder& b) { schedule_megatron(b, /*layer_wgrad_waits=*/true); }

}  // namespace

void schedule_megatron(Builder& b, bool layer_wgrad_waits) {
  const Slice& s = b.slices().front();  // the whole micro-batch
  const int l0 = b.first_layer(), L = b.end_layer();  // this pass's layers (sim/builder.hpp)
  b.emit_embedding(s);
  for (int l = l0; l < L; ++l) {
    if (l > l0) b.emit_mlp_residual(l - 1, s);
    b.emit_attn_fwd(l, s);
    b.emit_attn_residual(l, s);
    b.emit_mlp_fwd(l, s);
  }
  b.emit_mlp_residual(L - 1, s);
  b.emit_head_fwd(s);
  b.emit_loss(s);

  serialize(b, b.emit_head_bwd(s));  // the LM head: always Megatron-LM's own ColumnParallelLinear
  b.head_grads_ready();
  for (int l = L - 1; l >= l0; --l) {
    if (l == L - 1)
      b.emit_final_norm_bwd(s);
    else
      b.emit_attn_norm_bwd(l + 1, s);
    const BackwardTasks mlp = b.emit_mlp_bwd(l, s);
    if (layer_wgrad_waits) serialize(b, mlp);
    b.mlp_grads_ready(l);
    b.emit_mlp_norm_bwd(l, s);
    const BackwardTasks attn = b.emit_attn_bwd(l, s);
    if (layer_wgrad_waits) serialize(b, attn);
    b.attn_grads_ready(l);
  }
  b.emit_attn_norm_bwd(l0, s);
  b.emit_embedding_bwd(s);
  b.embedding_grads_ready();
}


const Strategy& strategy_none() {
  static const Strategy s{
      .name = "none",
      .description = "Megatron-LM tensor parallelism without overlap (the tuner's baseline)",
      // tp_channels: settable for what-ifs, searched at NCCL's choice only (the baseline is Megatron-LM as run)
      .knobs = {tp_channels_knob({0}, [](const Plan& p) { return p.tp > 1 && !p.grid_tp(); })},
      .baseline = true,
      .searched = true,
      .issues_builder_pieces = true,
      .describe = [](const Plan& p) { return "megatron" + describe_tp_channels(p); },
      .check = [](const ModelSpec&, const hardware::ClusterSpec& c, const Plan& p) { return check_tp_channels(c, p); },
      .schedule = schedule,
      .tp_overlap = [](const Plan& p) { return TpOverlap{.tp_sms = p.tp_channels > 0 ? p.tp_channels : -1}; },
  };
  return s;
}

}  // namespace sim
