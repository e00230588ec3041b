// The CUDA backend of the profiler: the executor's own GEMM path (executor/cuda/matmul.cuh: the same
// cuBLASLt descriptors, heuristic and workspace), attention kernels (executor/cuda/attention.cuh),
// element-wise kernels (elementwise.cuh, norm.cuh, cross_entropy.cuh) and fused AdamW (adamw.cuh),
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

#include "executor/cuda/adamw.cuh"
#include "executor/cuda/attention.cuh"
#include "executor/cuda/cross_entropy.cuh"
#include "executor/cuda/elementwise.cuh"
#include "executor/cuda/matmul.cuh"
#include "executor/cuda/norm.cuh"
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

// ---- element-wise kernels and AdamW (executor/cuda/elementwise.cuh, norm.cuh, cross_entropy.cuh, adamw.cuh) ----

using bf16 = __nv_bfloat16;

// fill_pattern_kernel: x[i] = a deterministic pseudo-random value in [-0.5, 0.5) (1000 levels): the
// index and seed through splitmix64's mixing, so that arrays of different seeds are uncorrelated
template <typename T>
__global__ void fill_pattern_kernel(T* x, long long n, unsigned long long seed) {
  GRID_STRIDE(i, n) {
    unsigned long long h = static_cast<unsigned long long>(i) + seed * 0x9E3779B97F4A7C15ull;
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    h ^= h >> 31;
    x[i] = ex::from_float<T>(static_cast<float>(h % 1000ull) / 1000.0f - 0.5f);
  }
}
template <typename T>
__global__ void fill_value_kernel(T* x, long long n, float v) {
  GRID_STRIDE(i, n) x[i] = ex::from_float<T>(v);
}
// fill_index_kernel: ids[i] = (i * 7919) % modulo (token ids, targets), or i % modulo with step 1 (positions)
__global__ void fill_index_kernel(int* ids, long long n, long long step, long long modulo) {
  GRID_STRIDE(i, n) ids[i] = static_cast<int>((i * step) % modulo);
}
// stream_add_kernel: y (N) += x (N), the "stream" sweep (reads x and y, writes y) the profiled model
// uses for element-wise kinds without rows of their own; written like the executor's kernels
template <typename T>
__global__ void stream_add_kernel(const T* x, T* y, long long n) {
  GRID_STRIDE(i, n) y[i] = ex::from_float<T>(ex::to_float(y[i]) + ex::to_float(x[i]));
}

template <typename T>
void fill_pattern(T* x, long long n, unsigned long long seed, cudaStream_t s) {
  fill_pattern_kernel<T><<<ex::grid_for(n, 256), 256, 0, s>>>(x, n, seed);
  CUDA_CHECK_LAUNCH();
}
template <typename T>
void fill_value(T* x, long long n, float v, cudaStream_t s) {
  fill_value_kernel<T><<<ex::grid_for(n, 256), 256, 0, s>>>(x, n, v);
  CUDA_CHECK_LAUNCH();
}
void fill_index(int* ids, long long n, long long step, long long modulo, cudaStream_t s) {
  fill_index_kernel<<<ex::grid_for(n, 256), 256, 0, s>>>(ids, n, step, modulo);
  CUDA_CHECK_LAUNCH();
}

float host_float(bf16 x) { return __bfloat162float(x); }
float host_float(float x) { return x; }
float host_float(int x) { return static_cast<float>(x); }

