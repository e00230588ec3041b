// A test double for hardware::CostModel with costs chosen so that answers can be derived by hand:
//   GEMM m x n x k   -> m microseconds; streams n bytes through HBM (1 TB/s HBM, so util = n / (m * 1e6))
//   collective bytes -> latency op.ranks - 1 microseconds... (0 for 1 rank), transfer bytes nanoseconds
//                       (1 byte/ns = the NVLink capacity); with nodes > 1 the wire bytes go over the NIC
//   it occupies 10 of the GPU's 100 SMs
#pragma once
#include "hardware/cost_model.hpp"
#include "sim/step_graph.hpp"

namespace test {

/// The streams and groups hand-built graphs use: Megatron's layout (as sim::Builder declares it).
constexpr sim::StreamId kCompute = 0, kTpComm = 1, kDpComm = 2;
constexpr sim::GroupId kTpGroup = 0, kDpGroup = 1;
inline std::vector<sim::StreamSpec> streams() {
  return {{.name = "compute", .kind = sim::StreamKind::compute},
          {.name = "tp_comm", .kind = sim::StreamKind::comm},
          {.name = "dp_comm", .kind = sim::StreamKind::comm}};
}
inline std::vector<sim::GroupSpec> groups(int tp_instance = 0, int dp_instance = 0) {
  return {{.name = "tp", .size = 8, .nodes = 1, .instance = tp_instance}, {.name = "dp", .size = 8, .nodes = 1, .instance = dp_instance}};
}
/// StepGraph::assemble on streams() and groups().
inline sim::StepGraph assemble(std::vector<sim::Task> tasks, const std::vector<std::pair<std::uint32_t, std::uint32_t>>& edges,
                               const sim::Plan& plan) {
  return sim::StepGraph::assemble(std::move(tasks), edges, plan, streams(), groups());
}

inline hardware::ClusterSpec fake_cluster() {
  hardware::ClusterSpec c;
  c.name = "fake";
  c.gpu.name = "fake-gpu";
  c.gpu.sm_count = 100;
  c.gpu.hbm_bytes_per_s = 1e12;
  c.gpu.hbm_capacity_bytes = 80e9;
  c.gpu.peak_flops_per_s = {1e12, 1e12, 1e12, 1e12};
  c.node.gpus_per_node = 8;
  c.node.nvlink_bytes_per_s = 1e9;  // 1 byte per ns
  c.network.nics_per_node = 8;
  c.network.nic_bytes_per_s = 1e9;
  for (auto& st : c.host.stacks) st.launch = {};
  c.interference.sm_contention = false;
  c.interference.hbm_amplification = 0;
  c.interference.sm_comm_slowdown = 0;
  return c;
}

class FakeCostModel final : public hardware::CostModel {
 public:
  explicit FakeCostModel(hardware::ClusterSpec c = fake_cluster(), bool with_latency = false)
      : c_(std::move(c)), with_latency_(with_latency) {}
  hardware::ComputeCost gemm(const hardware::GemmOp& op) const override {
    return {common::Duration::from_us(static_cast<double>(op.m)), static_cast<double>(op.n)};
  }
  hardware::ComputeCost attention(const hardware::AttentionOp& op) const override {
    return {common::Duration::from_us(static_cast<double>(op.s_q)), 0};
  }
  hardware::ComputeCost elementwise(const hardware::ElementwiseOp& op) const override {
    return {common::Duration::from_us(static_cast<double>(op.elements)), op.bytes};
  }
  hardware::ComputeCost optimizer(const hardware::OptimizerOp& op) const override {
    return {common::Duration::from_us(static_cast<double>(op.params)), 0};
  }
  hardware::CollectiveCost collective(const hardware::CollectiveOp& op) const override {
    hardware::CollectiveCost cc;
    cc.latency = with_latency_ ? common::Duration::from_us(op.ranks - 1.0) : common::Duration{};
    cc.transfer = common::Duration::from_ns(static_cast<double>(op.bytes));
    cc.wire_bytes.assign(2, 0.0);  // nvlink, nic (CostModel::links())
    cc.wire_bytes[static_cast<int>(op.nodes > 1 ? hardware::LinkClass::nic : hardware::LinkClass::nvlink)] = static_cast<double>(op.bytes);
    cc.sent_bytes = static_cast<double>(op.bytes);  // what this GPU sends (its HBM traffic is a multiple of it)
    cc.sms = 10;
    cc.channels = 10;
    return cc;
  }
  const hardware::ClusterSpec& cluster() const override { return c_; }
  hardware::Stack stack() const override { return hardware::Stack::eager; }
  std::string describe() const override { return "fake"; }

 private:
  hardware::ClusterSpec c_;
  bool with_latency_;
};

}  // namespace test
