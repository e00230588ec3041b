// defines: adamw_update_kernel, adamw_update — AdamW as the CPU reference (bias-corrected, decoupled
//          weight decay applied before the Adam step), on the fp32 master weight; writes the
//          low-precision copy the GEMMs read and zeroes the gradient for the next step.
#pragma once
#include "executor/cuda/cuda_common.cuh"

namespace executor::cuda {

struct AdamWParams {
  float lr = 3e-3f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
};

// master (fp32) may alias param when T is float (fp32 runs keep no separate master copy)
template <typename T>
__global__ void adamw_update_kernel(AdamWParams o, float c1, float c2, float* master, T* param, float* grad, float* m, float* v,
                                    long long n, bool decay) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const float g = grad[i];
    const float mi = o.beta1 * m[i] + (1.0f - o.beta1) * g;
    const float vi = o.beta2 * v[i] + (1.0f - o.beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float p = master[i];
    if (decay) p -= o.lr * o.weight_decay * p;
    p -= o.lr * (mi / c1) / (sqrtf(vi / c2) + o.eps);
    master[i] = p;
    param[i] = from_float<T>(p);
    grad[i] = 0.0f;
  }
}

template <typename T>
void adamw_update(const AdamWParams& o, int step, float* master, T* param, float* grad, float* m, float* v, long long n, bool decay,
                  cudaStream_t s) {
  const float c1 = 1.0f - powf(o.beta1, static_cast<float>(step));
  const float c2 = 1.0f - powf(o.beta2, static_cast<float>(step));
  const int block = 256;
  const long long grid = std::min<long long>(ceil_div(n, block), 1LL << 16);
  adamw_update_kernel<T><<<static_cast<unsigned>(grid), block, 0, s>>>(o, c1, c2, master, param, grad, m, v, n, decay);
  CUDA_CHECK_LAUNCH();
}

}  // namespace executor::cuda