/// `n` elements of device array `p` as fp32 on the host (synchronises `s`).
template <typename T>
std::vector<float> to_host(const T* p, long long n, cudaStream_t s) {
  std::vector<T> raw(static_cast<std::size_t>(n));
  CUDA_CHECK(cudaMemcpyAsync(raw.data(), p, raw.size() * sizeof(T), cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<float> out(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) out[i] = host_float(raw[i]);
  return out;
}

/// Throws unless |got - want| <= abs_tol + rel_tol |want| (a bf16 result: rel_tol ~ 1e-2).
void expect_near(const std::string& what, std::size_t i, double got, double want, double abs_tol, double rel_tol) {
  if (std::isfinite(got) && std::abs(got - want) <= abs_tol + rel_tol * std::abs(want)) return;
  throw std::runtime_error("profile: CUDA element-wise check: " + what + " element " + std::to_string(i) + " is " + std::to_string(got) +
                           ", expected " + std::to_string(want));
}

/// Device memory for one measurement; an allocation that does not fit leaves `failed` set instead of
/// throwing (the caller agrees with the other ranks to skip the shape), any other error throws.
class Arena {
 public:
  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena() {
    for (void* p : ptrs_) cudaFree(p);
  }
  template <typename T>
  T* get(long long n) {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, static_cast<std::size_t>(std::max<long long>(n, 1)) * sizeof(T));
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not sticky: clear it and report through failed
      failed = true;
      return nullptr;
    }
    CUDA_CHECK(e);
    ptrs_.push_back(p);
    return static_cast<T*>(p);
  }
  bool failed = false;

 private:
  std::vector<void*> ptrs_;
};

enum class Kernel { stream, norm_forward, norm_backward, gelu_forward, gelu_backward, swiglu_forward, swiglu_backward, residual,
                    cross_entropy, embedding_forward, embedding_backward };

/// One element-wise kernel of the CUDA executor at one shape, in bf16 (a bf16 plan's activation dtype;
/// logits, statistics and weight gradients fp32, as device.cu keeps them): buffers, one call issued
/// exactly as GpuDevice::run_compute_as issues the task, and a host check of one call's result.
class ElementwiseCase {
 public:
  ElementwiseCase(const ElementwiseShape& s, cudaStream_t stream, int sms)
      : shape_(s), rows_(s.rows), cols_(s.cols), n_(s.rows * s.cols), stream_(stream), sms_(sms) {
    if (rows_ <= 0 || cols_ <= 0) throw std::runtime_error("profile: element-wise shape " + s.kind + " " + std::to_string(rows_) + " x " + std::to_string(cols_) + " is empty");
    const std::string& k = s.kind;
    const bool b = s.backward;
    if (k == "stream" && !b) kernel_ = Kernel::stream;
    else if (k == "layernorm" || k == "rmsnorm") {
      kernel_ = b ? Kernel::norm_backward : Kernel::norm_forward;
      rms_ = k == "rmsnorm";
    }
    else if (k == "gelu") kernel_ = b ? Kernel::gelu_backward : Kernel::gelu_forward;
    else if (k == "swiglu") kernel_ = b ? Kernel::swiglu_backward : Kernel::swiglu_forward;
    else if (k == "residual" && !b) kernel_ = Kernel::residual;
    else if (k == "cross_entropy" && !b) kernel_ = Kernel::cross_entropy;
    else if (k == "embedding") kernel_ = b ? Kernel::embedding_backward : Kernel::embedding_forward;
    else throw std::runtime_error("profile: the CUDA executor has no element-wise kernel '" + k + (b ? "' backward" : "' forward"));
    if ((kernel_ == Kernel::norm_forward || kernel_ == Kernel::norm_backward) && cols_ > (1 << 20))
      throw std::runtime_error("profile: norm row width " + std::to_string(cols_) + " is beyond the executor's int width");
    const long long n = n_, c = cols_;
    switch (kernel_) {
      case Kernel::stream: x_ = a_.get<bf16>(n), z_ = a_.get<bf16>(n); break;
      case Kernel::norm_forward: x_ = a_.get<bf16>(n), w_ = a_.get<bf16>(2 * c), z_ = a_.get<bf16>(n); break;
      case Kernel::norm_backward:
        y_ = a_.get<bf16>(n), x_ = a_.get<bf16>(n), w_ = a_.get<bf16>(2 * c), r_ = a_.get<bf16>(n), z_ = a_.get<bf16>(n);
        dw_ = a_.get<float>(2 * c);
        break;
      case Kernel::gelu_forward: x_ = a_.get<bf16>(n), z_ = a_.get<bf16>(n); break;
      case Kernel::gelu_backward: x_ = a_.get<bf16>(n), y_ = a_.get<bf16>(n), z_ = a_.get<bf16>(n); break;
      case Kernel::swiglu_forward: x_ = a_.get<bf16>(2 * n), z_ = a_.get<bf16>(n); break;
      case Kernel::swiglu_backward: x_ = a_.get<bf16>(2 * n), y_ = a_.get<bf16>(n), z_ = a_.get<bf16>(2 * n); break;
      case Kernel::residual: x_ = a_.get<bf16>(n), y_ = a_.get<bf16>(n), z_ = a_.get<bf16>(n); break;
      case Kernel::cross_entropy:
        logits_ = a_.get<float>(n), dlogits_ = a_.get<float>(n), stats_ = a_.get<float>(3 * rows_), loss_ = a_.get<float>(rows_);
        ids_ = a_.get<int>(rows_);
        break;
      case Kernel::embedding_forward:
        ids_ = a_.get<int>(rows_), positions_ = a_.get<int>(rows_), x_ = a_.get<bf16>(n), r_ = a_.get<bf16>(n), z_ = a_.get<bf16>(n);
        break;
      case Kernel::embedding_backward:
        ids_ = a_.get<int>(rows_), positions_ = a_.get<int>(rows_), y_ = a_.get<bf16>(n), dw_ = a_.get<float>(n), dpos_ = a_.get<float>(n);
        break;
    }
  }

