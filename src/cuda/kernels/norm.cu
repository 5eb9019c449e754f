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
// else scalar.
template <int V, typename T>
__global__ void __launch_bounds__(kNormThreads)
rmsnorm_kernel(const float* __restrict__ x,        // [*, dim]
               const int32_t* __restrict__ rows,   // [n] or nullptr
               const T* __restrict__ w,            // [dim]
               int dim, float eps, T* __restrict__ out) {  // [n, dim]
  __shared__ float red[kNormThreads / 32];
  const float* xr = x + size_t(rows ? rows[blockIdx.x] : int(blockIdx.x)) * dim;
  float ss = 0.0f;
  for (int k = threadIdx.x * V; k < dim; k += kNormThreads * V) {
    float f[V];
    load_run<V>(xr + k, f);
#pragma unroll
    for (int e = 0; e < V; ++e) ss += f[e] * f[e];
  }
  ss = warp_sum(ss);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = ss;
  __syncthreads();  // red complete
  ss = 0.0f;
#pragma unroll
  for (int i = 0; i < kNormThreads / 32; ++i) ss += red[i];
  const float rstd = rsqrtf(ss / float(dim) + eps);
  T* o = out + size_t(blockIdx.x) * dim;
  for (int k = threadIdx.x * V; k < dim; k += kNormThreads * V) {
    float f[V], wf[V];
    load_run<V>(xr + k, f);
    load_run<V>(w + k, wf);
#pragma unroll
    for (int e = 0; e < V; ++e) f[e] = f[e] * rstd * wf[e];
    store_run<V>(o + k, f);
  }
}

// ---- launchers -------------------------------------------------------------------

template <typename T>
void rmsnorm_rows(const float* x, const int32_t* rows, const T* w, int n, int dim, float eps,
                  T* out, cudaStream_t s) {
  if (dim % 4 == 0 && aligned_to(16, x) && aligned_to(4 * sizeof(T), w, out))  // vector accesses
    launch({unsigned(n), kNormThreads, 0, s}, rmsnorm_kernel<4, T>, x, rows, w, dim, eps, out);
  else
    launch({unsigned(n), kNormThreads, 0, s}, rmsnorm_kernel<1, T>, x, rows, w, dim, eps, out);
}

template <typename T>
void rmsnorm(const float* x, const T* w, int n, int dim, float eps, T* out, cudaStream_t s) {
  rmsnorm_rows<T>(x, nullptr, w, n, dim, eps, out, s);
}

template <typename T>
void rmsnorm_gather(const float* x, const int32_t* rows, const T* w, int n, int dim, float eps,
                    T* out, cudaStream_t s) {
  rmsnorm_rows<T>(x, rows, w, n, dim, eps, out, s);
}

#define HAYATE_NORM_INSTANTIATE(T)                                                              \
  template void rmsnorm<T>(const float*, const T*, int, int, float, T*, cudaStream_t);          \
  template void rmsnorm_gather<T>(const float*, const int32_t*, const T*, int, int, float, T*,  \
                                  cudaStream_t);
HAYATE_NORM_INSTANTIATE(half)
HAYATE_NORM_INSTANTIATE(__nv_bfloat16)
#undef HAYATE_NORM_INSTANTIATE

}  // namespace hayate::cuda
