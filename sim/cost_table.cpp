#include "sim/cost_table.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "common/checked.hpp"
#include "common/limits.hpp"
#include "hardware/gemm_model.hpp"
#include "hardware/interference.hpp"

namespace sim {

std::size_t CostTable::OpHash::operator()(const TaskKind& k) const {
  std::size_t h = k.index() * 0x9E3779B97F4A7C15ull;
  auto mix = [&h](std::int64_t v) { h ^= static_cast<std::size_t>(v) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2); };
  std::visit(
      [&](const auto& op) {
        using T = std::decay_t<decltype(op)>;
        if constexpr (std::is_same_v<T, hardware::GemmOp>) {
          mix(op.m);
          mix(op.n);
          mix(op.k);
          mix(static_cast<int>(op.dtype));
          mix(op.batch);
        } else if constexpr (std::is_same_v<T, hardware::AttentionOp>) {
          mix(op.batch);
          mix(op.heads);
          mix(op.kv_heads);
          mix(op.s_q);
          mix(op.s_kv);
          mix(op.head_dim);
          mix(op.q_offset);
          mix(op.backward);
          mix(static_cast<int>(op.kernel));
          mix(op.causal);
        } else if constexpr (std::is_same_v<T, hardware::ElementwiseOp>) {
          mix(static_cast<int>(op.kind));
          mix(op.elements);
          mix(static_cast<std::int64_t>(op.bytes));
          mix(op.backward);
        } else if constexpr (std::is_same_v<T, hardware::CollectiveOp>) {
          mix(static_cast<int>(op.kind));
          mix(op.bytes);
          mix(op.ranks);
          mix(op.nodes);
          mix(static_cast<int>(op.dtype));
        } else {
          mix(op.params);
        }
      },
      k);
  return h;
}

bool CostTable::OpEqual::operator()(const TaskKind& a, const TaskKind& b) const {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        const auto& y = std::get<T>(b);
        if constexpr (std::is_same_v<T, hardware::GemmOp>)
          return x.m == y.m && x.n == y.n && x.k == y.k && x.dtype == y.dtype && x.batch == y.batch;
        else if constexpr (std::is_same_v<T, hardware::AttentionOp>)
          return x.batch == y.batch && x.heads == y.heads && x.kv_heads == y.kv_heads && x.s_q == y.s_q && x.s_kv == y.s_kv &&
                 x.head_dim == y.head_dim && x.q_offset == y.q_offset && x.backward == y.backward && x.causal == y.causal &&
                 x.dtype == y.dtype && x.kernel == y.kernel;
        else if constexpr (std::is_same_v<T, hardware::ElementwiseOp>)
          return x.kind == y.kind && x.elements == y.elements && x.bytes == y.bytes && x.backward == y.backward;
        else if constexpr (std::is_same_v<T, hardware::CollectiveOp>)
          return x.kind == y.kind && x.bytes == y.bytes && x.ranks == y.ranks && x.nodes == y.nodes && x.dtype == y.dtype;
        else
          return x.params == y.params;
      },
      a);
}

CostTable::CostTable(const hardware::CostModel& m, hardware::Stack stack)
    : m_(m), stack_(stack), hbm_(m.cluster().gpu.hbm_bytes_per_s) {}

std::uint32_t CostTable::index(const TaskKind& k) {
  auto it = memo_.find(k);
  if (it != memo_.end()) return it->second;
  TaskCost c = price(k);
  if (!c.collective) {
    c.first_ps = stack_compute_ps(m_.cluster().host, stack_, c.first_ps);
    c.hbm_util *= m_.cluster().host.kernel_efficiency_for(stack_);  // same bytes over a longer time
  }
  costs_.push_back(std::move(c));
  kinds_.push_back(k);
  const auto i = static_cast<std::uint32_t>(costs_.size() - 1);
  memo_.emplace(k, i);
  return i;
}