  bool fits() const { return !a_.failed; }

  /// Inputs: patterns in [-0.5, 0.5); norm weights 1 (scale) and 1 (bias); token ids (r 7919) mod the
  /// table's rows (the table has one row per token: every lookup reads a row of its own, as distinct
  /// tokens do), positions r; accumulated outputs zero.
  void fill() {
    const long long n = n_;
    if (x_) fill_pattern(x_, kernel_ == Kernel::swiglu_forward || kernel_ == Kernel::swiglu_backward ? 2 * n : n, 11, stream_);
    if (y_) fill_pattern(y_, n, 23, stream_);
    if (r_) fill_pattern(r_, n, 37, stream_);
    if (w_) fill_value(w_, 2 * cols_, 1.0f, stream_);
    if (logits_) fill_pattern(logits_, n, 41, stream_);
    if (ids_) fill_index(ids_, rows_, 7919, kernel_ == Kernel::cross_entropy ? cols_ : rows_, stream_);
    if (positions_) fill_index(positions_, rows_, 1, rows_, stream_);
    if (kernel_ == Kernel::stream) CUDA_CHECK(cudaMemsetAsync(z_, 0, static_cast<std::size_t>(n) * sizeof(bf16), stream_));
    if (dw_) CUDA_CHECK(cudaMemsetAsync(dw_, 0, static_cast<std::size_t>(kernel_ == Kernel::norm_backward ? 2 * cols_ : n) * sizeof(float), stream_));
    if (dpos_) CUDA_CHECK(cudaMemsetAsync(dpos_, 0, static_cast<std::size_t>(n) * sizeof(float), stream_));
  }

