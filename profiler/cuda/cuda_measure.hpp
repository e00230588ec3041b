// defines: profiler::cuda::measure (the GPU half of the CUDA profiler), Request, Result, DeviceInfo.
// Host-only and C++17: no CUDA types and no slicetune headers, so that nvcc compiles the .cu with
// this header alone and C++20 code (profiler/cuda_profiler.cpp) turns the Result into a Profile.
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
  std::ostream* progress = nullptr; ///< rank 0 only
};
struct Result {
  DeviceInfo device;
  std::vector<GemmResult> gemm;
  std::vector<CollectiveResult> collectives;
};

/// @brief Runs the GEMM and NCCL measurements on this rank's GPU (MPI must be initialised; one rank
/// per GPU). Throws std::runtime_error (CUDA_CHECK-style, with file:line) on any CUDA, cuBLASLt,
/// NCCL or correctness failure, and when no GPU is visible.
Result measure(const Request& r);

}  // namespace profiler::cuda