// Tasks at the same place of different layers (same op, phase, slice, chunk) usually have the same
// shape: a direct-mapped cache on that place, verified by comparing the op, avoids hashing it.
std::uint32_t CostTable::index(const Task& t) {
  if (t.fused != FusedPiece::none) return fused_index(t);
  if (t.comm_sms >= 0 && t.is_collective()) {  // the strategy chose its SMs (or copy engines)
    const std::uint32_t base = index(t.kind);
    const auto k = std::make_pair(base, t.comm_sms);
    if (auto it = on_sms_.find(k); it != on_sms_.end()) return it->second;
    TaskCost c = on_sms(costs_[base], t.comm_sms);
    costs_.push_back(std::move(c));
    kinds_.push_back(t.kind);  // never the target of a slot (slots hold index(kind)'s results)
    const auto i = static_cast<std::uint32_t>(costs_.size() - 1);
    on_sms_.emplace(k, i);
    return i;
  }
  if (t.launches == 0 && !t.is_collective()) {  // a piece of another task's call: no op_overhead of its own
    const std::uint32_t base = index(t.kind);
    const auto k = std::make_pair(base, kPiece);
    if (auto it = on_sms_.find(k); it != on_sms_.end()) return it->second;
    TaskCost c = costs_[base];
    c.first_ps = std::max<std::int64_t>(0, c.first_ps - m_.cluster().host.op_overhead_for(stack_).ps);
    costs_.push_back(std::move(c));
    kinds_.push_back(t.kind);
    const auto i = static_cast<std::uint32_t>(costs_.size() - 1);
    on_sms_.emplace(k, i);
    return i;
  }
  const std::uint32_t key = 1u + static_cast<std::uint32_t>(t.op) + (static_cast<std::uint32_t>(t.phase) << 5) +
                            (static_cast<std::uint32_t>(t.slice + 1) << 8) + (static_cast<std::uint32_t>(t.chunk + 1) << 16) +
                            (static_cast<std::uint32_t>(t.kind.index()) << 24);
  auto& slot = slots_[(key * 2654435761u) >> (32 - kSlotBits)];
  if (slot.key == key && OpEqual{}(kinds_[slot.index], t.kind)) return slot.index;
  slot.key = key;
  slot.index = index(t.kind);
  return slot.index;
}

std::uint32_t CostTable::fused_index(const Task& t) {
  const bool gemm = t.fused == FusedPiece::gemm;
  // a GEMM piece is priced by its whole kernel, a transfer by its own op (the key only)
  const std::uint32_t base = gemm ? index(TaskKind(fused_whole_gemm(t))) : index(t.kind);
  const auto k = std::make_tuple(base, t.fused, t.fused_of, t.launches > 0);
  if (auto it = fused_.find(k); it != fused_.end()) return it->second;
  TaskCost c;
  if (gemm) {
    c = costs_[base];
    c.first_ps = fused_gemm_piece_ps(c.first_ps, m_.cluster().host.op_overhead_for(stack_).ps, t);
    c.gemm_waves = std::max(1.0, c.gemm_waves / t.fused_of);  // its share of the kernel's waves (gated() reads one wave's time)
  } else {
    c = from_collective(fused_transfer_cost(m_, t));
  }
  costs_.push_back(std::move(c));
  kinds_.push_back(t.kind);  // never the target of a slot
  const auto i = static_cast<std::uint32_t>(costs_.size() - 1);
  fused_.emplace(k, i);
  return i;
}

TaskCost CostTable::on_sms(TaskCost c, int sms) const {
  // the same bytes over a longer transfer stage: the links' and HBM's rates shrink by as much
  auto stretch = [&c](double f) {
    if (f <= 1.0) return;
    c.second_ps = std::llround(static_cast<double>(c.second_ps) * f);
    for (auto& w : c.wire) w.bytes_per_ps /= f;
    c.sent_bytes_per_ps /= f;
  };
  if (sms == 0) {
    // copy engines: no SMs, the transfer at interference.copy_engine_bandwidth of NCCL's (hardware::copy_engine_seconds)
    const double transfer_s = static_cast<double>(c.second_ps) * 1e-12;
    if (transfer_s > 0) stretch(hardware::copy_engine_seconds(m_.cluster().interference, 0.0, transfer_s) / transfer_s);
    c.sms = 0;
    return c;
  }
  // SM kernels on `sms` SMs: each of NCCL's channels (one CTA, one SM) moves its share of the
  // bandwidth (hardware/collective_model.cpp), so fewer SMs than NCCL's channels move the bytes
  // proportionally slower; more do not speed up a transfer the links bound
  if (c.sms > 0) stretch(static_cast<double>(c.sms) / sms);
  c.sms = sms;
  return c;
}

TaskCost CostTable::from_compute(const hardware::ComputeCost& cc) const {
  TaskCost c;
  c.first_ps = cc.time.ps;
  const double secs = cc.time.s();
  c.hbm_util = secs > 0 ? std::min(1.0, cc.hbm_bytes / (secs * hbm_)) : 0.0;
  return c;
}

