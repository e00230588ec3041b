// The builder's activation recompute (the part of sim::Builder that sim/builder.hpp's header
// comment calls "activation recompute"; the settings: sim/recompute.hpp). Megatron-LM issues a
// checkpointed chunk's second forward when autograd reaches the chunk's output, i.e. right before
// the backward of its top layer, and its selective (core attention) recompute right before the
// attention backward; the builder emits them at the same points, so a strategy's backward order
// decides when they run (Domino: one slice's recompute beside another slice's backward).
#include "sim/builder.hpp"

namespace sim {

void Builder::ensure_recomputed(int l, const Slice& s) {
  if (rc_chunks_.empty() || recomputing_) return;
  const int c = chunk_of_layer_[l];
  if (c < 0 || recomputed_[c][s.index]) return;
  if (p_.row_axis == RowAxis::sequence && slices_.size() > 1) {
    // slice i's attention reads the keys of slices 0..i: recompute the chunk for every slice, in order
    for (const auto& t : slices_)
      if (!recomputed_[c][t.index]) recompute_chunk(c, t);
    return;
  }
  recompute_chunk(c, s);
}

void Builder::recompute_chunk(int c, const Slice& s) {
  const RecomputeChunk& k = rc_chunks_[c];
  recomputed_[c][s.index] = 1;
  auto& st = ss_[s.index];
  const TensorId keep_x = st.x;
  const std::vector<TensorId> keep_partial = st.partial;
  st.x = saved_[k.first][s.index].x;  // the checkpoint: the chunk's input, kept from the first forward
  recomputing_ = true;
  for (int l = k.first; l < k.end; ++l) {
    emit_attn_fwd(l, s);
    emit_attn_residual(l, s);
    emit_mlp_fwd(l, s);
    emit_mlp_residual(l, s);  // the chunk's output: Megatron-LM recomputes it too (nobody reads it)
  }
  recomputing_ = false;
  st.x = keep_x;
  st.partial = keep_partial;
}

TensorId Builder::recompute_attention(int l, const Slice& s) {
  auto& sv = saved_[l][s.index];
  const std::int64_t T = s.tokens();
  recomputing_ = true;
  const TensorId ctx = act(T, sh_.A, Op::attention, l, s.index);
  sv.aux = tensor(s.batch * (m_.heads / p_.tp) * s.seq, sh_.attention_aux_cols(s.seq, s.q_offset), sh_.attention_aux_dtype(),
                  TensorRole::activation, Op::attention, l, s.index, -1, false, 1);
  const TensorId outs[] = {ctx, sv.aux};
  add(task(sh_.attention(s.batch, s.seq, s.q_offset, false), Op::attention, Phase::fwd, l, s), kv_reads_[l][s.index], outs);
  recomputing_ = false;
  return ctx;
}

}  // namespace sim
