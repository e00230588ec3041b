// defines: profiler::cuda::measure (the GPU half of the CUDA profiler), Request, Result, DeviceInfo.
// Host-only: no CUDA types, so that host C++ (profiler/cuda_profiler.cpp) turns the Result into a
// Profile. The .cu behind it times the executor's own GEMM, attention, element-wise and AdamW code
// (executor/cuda/).
#pragma once
#include <array>
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
/// One element-wise kernel the CUDA executor launches: `kind` is hardware::ElementwiseKind's name
/// (to_string), or "stream" (a plain y += x sweep, the profiled model's stand-in for kinds without
/// rows of their own).
struct ElementwiseKernel {
  const char* kind;
  bool backward;
};
/// Every element-wise kernel a bf16 plan of the CUDA executor runs (executor/cuda/device.cu,
/// run_compute_as), plus "stream". Not here: accumulate, concat and rope, which the step graph
/// never emits and the CUDA launch plan refuses (executor/cuda/launch_plan.cpp, elementwise_kind).
inline constexpr std::array<ElementwiseKernel, 13> kElementwiseKernels{{
    {"stream", false}, {"layernorm", false}, {"layernorm", true}, {"rmsnorm", false}, {"rmsnorm", true},
    {"gelu", false}, {"gelu", true}, {"swiglu", false}, {"swiglu", true}, {"residual", false},
    {"cross_entropy", false}, {"embedding", false}, {"embedding", true}}};

/// An element-wise kernel over `rows` x `cols`: elements = rows x cols as the step graph counts them
/// (ElementwiseOp::elements). Row width `cols`: the hidden size (norms, residual, embedding), the
/// FFN width (activations; SwiGLU reads rows x 2 cols), the local vocabulary (cross-entropy).
struct ElementwiseShape {
  std::string kind;
  bool backward = false;
  std::int64_t rows = 0, cols = 0;
  std::int64_t elements() const { return rows * cols; }
};
struct ElementwiseResult {
  ElementwiseShape shape;
  double us = 0;  ///< median per call, mean over ranks; cross_entropy: half its two kernels (statistics, loss)
};
struct OptimizerResult {
  std::int64_t params = 0;
  double us = 0;  ///< one fused AdamW launch over `params`; median per call, mean over ranks
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
  std::vector<ElementwiseShape> elementwise;   ///< element-wise kernels to time (grid and a model's shapes)
  std::vector<std::int64_t> optimizer_params;  ///< AdamW sizes to time
  std::ostream* progress = nullptr; ///< rank 0 only
};
struct Result {
  DeviceInfo device;
  std::vector<GemmResult> gemm;
  std::vector<AttentionResult> attention;
  std::vector<ElementwiseResult> elementwise;  ///< one per Request::elementwise entry that fits in GPU memory
  std::vector<OptimizerResult> optimizer;      ///< one per Request::optimizer_params entry that fits
  std::vector<CollectiveResult> collectives;  ///< empty with one rank (nothing crosses a link)
};

/// @brief Runs the GEMM, attention, element-wise, optimizer and NCCL measurements on this rank's GPU (MPI must be initialised; one rank
/// per GPU). Throws std::runtime_error (CUDA_CHECK-style, with file:line) on any CUDA, cuBLASLt,
/// NCCL or correctness failure, and when no GPU is visible.
Result measure(const Request& r);

}  // namespace profiler::cuda