  /// One call, as device.cu issues the task (norm backward with the residual gradient, as in every
  /// layer; residual with one partial, no column chunks; embedding with learned positions, TP rank 0).
  void run() {
    const long long rows = rows_, cols = cols_, n = n_;
    switch (kernel_) {
      case Kernel::stream:
        stream_add_kernel<bf16><<<ex::grid_for(n, 256), 256, 0, stream_>>>(x_, z_, n);
        CUDA_CHECK_LAUNCH();
        return;
      case Kernel::norm_forward: ex::norm_forward<bf16>(rms_, x_, w_, z_, rows, static_cast<int>(cols), stream_); return;
      case Kernel::norm_backward: ex::norm_backward<bf16>(rms_, y_, x_, w_, r_, z_, dw_, rows, static_cast<int>(cols), sms_, stream_); return;
      case Kernel::gelu_forward: ex::gelu_forward<bf16>(x_, z_, n, stream_); return;
      case Kernel::gelu_backward: ex::gelu_backward<bf16>(x_, y_, z_, n, stream_); return;
      case Kernel::swiglu_forward: ex::swiglu_forward<bf16>(x_, z_, rows, cols, stream_); return;
      case Kernel::swiglu_backward: ex::swiglu_backward<bf16>(x_, y_, z_, rows, cols, stream_); return;
      case Kernel::residual: {
        ex::Partials<bf16> parts;
        parts.p[parts.count++] = y_;
        ex::residual_forward<bf16>(x_, parts, z_, rows, cols, stream_);
        return;
      }
      case Kernel::cross_entropy:  // the graph's two cross-entropy tasks: statistics, then loss and dlogits
        ex::cross_entropy_stats(logits_, ids_, 0, cols, stats_, rows, stream_);
        ex::cross_entropy_loss(logits_, stats_, ids_, 0, cols, 1.0f / static_cast<float>(rows), dlogits_, loss_, rows, stream_);
        return;
      case Kernel::embedding_forward: ex::embedding_forward<bf16>(ids_, positions_, x_, r_, 0, rows, z_, rows, cols, stream_); return;
      case Kernel::embedding_backward: ex::embedding_backward<bf16>(ids_, positions_, y_, dw_, dpos_, 0, rows, rows, cols, stream_); return;
    }
  }

  /// Calls per timed call: cross_entropy times its two kernels together, the table holds their mean.
  int tasks_per_call() const { return kernel_ == Kernel::cross_entropy ? 2 : 1; }

