// defines: hardware::GpuSpec, NodeFabric, NetworkSpec, HostSpec, InterferenceSpec, ClusterSpec,
//          load_cluster (YAML -> ClusterSpec; units converted here, once)
#pragma once
#include <array>
#include <optional>
#include <string>

#include "common/units.hpp"
#include "hardware/ops.hpp"

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
  /// Hopper only: the rate at which FLUX's fused GEMM + reduce-scatter pulls its output tiles
  /// through the kernel's own fetch pipeline (one TMA stage and one reduce warp per CTA;
  /// hardware/tp_overlap.hpp). Fitted (docs/accuracy.md names the fit input); unset when the file
  /// does not give it, and then a fused GEMM + reduce-scatter on this GPU is refused.
  std::optional<double> fused_rs_pull_bytes_per_s;

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
  double nic_bytes_per_s = 0;   ///< per NIC, one direction (line rate)
  /// Fraction of the line rate a NCCL channel reaches on one NIC (NVIDIA: 46-48 GB/s per 400 Gb/s
  /// NDR NIC, i.e. 0.92-0.96; fitted per cluster file where measured curves exist).
  double nic_efficiency = 0.94;
  /// What one inter-node step of a collective costs, end to end: the RDMA write, its completion and
  /// NCCL's proxy hand-off (NCCL's tuner assumes 2.7 / 4 / 14 us for LL / LL128 / Simple).
  common::Duration latency{};
  Topology topology = Topology::rail_optimized;
  double oversubscription = 1.0;  ///< spine oversubscription ratio (1 = non-blocking)
};

/// @brief The software stack that issues a step's kernels: eager PyTorch as in Megatron-LM /
/// Megatron-DeepSpeed, a C++ executor (slicetune run), PyTorch with CUDA graphs and torch.compile
/// (DeepSpeed-Domino's released runs), Megatron-Core with TransformerEngine.
enum class Stack : std::uint8_t { eager, cpp, cuda_graphs, megatron_core };
inline constexpr int kStacks = 4;
inline constexpr Stack kAllStacks[kStacks] = {Stack::eager, Stack::cpp, Stack::cuda_graphs, Stack::megatron_core};
std::string_view to_string(Stack s);  ///< "eager", "cpp", "cuda_graphs", "megatron-core"
bool parse_stack(std::string_view s, Stack& out);

/// @brief What a software stack does to a step's kernels, as mechanisms one can check in a profile
/// of that stack (each cluster file names each value's source; docs/cost-models.md).
struct StackSpec {
  common::Duration launch{};       ///< host time to issue one kernel or collective (CUDA graphs: replay, about none)
  common::Duration op_overhead{};  ///< GPU time each op costs beyond its named kernel(s): the casts, copies,
                                   ///< bias and gradient-accumulate kernels around it and the gaps between them
  double gemm_efficiency = 1.0;    ///< the stack's GEMMs as a fraction of the best-shape library speed (gpu.gemm_efficiency)
  /// The attention kernel this stack runs (hardware/ops.hpp): a plan's `attention` key overrides it.
  AttentionKernel attention = AttentionKernel::flash;
  std::uint32_t fused = 0;         ///< one bit per ElementwiseKind: ops fused into a neighbouring kernel
                                   ///< (no kernel of their own, no HBM round trip)

  bool fuses(ElementwiseKind k) const { return (fused >> static_cast<int>(k)) & 1u; }
};

struct HostSpec {
  std::array<StackSpec, kStacks> stacks{};
  /// A uniform factor the engine applies to every compute kernel of a stack. No cluster file sets
  /// it any more (1: the stack's mechanisms are priced by its cost model, make_analytic_cost_model);
  /// it stays for the engine's own tests until the engine's stack hook replaces stack_compute_ps.
  std::array<double, kStacks> kernel_efficiency{1.0, 1.0, 1.0, 1.0};

  const StackSpec& stack(Stack s) const { return stacks[static_cast<int>(s)]; }
  common::Duration op_overhead_for(Stack s) const { return stack(s).op_overhead; }
  double kernel_efficiency_for(Stack s) const { return kernel_efficiency[static_cast<int>(s)]; }
  common::Duration launch_for(Stack s) const { return stack(s).launch; }
};

/// @brief How communication and computation slow each other when they overlap (hardware/interference).
struct InterferenceSpec {
  /// A kernel beside an SM-based collective runs on the SMs its channels leave (one CTA per
  /// channel, never shared with compute: NVIDIA/nccl#689).
  bool sm_contention = true;
  /// HBM bytes a collective moves per wire byte (NVIDIA/nccl#1428: "at least 2x ... 3x" when user
  /// data is read and written).
  double hbm_amplification = 3.0;
  /// Fraction of its bandwidth an SM-based collective loses while a kernel runs on the other SMs
  /// (fitted: pytorch/pytorch#172714's overlapped GEMM + all-gather).
  double sm_comm_slowdown = 0.0;
  /// Bandwidth of a copy-engine transfer as a fraction of NCCL's SM kernels (fitted:
  /// pytorch/pytorch#182850's all-gather at 1-16 MiB shards).
  double copy_engine_bandwidth = 1.0;
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

/// @brief What a GPU's memory holds beyond the training state the memory model counts
/// (sim/memory.hpp): the cluster file's `memory` section.
struct MemorySpec {
  /// Fraction of HBM kept free for the caching allocator's fragmentation (reserved but not
  /// allocated): a plan must fit in (1 - this) x capacity. Default 0.05 (docs/cost-models.md).
  double fragmentation_reserve = 0.05;
  /// CUDA context, kernel images and library workspaces per process (cuBLAS(Lt), NCCL's own
  /// structures besides its buffers). Default 0.5 GB (docs/cost-models.md).
  double cuda_context_bytes = 0.5e9;
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
  MemorySpec memory;
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
