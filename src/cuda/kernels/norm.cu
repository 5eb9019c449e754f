// RMSNorm: fp32 residual stream in, T out (the GEMM input); optionally of
// gathered rows (the batched backend's LM-head rows). Bucket 1's persistent
// kernel fuses the norm into its GEMV phases instead (persistent.cuh).
#include "cuda/kernels/common.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"

namespace hayate::cuda {

// ---- kernels -------------------------------------------------------------------

constexpr int kNormThreads = 256;

// One block per output row j, reading x's row rows[j] (rows == nullptr: j);
// V = 4: 16-byte loads of x, 8-byte loads of w and stores (dim % 4 == 0),
// else scalar. C > 0 (dim <= C V kNormThreads): the row stays in registers
// between the sum of squares and the scaling, one read of x instead of two
// (the second came from L2: 1,024 rows x 4,096, 9.7 us a launch at max load);
// C = 0: any dim, x read twice.
template <int V, int C, typename T>
__global__ void __launch_bounds__(kNormThreads)
rmsnorm_kernel(const float* __restrict__ x,        // [*, dim]
               const int32_t* __restrict__ rows,   // [n] or nullptr
               const T* __restrict__ w,            // [dim]
               int dim, float eps, T* __restrict__ out) {  // [n, dim]
  griddep_enter();
  __shared__ float red[kNormThreads / 32];
  const float* xr = x + size_t(rows ? rows[blockIdx.x] : int(blockIdx.x)) * dim;
  T* o = out + size_t(blockIdx.x) * dim;
  float ss = 0.0f;
  if constexpr (C > 0) {
    float f[C][V];
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int k = (c * kNormThreads + int(threadIdx.x)) * V;
      if (k >= dim) continue;
      load_run<V>(xr + k, f[c]);
#pragma unroll
      for (int e = 0; e < V; ++e) ss += f[c][e] * f[c][e];
    }
    const float rstd = block_rstd<kNormThreads>(ss, dim, eps, red);
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int k = (c * kNormThreads + int(threadIdx.x)) * V;
      if (k >= dim) continue;
      float wf[V];
      load_run<V>(w + k, wf);
#pragma unroll
      for (int e = 0; e < V; ++e) f[c][e] = f[c][e] * rstd * wf[e];
      store_run<V>(o + k, f[c]);
    }
  } else {
    for (int k = threadIdx.x * V; k < dim; k += kNormThreads * V) {
      float f[V];
      load_run<V>(xr + k, f);
#pragma unroll
      for (int e = 0; e < V; ++e) ss += f[e] * f[e];
    }
    const float rstd = block_rstd<kNormThreads>(ss, dim, eps, red);
    for (int k = threadIdx.x * V; k < dim; k += kNormThreads * V) {
      float f[V], wf[V];
      load_run<V>(xr + k, f);
      load_run<V>(w + k, wf);
#pragma unroll
      for (int e = 0; e < V; ++e) f[e] = f[e] * rstd * wf[e];
      store_run<V>(o + k, f);
    }
  }
}

// ---- launchers -------------------------------------------------------------------

template <typename T>
void rmsnorm_rows(const float* x, const int32_t* rows, const T* w, int n, int dim, float eps,
                  T* out, cudaStream_t s, bool pdl) {
  const LaunchConfig cfg{unsigned(n), kNormThreads, 0, s, pdl};
  constexpr int kRun = 4 * kNormThreads;  // elements of one 4-wide pass of the block
  if (dim % 4 == 0 && aligned_to(16, x) && aligned_to(4 * sizeof(T), w, out)) {  // vector accesses
    if (dim <= 4 * kRun)  // Llama 8B's 4,096
      launch(cfg, rmsnorm_kernel<4, 4, T>, x, rows, w, dim, eps, out);
    else if (dim <= 8 * kRun)  // 70B's 8,192
      launch(cfg, rmsnorm_kernel<4, 8, T>, x, rows, w, dim, eps, out);
    else
      launch(cfg, rmsnorm_kernel<4, 0, T>, x, rows, w, dim, eps, out);
  } else {
    launch(cfg, rmsnorm_kernel<1, 0, T>, x, rows, w, dim, eps, out);
  }
}

template <typename T>
void rmsnorm(const float* x, const T* w, int n, int dim, float eps, T* out, cudaStream_t s,
             bool pdl) {
  rmsnorm_rows<T>(x, nullptr, w, n, dim, eps, out, s, pdl);
}

template <typename T>
void rmsnorm_gather(const float* x, const int32_t* rows, const T* w, int n, int dim, float eps,
                    T* out, cudaStream_t s, bool pdl) {
  rmsnorm_rows<T>(x, rows, w, n, dim, eps, out, s, pdl);
}

#define HAYATE_NORM_INSTANTIATE(T)                                                              \
  template void rmsnorm<T>(const float*, const T*, int, int, float, T*, cudaStream_t, bool);    \
  template void rmsnorm_gather<T>(const float*, const int32_t*, const T*, int, int, float, T*,  \
                                  cudaStream_t, bool);
HAYATE_NORM_INSTANTIATE(half)
HAYATE_NORM_INSTANTIATE(__nv_bfloat16)
#undef HAYATE_NORM_INSTANTIATE

}  // namespace hayate::cuda
