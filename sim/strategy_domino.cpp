// Strategy domino: DeepSpeed-Domino's tensor slicing (Wang et al. 2024). The micro-batch is cut
// into row slices (along the batch or the sequence axis) and the row-parallel GEMMs (out-proj,
// FC2) into column chunks; every block is issued for all slices before the block that consumes its
// collective, so slice i's collective overlaps slice i+1's compute.
//
// The order is the released code's (DeepSpeedExamples training/DeepSpeed-Domino, the example the
// published figures come from; deepspeed/runtime/domino/transformer.py keeps it):
//  - forward: DominoTransformerLayer.forward issues the attention of every slice with an async
//    all-reduce after each, then every slice's MLP; the last slice's MLP all-reduce is synchronous
//    and the layer waits for the others' handles before it returns, so the next layer's compute
//    starts only when all of this layer's MLP collectives are done - the last one is never hidden
//    (at most 3 of 4 forward collectives per layer overlap with 2 slices);
//  - backward: autograd runs a ready node created later first (its ready queue orders by
//    sequence number), so slices run last-to-first; an MLP's input-gradient all-reduce is issued
//    by _CopyToModelParallelRegionA after FC1's MmBackward (dgrad and wgrad) and waited for by
//    NoOper right after the post-attention norm - it overlaps the other slice's MLP backward,
//    and the first slice's overlaps only norm work; the attention's QKV is Megatron-LM 23.08's
//    ColumnParallelLinear, whose backward all-reduces the input gradient asynchronously beside its
//    own wgrad GEMM and waits at its end (handle.wait()), before the next kernel.
// On a 2D / 2.5D grid the same order runs each slice's SUMMA products, norms and attention
// (sim/builder_grid.cpp); no released code composes the two, so a slice's broadcasts and reduces
// are waited for by the tasks that read their results only, letting them overlap the other
// slice's GEMMs. Column chunks are 1D only (check_plan).
#include <fmt/format.h>

#include <algorithm>

#include "sim/builder.hpp"
#include "sim/strategy.hpp"

