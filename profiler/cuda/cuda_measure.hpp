// defines: profiler::cuda::measure (the GPU half of the CUDA profiler), Request, Result, DeviceInfo.
// Host-only: no CUDA types, so that host C++ (profiler/cuda_profiler.cpp) turns the Result into a
// Profile. The .cu behind it times the executor's own GEMM and attention paths (executor/cuda/).
#pragma once
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace profiler::cuda {

struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
};
struct GemmResult {
  std::int64_t m = 0, n = 0, k = 0;
  double us = 0;  ///< bf16 in, fp32 accumulate, bf16 out; mean per call, mean over ranks
};
/// Causal self-attention of `batch` sequences of `s` tokens, s_q = s_kv (the executor's kernels).
struct AttentionShape {
  std::int64_t batch = 0, heads = 0, s = 0, head_dim = 0;
};
struct AttentionResult {
  AttentionShape shape;
  bool backward = false;
  double us = 0;  ///< bf16; mean per call, mean over ranks
};
enum class Collective { all_reduce, all_gather, reduce_scatter };
struct CollectiveResult {
  Collective kind = Collective::all_reduce;
  std::int64_t bytes = 0;
  double us = 0;  ///< mean per call, max over ranks
};
struct DeviceInfo {
  std::string name;
  int major = 0, sms = 0;
  double memory_bytes = 0;
  double copy_bytes_per_s = 0;  ///< device-to-device copy, read + write
  int rank = 0, ranks = 1, local_ranks = 1;
  std::map<std::string, std::string> libraries;
};
struct Request {
  bool quick = false;
  std::vector<std::int64_t> grid;   ///< m, n and k axes of the GEMM grid
  std::vector<GemmShape> extra;     ///< exact shapes (a model's)
  std::vector<AttentionShape> attention;  ///< exact attention shapes (a model's), added to a built-in grid
  std::ostream* progress = nullptr; ///< rank 0 only
};
struct Result {
  DeviceInfo device;
  std::vector<GemmResult> gemm;
  std::vector<AttentionResult> attention;
  std::vector<CollectiveResult> collectives;  ///< empty with one rank (nothing crosses a link)
};

/// @brief Runs the GEMM, attention and NCCL measurements on this rank's GPU (MPI must be initialised; one rank
/// per GPU). Throws std::runtime_error (CUDA_CHECK-style, with file:line) on any CUDA, cuBLASLt,
/// NCCL or correctness failure, and when no GPU is visible.
Result measure(const Request& r);

}  // namespace profiler::cuda