TaskCost CostTable::price(const TaskKind& k) const {
  return std::visit(
      [&](const auto& op) -> TaskCost {
        using T = std::decay_t<decltype(op)>;
        if constexpr (std::is_same_v<T, hardware::GemmOp>) {
          TaskCost c = from_compute(m_.gemm(op));
          c.gemm = op;
          c.gemm_waves = std::max(1.0, hardware::estimate_gemm(m_.cluster().gpu, op).waves);
          return c;
        } else if constexpr (std::is_same_v<T, hardware::AttentionOp>)
          return from_compute(m_.attention(op));
        else if constexpr (std::is_same_v<T, hardware::ElementwiseOp>)
          return from_compute(m_.elementwise(op));
        else if constexpr (std::is_same_v<T, hardware::OptimizerOp>)
          return from_compute(m_.optimizer(op));
        else
          return from_collective(m_.collective(op));
      },
      k);
}

TaskCost CostTable::from_collective(const hardware::CollectiveCost& cc) const {
  TaskCost c;
  c.collective = true;
  c.first_ps = cc.latency.ps;
  c.second_ps = cc.transfer.ps;
  for (std::size_t l = 0; l < cc.wire_bytes.size(); ++l) {
    const double rate = c.second_ps > 0 ? cc.wire_bytes[l] / static_cast<double>(c.second_ps) : 0.0;
    if (rate > 0) c.wire.push_back({static_cast<std::uint8_t>(l), rate});
  }
  c.sms = cc.sms;
  c.sent_bytes_per_ps = c.second_ps > 0 ? cc.sent_bytes / static_cast<double>(c.second_ps) : 0.0;
  return c;
}

hardware::GemmOp fused_whole_gemm(const Task& t) {
  hardware::GemmOp op = std::get<hardware::GemmOp>(t.kind);
  op.m *= std::max<std::int64_t>(1, t.fused_of);
  return op;
}

std::int64_t fused_gemm_piece_ps(std::int64_t whole_ps, std::int64_t op_overhead_ps, const Task& t) {
  const std::int64_t n = std::max<std::int64_t>(1, t.fused_of);
  const std::int64_t kernel = std::max<std::int64_t>(0, whole_ps - op_overhead_ps);
  // rounded up, so that the pieces never add up to less than the kernel (the tuner's bounds price it whole)
  return (kernel + n - 1) / n + (t.launches > 0 ? op_overhead_ps : 0);
}

hardware::CollectiveCost fused_transfer_cost(const hardware::CostModel& cost, const Task& t) {
  using hardware::LinkClass;
  const auto* op = std::get_if<hardware::CollectiveOp>(&t.kind);
  if (!op || t.fused == FusedPiece::none || t.fused == FusedPiece::gemm)
    throw std::logic_error("fused_transfer_cost: not a transfer of a fused kernel");
  const auto& cl = cost.cluster();
  hardware::CollectiveCost cc;
  cc.algo = "fused";
  cc.proto = to_string(t.fused);
  cc.channels = 0;
  cc.sms = 0;  // copy engines, the epilogue's stores, the kernel's own fetch warps: no SMs of their own
  cc.wire_bytes.assign(cost.links().size(), 0.0);
  const double bytes = static_cast<double>(op->bytes);
  switch (t.fused) {
    case FusedPiece::ag_copy:
    case FusedPiece::ag_copy_first: {
      // hardware::tp_gemm_fused: the shards come one after another, the gather's transfer at the
      // copy engines' pace in all, the all-gather's latency once before the first
      const int tp = std::max<int>(2, t.fused_of);
      const auto nccl = cost.collective(hardware::CollectiveOp{
          .kind = hardware::CollectiveKind::all_gather, .bytes = op->bytes * tp, .ranks = tp, .nodes = 1, .dtype = op->dtype});
      const double pieces = tp - 1;
      cc.latency = t.fused == FusedPiece::ag_copy_first ? nccl.latency : common::Duration{};
      cc.transfer = common::Duration::from_s(hardware::copy_engine_seconds(cl.interference, 0.0, nccl.transfer.s()) / pieces);
      for (std::size_t l = 0; l < cc.wire_bytes.size() && l < nccl.wire_bytes.size(); ++l) cc.wire_bytes[l] = nccl.wire_bytes[l] / pieces;
      cc.sent_bytes = nccl.sent_bytes / pieces;
      break;
    }
    case FusedPiece::rs_store: {  // Ampere's epilogue: one GPU's NVLink port
      cc.transfer = common::Duration::from_s(bytes / cost.link_capacity(LinkClass::nvlink));
      cc.wire_bytes[static_cast<std::size_t>(LinkClass::nvlink)] = bytes;
      cc.sent_bytes = bytes;
      break;
    }
    case FusedPiece::rs_pull: {  // Hopper's in-kernel pull: the kernel's own rate, not the port's
      if (!cl.gpu.fused_rs_pull_bytes_per_s)
        throw std::logic_error(fmt::format("{}: no gpu.fused_rs_pull_gb_per_s for a fused GEMM + reduce-scatter", cl.source));
      cc.transfer = common::Duration::from_s(bytes / *cl.gpu.fused_rs_pull_bytes_per_s);
      if (op->ranks > 1) cc.wire_bytes[static_cast<std::size_t>(LinkClass::nvlink)] = bytes;  // the local rows cross no link
      cc.sent_bytes = bytes;
      break;
    }
    case FusedPiece::none:
    case FusedPiece::gemm: break;
  }
  return cc;
}