  /// Refills the inputs, runs one call and compares every output element with a host computation
  /// (double precision from the same bf16 inputs). Throws std::runtime_error on a mismatch.
  void check() {
    fill();
    run();
    const long long rows = rows_, cols = cols_, n = n_;
    const std::string what = shape_.kind + (shape_.backward ? " backward " : " forward ") + std::to_string(rows) + " x " + std::to_string(cols);
    const double bf = 1.0 / 64;  // bf16 output: 8 significant bits, fp32 arithmetic before the rounding
    switch (kernel_) {
      case Kernel::stream: {  // 0 + x is x exactly
        const auto x = to_host(x_, n, stream_), z = to_host(z_, n, stream_);
        for (std::size_t i = 0; i < z.size(); ++i) expect_near(what, i, z[i], x[i], 0, 0);
        return;
      }
      case Kernel::norm_forward:
      case Kernel::norm_backward: {
        const auto x = to_host(x_, n, stream_), z = to_host(z_, n, stream_);
        const bool bwd = kernel_ == Kernel::norm_backward;
        const auto dy = bwd ? to_host(y_, n, stream_) : std::vector<float>{};
        const auto res = bwd ? to_host(r_, n, stream_) : std::vector<float>{};
        std::vector<double> dw(static_cast<std::size_t>(2 * cols), 0.0), dw_abs(dw.size(), 0.0);
        for (long long r = 0; r < rows; ++r) {
          const float* xr = x.data() + r * cols;
          double mean = 0, var = 0;
          if (!rms_) {
            for (long long c = 0; c < cols; ++c) mean += xr[c];
            mean /= cols;
          }
          for (long long c = 0; c < cols; ++c) var += (xr[c] - mean) * (xr[c] - mean);
          const double rstd = 1.0 / std::sqrt(var / cols + 1e-5);
          if (!bwd) {  // weight 1, bias 1 (LayerNorm): out = xhat + 1; RMSNorm: out = xhat
            for (long long c = 0; c < cols; ++c)
              expect_near(what, static_cast<std::size_t>(r * cols + c), z[r * cols + c], (xr[c] - mean) * rstd + (rms_ ? 0.0 : 1.0), 1e-2, bf);
            continue;
          }
          // dx = rstd (dy - mean(dy) - xhat mean(dy xhat)) + residual (weight 1; RMSNorm without mean(dy))
          double m1 = 0, m2 = 0;
          for (long long c = 0; c < cols; ++c) {
            const double xhat = (xr[c] - mean) * rstd, g = dy[r * cols + c];
            m1 += g;
            m2 += g * xhat;
            dw[c] += g * xhat;
            dw_abs[c] += std::abs(g * xhat);
            dw[cols + c] += g;
            dw_abs[cols + c] += std::abs(g);
          }
          m1 = rms_ ? 0.0 : m1 / cols;
          m2 /= cols;
          for (long long c = 0; c < cols; ++c) {
            const double xhat = (xr[c] - mean) * rstd, g = dy[r * cols + c];
            const std::size_t i = static_cast<std::size_t>(r * cols + c);
            expect_near(what + " dx", i, z[i], rstd * (g - m1 - xhat * m2) + res[i], 3e-2, bf);
          }
        }
        if (bwd) {  // weight gradient (fp32, +=): scale row sum(dy xhat), LayerNorm bias row sum(dy)
          const auto got = to_host(dw_, (rms_ ? 1 : 2) * cols, stream_);
          for (std::size_t i = 0; i < got.size(); ++i) expect_near(what + " dw", i, got[i], dw[i], 1e-4 + 1e-3 * dw_abs[i], 1e-3);
        }
        return;
      }
      case Kernel::gelu_forward:
      case Kernel::gelu_backward: {
        const auto x = to_host(x_, n, stream_), z = to_host(z_, n, stream_);
        const auto dy = kernel_ == Kernel::gelu_backward ? to_host(y_, n, stream_) : std::vector<float>{};
        const double k = 0.7978845608028654;
        for (std::size_t i = 0; i < z.size(); ++i) {
          const double v = x[i], t = std::tanh(k * (v + 0.044715 * v * v * v));
          const double want = dy.empty() ? 0.5 * v * (1 + t) : dy[i] * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * 0.044715 * v * v));
          expect_near(what, i, z[i], want, 1e-3, bf);
        }
        return;
      }
      case Kernel::swiglu_forward:
      case Kernel::swiglu_backward: {
        const auto x = to_host(x_, 2 * n, stream_);
        const bool bwd = kernel_ == Kernel::swiglu_backward;
        const auto z = to_host(z_, bwd ? 2 * n : n, stream_);
        const auto dy = bwd ? to_host(y_, n, stream_) : std::vector<float>{};
        for (long long r = 0; r < rows; ++r)
          for (long long c = 0; c < cols; ++c) {
            const double g = x[r * 2 * cols + c], u = x[r * 2 * cols + cols + c], sig = 1 / (1 + std::exp(-g));
            if (!bwd) {
              expect_near(what, static_cast<std::size_t>(r * cols + c), z[r * cols + c], g * sig * u, 1e-3, bf);
            } else {
              const double d = dy[r * cols + c];
              expect_near(what + " dgate", static_cast<std::size_t>(r * cols + c), z[r * 2 * cols + c], d * u * sig * (1 + g * (1 - sig)), 1e-3, bf);
              expect_near(what + " dup", static_cast<std::size_t>(r * cols + c), z[r * 2 * cols + cols + c], d * g * sig, 1e-3, bf);
            }
          }
        return;
      }
      case Kernel::residual: {
        const auto x = to_host(x_, n, stream_), y = to_host(y_, n, stream_), z = to_host(z_, n, stream_);
        for (std::size_t i = 0; i < z.size(); ++i) expect_near(what, i, z[i], static_cast<double>(x[i]) + y[i], 1e-3, bf);
        return;
      }
      case Kernel::cross_entropy: {  // loss = log-sum-exp - target logit; dlogits = (softmax - one-hot) / rows
        const auto l = to_host(logits_, n, stream_), dl = to_host(dlogits_, n, stream_), loss = to_host(loss_, rows, stream_);
        const auto ids = to_host(ids_, rows, stream_);
        for (long long r = 0; r < rows; ++r) {
          const float* lr = l.data() + r * cols;
          double mx = lr[0], sum = 0;
          for (long long c = 0; c < cols; ++c) mx = std::max<double>(mx, lr[c]);
          for (long long c = 0; c < cols; ++c) sum += std::exp(lr[c] - mx);
          const double lse = mx + std::log(sum);
          const long long t = static_cast<long long>(ids[r]);
          expect_near(what + " loss", static_cast<std::size_t>(r), loss[r], lse - lr[t], 1e-5, 1e-4);
          for (long long c = 0; c < cols; ++c)
            expect_near(what + " dlogits", static_cast<std::size_t>(r * cols + c), dl[r * cols + c],
                        (std::exp(lr[c] - lse) - (c == t ? 1.0 : 0.0)) / static_cast<double>(rows), 1e-9, 1e-4);
        }
        return;
      }
      case Kernel::embedding_forward: {  // out[r] = table[id[r]] + positions table[position[r]]
        const auto table = to_host(x_, n, stream_), pos = to_host(r_, n, stream_), z = to_host(z_, n, stream_);
        const auto ids = to_host(ids_, rows, stream_), ps = to_host(positions_, rows, stream_);
        for (long long r = 0; r < rows; ++r)
          for (long long c = 0; c < cols; ++c)
            expect_near(what, static_cast<std::size_t>(r * cols + c), z[r * cols + c],
                        static_cast<double>(table[static_cast<long long>(ids[r]) * cols + c]) + pos[static_cast<long long>(ps[r]) * cols + c], 1e-3, bf);
        return;
      }
      case Kernel::embedding_backward: {  // dw[id[r]] += dy[r], dpos[position[r]] += dy[r] (fp32)
        const auto dy = to_host(y_, n, stream_), dw = to_host(dw_, n, stream_), dpos = to_host(dpos_, n, stream_);
        const auto ids = to_host(ids_, rows, stream_), ps = to_host(positions_, rows, stream_);
        std::vector<double> want_w(static_cast<std::size_t>(n), 0.0), want_p(static_cast<std::size_t>(n), 0.0);
        for (long long r = 0; r < rows; ++r)
          for (long long c = 0; c < cols; ++c) {
            want_w[static_cast<std::size_t>(static_cast<long long>(ids[r]) * cols + c)] += dy[r * cols + c];
            want_p[static_cast<std::size_t>(static_cast<long long>(ps[r]) * cols + c)] += dy[r * cols + c];
          }
        for (std::size_t i = 0; i < dw.size(); ++i) {
          expect_near(what + " dw", i, dw[i], want_w[i], 1e-6, 1e-5);
          expect_near(what + " dpos", i, dpos[i], want_p[i], 1e-6, 1e-5);
        }
        return;
      }
    }
  }

 private:
  ElementwiseShape shape_;
  long long rows_, cols_, n_;
  cudaStream_t stream_;
  int sms_;
  Kernel kernel_ = Kernel::stream;
  bool rms_ = false;
  Arena a_;
  bf16 *x_ = nullptr, *y_ = nullptr, *z_ = nullptr, *w_ = nullptr, *r_ = nullptr;
  float *dw_ = nullptr, *dpos_ = nullptr, *logits_ = nullptr, *dlogits_ = nullptr, *stats_ = nullptr, *loss_ = nullptr;
  int *ids_ = nullptr, *positions_ = nullptr;
};

