// defines: hardware::GpuSpec, NodeFabric, NetworkSpec, HostSpec, InterferenceSpec, ClusterSpec,
//          load_cluster (YAML -> ClusterSpec; units converted here, once)
#pragma once
#include <array>
#include <string>

#include "common/units.hpp"

namespace hardware {

enum class GpuArch : std::uint8_t { ampere, hopper, blackwell, cpu };
std::string_view to_string(GpuArch a);

/// @brief One accelerator. All rates in SI base units (FLOP/s, bytes/s).
struct GpuSpec {
  std::string name;
  GpuArch arch = GpuArch::hopper;
  std::array<double, 4> peak_flops_per_s{};  ///< dense peak, indexed by common::DType (fp32, bf16, fp16, fp8)
  double hbm_bytes_per_s = 0;
  double hbm_capacity_bytes = 0;
  int sm_count = 0;
  /// Best-shape fraction of peak a cuBLAS-like GEMM reaches, per common::DType (fitted: the best shape
  /// measured, e.g. H100 bf16 794.5 / 989 TFLOP/s).
  std::array<double, 4> gemm_efficiency{0.8, 0.8, 0.8, 0.8};
  common::Duration gemm_tile_overhead{};  ///< fixed time per output tile (prologue: first K block in flight; epilogue: C store)
  double memory_efficiency = 0.8; ///< fraction of HBM bandwidth element-wise kernels reach
  common::Duration kernel_latency{};      ///< fixed GPU-side cost of any kernel (launch to first instruction)

  double peak_flops(common::DType t) const { return peak_flops_per_s[static_cast<int>(t)]; }
  double gemm_eff(common::DType t) const { return gemm_efficiency[static_cast<int>(t)]; }
};

/// @brief The fabric inside one node. A node is one NVLink domain (72 GPUs on GB200 NVL72).
struct NodeFabric {
  int gpus_per_node = 8;
  double nvlink_bytes_per_s = 0;  ///< per GPU, one direction (H100: 18 links x 25 GB/s = 450 GB/s)
  int nvlink_links = 0;           ///< NVLink links per GPU
  bool nvswitch = true;
  bool nvls = false;              ///< NVLink SHARP (in-switch reduction) available
};

enum class Topology : std::uint8_t { rail_optimized, fat_tree };

/// @brief The fabric between nodes.
struct NetworkSpec {
  int nics_per_node = 8;
  double nic_bytes_per_s = 0;   ///< per NIC, one direction
  common::Duration latency{};           ///< one hop, end to end
  Topology topology = Topology::rail_optimized;
  double oversubscription = 1.0;  ///< spine oversubscription ratio (1 = non-blocking)
};

/// @brief How the software stack issues kernels: host time per kernel launch.
enum class Stack : std::uint8_t { eager, cpp, cuda_graphs };
std::string_view to_string(Stack s);
bool parse_stack(std::string_view s, Stack& out);

/// @brief The attention kernel the modelled framework runs: fused flash attention, or Megatron's
/// unfused core attention (batched GEMMs + softmax / dropout passes over the score matrix).
enum class AttentionKernel : std::uint8_t { flash, unfused };

struct HostSpec {
  std::array<common::Duration, 3> launch{};  ///< per Stack: host time to issue one kernel / collective
  AttentionKernel attention = AttentionKernel::flash;
  /// Per Stack: GPU time each task costs beyond its named kernel(s) - the casts, copies, bias and
  /// autograd-accumulate kernels an eager framework runs around every op, and the gaps between them.
  std::array<common::Duration, 3> op_overhead{};
  /// Per Stack: the fraction of its modelled (isolated-kernel) speed a compute kernel reaches when
  /// this stack runs a whole training step - what a real framework loses to unfused passes, loss
  /// scaling, allocator and stream syncs and sustained clocks. Compute tasks take time / efficiency.
  std::array<double, 3> kernel_efficiency{1.0, 1.0, 1.0};
  common::Duration op_overhead_for(Stack s) const { return op_overhead[static_cast<int>(s)]; }
  double kernel_efficiency_for(Stack s) const { return kernel_efficiency[static_cast<int>(s)]; }
  common::Duration launch_for(Stack s) const { return launch[static_cast<int>(s)]; }
};

/// @brief How communication and computation slow each other when they overlap.
struct InterferenceSpec {
  /// Compute slows by (SMs taken by the collective / SM count) ...
  bool sm_contention = true;
  /// ... plus hbm_amplification x (collective wire bytes/s) / (HBM bytes/s): NCCL moves each wire byte
  /// through HBM several times (read, reduce, write).
  double hbm_amplification = 2.5;
  /// A collective slows by this fraction while a compute kernel runs beside it.
  double comm_slowdown = 0.05;
};

/// @brief What NCCL costs beyond its own tuner model: the two constants fitted to nccl-tests.
struct NcclSpec {
  /// Fixed time of one collective call as nccl-tests measures it (kernel launch, proxy and
  /// cross-GPU handshakes) on top of NCCL's modelled latency.
  double call_overhead_us = 0;
  /// NVLS AllReduce algorithm bandwidth as a fraction of one GPU's NVLink bandwidth (one direction).
  double nvls_efficiency = 0.6;
  /// NVLS latency (NCCL's tuner assumes 25 us; measured curves put the knee later).
  double nvls_latency_us = 25;
};

/// @brief A whole cluster: `nodes` identical nodes.
struct ClusterSpec {
  std::string name;
  std::string source;  ///< file or "embedded:clusters/NAME"
  GpuSpec gpu;
  NodeFabric node;
  NetworkSpec network;
  HostSpec host;
  InterferenceSpec interference;
  NcclSpec nccl;
  int nodes = 1;

  int total_gpus() const { return nodes * node.gpus_per_node; }
};

/// @brief Sets the node count (from a flag or a sweep), refusing with common::ConfigError naming
/// `source` a count outside [1, limits::kMaxNodes] or one that makes more than limits::kMaxGpus GPUs.
void set_nodes(ClusterSpec& c, std::int64_t nodes, const std::string& source);

/// @brief Loads NAME (embedded configs/clusters/NAME.yaml) or a path to a YAML file.
/// Throws common::ConfigError naming the file and key on any problem; unknown keys are refused.
ClusterSpec load_cluster(const std::string& name_or_path);
ClusterSpec parse_cluster(const std::string& yaml_text, const std::string& source);

}  // namespace hardware
