// The CUDA backend of the profiler: cuBLASLt GEMMs (bf16 in, fp32 accumulate) and NCCL collectives,
// one MPI rank per GPU. Compiles and links wherever SLICETUNE_CUDA is on; it has not yet run on a GPU.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <iostream>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "profiler/cuda/cuda_measure.hpp"

#include "common/check.hpp"

namespace profiler::cuda {

namespace {

// fill_bf16_kernel: x[i] = v (for the correctness pass: all-ones inputs give C = k exactly for powers of two)
__global__ void fill_bf16_kernel(__nv_bfloat16* x, std::size_t n, float v) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    x[i] = __float2bfloat16(v);
}
__global__ void fill_f32_kernel(float* x, std::size_t n, float v) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    x[i] = v;
}

double round_sig(double v) {
  if (v <= 0) return v;
  const double scale = std::pow(10.0, 3 - std::floor(std::log10(v)));
  return std::round(v * scale) / scale;
}

template <class T>
struct DeviceBuffer {
  T* p = nullptr;
  explicit DeviceBuffer(std::size_t n) { CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(n, 1) * sizeof(T))); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

class CudaProfiler {
 public:
  explicit CudaProfiler(const Request& o) : o_(o), out_(o.progress ? o.progress : &std::cerr) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
      throw std::runtime_error("no CUDA GPU is visible on this machine");
    MPI_Comm local;
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local));
    MPI_Comm_rank(local, &local_rank_);
    MPI_Comm_size(local, &local_size_);
    MPI_Comm_free(&local);
    CUDA_CHECK(cudaSetDevice(local_rank_ % devices));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasLtCreate(&lt_));
    CUDA_CHECK(cudaMalloc(&workspace_, kWorkspace));
    CUDA_CHECK(cudaEventCreate(&start_));
    CUDA_CHECK(cudaEventCreate(&stop_));
    ncclUniqueId id;
    if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    // the NCCL id travels over MPI, the way mpirun/srun-launched NCCL jobs bootstrap
    MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
    NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
  }
  ~CudaProfiler() {
    ncclCommDestroy(comm_);
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaFree(workspace_);
    cublasLtDestroy(lt_);
    cudaStreamDestroy(stream_);
  }

  Result run() {
    Result r;
    r.device = info();
    gemms(r);
    if (rank_ == 0) *out_ << "profile: gemm done\n" << std::flush;
    collectives(r);
    if (rank_ == 0) *out_ << "profile: collectives done\n" << std::flush;
    const std::size_t copy_bytes = 1u << 28;
    DeviceBuffer<char> x(copy_bytes), y(copy_bytes);
    const double copy_ms = time_ms([&] { CUDA_CHECK(cudaMemcpyAsync(y.p, x.p, copy_bytes, cudaMemcpyDeviceToDevice, stream_)); }, 2, 10);
    r.device.copy_bytes_per_s = 2.0 * copy_bytes / (copy_ms * 1e-3);
    return r;
  }

 private:
  static constexpr std::size_t kWorkspace = 64u << 20;

  /// Mean milliseconds per call over `iters` calls after `warmup`, timed with CUDA events on the stream.
  template <class F>
  double time_ms(F&& f, int warmup, int iters) {
    for (int i = 0; i < warmup; ++i) f();
    CUDA_CHECK(cudaEventRecord(start_, stream_));
    for (int i = 0; i < iters; ++i) f();
    CUDA_CHECK(cudaEventRecord(stop_, stream_));
    CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms / iters;
  }

  /// Row-major C(m, n) = A(m, k) B(k, n) is column-major C^T = B^T A^T: cuBLASLt sees (n x k) . (k x m).
  void matmul(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, std::int64_t m, std::int64_t n, std::int64_t k,
              cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lc,
              const cublasLtMatmulAlgo_t* algo) {
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(lt_, op, &one, b, lb, a, la, &zero, c, lc, c, lc, algo, workspace_, kWorkspace, stream_));
    (void)m, (void)n, (void)k;
  }

  double gemm_us(std::int64_t m, std::int64_t n, std::int64_t k, bool check) {
    DeviceBuffer<__nv_bfloat16> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n)), c(static_cast<std::size_t>(m * n));
    fill_bf16_kernel<<<1024, 256, 0, stream_>>>(a.p, static_cast<std::size_t>(m * k), 1.0f);
    fill_bf16_kernel<<<1024, 256, 0, stream_>>>(b.p, static_cast<std::size_t>(k * n), 1.0f);
    CUDA_CHECK(cudaGetLastError());
    cublasLtMatmulDesc_t op;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtMatrixLayout_t lb, la, lc;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(k), n));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, static_cast<std::uint64_t>(k), static_cast<std::uint64_t>(m), k));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(m), n));
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    std::size_t ws = kWorkspace;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t heur{};
    int found = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt_, op, lb, la, lc, lc, pref, 1, &heur, &found));
    if (found == 0) throw std::runtime_error("profile: cuBLASLt has no algorithm for a bf16 GEMM " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
    const double flops = 2.0 * m * n * k;
    const int iters = static_cast<int>(std::clamp(2e9 / flops * (o_.quick ? 1 : 5), 5.0, 200.0));
    const double ms = time_ms([&] { matmul(a.p, b.p, c.p, m, n, k, op, lb, la, lc, &heur.algo); }, 3, iters);
    if (check) {  // all-ones inputs: every entry of C is k (exact in bf16 for powers of two)
      std::vector<std::uint16_t> host(2);
      CUDA_CHECK(cudaMemcpyAsync(host.data(), c.p, 2 * sizeof(std::uint16_t), cudaMemcpyDeviceToHost, stream_));
      CUDA_CHECK(cudaStreamSynchronize(stream_));
      for (auto bits : host) {
        const std::uint32_t f32 = static_cast<std::uint32_t>(bits) << 16;
        float v;
        std::memcpy(&v, &f32, sizeof v);
        if (v != static_cast<float>(k)) throw std::runtime_error("profile: bf16 GEMM with all-ones inputs gives " + std::to_string(v) + ", expected " + std::to_string(k));
      }
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatmulDescDestroy(op);
    double us = ms * 1e3;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &us, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    return us / size_;
  }

  void gemms(Result& r) {
    std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> shapes;
    for (auto m : o_.grid)
      for (auto n : o_.grid)
        for (auto k : o_.grid) shapes.insert({m, n, k});
    for (const auto& g : o_.extra) shapes.insert({g.m, g.n, g.k});
    for (const auto& [m, n, k] : shapes) {
      const bool pow2 = (k & (k - 1)) == 0 && k <= 256;  // C = k exactly representable in bf16
      r.gemm.push_back({m, n, k, round_sig(gemm_us(m, n, k, pow2))});
    }
  }

  void collectives(Result& r) {
    const std::int64_t max_bytes = o_.quick ? (std::int64_t{1} << 26) : (std::int64_t{1} << 30);
    const std::int64_t step = o_.quick ? 4 : 2;
    DeviceBuffer<float> send(static_cast<std::size_t>(max_bytes / 4)), recv(static_cast<std::size_t>(max_bytes / 4));
    for (Collective kind : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter}) {
      for (std::int64_t bytes = 1024; bytes <= max_bytes; bytes *= step) {
        const std::size_t count = static_cast<std::size_t>(bytes / 4);
        auto run = [&] {
          switch (kind) {
            case Collective::all_reduce: NCCL_CHECK(ncclAllReduce(send.p, recv.p, count, ncclFloat, ncclSum, comm_, stream_)); break;
            case Collective::all_gather: NCCL_CHECK(ncclAllGather(send.p, recv.p, count / size_, ncclFloat, comm_, stream_)); break;
            default: NCCL_CHECK(ncclReduceScatter(send.p, recv.p, count / size_, ncclFloat, ncclSum, comm_, stream_)); break;
          }
        };
        fill_f32_kernel<<<1024, 256, 0, stream_>>>(send.p, count, 1.0f);
        CUDA_CHECK(cudaGetLastError());
        const int iters = bytes >= (1 << 26) ? 5 : 20;
        double us = time_ms(run, 5, iters) * 1e3;
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
        // correctness: ones summed over ranks (AllReduce, ReduceScatter) or gathered (AllGather)
        fill_f32_kernel<<<1024, 256, 0, stream_>>>(send.p, count, 1.0f);
        run();
        float first = 0;
        CUDA_CHECK(cudaMemcpyAsync(&first, recv.p, sizeof first, cudaMemcpyDeviceToHost, stream_));
        CUDA_CHECK(cudaStreamSynchronize(stream_));
        const float expect = kind == Collective::all_gather ? 1.0f : static_cast<float>(size_);
        if (first != expect)
          throw std::runtime_error("profile: NCCL collective " + std::to_string(static_cast<int>(kind)) + " gives " + std::to_string(first) +
                                   ", expected " + std::to_string(expect));
        r.collectives.push_back({kind, bytes, round_sig(us)});
      }
    }
  }

  DeviceInfo info() const {
    DeviceInfo d;
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, local_rank_));
    d.name = prop.name;
    d.major = prop.major;
    d.sms = prop.multiProcessorCount;
    d.memory_bytes = static_cast<double>(prop.totalGlobalMem);
    d.rank = rank_;
    d.ranks = size_;
    d.local_ranks = local_size_;
    int rt = 0, drv = 0, nccl = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    ncclGetVersion(&nccl);
    d.libraries["cuda_runtime"] = std::to_string(rt);
    d.libraries["cuda_driver"] = std::to_string(drv);
    d.libraries["cublaslt"] = std::to_string(cublasLtGetVersion());
    d.libraries["nccl"] = std::to_string(nccl);
    return d;
  }

  const Request& o_;
  std::ostream* out_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  cudaStream_t stream_{};
  cublasLtHandle_t lt_{};
  void* workspace_ = nullptr;
  cudaEvent_t start_{}, stop_{};
  ncclComm_t comm_{};
};

}  // namespace

Result measure(const Request& r) { return CudaProfiler(r).run(); }

}  // namespace profiler::cuda
