#include "executor/zero_layout.hpp"

#include <algorithm>
#include <stdexcept>

namespace executor {

bool is_dp_bucket_collective(const sim::StepGraph& g, std::uint32_t t) {
  const auto& task = g.tasks[t];
  const auto* c = std::get_if<hardware::CollectiveOp>(&task.kind);
  if (!c) return false;
  return (task.op == sim::Op::dp_reduce && c->kind == hardware::CollectiveKind::reduce_scatter) ||
         (task.op == sim::Op::param_gather && c->kind == hardware::CollectiveKind::all_gather);
}

BucketLayout bucket_layout(const sim::StepGraph& g, std::uint32_t t) {
  if (!is_dp_bucket_collective(g, t)) throw std::logic_error("bucket_layout: task " + g.task_name(t) + " is no DP bucket collective");
  const bool gather = g.tasks[t].op == sim::Op::param_gather;
  const auto members = gather ? g.outputs(t) : g.inputs(t);
  const auto shard = gather ? g.inputs(t) : g.outputs(t);
  BucketLayout b;
  for (sim::TensorId x : members) {
    b.tensors.push_back(x);
    b.offsets.push_back(b.elements);
    b.elements += g.tensors[x].rows * g.tensors[x].cols;
  }
  b.shard = g.tensors[shard[0]].rows * g.tensors[shard[0]].cols;
  return b;
}

std::vector<ShardPiece> shard_pieces(const BucketLayout& b, const sim::StepGraph& g, int dp_rank) {
  std::vector<ShardPiece> out;
  const std::int64_t lo = dp_rank * b.shard, hi = lo + b.shard;
  for (std::size_t i = 0; i < b.tensors.size(); ++i) {
    const std::int64_t n = g.tensors[b.tensors[i]].rows * g.tensors[b.tensors[i]].cols;
    const std::int64_t a = std::max(lo, b.offsets[i]), e = std::min(hi, b.offsets[i] + n);
    if (a < e) out.push_back({.tensor = b.tensors[i], .shard_offset = a - lo, .tensor_offset = a - b.offsets[i], .count = e - a});
  }
  return out;
}

}  // namespace executor
