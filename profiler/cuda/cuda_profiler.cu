// The CUDA backend of the profiler: the executor's own GEMM path (executor/cuda/matmul.cuh: the same
// cuBLASLt descriptors, heuristic and workspace) and attention kernels (executor/cuda/attention.cuh),
// bf16, and NCCL collectives; one MPI rank per GPU. Compiles and links wherever SLICETUNE_CUDA is on.

#include <algorithm>
#include <cstring>
#include <cmath>
#include <iostream>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "executor/cuda/attention.cuh"
#include "executor/cuda/matmul.cuh"
#include "profiler/cuda/cuda_measure.hpp"

namespace profiler::cuda {

namespace {

namespace ex = executor::cuda;

// fill_bf16_kernel: x[i] = v (for the correctness pass: all-ones inputs give C = k exactly for powers of two)
__global__ void fill_bf16_kernel(__nv_bfloat16* x, std::size_t n, float v) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    x[i] = __float2bfloat16(v);
}
// fill_pattern_bf16_kernel: x[i] = a deterministic value in [-0.5, 0.5) (attention inputs)
__global__ void fill_pattern_bf16_kernel(__nv_bfloat16* x, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    x[i] = __float2bfloat16(static_cast<float>((i * 2654435761u) % 1000u) / 1000.0f - 0.5f);
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
    CUBLAS_CHECK(cublasCreate(&blas_));
    CUDA_CHECK(cudaMalloc(&workspace_, ex::kLtWorkspaceBytes));
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
    cublasDestroy(blas_);
    cublasLtDestroy(lt_);
    cudaStreamDestroy(stream_);
  }

  Result run() {
    Result r;
    r.device = info();
    gemms(r);
    if (rank_ == 0) *out_ << "profile: gemm done\n" << std::flush;
    attention(r);
    if (rank_ == 0) *out_ << "profile: attention done\n" << std::flush;
    if (size_ > 1) {
      collectives(r);
      if (rank_ == 0) *out_ << "profile: collectives done\n" << std::flush;
    } else if (rank_ == 0) {
      *out_ << "profile: one rank: no collectives measured (run under mpirun -np N for N GPUs)\n" << std::flush;
    }
    const std::size_t copy_bytes = 1u << 28;
    DeviceBuffer<char> x(copy_bytes), y(copy_bytes);
    const double copy_ms = time_ms([&] { CUDA_CHECK(cudaMemcpyAsync(y.p, x.p, copy_bytes, cudaMemcpyDeviceToDevice, stream_)); }, 2, 10);
    r.device.copy_bytes_per_s = 2.0 * copy_bytes / (copy_ms * 1e-3);
    return r;
  }

 private:
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

