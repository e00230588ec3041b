// StepGraph -> launch list for the CUDA backend (host-only).
#include "executor/cuda/launch_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "executor/cuda/attention_layout.hpp"
#include "executor/grid_pieces.hpp"
#include "executor/tp_pieces.hpp"
#include "executor/zero_layout.hpp"
#include "common/config_reader.hpp"
#include "sim/shapes.hpp"

namespace executor::cuda {
namespace {

using common::DType;
using sim::Op;
using sim::Phase;

constexpr std::uint64_t kAlign = 256;  // cudaMalloc alignment; keeps every tensor 16-byte vectorisable

std::uint64_t align_up(std::uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

[[noreturn]] void unsupported(const sim::StepGraph& g, std::size_t t, const std::string& what) {
  throw common::ConfigError("--backend cuda", g.task_name(t), what);
}

bool is_column_parallel(Op o) { return o == Op::qkv || o == Op::fc1; }
bool is_row_parallel(Op o) { return o == Op::out_proj || o == Op::fc2; }

/// Checks that C[m, n] = op(A) . op(B) agrees with the tensors' shapes (for parts: that each part's
/// row blocks of A and C lie inside their tensors).
void check_gemm_shapes(const sim::StepGraph& g, std::size_t t, const GemmCall& c) {
  const std::int64_t a_rows = c.trans_a ? c.k : c.m, a_cols = c.trans_a ? c.m : c.k;
  const std::int64_t b_rows = c.trans_b ? c.n : c.k, b_cols = c.trans_b ? c.k : c.n;
  for (const auto& p : c.parts) {
    const auto& A = g.tensors[p.a];
    const auto& B = g.tensors[p.b];
    const auto& C = g.tensors[p.c];
    auto inside = [](const sim::TensorInfo& x, std::int64_t offset, std::int64_t rows) {
      return offset >= 0 && offset % x.cols == 0 && offset / x.cols + rows <= x.rows;
    };
    const bool ok = A.cols == a_cols && inside(A, p.a_offset, a_rows) && B.rows == b_rows && B.cols == b_cols &&
                    p.b_offset == 0 && C.cols == c.n && inside(C, p.c_offset, c.m) && A.cols == c.lda && B.cols == c.ldb &&
                    C.cols == c.ldc;
    if (!ok)
      unsupported(
          g, t,
          fmt::format("GEMM piece m={} n={} k={} at rows {} of A and {} of C does not fit its tensors A {}x{}, B {}x{}, C {}x{}",
                      c.m, c.n, c.k, p.a_offset / std::max<std::int64_t>(1, A.cols),
                      p.c_offset / std::max<std::int64_t>(1, C.cols), A.rows, A.cols, B.rows, B.cols, C.rows, C.cols));
  }
  if (!c.parts.empty()) return;
  const auto& A = g.tensors[c.a];
  const auto& B = g.tensors[c.b];
  const auto& C = g.tensors[c.c];
  // a column chunk of B: columns [b_offset, b_offset + n) of a wider matrix
  const bool ok = A.rows == a_rows && A.cols == a_cols && B.rows == b_rows &&
                  (c.trans_b ? B.cols == b_cols : c.b_offset + b_cols <= B.cols) && C.rows == c.m && C.cols == c.n;
  if (!ok)
    unsupported(g, t,
                fmt::format("GEMM m={} n={} k={} does not match its tensors A {}x{}, B {}x{}, C {}x{}", c.m, c.n, c.k, A.rows, A.cols,
                            B.rows, B.cols, C.rows, C.cols));
}

GemmCall plan_gemm(const sim::StepGraph& g, std::size_t t, const TpPieces& pieces, int tp_rank) {
  const auto& task = g.tasks[t];
  const auto& op = std::get<hardware::GemmOp>(task.kind);
  const auto in = g.inputs(t);
  const auto out = g.outputs(t);
  const auto kind = pieces.kind[t];
  const int tp = g.plan.tp;
  using Kind = TpPieces::Kind;
  if (kind == Kind::ag_wgrad) {  // inputs {dY piece 0 .. tp-1, X}: dW += X[piece k's rows]^T . dY_k, one GEMM per piece
    const sim::TensorId x = in.back();
    const auto& dW = g.tensors[out[0]];
    const std::int64_t rows = g.tensors[in[0]].rows;
    GemmCall c{.m = dW.rows, .n = dW.cols, .k = rows, .a = x, .b = in[0], .c = out[0], .trans_a = true, .accumulate = true};
    c.lda = g.tensors[x].cols;
    c.ldb = dW.cols;
    c.ldc = dW.cols;
    for (std::size_t k = 0; k + 1 < in.size(); ++k)
      c.parts.push_back(
          {.a = x, .b = in[k], .c = out[0], .a_offset = TpPieces::ag_shard(tp_rank, static_cast<int>(k), tp) * rows * c.lda});
    check_gemm_shapes(g, t, c);
    if (g.tensors[x].dtype != g.tensors[in[0]].dtype || dW.dtype != common::DType::fp32)
      unsupported(g, t, "weight-gradient pieces need matching operand dtypes and an fp32 gradient");
    return c;
  }
  if (in.size() != 2 || out.size() != 1) unsupported(g, t, "a GEMM task needs 2 inputs and 1 output");
  GemmCall c{.m = op.m, .n = op.n, .k = op.k};
  c.c = out[0];
  switch (task.phase) {
    case Phase::fwd:
      c.a = in[0];
      c.b = in[1];
      if (task.op == Op::lm_head) {  // logits = x . W_head^T, W_head [vocab/tp, h]
        c.trans_b = true;
      } else if (is_row_parallel(task.op) && task.chunk >= 0 && kind == Kind::none) {  // chunk c: output columns [c n, (c+1) n)
        c.b_offset = static_cast<std::int64_t>(task.chunk) * op.n;
      } else if (!is_column_parallel(task.op) && !is_row_parallel(task.op)) {
        unsupported(g, t, "no forward GEMM for this op");
      }
      break;
    case Phase::bwd_dgrad:  // dX = dY . W^T (Y = X W); LM head: dX = dlogits . W_head
      c.a = in[0];
      c.b = in[1];
      c.trans_b = task.op != Op::lm_head;
      break;
    case Phase::bwd_wgrad:  // dW += X^T . dY; LM head: dW_head += dlogits^T . x
      c.accumulate = true;
      c.trans_a = true;
      if (task.op == Op::lm_head) {
        c.a = in[0];
        c.b = in[1];
      } else {
        c.a = in[1];
        c.b = in[0];
      }
      break;
    default: unsupported(g, t, "GEMM in an unexpected phase");
  }
  c.lda = g.tensors[c.a].cols;
  c.ldb = g.tensors[c.b].cols;
  c.ldc = g.tensors[c.c].cols;
  // the pieces of a decomposed TP site (executor/tp_pieces.hpp): row blocks of A or C by TP rank
  const auto& A = g.tensors[c.a];
  const auto& C = g.tensors[c.c];
  if (kind == Kind::ag_gemm) {  // an AllGather step: its shard's rows of the output
    c.parts.push_back({.a = c.a, .b = c.b, .c = c.c, .c_offset = TpPieces::ag_shard(tp_rank, task.chunk, tp) * A.rows * C.cols});
  } else if (kind == Kind::rs_split_gemm) {  // TE's chunk k: rows [p R + k r, p R + (k+1) r) of every TP rank p into row block p
    const std::int64_t R = A.rows / tp, r = C.rows / tp;
    c.m = r;
    for (int p = 0; p < tp; ++p)
      c.parts.push_back(
          {.a = c.a, .b = c.b, .c = c.c, .a_offset = (p * R + task.chunk * r) * A.cols, .c_offset = p * r * C.cols});
  } else if (kind == Kind::rs_peer_gemm) {  // peer step c: the rows of (a sub-chunk of) shard (r + c) mod tp
    c.parts.push_back({.a = c.a, .b = c.b, .c = c.c, .a_offset = pieces.rs_input_row(g, static_cast<std::uint32_t>(t), tp_rank) * A.cols});
  }
  check_gemm_shapes(g, t, c);
  const DType da = g.tensors[c.a].dtype, db = g.tensors[c.b].dtype, dc = g.tensors[c.c].dtype;
  if (da != db) {
    if (da != DType::fp32) unsupported(g, t, "GEMM operands of different dtypes where A is not fp32");
    c.cast_a = true;
  }
  if (c.accumulate && dc != DType::fp32) unsupported(g, t, "weight gradients must be fp32");
  return c;
}

/// A SUMMA step's GEMM (executor/grid_pieces.hpp): forward y (+)= a . b (the head: a . b^T), input
/// gradient c = dy . b^T (the head: dy . b), weight gradient e = a^T . dy (the head: dy^T . a).
GemmCall plan_grid_gemm(const sim::StepGraph& g, std::size_t t, GridPieces::Kind kind) {
  const auto& task = g.tasks[t];
  const auto& op = std::get<hardware::GemmOp>(task.kind);
  const auto in = g.inputs(t);
  const auto out = g.outputs(t);
  const bool head = task.op == Op::lm_head;
  GemmCall c{.m = op.m, .n = op.n, .k = op.k};
  c.c = out[0];
  using K = GridPieces::Kind;
  if (kind == K::summa_fwd) {  // inputs {a, b, y}
    if (in.size() != 3) unsupported(g, t, "a SUMMA step needs inputs {a, b, y}");
    c.a = in[0];
    c.b = in[1];
    c.trans_b = head;
    c.accumulate = task.chunk > 0;
  } else if (kind == K::summa_dgrad) {  // inputs {dy, b}
    c.a = in[0];
    c.b = in[1];
    c.trans_b = !head;
  } else {  // inputs {a, dy}
    c.trans_a = true;
    c.a = head ? in[1] : in[0];
    c.b = head ? in[0] : in[1];
  }
  c.lda = g.tensors[c.a].cols;
  c.ldb = g.tensors[c.b].cols;
  c.ldc = g.tensors[c.c].cols;
  check_gemm_shapes(g, t, c);
  const DType da = g.tensors[c.a].dtype, db = g.tensors[c.b].dtype;
  if (da != db) {
    if (da != DType::fp32) unsupported(g, t, "GEMM operands of different dtypes where A is not fp32");
    c.cast_a = true;  // the head's fp32 dlogits
  }
  return c;
}

LaunchKind elementwise_kind(const sim::StepGraph& g, std::size_t t) {
  const auto& task = g.tasks[t];
  const auto& e = std::get<hardware::ElementwiseOp>(task.kind);
  using hardware::ElementwiseKind;
  switch (e.kind) {
    case ElementwiseKind::embedding: return e.backward ? LaunchKind::embedding_backward : LaunchKind::embedding_forward;
    case ElementwiseKind::layernorm:
    case ElementwiseKind::rmsnorm: return e.backward ? LaunchKind::norm_backward : LaunchKind::norm_forward;
    case ElementwiseKind::gelu:
    case ElementwiseKind::swiglu: return e.backward ? LaunchKind::activation_backward : LaunchKind::activation_forward;
    case ElementwiseKind::residual_add: return LaunchKind::residual_forward;  // a TP site's sum is TpPieces' rs_peer_sum
    case ElementwiseKind::cross_entropy: return task.op == Op::loss_comm ? LaunchKind::cross_entropy_stats : LaunchKind::cross_entropy_loss;
    default: unsupported(g, t, fmt::format("element-wise kind {} has no CUDA kernel", hardware::to_string(e.kind)));
  }
}

LaunchKind collective_kind(const sim::StepGraph& g, std::size_t t) {
  const auto& c = std::get<hardware::CollectiveOp>(g.tasks[t].kind);
  using hardware::CollectiveKind;
  switch (c.kind) {
    case CollectiveKind::all_reduce: return LaunchKind::all_reduce;
    case CollectiveKind::all_gather: return LaunchKind::all_gather;
    case CollectiveKind::reduce_scatter: return LaunchKind::reduce_scatter;
    case CollectiveKind::send_recv: return LaunchKind::send_recv;
    default: unsupported(g, t, fmt::format("collective {} has no NCCL mapping here", hardware::to_string(c.kind)));
  }
}

}  // namespace

std::string_view to_string(LaunchKind k) {
  switch (k) {
    case LaunchKind::gemm: return "gemm";
    case LaunchKind::attention_forward: return "attention_forward";
    case LaunchKind::attention_backward: return "attention_backward";
    case LaunchKind::norm_forward: return "norm_forward";
    case LaunchKind::norm_backward: return "norm_backward";
    case LaunchKind::activation_forward: return "activation_forward";
    case LaunchKind::activation_backward: return "activation_backward";
    case LaunchKind::residual_forward: return "residual_forward";
    case LaunchKind::partial_sum: return "partial_sum";
    case LaunchKind::embedding_forward: return "embedding_forward";
    case LaunchKind::embedding_backward: return "embedding_backward";
    case LaunchKind::cross_entropy_stats: return "cross_entropy_stats";
    case LaunchKind::cross_entropy_loss: return "cross_entropy_loss";
    case LaunchKind::all_reduce: return "all_reduce";
    case LaunchKind::all_gather: return "all_gather";
    case LaunchKind::reduce_scatter: return "reduce_scatter";
    case LaunchKind::send_recv: return "send_recv";
    case LaunchKind::tp_exchange:
      return "tp_exchange";
    case LaunchKind::adamw: return "adamw";
    case LaunchKind::flash_attention_forward: return "flash_attention_forward";
    case LaunchKind::flash_attention_backward: return "flash_attention_backward";
    case LaunchKind::bucket_reduce_scatter: return "bucket_reduce_scatter";
    case LaunchKind::param_all_gather: return "param_all_gather";
    case LaunchKind::broadcast: return "broadcast";
    case LaunchKind::reduce: return "reduce";
    case LaunchKind::grid_norm_stats: return "grid_norm_stats";
    case LaunchKind::grid_norm_sums: return "grid_norm_sums";
    case LaunchKind::grid_norm_forward: return "grid_norm_forward";
    case LaunchKind::grid_norm_backward: return "grid_norm_backward";
  }
  return "?";
}

std::optional<std::string> check_cuda_plan(const sim::ModelSpec& model, const sim::Plan& plan) {
  if (plan.dtype == DType::fp8)
    return std::string("dtype=fp8 is not supported by the CUDA backend (expected bf16, fp16 or fp32)");
  if (plan.row_slices > 1 && plan.row_axis == sim::RowAxis::sequence)
    return fmt::format("row_axis=sequence with row_slices={} is not supported by the CUDA backend (expected row_axis=batch)",
                       plan.row_slices);
  if (plan.col_slices > 8) return fmt::format("col_slices={} is more than the CUDA residual kernel's 8 chunks", plan.col_slices);
  if (model.head_dim() % 2) return fmt::format("head_dim={} is odd; the CUDA attention kernels rotate pairs", model.head_dim());
  if (plan.attention == hardware::AttentionKernel::flash && model.head_dim() > kFlashMaxHeadDim)
    return fmt::format("attention=flash with head_dim={}: the CUDA flash kernel takes head_dim <= {}", model.head_dim(), kFlashMaxHeadDim);
  return std::nullopt;
}

LaunchPlan plan_launches(const sim::StepGraph& g, int tp_rank) {
  if (auto why = check_cuda_plan(g.model, g.plan)) throw common::ConfigError("--backend cuda", "plan", *why);
  LaunchPlan p;
  const std::size_t n = g.size();
  const TpPieces pieces(g);
  const GridPieces grid(g);
  using GK = GridPieces::Kind;

  // ---- tensors: one arena, each tensor at a 256-byte aligned offset ----
  p.tensors.resize(g.tensors.size());
  std::uint64_t off = 0;
  for (std::size_t i = 0; i < g.tensors.size(); ++i) {
    const auto& ti = g.tensors[i];
    p.tensors[i] = {.offset = off, .bytes = static_cast<std::uint64_t>(ti.rows) * static_cast<std::uint64_t>(ti.cols) *
                                            static_cast<std::uint64_t>(common::dtype_bytes(ti.dtype))};
    off += align_up(p.tensors[i].bytes);
    if (ti.role == sim::TensorRole::weight) p.weight_params += static_cast<std::uint64_t>(ti.rows * ti.cols);
  }
  p.arena_bytes = off;

  // ---- launches ----
  p.launches.resize(n);
  const int act_bytes = common::dtype_bytes(sim::activation_dtype(g.plan.dtype));
  for (std::size_t t = 0; t < n; ++t) {
    const auto& task = g.tasks[t];
    Launch& l = p.launches[t];
    l.task = static_cast<std::uint32_t>(t);
    l.stream = task.stream;
    l.once_per_step = task.once_per_step;
    l.step_start = task.step_start;
    if (const GK gk = grid.kind[t]; gk != GK::none) {  // 2D / 2.5D grids
      switch (gk) {
        case GK::summa_fwd:
        case GK::summa_dgrad:
        case GK::summa_wgrad: l.kind = LaunchKind::gemm; l.gemm = plan_grid_gemm(g, t, gk); break;
        case GK::broadcast: l.kind = LaunchKind::broadcast; l.root = task.chunk; break;
        case GK::reduce_set:
        case GK::reduce_add: {
          l.kind = LaunchKind::reduce;
          l.root = task.chunk;
          l.accumulate = gk == GK::reduce_add;
          const auto out = g.outputs(t);
          if (out.size() != 2) unsupported(g, t, "a SUMMA reduce needs outputs {partial, result}");
          const auto& part = g.tensors[out[0]];
          const auto& dst = g.tensors[out[1]];
          if (part.rows * part.cols != dst.rows * dst.cols) unsupported(g, t, "reduces into a tensor of another size");
          if (l.accumulate && dst.dtype != DType::fp32) unsupported(g, t, "weight gradients must be fp32");
          if (!l.accumulate && dst.dtype != part.dtype) unsupported(g, t, "an input-gradient reduce between dtypes");
          if (l.accumulate) p.grid_scratch_bytes = std::max(p.grid_scratch_bytes, align_up(part.bytes()));
          break;
        }
        case GK::norm_stats_fwd: {
          l.kind = LaunchKind::grid_norm_stats;
          l.part = task.chunk;
          const auto& st = g.tensors[g.outputs(t)[0]];
          p.grid_scratch_bytes = std::max(p.grid_scratch_bytes, align_up(static_cast<std::uint64_t>(st.rows) * 4));
          break;
        }
        case GK::norm_stats_bwd:
          l.kind = LaunchKind::grid_norm_sums;
          l.stats = grid.fwd_stats[t];
          l.norm_task = grid.norm_task[t];
          break;
        case GK::norm_fwd: l.kind = LaunchKind::grid_norm_forward; break;
        case GK::norm_bwd:
          l.kind = LaunchKind::grid_norm_backward;
          l.stats = grid.fwd_stats[t];
          l.sums = grid.bwd_sums[t];
          break;
        case GK::none: break;
      }
      if (task.is_collective() && g.on_compute(t)) unsupported(g, t, "a collective on a compute stream");
      if (l.gemm && l.gemm->cast_a) {
        const auto& a = g.tensors[l.gemm->a];
        p.cast_scratch_bytes = std::max<std::uint64_t>(p.cast_scratch_bytes, static_cast<std::uint64_t>(a.rows * a.cols) * act_bytes);
      }
    } else if (std::holds_alternative<hardware::GemmOp>(task.kind)) {
      l.kind = LaunchKind::gemm;
      l.gemm = plan_gemm(g, t, pieces, tp_rank);
      if (l.gemm->cast_a) {
        const auto& a = g.tensors[l.gemm->a];
        p.cast_scratch_bytes = std::max<std::uint64_t>(p.cast_scratch_bytes, static_cast<std::uint64_t>(a.rows * a.cols) * act_bytes);
      }
    } else if (const auto* a = std::get_if<hardware::AttentionOp>(&task.kind)) {
      const bool flash = a->kernel == hardware::AttentionKernel::flash;
      l.kind = flash ? (a->backward ? LaunchKind::flash_attention_backward : LaunchKind::flash_attention_forward)
                     : (a->backward ? LaunchKind::attention_backward : LaunchKind::attention_forward);
      if (a->s_kv != a->s_q || a->q_offset != 0) unsupported(g, t, "attention over earlier sequence slices (row_axis sequence)");
      p.attention_scratch_bytes =
          std::max(p.attention_scratch_bytes, flash ? flash_attention_layout(*a).bytes : attention_layout(*a, act_bytes).bytes);
    } else if (std::holds_alternative<hardware::ElementwiseOp>(task.kind)) {
      l.kind = pieces.kind[t] == TpPieces::Kind::rs_peer_sum ? LaunchKind::partial_sum : elementwise_kind(g, t);
      l.subs = pieces.subs[t];
    } else if (std::holds_alternative<hardware::CollectiveOp>(task.kind)) {
      l.kind = collective_kind(g, t);
      if (g.on_compute(t)) unsupported(g, t, "a collective on a compute stream");
      if (pieces.kind[t] == TpPieces::Kind::ag_exchange || pieces.kind[t] == TpPieces::Kind::rs_peer_exchange) {
        l.kind = LaunchKind::tp_exchange;
        std::tie(l.send_to, l.recv_from) = pieces.exchange_peers(g, static_cast<std::uint32_t>(t), tp_rank);
      }
      if (is_dp_bucket_collective(g, static_cast<std::uint32_t>(t))) {
        const auto b = bucket_layout(g, static_cast<std::uint32_t>(t));
        l.kind = task.op == Op::param_gather ? LaunchKind::param_all_gather : LaunchKind::bucket_reduce_scatter;
        const auto dp = static_cast<std::uint64_t>(g.plan.dp), shard = static_cast<std::uint64_t>(b.shard);
        p.bucket_scratch_bytes = std::max(p.bucket_scratch_bytes, align_up(shard * dp * 4) + align_up(shard * 4));
      }
    } else {
      l.kind = LaunchKind::adamw;
    }
  }

  // ---- cross-stream edges -> events ----
  // One event per producer that has a consumer on another stream, recorded right after it; each
  // such edge adds one wait to the consumer. Vertex order is host issue order, so the record is
  // always issued before the wait (checked: an edge backwards in issue order is refused).
  std::vector<std::optional<std::uint32_t>> event_of(n);
  for (std::size_t u = 0; u < n; ++u) {
    for (auto v : boost::make_iterator_range(g.successors(u))) {
      if (v <= u) unsupported(g, v, fmt::format("depends on task {} issued after it", u));
      if (g.tasks[v].stream == g.tasks[u].stream) continue;  // same in-order stream: nothing to do
      if (g.tasks[u].once_per_step && !g.tasks[v].once_per_step)
        unsupported(g, v, "waits on a once-per-step task from every micro-batch");
      if (!event_of[u]) event_of[u] = p.events++;
      auto& waits = p.launches[v].waits;
      if (std::find(waits.begin(), waits.end(), *event_of[u]) == waits.end()) {
        waits.push_back(*event_of[u]);
        ++p.cross_stream_edges;
      }
    }
    p.launches[u].record = event_of[u];
  }
  return p;
}

}  // namespace executor::cuda