/// The executor's fused AdamW (adamw.cuh) over `n` parameters of a bf16 plan: fp32 master, gradient,
/// m and v, bf16 weight copy out; one launch, as device.cu issues it per weight tensor.
class OptimizerCase {
 public:
  OptimizerCase(long long n, cudaStream_t stream) : n_(n), stream_(stream) {
    master_ = a_.get<float>(n), grad_ = a_.get<float>(n), m_ = a_.get<float>(n), v_ = a_.get<float>(n);
    param_ = a_.get<bf16>(n);
  }
  bool fits() const { return !a_.failed; }
  void fill() {
    fill_pattern(master_, n_, 53, stream_);
    fill_pattern(grad_, n_, 59, stream_);
    CUDA_CHECK(cudaMemsetAsync(m_, 0, static_cast<std::size_t>(n_) * sizeof(float), stream_));
    CUDA_CHECK(cudaMemsetAsync(v_, 0, static_cast<std::size_t>(n_) * sizeof(float), stream_));
    step_ = 0;
  }
  void run() { ex::adamw_update<bf16>(ex::AdamWParams{}, ++step_, master_, param_, grad_, m_, v_, n_, true, stream_); }
  /// Step 1 from m = v = 0: m / c1 = g and v / c2 = g^2, so p <- p (1 - lr wd) - lr g / (|g| + eps);
  /// the bf16 copy is the master rounded, the gradient is zeroed.
  void check() {
    fill();
    const auto p0 = to_host(master_, n_, stream_), g0 = to_host(grad_, n_, stream_);
    run();
    const auto p1 = to_host(master_, n_, stream_), w = to_host(param_, n_, stream_), g1 = to_host(grad_, n_, stream_);
    const ex::AdamWParams o{};
    const std::string what = "AdamW over " + std::to_string(n_) + " parameters";
    for (std::size_t i = 0; i < p1.size(); ++i) {
      const double g = g0[i], p = p0[i] * (1.0 - static_cast<double>(o.lr) * o.weight_decay);
      expect_near(what + " master", i, p1[i], p - o.lr * g / (std::abs(g) + o.eps), 1e-6, 1e-4);
      expect_near(what + " bf16 weight", i, w[i], p1[i], 1e-6, 1.0 / 128);
      expect_near(what + " gradient", i, g1[i], 0.0, 0, 0);
    }
  }

