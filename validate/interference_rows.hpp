// defines: validate::InterferenceFigures, read_interference_figures (interference-nvidia.md's
//          kernel-level rows and aggregate), Row8Prediction, predict_row8, predict_row1,
//          InterferenceAggregate, predict_aggregate (the interference mechanisms of
//          hardware/interference against them)
#pragma once
#include <string>
#include <vector>

#include "hardware/cluster.hpp"

namespace validate {

struct InterferenceFigures {
  // row 8: 8x H100, fp16 8192^3 GEMM beside a 64 MiB-per-rank all-gather (pytorch/pytorch#172714)
  double sequential_ms = 0, overlap_sm_ms = 0, overlap_ce_ms = 0;
  // row 1: A100 GEMM alone / beside an NCCL all-gather (NVIDIA/nccl#1428)
  double a100_gemm_alone_ms = 0, a100_gemm_beside_ms = 0;
  // row 10: copy-engine / NCCL all-gather bandwidth alone, by shard MiB (pytorch/pytorch#182850)
  std::vector<double> ce_shard_mib, ce_ratio;
  // arXiv 2507.03114: overlapped compute slower than alone, mean and max (%)
  double aggregate_mean_pct = 0, aggregate_max_pct = 0;
};
InterferenceFigures read_interference_figures(const std::string& calibration_dir);

struct Row8Prediction {
  double gemm_ms = 0, all_gather_ms = 0;
  double sequential_ms = 0, overlap_sm_ms = 0, overlap_ce_ms = 0;
  int comm_sms = 0;
};
/// @brief Row 8 on `h100`: GEMM and all-gather priced alone, back to back, and overlapped (the
/// all-gather issued first) on NCCL's SM kernels and on copy engines.
Row8Prediction predict_row8(const hardware::ClusterSpec& h100);

/// @brief Row 1 on `a100`: how much slower a kernel streaming the usable HBM runs beside a ring
/// all-gather (the maintainer's reading of the row: HBM bandwidth).
double predict_row1(const hardware::ClusterSpec& a100);

/// @brief Row 10 on `h100`: copy-engine / NCCL all-gather bandwidth alone for a shard of `shard_mib` MiB.
double predict_ce_ratio(const hardware::ClusterSpec& h100, double shard_mib);

/// @brief The aggregate at kernel level: for each workload (GPT-3 2.7B / 6.7B, Llama-2 7B / 13B at
/// micro-batch 2 and 8, TP = 4 on 4 A100 and on 4 H100, as the paper's 4-GPU systems), every compute
/// kernel of one Domino layer beside the layer's TP all-reduce; a workload's slowdown is its
/// kernels' summed time beside / alone - 1.
struct InterferenceAggregate {
  int workloads = 0;
  double mean = 0, max = 0;  ///< relative slowdown
  std::string worst;
};
InterferenceAggregate predict_aggregate();

}  // namespace validate
