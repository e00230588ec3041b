// defines: gelu_forward_kernel, gelu_backward_kernel, swiglu_forward_kernel, swiglu_backward_kernel,
//          residual_forward_kernel, embedding_forward_kernel, embedding_backward_kernel and their
//          launchers (same names without _kernel). Semantics as the CPU reference kernels.
#pragma once
#include "executor/cuda/cuda_common.cuh"

namespace executor::cuda {

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi); GeLU tanh approximation as GPT-2

template <typename T>
__global__ void gelu_forward_kernel(const T* x, T* out, long long n) {
  GRID_STRIDE(i, n) {
    const float v = to_float(x[i]);
    out[i] = from_float<T>(0.5f * v * (1.0f + tanhf(kGeluC * (v + 0.044715f * v * v * v))));
  }
}
// backward to input, uses = (set)
template <typename T>
__global__ void gelu_backward_kernel(const T* x, const T* dout, T* dx, long long n) {
  GRID_STRIDE(i, n) {
    const float v = to_float(x[i]);
    const float t = tanhf(kGeluC * (v + 0.044715f * v * v * v));
    const float du = kGeluC * (1.0f + 3.0f * 0.044715f * v * v);
    dx[i] = from_float<T>(to_float(dout[i]) * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du));
  }
}
// x (N, 2F) = [gate | up] -> out (N, F) = silu(gate) * up
template <typename T>
__global__ void swiglu_forward_kernel(const T* x, T* out, long long n, long long f) {
  GRID_STRIDE(i, n * f) {
    const long long r = i / f, c = i % f;
    const float g = to_float(x[r * 2 * f + c]), u = to_float(x[r * 2 * f + f + c]);
    out[i] = from_float<T>(g / (1.0f + expf(-g)) * u);
  }
}
// dx (N, 2F) (set) from dout (N, F)
template <typename T>
__global__ void swiglu_backward_kernel(const T* x, const T* dout, T* dx, long long n, long long f) {
  GRID_STRIDE(i, n * f) {
    const long long r = i / f, c = i % f;
    const float g = to_float(x[r * 2 * f + c]), u = to_float(x[r * 2 * f + f + c]), d = to_float(dout[i]);
    const float sig = 1.0f / (1.0f + expf(-g));
    dx[r * 2 * f + c] = from_float<T>(d * u * sig * (1.0f + g * (1.0f - sig)));
    dx[r * 2 * f + f + c] = from_float<T>(d * g * sig);
  }
}

template <typename T>
void gelu_forward(const T* x, T* out, long long n, cudaStream_t s) {
  gelu_forward_kernel<T><<<grid_for(n, 256), 256, 0, s>>>(x, out, n);
  CUDA_CHECK_LAUNCH();
}
template <typename T>
void gelu_backward(const T* x, const T* dout, T* dx, long long n, cudaStream_t s) {
  gelu_backward_kernel<T><<<grid_for(n, 256), 256, 0, s>>>(x, dout, dx, n);
  CUDA_CHECK_LAUNCH();
}
template <typename T>
void swiglu_forward(const T* x, T* out, long long n, long long f, cudaStream_t s) {
  swiglu_forward_kernel<T><<<grid_for(n * f, 256), 256, 0, s>>>(x, out, n, f);
  CUDA_CHECK_LAUNCH();
}
template <typename T>
void swiglu_backward(const T* x, const T* dout, T* dx, long long n, long long f, cudaStream_t s) {
  swiglu_backward_kernel<T><<<grid_for(n * f, 256), 256, 0, s>>>(x, dout, dx, n, f);
  CUDA_CHECK_LAUNCH();
}

/// The row-parallel partial outputs of one residual: up to 8 column chunks side by side.
template <typename T>
struct Partials {
  static constexpr int kMax = 8;
  const T* p[kMax] = {};
  int count = 0;
};
// out (N, H) = x + [partial_0 | partial_1 | ...], chunk c holding columns [c H/C, (c + 1) H/C)
template <typename T>
__global__ void residual_forward_kernel(const T* x, Partials<T> parts, T* out, long long n, long long h) {
  const long long w = h / parts.count;
  GRID_STRIDE(i, n * h) {
    const long long r = i / h, col = i % h, c = col / w;
    out[i] = from_float<T>(to_float(x[i]) + to_float(parts.p[c][r * w + col % w]));
  }
}
template <typename T>
void residual_forward(const T* x, const Partials<T>& parts, T* out, long long n, long long h, cudaStream_t s) {
  residual_forward_kernel<T><<<grid_for(n * h, 256), 256, 0, s>>>(x, parts, out, n, h);
  CUDA_CHECK_LAUNCH();
}

// Vocab-parallel embedding: out (N, H) = (token in [v_begin, v_begin + V) ? w[token - v_begin] : 0)
//                                        + (pos_w ? pos_w[position] : 0)
template <typename T>
__global__ void embedding_forward_kernel(const int* tokens, const int* positions, const T* w, const T* pos_w, long long v_begin,
                                         long long v_local, T* out, long long n, long long h) {
  GRID_STRIDE(i, n * h) {
    const long long r = i / h, c = i % h;
    const long long t = tokens[r] - v_begin;
    float v = (t >= 0 && t < v_local) ? to_float(w[t * h + c]) : 0.0f;
    if (pos_w) v += to_float(pos_w[static_cast<long long>(positions[r]) * h + c]);
    out[i] = from_float<T>(v);
  }
}
// backward to weight, uses += (accumulate): dw[token - v_begin] += dout (tokens in range),
// dpos[position] += dout (if dpos). Atomic: a token may repeat within the slice.
template <typename T>
__global__ void embedding_backward_kernel(const int* tokens, const int* positions, const T* dout, float* dw, float* dpos,
                                          long long v_begin, long long v_local, long long n, long long h) {
  GRID_STRIDE(i, n * h) {
    const long long r = i / h, c = i % h;
    const float g = to_float(dout[i]);
    const long long t = tokens[r] - v_begin;
    if (t >= 0 && t < v_local) atomicAdd(&dw[t * h + c], g);
    if (dpos) atomicAdd(&dpos[static_cast<long long>(positions[r]) * h + c], g);
  }
}
template <typename T>
void embedding_forward(const int* tokens, const int* positions, const T* w, const T* pos_w, long long v_begin, long long v_local,
                       T* out, long long n, long long h, cudaStream_t s) {
  embedding_forward_kernel<T><<<grid_for(n * h, 256), 256, 0, s>>>(tokens, positions, w, pos_w, v_begin, v_local, out, n, h);
  CUDA_CHECK_LAUNCH();
}
template <typename T>
void embedding_backward(const int* tokens, const int* positions, const T* dout, float* dw, float* dpos, long long v_begin,
                        long long v_local, long long n, long long h, cudaStream_t s) {
  embedding_backward_kernel<T><<<grid_for(n * h, 256), 256, 0, s>>>(tokens, positions, dout, dw, dpos, v_begin, v_local, n, h);
  CUDA_CHECK_LAUNCH();
}

}  // namespace executor::cuda
