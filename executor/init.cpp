#include "executor/init.hpp"

#include <cmath>

#include "common/config_reader.hpp"

namespace executor {
namespace {

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
/// Uniform in [0, 1) from a 64-bit hash.
double unit(std::uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }

/// What splits a weight's widths: tp under 1D, the grid side q on a grid.
int tp_of(const sim::StepGraph& g) { return g.plan.tp_width(); }

/// Row-sharded (vocab-parallel, row-parallel): the rank's rows are one block of the full weight.
std::int64_t rows_index(const sim::StepGraph&, const sim::TensorInfo& t, int r, std::int64_t row, std::int64_t col) {
  return (static_cast<std::int64_t>(r) * t.rows + row) * t.cols + col;
}
std::int64_t same_index(const sim::StepGraph&, const sim::TensorInfo& t, int, std::int64_t row, std::int64_t col) {
  return row * t.cols + col;
}
/// Column `col` of 1D TP rank r's QKV block in the full [Q | K | V] columns.
std::int64_t qkv_col(const sim::StepGraph& g, int r, std::int64_t col) {
  const std::int64_t h = g.model.hidden, kvd = g.model.kv_dim(), tp = tp_of(g);
  const std::int64_t ql = h / tp, kl = kvd / tp;
  if (col < ql) return r * ql + col;
  if (col < ql + kl) return h + r * kl + (col - ql);
  return h + kvd + r * kl + (col - ql - kl);
}
/// Column `col` of 1D TP rank r's FC1 block in the full [gate | up] (SwiGLU) or FC1 columns.
std::int64_t fc1_col(const sim::StepGraph& g, int r, std::int64_t col) {
  const std::int64_t f = g.model.ffn_hidden, tp = tp_of(g), fl = f / tp;
  if (g.model.activation == sim::Activation::gelu) return r * fl + col;
  return col < fl ? r * fl + col : f + r * fl + (col - fl);
}
std::int64_t qkv_index(const sim::StepGraph& g, const sim::TensorInfo&, int r, std::int64_t row, std::int64_t col) {
  return row * (g.model.hidden + 2 * g.model.kv_dim()) + qkv_col(g, r, col);
}
std::int64_t fc1_index(const sim::StepGraph& g, const sim::TensorInfo&, int r, std::int64_t row, std::int64_t col) {
  return row * g.model.fc1_out() + fc1_col(g, r, col);
}

// ---- 2D / 2.5D grids: rank (row i, column j) holds an [in/q, out/q] block of every matrix
sim::Plan::GridCoord at(const sim::StepGraph& g, int tp_rank) { return g.plan.grid_coord(tp_rank); }
/// Block (i, j): rows of block i, columns of block j (out-proj, FC2, the embedding).
std::int64_t grid_block_index(const sim::StepGraph& g, const sim::TensorInfo& t, int r, std::int64_t row, std::int64_t col) {
  const auto c = at(g, r);
  return (c.row * t.rows + row) * (t.cols * g.plan.tp_q) + c.col * t.cols + col;
}
/// The LM head [vocab block j, hidden block i] (the transpose of W^T's block (i, j)).
std::int64_t grid_head_index(const sim::StepGraph& g, const sim::TensorInfo& t, int r, std::int64_t row, std::int64_t col) {
  const auto c = at(g, r);
  return (c.col * t.rows + row) * (t.cols * g.plan.tp_q) + c.row * t.cols + col;
}
/// Columns of block j, every row (norms, learned positions: the same on every row of a column).
std::int64_t grid_cols_index(const sim::StepGraph& g, const sim::TensorInfo& t, int r, std::int64_t row, std::int64_t col) {
  return row * (t.cols * g.plan.tp_q) + at(g, r).col * t.cols + col;
}
std::int64_t grid_qkv_index(const sim::StepGraph& g, const sim::TensorInfo& t, int r, std::int64_t row, std::int64_t col) {
  const auto c = at(g, r);
  return (c.row * t.rows + row) * (g.model.hidden + 2 * g.model.kv_dim()) + qkv_col(g, c.col, col);
}
std::int64_t grid_fc1_index(const sim::StepGraph& g, const sim::TensorInfo& t, int r, std::int64_t row, std::int64_t col) {
  const auto c = at(g, r);
  return (c.row * t.rows + row) * g.model.fc1_out() + fc1_col(g, c.col, col);
}

WeightLayout grid_weight_layout(const sim::StepGraph& g, const sim::TensorInfo& t) {
  const std::int64_t q = g.plan.tp_q;
  switch (t.op) {
    case sim::Op::embedding:
      if (t.variant == 1) return {t.rows, t.cols * q, true, grid_cols_index};  // learned positions
      return {t.rows * q, t.cols * q, false, grid_block_index};
    case sim::Op::lm_head: return {t.rows * q, t.cols * q, false, grid_head_index};
    case sim::Op::norm1:
    case sim::Op::norm2:
    case sim::Op::final_norm: return {t.rows, t.cols * q, true, grid_cols_index};
    case sim::Op::qkv: return {t.rows * q, t.cols * q, false, grid_qkv_index};
    case sim::Op::fc1: return {t.rows * q, t.cols * q, false, grid_fc1_index};
    case sim::Op::out_proj:
    case sim::Op::fc2: return {t.rows * q, t.cols * q, false, grid_block_index};
    default: throw std::logic_error("weight_layout: no grid layout for " + t.name());
  }
}

}  // namespace

WeightLayout weight_layout(const sim::StepGraph& g, sim::TensorId id) {
  const auto& t = g.tensors[id];
  if (t.role != sim::TensorRole::weight && t.role != sim::TensorRole::weight_grad)
    throw std::logic_error("weight_layout: tensor " + t.name() + " is not a weight");
  if (g.plan.grid_tp()) return grid_weight_layout(g, t);
  const std::int64_t tp = tp_of(g);
  switch (t.op) {
    case sim::Op::embedding:
      if (t.variant == 1) return {t.rows, t.cols, true, same_index};  // learned positions
      return {t.rows * tp, t.cols, false, rows_index};
    case sim::Op::lm_head: return {t.rows * tp, t.cols, false, rows_index};
    case sim::Op::norm1:
    case sim::Op::norm2:
    case sim::Op::final_norm: return {t.rows, t.cols, true, same_index};
    case sim::Op::qkv: return {t.rows, t.cols * tp, false, qkv_index};
    case sim::Op::fc1: return {t.rows, t.cols * tp, false, fc1_index};
    case sim::Op::out_proj:
    case sim::Op::fc2: return {t.rows * tp, t.cols, false, rows_index};
    default: throw std::logic_error("weight_layout: no layout for " + t.name());
  }
}

std::vector<float> init_weight(const sim::StepGraph& g, sim::TensorId id, int tp_rank, std::uint64_t seed) {
  const auto& t = g.tensors[id];
  std::vector<float> w(static_cast<std::size_t>(t.rows * t.cols));
  const bool norm = t.op == sim::Op::norm1 || t.op == sim::Op::norm2 || t.op == sim::Op::final_norm;
  if (norm) {  // scale 1, bias 0
    for (std::int64_t c = 0; c < t.cols; ++c) w[static_cast<std::size_t>(c)] = 1.0f;
    return w;
  }
  double std = 0.02;
  if (t.op == sim::Op::out_proj || t.op == sim::Op::fc2) std /= std::sqrt(2.0 * g.model.layers);
  const double half_width = std * std::sqrt(3.0);  // uniform with this standard deviation
  const auto layout = weight_layout(g, id);
  const std::uint64_t key = splitmix(seed ^ splitmix((static_cast<std::uint64_t>(t.op) << 40) ^
                                                     (static_cast<std::uint64_t>(t.layer + 1) << 8) ^ t.variant));
  for (std::int64_t r = 0; r < t.rows; ++r)
    for (std::int64_t c = 0; c < t.cols; ++c) {
      const auto gi = static_cast<std::uint64_t>(layout.global_index(g, t, tp_rank, r, c));
      w[static_cast<std::size_t>(r * t.cols + c)] = static_cast<float>((2.0 * unit(splitmix(key ^ splitmix(gi))) - 1.0) * half_width);
    }
  return w;
}

bool decays(const sim::TensorInfo& w) {
  return !(w.op == sim::Op::norm1 || w.op == sim::Op::norm2 || w.op == sim::Op::final_norm);
}

std::int64_t tokens_per_step(const sim::Plan& p) { return static_cast<std::int64_t>(p.global_batch) * p.seq_len; }

static std::size_t n_batches(const sim::StepGraph& g) { return static_cast<std::size_t>(g.micro_batches * g.plan.row_slices); }

Batch make_batch(const sim::StepGraph& g, std::uint64_t seed, int step, int micro0, int dp_rank, int tp_rank) {
  const auto& p = g.plan;
  const std::int64_t V = g.model.vocab, S = p.seq_len;
  const int slices = p.row_slices;
  Batch b;
  const auto n = static_cast<std::size_t>(g.micro_batches * slices);
  b.tokens.resize(n);
  b.targets.resize(n);
  b.positions.resize(n);
  for (int k = 0; k < g.micro_batches; ++k) {
    const int micro = micro0 + k;
    // Sequence q of this micro-batch: the global sequence index (step, dp rank, micro-batch, q)
    // decides its tokens, so any split of the global batch sees the same data.
    const std::int64_t seq_index0 = (static_cast<std::int64_t>(step) * p.global_batch) +
                                    (static_cast<std::int64_t>(dp_rank) * p.grad_accum_steps() + micro) * p.micro_batch;
    std::vector<std::vector<std::int32_t>> seqs(static_cast<std::size_t>(p.micro_batch));
    for (int q = 0; q < p.micro_batch; ++q) {
      std::uint64_t h = splitmix(seed * 0x51ED27ull ^ splitmix(static_cast<std::uint64_t>(seq_index0 + q)));
      auto& s = seqs[static_cast<std::size_t>(q)];
      s.resize(static_cast<std::size_t>(S + 1));
      // next = (5 cur + 3) mod V, restarting at a random token with probability 1/16
      std::int64_t cur = static_cast<std::int64_t>(h % static_cast<std::uint64_t>(V));
      for (std::int64_t i = 0; i <= S; ++i) {
        s[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(cur);
        h = splitmix(h);
        cur = (h & 15) == 0 ? static_cast<std::int64_t>((h >> 8) % static_cast<std::uint64_t>(V)) : (5 * cur + 3) % V;
      }
    }
    if (p.grid_tp()) {
      // q x d row blocks of n sequences: this rank's block (depth x q + row) and its column's q
      // blocks of the same depth (row-major: the layout of the embedding's reduce-scatter input)
      if (slices != 1) throw std::logic_error("make_batch: row slices on a 2D / 2.5D grid");
      const auto c = p.grid_coord(tp_rank);
      const int n = p.micro_batch / p.tp_rows(), first = c.depth * p.tp_q;
      const std::size_t at = batch_index(g, k, 0);
      b.column_tokens.resize(n_batches(g));
      b.column_positions.resize(n_batches(g));
      for (int blk = first; blk < first + p.tp_q; ++blk)
        for (int bi = 0; bi < n; ++bi)
          for (std::int64_t si = 0; si < S; ++si) {
            const auto& s = seqs[static_cast<std::size_t>(blk * n + bi)];
            b.column_tokens[at].push_back(s[static_cast<std::size_t>(si)]);
            b.column_positions[at].push_back(static_cast<std::int32_t>(si));
            if (blk != first + c.row) continue;
            b.tokens[at].push_back(s[static_cast<std::size_t>(si)]);
            b.targets[at].push_back(s[static_cast<std::size_t>(si + 1)]);
            b.positions[at].push_back(static_cast<std::int32_t>(si));
          }
      continue;
    }
    for (int sl = 0; sl < slices; ++sl) {
      const std::size_t at = batch_index(g, k, sl);
      const bool by_batch = p.row_axis == sim::RowAxis::batch;
      const std::int64_t nb = by_batch ? p.micro_batch / slices : p.micro_batch;
      const std::int64_t ns = by_batch ? S : S / slices;
      for (std::int64_t bi = 0; bi < nb; ++bi)
        for (std::int64_t si = 0; si < ns; ++si) {
          const std::int64_t q = by_batch ? sl * nb + bi : bi;
          const std::int64_t pos = by_batch ? si : sl * ns + si;
          const auto& s = seqs[static_cast<std::size_t>(q)];
          b.tokens[at].push_back(s[static_cast<std::size_t>(pos)]);
          b.targets[at].push_back(s[static_cast<std::size_t>(pos + 1)]);
          b.positions[at].push_back(static_cast<std::int32_t>(pos));
        }
    }
  }
  return b;
}

}  // namespace executor
