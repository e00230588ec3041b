// defines: hardware::KernelLoad, CommLoad, ConcurrentRates, rates_beside (the speeds of a compute
//          kernel and a collective sharing one GPU: SMs taken by NCCL's channels, HBM traffic of the
//          collective, a collective slowed beside compute, copy-engine transfers), share_hbm,
//          gemm_seconds_on_sms, copy_engine_seconds, IssueOrder, OverlapTiming, overlap (one kernel
//          beside one collective, issued in order: what the kernel-level measurements time; the
//          engine's interference model applies rates_beside to whatever runs together)
#pragma once
#include "hardware/cluster.hpp"
#include "hardware/ops.hpp"

namespace hardware {

/// @brief A compute kernel as interference sees it.
struct KernelLoad {
  double seconds = 0;            ///< alone, on every SM
  double seconds_on_fewer = 0;   ///< on the SMs a collective leaves it (GEMMs: wave quantization on
                                 ///< SMs - channels); equal to `seconds` where the SM count does not matter
  double hbm_bytes = 0;          ///< HBM traffic of the whole kernel
};

/// @brief A collective as interference sees it.
struct CommLoad {
  double seconds = 0;            ///< alone: latency + transfer
  double wire_bytes_per_s = 0;   ///< bytes/s this GPU sends while transferring alone (CollectiveCost::sent_bytes / transfer)
  int sms = 0;                   ///< SMs its CTAs hold (NCCL: one per channel); 0 for a copy-engine transfer
};

/// @brief Fractions of their solo speed.
struct ConcurrentRates {
  double compute = 1.0;
  double comm = 1.0;
};

/// @brief Max-min fair share of `usable` bytes/s between two demands (SimGrid's sharing): a demand
/// below half gets all it asks, the other the rest. Returns the fraction of its demand each gets.
ConcurrentRates share_hbm(double usable_bytes_per_s, double compute_demand, double comm_demand);

/// @brief The speeds of a compute kernel and a collective running together on one GPU:
///  - an SM-based collective holds `comm.sms` SMs (NCCL: one CTA per channel, never shared with
///    compute, NVIDIA/nccl#689): the kernel runs at seconds / seconds_on_fewer;
///  - an SM-based collective beside a kernel on the other SMs loses sm_comm_slowdown x (1 - the
///    kernel's HBM share alone) of its bandwidth: its channels are latency-bound copy loops that a
///    compute-bound kernel (L2 and crossbar traffic) slows; beside a memory-bound kernel it keeps its
///    HBM share and the kernel yields. A copy-engine transfer is not slowed;
///  - the collective moves hbm_amplification x its wire bytes through HBM (NVIDIA/nccl#1428: 2x to
///    3x); kernel and collective share the GPU's usable HBM bandwidth (hbm x memory_efficiency)
///    max-min fairly (share_hbm).
ConcurrentRates rates_beside(const InterferenceSpec& spec, double usable_hbm_bytes_per_s, const KernelLoad& kernel, const CommLoad& comm);

/// @brief A GEMM's time on `sms` of the GPU's SMs (each SM as fast as before): wave quantization
/// on the SMs a collective leaves.
double gemm_seconds_on_sms(const GpuSpec& gpu, const GemmOp& op, int sms);

/// @brief Time of a kernel other than a GEMM on the SMs `taken` SMs leave, from its time alone:
/// its SM-bound share (1 - `hbm_share`, its share of the usable HBM bandwidth alone) slows with the
/// SMs taken, its memory-bound share does not. When `taken` >= `sms` (a CPU rank's one core held
/// by the communication thread) the kernel time-shares them: its SM-bound share takes twice as long
/// (two runnable threads).
double seconds_on_fewer_sms(double seconds, double hbm_share, int sms, int taken);

/// @brief A collective moved by copy engines instead of SM kernels: no SMs, and the transfer at
/// `copy_engine_bandwidth` of NCCL's bandwidth (pytorch/pytorch#182850: copy-engine all-gather at
/// 0.65-0.76 of NCCL's at 1-16 MiB shards).
double copy_engine_seconds(const InterferenceSpec& spec, double nccl_latency_s, double nccl_transfer_s);

/// @brief Which of the two is issued first.
enum class IssueOrder : std::uint8_t { comm_first, compute_first };

/// @brief When one kernel and one collective issued together finish.
struct OverlapTiming {
  double total_s = 0;    ///< both done
  double compute_s = 0;  ///< the kernel done
  double comm_s = 0;     ///< the collective done
  double comm_start_s = 0;
};

/// @brief One compute kernel and one collective issued together on two streams. Issue order:
/// with `single_connection` (CUDA_DEVICE_MAX_CONNECTIONS=1, as Megatron sets it) kernels start in
/// issue order, so a collective issued behind a GEMM waits until the GEMM's last wave leaves it
/// enough SMs (pytorch/pytorch#143890); with several connections its CTAs take SMs as the first
/// wave's finish. A collective issued first starts at once and the kernel runs on the SMs left.
/// While both run, rates_beside; when one finishes the other runs alone (the GEMM on every SM again).
/// `gemm_waves`: the kernel's waves on every SM (1 for non-GEMM kernels: no tail to wait for).
OverlapTiming overlap(const InterferenceSpec& spec, double usable_hbm_bytes_per_s, const KernelLoad& kernel, const CommLoad& comm,
                      IssueOrder order, bool single_connection, double gemm_waves = 1.0);

}  // namespace hardware