std::int64_t stack_compute_ps(const hardware::HostSpec& host, hardware::Stack stack, std::int64_t kernel_ps) {
  // checked: a tiny kernel_efficiency must not turn a long kernel into an int64 overflow
  const double ps = static_cast<double>(kernel_ps) / host.kernel_efficiency_for(stack);
  if (!(ps <= common::limits::kMaxDurationPs)) common::duration_out_of_range(ps);
  return common::checked_add(std::llround(ps), host.op_overhead_for(stack).ps, "simulated time");
}

common::Duration solo_time(const hardware::CostModel& c, const Task& t, hardware::Stack stack) {
  if (t.fused == FusedPiece::gemm) {
    const std::int64_t whole = stack_compute_ps(c.cluster().host, stack, c.gemm(fused_whole_gemm(t)).time.ps);
    return common::Duration::from_ps(fused_gemm_piece_ps(whole, c.cluster().host.op_overhead_for(stack).ps, t));
  }
  if (t.fused != FusedPiece::none) return fused_transfer_cost(c, t).total();
  const common::Duration d = solo_time(c, t.kind, stack);
  if (t.launches > 0 || t.is_collective()) return d;
  return common::Duration::from_ps(std::max<std::int64_t>(0, d.ps - c.cluster().host.op_overhead_for(stack).ps));
}

common::Duration solo_time(const hardware::CostModel& c, const TaskKind& k, hardware::Stack stack) {
  using common::Duration;
  const auto on_stack = [&](Duration kernel) { return Duration::from_ps(stack_compute_ps(c.cluster().host, stack, kernel.ps)); };
  return std::visit(
      [&](const auto& op) -> Duration {
        using T = std::decay_t<decltype(op)>;
        if constexpr (std::is_same_v<T, hardware::GemmOp>)
          return on_stack(c.gemm(op).time);
        else if constexpr (std::is_same_v<T, hardware::AttentionOp>)
          return on_stack(c.attention(op).time);
        else if constexpr (std::is_same_v<T, hardware::ElementwiseOp>)
          return on_stack(c.elementwise(op).time);
        else if constexpr (std::is_same_v<T, hardware::OptimizerOp>)
          return on_stack(c.optimizer(op).time);
        else
          return c.collective(op).total();
      },
      k);
}

CostTable& kept_cost_table(const hardware::CostModel& cost, hardware::Stack stack, std::unique_ptr<CostTable>& own) {
  const std::uint64_t id = cost.pricing_id();
  if (id == 0) {
    own = std::make_unique<CostTable>(cost, stack);
    return *own;
  }
  struct Kept {
    std::uint64_t id;
    hardware::Stack stack;
    std::unique_ptr<CostTable> table;
  };
  constexpr std::size_t kKept = 8;  // the newest models' tables (a search uses one; whatif one per point)
  thread_local std::vector<Kept> kept;
  for (auto& k : kept)
    if (k.id == id && k.stack == stack) return *k.table;
  if (kept.size() >= kKept) kept.erase(kept.begin());
  kept.push_back({id, stack, std::make_unique<CostTable>(cost, stack)});
  return *kept.back().table;
}

}  // namespace sim