  /// Row-major C(m, n) = A(m, k) B(k, n) in bf16, fp32 accumulation, through the executor's path:
  /// prepare_gemm (descriptors + cuBLASLt heuristic) once, then matmul_forward per call.
  double gemm_us(std::int64_t m, std::int64_t n, std::int64_t k, bool check) {
    DeviceBuffer<__nv_bfloat16> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n)), c(static_cast<std::size_t>(m * n));
    fill_bf16_kernel<<<1024, 256, 0, stream_>>>(a.p, static_cast<std::size_t>(m * k), 1.0f);
    fill_bf16_kernel<<<1024, 256, 0, stream_>>>(b.p, static_cast<std::size_t>(k * n), 1.0f);
    CUDA_CHECK(cudaGetLastError());
    const ex::GemmCall call{.m = m, .n = n, .k = k, .lda = k, .ldb = n, .ldc = n};
    const ex::PreparedGemm prepared = ex::prepare_gemm(lt_, call, common::DType::bf16, common::DType::bf16, ex::kLtWorkspaceBytes);
    const double flops = 2.0 * m * n * k;
    const int iters = static_cast<int>(std::clamp(2e9 / flops * (o_.quick ? 1 : 5), 5.0, 200.0));
    const double ms = time_ms([&] { ex::matmul_forward(lt_, prepared, a.p, b.p, c.p, workspace_, ex::kLtWorkspaceBytes, stream_); }, 3, iters);
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

  /// The executor's causal attention (forward, and backward recomputing the probabilities) in bf16.
  /// Shapes: a small built-in grid (batch 1, 2 heads) plus the model's exact ones (Request::attention).
  void attention(Result& r) {
    std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>> shapes;  // batch, heads, s, d
    const std::vector<std::int64_t> seqs = o_.quick ? std::vector<std::int64_t>{128, 512, 2048} : std::vector<std::int64_t>{128, 256, 512, 1024, 2048, 4096};
    for (std::int64_t d : {64, 128})
      for (auto s : seqs) shapes.insert({1, 2, s, d});
    for (const auto& a : o_.attention) shapes.insert({a.batch, a.heads, a.s, a.head_dim});
    for (const auto& [batch, heads, s, d] : shapes) {
      const hardware::AttentionOp op{.batch = batch, .heads = heads, .kv_heads = heads, .s_q = s, .s_kv = s, .head_dim = d,
                                     .q_offset = 0, .causal = true, .backward = false, .dtype = common::DType::bf16};
      const ex::AttentionDims dims{.batch = batch, .heads = heads, .kv_heads = heads, .seq = s, .head_dim = d, .rope = false};
      const auto layout = ex::attention_layout(op, 2);
      const std::size_t rows = static_cast<std::size_t>(batch * s), width = static_cast<std::size_t>(dims.width());
      const std::size_t ctx_cols = static_cast<std::size_t>(heads * d);
      DeviceBuffer<__nv_bfloat16> qkv(rows * width), dqkv(rows * width), ctx(rows * ctx_cols), dctx(rows * ctx_cols);
      DeviceBuffer<char> scratch(static_cast<std::size_t>(layout.bytes));
      fill_pattern_bf16_kernel<<<1024, 256, 0, stream_>>>(qkv.p, rows * width);
      fill_pattern_bf16_kernel<<<1024, 256, 0, stream_>>>(dctx.p, rows * ctx_cols);
      CUDA_CHECK(cudaGetLastError());
      const double flops = 4.0 * batch * heads * s * s * d / 2;  // QK^T and PV, causal half
      const int iters = static_cast<int>(std::clamp(2e9 / flops * (o_.quick ? 1 : 5), 3.0, 100.0));
      const double fwd_ms = time_ms([&] { ex::attention_forward(blas_, qkv.p, ctx.p, scratch.p, layout, dims, stream_); }, 2, iters);
      const double bwd_ms =
          time_ms([&] { ex::attention_backward(blas_, qkv.p, dctx.p, dqkv.p, scratch.p, layout, dims, stream_); }, 2, iters);
      // correctness: the first query of a sequence sees only key 0, so its output is V's row 0
      ex::attention_forward(blas_, qkv.p, ctx.p, scratch.p, layout, dims, stream_);
      std::vector<__nv_bfloat16> out(ctx_cols), v0(ctx_cols);
      CUDA_CHECK(cudaMemcpyAsync(out.data(), ctx.p, ctx_cols * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost, stream_));
      CUDA_CHECK(cudaMemcpyAsync(v0.data(), qkv.p + 2 * ctx_cols, ctx_cols * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost, stream_));
      CUDA_CHECK(cudaStreamSynchronize(stream_));
      for (std::size_t c = 0; c < ctx_cols; ++c)
        if (std::abs(__bfloat162float(out[c]) - __bfloat162float(v0[c])) > 1e-2f)
          throw std::runtime_error("profile: attention output row 0 column " + std::to_string(c) + " is " +
                                   std::to_string(__bfloat162float(out[c])) + ", expected V's " + std::to_string(__bfloat162float(v0[c])));
      double us[2] = {fwd_ms * 1e3, bwd_ms * 1e3};
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, us, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
      const AttentionShape shape{batch, heads, s, d};
      r.attention.push_back({shape, false, round_sig(us[0] / size_)});
      r.attention.push_back({shape, true, round_sig(us[1] / size_)});
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
  cublasHandle_t blas_{};
  void* workspace_ = nullptr;
  cudaEvent_t start_{}, stop_{};
  ncclComm_t comm_{};
};

}  // namespace

Result measure(const Request& r) { return CudaProfiler(r).run(); }

}  // namespace profiler::cuda