namespace sim {

namespace {

void schedule(Builder& b) {
  const int l0 = b.first_layer(), L = b.end_layer();  // this pass's layers (sim/builder.hpp)
  const auto& slices = b.slices();
  const bool grid = b.plan().grid_tp();  // 2D / 2.5D: each slice's SUMMA layers (sim/builder_grid.cpp)
  for (const auto& s : slices) b.emit_embedding(s);
  for (int l = l0; l < L; ++l) {
    for (const auto& s : slices) b.emit_attn_fwd(l, s);
    for (const auto& s : slices) {
      b.emit_attn_residual(l, s);
      b.emit_mlp_fwd(l, s);
    }
    // the layer returns after every slice's MLP all-reduce (the last one synchronous)
    for (const auto& s : slices) b.emit_mlp_residual(l, s);
  }
  for (const auto& s : slices) b.emit_head_fwd(s);
  for (const auto& s : slices) b.emit_loss(s);

  // autograd: the slice created last runs first (along the sequence axis this is also what the
  // data needs: slice i's attention backward adds into dK/dV of slices <= i)
  std::vector<Slice> order(slices);
  std::reverse(order.begin(), order.end());
  for (const auto& s : order) b.emit_head_bwd(s);
  b.head_grads_ready();
  for (int l = L - 1; l >= l0; --l) {
    for (const auto& s : order) {
      if (l == L - 1)
        b.emit_final_norm_bwd(s);
      else
        b.emit_attn_norm_bwd(l + 1, s);
    }
    // one slice (the tuner's neutral point) keeps Megatron-LM's task order
    for (const auto& s : order) b.emit_mlp_bwd(l, s, /*wgrad_before_collective=*/order.size() > 1);
    b.mlp_grads_ready(l);
    for (const auto& s : order) b.emit_mlp_norm_bwd(l, s);
    for (const auto& s : order) {
      const BackwardTasks t = b.emit_attn_bwd(l, s);
      // ColumnParallelLinear's handle.wait(); a grid's QKV reduces are waited for by their readers
      if (t.collective && !grid) b.next_compute_waits_for(*t.collective);
    }
    b.attn_grads_ready(l);
  }
  for (const auto& s : order) {
    b.emit_attn_norm_bwd(l0, s);
    b.emit_embedding_bwd(s);
  }
  b.embedding_grads_ready();
}

}  // namespace

const Strategy& strategy_domino() {
  static const Strategy s{
      .name = "domino",
      .description = "DeepSpeed-Domino: row slices and column chunks whose TP collectives overlap the next slice's compute",
      .knobs =
          {
              Knob{.key = "row_slices",
                   .flag = "--row-slices",
                   .help = "domino row slices (default 2 with domino)",
                   .min = 1,
                   .max = 64,
                   .neutral = 1,
                   .default_value = 2,
                   .searched = {1, 2, 4, 8},
                   .refused_as = Infeasibility::row_slices_batch,
                   .get = [](const Plan& p) { return p.row_slices; },
                   .set = [](Plan& p, int v) { p.row_slices = v; },
                   .get_input = [](const PlanInput& in) { return in.row_slices; },
                   .set_input = [](PlanInput& in, int v) { in.row_slices = v; }},
              Knob{.key = "row_axis",
                   .flag = "--row-axis",
                   .help = "batch (default) | sequence",
                   .choices = {"batch", "sequence"},
                   .min = 0,
                   .max = 1,
                   .neutral = 0,
                   .default_value = 0,
                   .searched = {0, 1},
                   .refused_as = Infeasibility::row_slices_sequence,
                   .get = [](const Plan& p) { return static_cast<int>(p.row_axis); },
                   .set = [](Plan& p, int v) { p.row_axis = static_cast<RowAxis>(v); },
                   .get_input =
                       [](const PlanInput& in) {
                         return in.row_axis ? std::optional<int>(static_cast<int>(*in.row_axis)) : std::nullopt;
                       },
                   .set_input = [](PlanInput& in, int v) { in.row_axis = static_cast<RowAxis>(v); },
                   .applies = [](const Plan& p) { return p.row_slices > 1; }},
              Knob{.key = "col_slices",
                   .flag = "--col-slices",
                   .help = "domino column chunks of out-proj / FC2 (default 1)",
                   .min = 1,
                   .max = 64,
                   .neutral = 1,
                   .default_value = 1,
                   .searched = {1, 2, 4},
                   .refused_as = Infeasibility::col_slices,
                   .get = [](const Plan& p) { return p.col_slices; },
                   .set = [](Plan& p, int v) { p.col_slices = v; },
                   .get_input = [](const PlanInput& in) { return in.col_slices; },
                   .set_input = [](PlanInput& in, int v) { in.col_slices = v; }},
              // fewer channels: slower TP collectives, more SMs left to the next slice's GEMMs they overlap
              // (searched where a collective overlaps compute: more than one slice or chunk)
              tp_channels_knob({0, 8}, [](const Plan& p) { return p.tp > 1 && !p.grid_tp() && (p.row_slices > 1 || p.col_slices > 1); }),
          },
      .baseline = false,
      .searched = true,
      .neutral_tasks_are_default = true,  // one slice, one chunk: Megatron-LM's tasks without its ordering edges
      .issues_builder_pieces = true,
      .describe =
          [](const Plan& p) {
            return fmt::format("domino {}x{}{}{}", p.row_slices, p.col_slices, p.row_axis == RowAxis::sequence ? " seq" : "",
                               describe_tp_channels(p));
          },
      .check = [](const ModelSpec&, const hardware::ClusterSpec& c, const Plan& p) { return check_tp_channels(c, p); },
      .schedule = schedule,
      .tp_overlap = [](const Plan& p) { return TpOverlap{.tp_sms = p.tp_channels > 0 ? p.tp_channels : -1}; },
  };
  return s;
}

}  // namespace sim
