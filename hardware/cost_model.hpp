// defines: hardware::CostModel (the interface the engine prices tasks through),
//          ComputeCost, CollectiveCost, LinkSpec, LinkClass
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "hardware/cluster.hpp"
#include "hardware/ops.hpp"

namespace hardware {

/// @brief What a compute kernel costs when it runs alone.
struct ComputeCost {
  common::Duration time;
  double hbm_bytes = 0;  ///< HBM traffic; hbm_bytes / time / HBM bandwidth = how memory-bound it is
};

/// @brief A class of link one GPU's transfers cross, with the capacity of that GPU's share of it -
/// a row of CostModel::links(), the table the engine's link-sharing model makes constraints of.
struct LinkSpec {
  std::string name;        ///< "nvlink", "nic"
  double bytes_per_s = 0;  ///< one GPU's share, one direction
};

/// @brief The rows of CostModel::links() the built-in models price: a GPU's NVLink port and its
/// share of the node's NICs. A model that prices another path (PCIe, copy engines) adds a row.
enum class LinkClass : std::uint8_t { nvlink, nic };

/// @brief What a collective costs when it runs alone, and what it occupies while it runs.
struct CollectiveCost {
  common::Duration latency;   ///< fixed part (protocol and hop latencies), no bandwidth used
  common::Duration transfer;  ///< bandwidth part at solo speed
  /// Bytes this GPU sends over each link class (indexed as CostModel::links()) during `transfer`
  /// (flow-level link sharing); empty when nothing moves.
  std::vector<double> wire_bytes;
  /// Bytes this GPU really sends over all its links (nccl-tests' bus volume: busbw x time), which
  /// its HBM traffic is a multiple of (interference); wire_bytes are scaled for link sharing instead.
  double sent_bytes = 0;
  std::string algo = "ring";    ///< ring | tree | nvls | nvls_tree | pat | hierarchical ...
  std::string proto = "simple"; ///< ll | ll128 | simple
  int channels = 1;
  int sms = 1;                  ///< SMs the collective's CTAs occupy (taken from compute)

  common::Duration total() const { return latency + transfer; }
};

/// @brief Prices the operations of a step graph on one cluster. Implementations: analytic (the
/// embedded default) and profiled (measured tables). Thread-safe for concurrent const calls.
class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual ComputeCost gemm(const GemmOp& op) const = 0;
  virtual ComputeCost attention(const AttentionOp& op) const = 0;
  virtual ComputeCost elementwise(const ElementwiseOp& op) const = 0;
  virtual ComputeCost optimizer(const OptimizerOp& op) const = 0;
  virtual CollectiveCost collective(const CollectiveOp& op) const = 0;
  virtual const ClusterSpec& cluster() const = 0;
  /// The software stack whose kernels it prices (its fused ops, attention kernel, GEMM speed): a
  /// plan must be simulated with the cost model of its own stack.
  virtual Stack stack() const = 0;
  /// Short description for reports ("analytic", "profiled: p.yaml").
  virtual std::string describe() const = 0;
  /// The link classes CollectiveCost::wire_bytes indexes: by default NVLink and the NIC share
  /// (LinkClass order), with the cluster's capacities.
  virtual std::vector<LinkSpec> links() const;
  /// Capacity in bytes/s of one GPU's share of a link class (link-sharing constraints).
  double link_capacity(LinkClass l) const;
  /// Non-zero, unique among the models of a process: this model's prices never change (a pure
  /// function of the op for its whole life), so the engine may keep what it priced through it from
  /// one simulation to the next (sim/engine.cpp). 0 (the default): price afresh in every simulation.
  virtual std::uint64_t pricing_id() const { return 0; }
  /// A fresh id for pricing_id.
  static std::uint64_t next_pricing_id();
};

/// @brief The built-in analytic model: roofline GEMMs with tile and wave quantization, bandwidth-bound
/// element-wise kernels, flash or unfused attention, NCCL-priced collectives — as `stack` runs them
/// (host.stacks: its GEMMs at stack gemm_efficiency of the best-shape speed, its attention kernel,
/// its fused element-wise ops at no cost of their own). Never returns null.
std::unique_ptr<CostModel> make_analytic_cost_model(const ClusterSpec& cluster, Stack stack);

}  // namespace hardware
