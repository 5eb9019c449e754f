// RMSNorm for prefill rows: fp32 residual stream in, T out (the GEMM input).
// Decode fuses the norm into the next GEMV's prologue instead (gemv.cuh).
#include "cuda/common.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"

namespace hayate::cuda {

// ---- kernels -------------------------------------------------------------------

constexpr int kNormThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kNormThreads)
rmsnorm_kernel(const float* __restrict__ x,  // [n, dim]
               const T* __restrict__ w,      // [dim]
               int dim, float eps, T* __restrict__ out) {  // [n, dim]
  __shared__ float red[kNormThreads / 32];
  const float* xr = x + size_t(blockIdx.x) * dim;
  float ss = 0.0f;
  for (int k = threadIdx.x; k < dim; k += kNormThreads) ss += xr[k] * xr[k];
  ss = warp_sum(ss);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = ss;
  __syncthreads();  // red complete
  ss = 0.0f;
#pragma unroll
  for (int i = 0; i < kNormThreads / 32; ++i) ss += red[i];
  const float rstd = rsqrtf(ss / float(dim) + eps);
  T* o = out + size_t(blockIdx.x) * dim;
  for (int k = threadIdx.x; k < dim; k += kNormThreads) o[k] = from_f32<T>(xr[k] * rstd * to_f32(w[k]));
}

// ---- launchers -------------------------------------------------------------------

template <typename T>
void rmsnorm(const float* x, const T* w, int n, int dim, float eps, T* out, cudaStream_t s) {
  launch({unsigned(n), kNormThreads, 0, s}, rmsnorm_kernel<T>, x, w, dim, eps, out);
}

template void rmsnorm<half>(const float*, const half*, int, int, float, half*, cudaStream_t);
template void rmsnorm<__nv_bfloat16>(const float*, const __nv_bfloat16*, int, int, float,
                                     __nv_bfloat16*, cudaStream_t);

}  // namespace hayate::cuda