 private:
  long long n_;
  cudaStream_t stream_;
  Arena a_;
  float *master_ = nullptr, *grad_ = nullptr, *m_ = nullptr, *v_ = nullptr;
  bf16* param_ = nullptr;
  int step_ = 0;
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
    device_ = local_rank_ % devices;
    CUDA_CHECK(cudaSetDevice(device_));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device_));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasLtCreate(&lt_));
    CUBLAS_CHECK(cublasCreate(&blas_));
    CUDA_CHECK(cudaMalloc(&workspace_, ex::kLtWorkspaceBytes));
    CUDA_CHECK(cudaEventCreate(&start_));
    CUDA_CHECK(cudaEventCreate(&stop_));
    call_events_.resize(2 * kMaxCalls);
    for (auto& e : call_events_) CUDA_CHECK(cudaEventCreate(&e));
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
    for (auto e : call_events_) cudaEventDestroy(e);
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
    elementwise(r);
    optimizer(r);
    if (rank_ == 0) *out_ << "profile: element-wise and optimizer done\n" << std::flush;
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

  /// Median microseconds of one call of f, each call between its own pair of CUDA events on the
  /// stream, as the executor times each task (device.cu records start_[t] and end_[t] around it), after
  /// two warm-up calls; as many calls as fit in about `target_ms` by one timed call, 5 to kMaxCalls.
  /// Mean over ranks.
  template <class F>
  double median_call_us(F&& f, double target_ms) {
    f();
    f();
    CUDA_CHECK(cudaEventRecord(call_events_[0], stream_));
    f();
    CUDA_CHECK(cudaEventRecord(call_events_[1], stream_));
    CUDA_CHECK(cudaEventSynchronize(call_events_[1]));
    float one_ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&one_ms, call_events_[0], call_events_[1]));
    const int calls = static_cast<int>(std::clamp(target_ms / std::max(static_cast<double>(one_ms), 1e-4), 5.0, static_cast<double>(kMaxCalls)));
    for (int i = 0; i < calls; ++i) {
      CUDA_CHECK(cudaEventRecord(call_events_[2 * i], stream_));
      f();
      CUDA_CHECK(cudaEventRecord(call_events_[2 * i + 1], stream_));
    }
    CUDA_CHECK(cudaEventSynchronize(call_events_[2 * calls - 1]));
    std::vector<double> us(static_cast<std::size_t>(calls));
    for (int i = 0; i < calls; ++i) {
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, call_events_[2 * i], call_events_[2 * i + 1]));
      us[static_cast<std::size_t>(i)] = ms * 1e3;
    }
    std::nth_element(us.begin(), us.begin() + calls / 2, us.end());
    // cudaEventElapsedTime resolves about 0.5 us (CUDA Runtime API reference); a median below that
    // is recorded as 0.5 us, so that no row reads 0 (a profile file's times must be positive)
    double med = std::max(us[static_cast<std::size_t>(calls / 2)], kEventResolutionUs);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &med, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    return med / size_;
  }

  /// True on every rank when every rank's allocations succeeded (ranks skip a shape together).
  bool all_fit(bool fits, const std::string& what) {
    int ok = fits ? 1 : 0;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
    if (!ok && rank_ == 0)
      *out_ << "profile: " << what << " does not fit in GPU memory: not measured (the analytic model prices it)\n" << std::flush;
    return ok != 0;
  }

  /// The executor's element-wise kernels over Request::elementwise (built by profiler::cuda_request:
  /// every kernel over a grid of sizes, plus a model's exact shapes), then a correctness pass of each
  /// kernel at two small shapes (one of them wider than a 48 KiB LayerNorm weight-gradient buffer).
  void elementwise(Result& r) {
    const double target_ms = o_.quick ? 1.0 : 3.0;
    for (const auto& s : o_.elementwise) {
      ElementwiseCase c(s, stream_, sms_);
      if (!all_fit(c.fits(), "element-wise " + s.kind + (s.backward ? " backward" : "") + " over " + std::to_string(s.rows) + " x " +
                                 std::to_string(s.cols)))
        continue;
      c.fill();
      const double us = median_call_us([&] { c.run(); }, target_ms) / c.tasks_per_call();
      r.elementwise.push_back({s, round_sig(us)});
    }
    for (const auto& k : kElementwiseKernels)
      for (auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{64, 1024}, {8, 8192}}) {
        ElementwiseCase c({.kind = k.kind, .backward = k.backward, .rows = rows, .cols = cols}, stream_, sms_);
        if (!c.fits()) throw std::runtime_error("profile: no GPU memory left for the element-wise correctness check");
        c.check();
      }
  }

  /// The executor's fused AdamW over Request::optimizer_params, then a correctness pass of one step.
  void optimizer(Result& r) {
    const double target_ms = o_.quick ? 1.0 : 3.0;
    for (const auto n : o_.optimizer_params) {
      OptimizerCase c(n, stream_);
      if (!all_fit(c.fits(), "AdamW over " + std::to_string(n) + " parameters")) continue;
      c.fill();
      r.optimizer.push_back({n, round_sig(median_call_us([&] { c.run(); }, target_ms))});
    }
    OptimizerCase c(1 << 16, stream_);
    if (!c.fits()) throw std::runtime_error("profile: no GPU memory left for the AdamW correctness check");
    c.check();
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
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
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
  static constexpr int kMaxCalls = 100;
  static constexpr double kEventResolutionUs = 0.5;  ///< timed calls of one element-wise or optimizer measurement, at most
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, device_ = 0, sms_ = 1;
  std::vector<cudaEvent_t> call_events_;  ///< 2 kMaxCalls: a start and an end per timed call
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
