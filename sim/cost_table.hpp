// defines: sim::TaskCost (what a task costs and occupies, as the engine and its models use it),
//          LinkUse, CostTable (prices each distinct operation of a graph once)
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "hardware/cost_model.hpp"
#include "sim/task.hpp"

namespace sim {

/// @brief Bytes per picosecond a transfer puts on one link class (CostModel::links() index) at solo speed.
struct LinkUse {
  std::uint8_t link = 0;
  double bytes_per_ps = 0;
};

/// @brief A task's cost as the engine uses it, in picoseconds at solo speed, and what it occupies
/// while it runs - the inputs of the engine's resource models (sim/engine_model.hpp).
struct TaskCost {
  std::int64_t first_ps = 0;   ///< compute: the whole kernel on the plan's stack; collective: latency stage
  std::int64_t second_ps = 0;  ///< collective: transfer stage (bandwidth-bound)
  double hbm_util = 0;         ///< compute: fraction of HBM bandwidth it streams
  std::vector<LinkUse> wire;   ///< collective: links it loads during the transfer stage, in link order
  int sms = 0;                 ///< collective: SMs its CTAs hold (NCCL: one per channel); 0 for copy-engine transfers
  double sent_bytes_per_ps = 0;  ///< collective: bytes this GPU really sends per ps in the transfer stage at solo
                                 ///< speed (CollectiveCost::sent_bytes; its HBM traffic is a multiple of them)
  std::optional<hardware::GemmOp> gemm;  ///< compute: the GEMM, whose time on fewer SMs the interference model prices
  double gemm_waves = 1;  ///< compute: a GEMM's waves of tiles on every SM (hardware::estimate_gemm); 1 for other kernels
  bool collective = false;
};

/// @brief Prices the tasks of one rank's graph: each distinct operation once (a compute kernel as the
/// plan's stack runs it: stack_compute_ps). Not thread-safe; one per simulated rank.
class CostTable {
 public:
  CostTable(const hardware::CostModel& m, hardware::Stack stack);

  /// Index of the cost of `t` (priced on first sight).
  std::uint32_t index(const Task& t);
  const TaskCost& operator[](std::uint32_t i) const { return costs_[i]; }

 private:
  struct OpHash {
    std::size_t operator()(const TaskKind& k) const;
  };
  struct OpEqual {
    bool operator()(const TaskKind& a, const TaskKind& b) const;
  };
  std::uint32_t index(const TaskKind& k);
  TaskCost price(const TaskKind& k) const;
  TaskCost from_compute(const hardware::ComputeCost& cc) const;
  TaskCost from_collective(const hardware::CollectiveCost& cc) const;
  /// A piece of a fused kernel (Task::fused): its share of the kernel's GEMM, or its transfer.
  std::uint32_t fused_index(const Task& t);
  /// A collective's cost moved on `sms` SMs (Task::comm_sms), or by copy engines when 0.
  TaskCost on_sms(TaskCost c, int sms) const;

  const hardware::CostModel& m_;
  hardware::Stack stack_;
  double hbm_;
  std::unordered_map<TaskKind, std::uint32_t, OpHash, OpEqual> memo_;
  // (index of the NCCL cost, Task::comm_sms) -> index; (index of a kernel's cost, kPiece) -> the same without op_overhead
  std::map<std::pair<std::uint32_t, int>, std::uint32_t> on_sms_;
  // (index of the op it is priced by, Task::fused, Task::fused_of, launches > 0) -> index
  std::map<std::tuple<std::uint32_t, FusedPiece, std::uint16_t, bool>, std::uint32_t> fused_;
  static constexpr int kPiece = -2;
  std::vector<TaskCost> costs_;  // distinct costs
  std::vector<TaskKind> kinds_;  // the op of each distinct cost
  static constexpr int kSlotBits = 10;
  struct Slot {
    std::uint32_t key = 0, index = 0;
  };
  std::vector<Slot> slots_ = std::vector<Slot>(std::size_t{1} << kSlotBits);
};

/// @brief The CostTable to price tasks of `stack` in: with a model whose prices never change
/// (CostModel::pricing_id), one per thread and (model, stack), kept from one call to the next (the
/// tuner simulates thousands of graphs of the same few hundred distinct ops); otherwise `own`, fresh.
CostTable& kept_cost_table(const hardware::CostModel& cost, hardware::Stack stack, std::unique_ptr<CostTable>& own);

/// @brief A compute kernel's time on a stack, from its modelled (isolated-kernel) time:
/// time / host.kernel_efficiency[stack] + host.op_overhead_us[stack].
std::int64_t stack_compute_ps(const hardware::HostSpec& host, hardware::Stack stack, std::int64_t kernel_ps);

/// @brief The same for one task: a compute task with Task::launches 0 is a piece of another
/// task's framework call (a strategy's GEMM chunk, sim/builder.hpp) and carries no op_overhead of
/// its own (the engine prices it so: CostTable); a piece of a fused kernel (Task::fused) is priced
/// as its share of that kernel (fused_piece_cost). Other collectives as solo_time(kind).
common::Duration solo_time(const hardware::CostModel& cost, const Task& t, hardware::Stack stack);

/// @brief What a task costs when it runs alone (collectives: latency + transfer) on the given
/// host stack (collectives are priced as NCCL runs them, stack-independent).
common::Duration solo_time(const hardware::CostModel& cost, const TaskKind& kind, hardware::Stack stack);

/// @brief What a piece of a fused GEMM + communication kernel moves and how fast, as a
/// collective's cost (strategy fused; the mechanisms of hardware::tp_gemm_fused): no SMs; an
/// ag_copy 1 / (tp - 1) of NCCL's all-gather of the site (`cost`'s price of it) at
/// interference.copy_engine_bandwidth, the first with that all-gather's latency; an rs_store its
/// bytes at one NVLink port (CostModel::link_capacity); an rs_pull its bytes at
/// gpu.fused_rs_pull_gb_per_s (std::logic_error where the GPU has none: the strategy refuses such
/// plans). `t` must be a collective with a transfer FusedPiece.
hardware::CollectiveCost fused_transfer_cost(const hardware::CostModel& cost, const Task& t);
/// @brief A FusedPiece::gemm's time from its whole kernel's on the stack (`whole_ps`, op_overhead
/// included): 1 / Task::fused_of of the kernel, rounded up, plus the op_overhead if the piece is the
/// one the framework launches (Task::launches > 0).
std::int64_t fused_gemm_piece_ps(std::int64_t whole_ps, std::int64_t op_overhead_ps, const Task& t);
/// @brief The whole GEMM a FusedPiece::gemm is a chunk of: its op with Task::fused_of x its rows.
hardware::GemmOp fused_whole_gemm(const Task& t);

}  // namespace sim
