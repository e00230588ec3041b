// defines: PreparedGemm, prepare_gemm, matmul_forward (cuBLASLt, row-major C (+)= op(A) op(B), fp32
//          accumulation), gemm_strided_batched (cuBLAS, for attention), cast_forward_kernel / cast_forward
// Row-major operands are passed to the column-major libraries as their transposes:
// C (m, n) = op(A) op(B)  <=>  C^T (n, m) = op(B)^T op(A)^T, so cuBLAS's "A" is our B.
#pragma once
#include "executor/cuda/cuda_common.cuh"
#include "executor/cuda/launch_plan.hpp"

namespace executor::cuda {

/// cuBLASLt workspace the executor gives every GEMM (Hopper kernels like 32 MiB); the profiler
/// times GEMMs with the same, so that the heuristic picks the same algorithms.
constexpr std::size_t kLtWorkspaceBytes = 32u << 20;

inline cudaDataType_t cuda_dtype(common::DType t) {
  switch (t) {
    case common::DType::fp32: return CUDA_R_32F;
    case common::DType::bf16: return CUDA_R_16BF;
    case common::DType::fp16: return CUDA_R_16F;
    case common::DType::fp8: break;
  }
  throw std::runtime_error("cuda backend: fp8 tensors are not supported");
}

/// @brief One GEMM of the launch plan with its cuBLASLt descriptors and the algorithm the
/// heuristic chose, built once in prepare() so that issuing costs one cublasLtMatmul call.
struct PreparedGemm {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t x = nullptr, y = nullptr, c = nullptr;  // x = our B, y = our A (see above)
  cublasLtMatmulAlgo_t algo{};
  float beta = 0.0f;
  PreparedGemm() = default;
  PreparedGemm(const PreparedGemm&) = delete;
  PreparedGemm& operator=(const PreparedGemm&) = delete;
  PreparedGemm(PreparedGemm&& o) noexcept { *this = std::move(o); }
  PreparedGemm& operator=(PreparedGemm&& o) noexcept {
    std::swap(desc, o.desc); std::swap(x, o.x); std::swap(y, o.y); std::swap(c, o.c);
    algo = o.algo; beta = o.beta;
    return *this;
  }
  ~PreparedGemm() {
    if (desc) cublasLtMatmulDescDestroy(desc);
    if (x) cublasLtMatrixLayoutDestroy(x);
    if (y) cublasLtMatrixLayoutDestroy(y);
    if (c) cublasLtMatrixLayoutDestroy(c);
  }
};

/// @brief Descriptors and algorithm for `g` with A/B of `ab` and C of `c_type`; fp32 inputs use
/// true fp32 (no TF32) so that the CUDA backend matches the CPU backend in fp32 runs.
inline PreparedGemm prepare_gemm(cublasLtHandle_t lt, const GemmCall& g, common::DType ab, common::DType c_type,
                                 std::size_t workspace_bytes) {
  PreparedGemm p;
  const cudaDataType_t abt = cuda_dtype(ab), ct = cuda_dtype(c_type);
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t opx = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, opy = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opx, sizeof(opx)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opy, sizeof(opy)));
  // column-major views: X = B^T stored (n, k) [N] or (k, n) [T]; Y = A^T stored (k, m) [N] or (m, k) [T]
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.x, abt, g.trans_b ? g.k : g.n, g.trans_b ? g.n : g.k, g.ldb));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.y, abt, g.trans_a ? g.m : g.k, g.trans_a ? g.k : g.m, g.lda));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, ct, g.n, g.m, g.ldc));
  p.beta = g.accumulate ? 1.0f : 0.0f;
  cublasLtMatmulPreference_t pref;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                                    sizeof(workspace_bytes)));
  // The heuristic assumes 256-byte aligned operands; a column chunk of B starts at b_offset
  // elements, and the pieces of a decomposed TP site (GemmCall::parts) at row offsets of our A and C,
  // so tell it the real alignment of each (cuBLAS's A is our B, its B our A). The arena is 256-aligned.
  auto align_of = [](std::int64_t elements, common::DType t) {
    const std::uint64_t bytes = static_cast<std::uint64_t>(elements) * static_cast<std::uint64_t>(common::dtype_bytes(t));
    std::uint32_t a = 256;
    while (a > 1 && bytes % a != 0) a /= 2;
    return a;
  };
  std::uint32_t align = align_of(g.b_offset, ab), align_b = 256, align_c = 256;
  for (const auto& part : g.parts) {
    align = std::min(align, align_of(part.b_offset, ab));
    align_b = std::min(align_b, align_of(part.a_offset, ab));
    align_c = std::min(align_c, align_of(part.c_offset, c_type));
  }
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align, sizeof(align)));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b)));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(align_c)));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof(align_c)));
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, p.desc, p.x, p.y, p.c, p.c, pref, 1, &heur, &found));
  cublasLtMatmulPreferenceDestroy(pref);
  if (found == 0)
    throw std::runtime_error("cuBLASLt has no algorithm for a GEMM m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) +
                             " k=" + std::to_string(g.k));
  p.algo = heur.algo;
  return p;
}

/// C (+)= op(A) op(B) on `stream`; a, b, c are device pointers of the prepared dtypes.
inline void matmul_forward(cublasLtHandle_t lt, const PreparedGemm& p, const void* a, const void* b, void* c, void* workspace,
                           std::size_t workspace_bytes, cudaStream_t stream) {
  const float alpha = 1.0f;
  CUBLAS_CHECK(cublasLtMatmul(lt, p.desc, &alpha, b, p.x, a, p.y, &p.beta, c, p.c, c, p.c, &p.algo, workspace, workspace_bytes,
                              stream));
}

/// Row-major batched C[i] (m, n) = alpha op(A[i]) op(B[i]) + beta C[i], fp32 accumulation (cuBLAS).
struct BatchedGemm {
  bool trans_a = false, trans_b = false;
  long long m = 0, n = 0, k = 0;
  const void* a = nullptr; long long lda = 0, stride_a = 0;
  const void* b = nullptr; long long ldb = 0, stride_b = 0;
  void* c = nullptr; long long ldc = 0, stride_c = 0;
  long long batch = 1;
  float alpha = 1.0f, beta = 0.0f;
  cudaDataType_t ab_type = CUDA_R_32F, c_type = CUDA_R_32F;
};
inline void gemm_strided_batched(cublasHandle_t h, const BatchedGemm& g, cudaStream_t stream) {
  CUBLAS_CHECK(cublasSetStream(h, stream));
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                          static_cast<int>(g.n), static_cast<int>(g.m), static_cast<int>(g.k), &g.alpha, g.b, g.ab_type,
                                          static_cast<int>(g.ldb), g.stride_b, g.a, g.ab_type, static_cast<int>(g.lda), g.stride_a,
                                          &g.beta, g.c, g.c_type, static_cast<int>(g.ldc), g.stride_c, static_cast<int>(g.batch),
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// defines: cast_forward_kernel — out = (T) in, fp32 -> the activation dtype (dlogits before the LM-head GEMMs)
template <typename T>
__global__ void cast_forward_kernel(const float* in, T* out, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long long>(gridDim.x) * blockDim.x)
    out[i] = from_float<T>(in[i]);
}
template <typename T>
void cast_forward(const float* in, T* out, long long n, cudaStream_t stream) {
  const int block = 256;
  const long long grid = std::min<long long>(ceil_div(n, block), 65535);
  cast_forward_kernel<T><<<static_cast<unsigned>(grid), block, 0, stream>>>(in, out, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace executor::cuda
