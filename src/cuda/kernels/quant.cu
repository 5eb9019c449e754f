// FP8 quantization kernels (core/fp8.h's arithmetic, kernels/fp8.cuh): the
// weights' per-row quantization at load, and the activations' per-token
// quantization fused into the kernels that produce a linear's input
// (RMSNorm, SiLU * mul) or, for the attention output, one pass of its own.
// Every kernel is one block per row: the row's amax is a block reduction,
// then the row is read again (from L1/L2) and quantized; a static scale
// (> 0) skips the reduction.
#include "core/check.h"
#include "cuda/kernels/fp8.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"

namespace hayate::cuda {

// ---- kernels -------------------------------------------------------------------

constexpr int kQuantThreads = 256;

__device__ __forceinline__ float silu_f(float g) { return g / (1.0f + __expf(-g)); }

// Row r of the source as fp32: the value of column k (one of three sources).
struct RowF32 {  // fp32 rows (weights at load)
  const float* x;
  int cols;
  __device__ float operator()(int r, int k) const { return x[size_t(r) * cols + k]; }
};
template <typename T>
struct RowT {  // T rows (attention output)
  const T* x;
  int cols;
  __device__ float operator()(int r, int k) const { return to_f32(x[size_t(r) * cols + k]); }
};
template <typename T>
struct RowSiluMul {  // silu(gate) * up of a [rows, 2 cols] gate ; up row in T
  const T* gu;
  int cols;
  __device__ float operator()(int r, int k) const {
    const T* g = gu + size_t(r) * 2 * cols;
    return silu_f(to_f32(g[k])) * to_f32(g[cols + k]);
  }
};

// out [rows, cols] e4m3 codes, scale [rows]: row blockIdx.x of `src`, with
// its own scale (static_scale 0) or static_scale.
template <typename Src>
__global__ void __launch_bounds__(kQuantThreads)
quantize_rows_kernel(Src src, int cols, float static_scale, uint8_t* __restrict__ out,
                     float* __restrict__ scale) {
  __shared__ float red[32];
  const int r = blockIdx.x;
  float s = static_scale;
  if (s == 0.0f) {
    float amax = 0.0f;
    for (int k = threadIdx.x; k < cols; k += blockDim.x) amax = fmaxf(amax, fabsf(src(r, k)));
    s = fp8_scale_for_dev(block_max(amax, red));
  }
  uint8_t* o = out + size_t(r) * cols;
  for (int k = threadIdx.x; k < cols; k += blockDim.x) o[k] = fp8_quantize_dev(src(r, k), s);
  if (threadIdx.x == 0) scale[r] = s;
}

// RMSNorm then quantization: row blockIdx.x of x [n, dim] (fp32), normalised
// and scaled by w in fp32 (norm.cu's arithmetic), kept in shared memory
// (dim <= kNormFp8MaxDim) between the amax and the quantization.
constexpr int kNormFp8MaxDim = 8192;
template <typename T>
__global__ void __launch_bounds__(kQuantThreads)
rmsnorm_fp8_kernel(const float* __restrict__ x, const T* __restrict__ w, int dim, float eps,
                   float static_scale, uint8_t* __restrict__ out, float* __restrict__ scale) {
  __shared__ float y[kNormFp8MaxDim];
  __shared__ float red[32];
  const float* xr = x + size_t(blockIdx.x) * dim;
  float ss = 0.0f;
  for (int k = threadIdx.x; k < dim; k += blockDim.x) {
    const float v = xr[k];
    y[k] = v;
    ss += v * v;
  }
  ss = warp_sum(ss);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = ss;
  __syncthreads();  // red complete
  ss = 0.0f;
  for (int i = 0; i < int(blockDim.x / 32); ++i) ss += red[i];
  const float rstd = rsqrtf(ss / float(dim) + eps);
  float amax = 0.0f;
  for (int k = threadIdx.x; k < dim; k += blockDim.x) {
    const float v = y[k] * rstd * to_f32(w[k]);
    y[k] = v;  // each thread rewrites only its own elements
    amax = fmaxf(amax, fabsf(v));
  }
  const float s = static_scale != 0.0f ? static_scale : fp8_scale_for_dev(block_max(amax, red));
  uint8_t* o = out + size_t(blockIdx.x) * dim;
  for (int k = threadIdx.x; k < dim; k += blockDim.x) o[k] = fp8_quantize_dev(y[k], s);
  if (threadIdx.x == 0) scale[blockIdx.x] = s;
}

// ---- launchers -------------------------------------------------------------------

void quantize_weight_rows(const float* w, int rows, int cols, uint8_t* out, float* scale,
                          cudaStream_t s) {
  if (rows <= 0) return;
  launch({unsigned(rows), kQuantThreads, 0, s}, quantize_rows_kernel<RowF32>, RowF32{w, cols},
         cols, 0.0f, out, scale);
}

template <typename T>
void quantize_rows_fp8(const T* x, int n, int dim, float static_scale, uint8_t* out,
                       float* scale, cudaStream_t s) {
  if (n <= 0) return;
  launch({unsigned(n), kQuantThreads, 0, s}, quantize_rows_kernel<RowT<T>>, RowT<T>{x, dim}, dim,
         static_scale, out, scale);
}

template <typename T>
void silu_mul_fp8(const T* gu, int n, int inter, float static_scale, uint8_t* out, float* scale,
                  cudaStream_t s) {
  if (n <= 0) return;
  launch({unsigned(n), kQuantThreads, 0, s}, quantize_rows_kernel<RowSiluMul<T>>,
         RowSiluMul<T>{gu, inter}, inter, static_scale, out, scale);
}

bool rmsnorm_fp8_supported(int dim) { return dim <= kNormFp8MaxDim; }

template <typename T>
void rmsnorm_fp8(const float* x, const T* w, int n, int dim, float eps, float static_scale,
                 uint8_t* out, float* scale, cudaStream_t s) {
  if (n <= 0) return;
  HAYATE_CHECK(rmsnorm_fp8_supported(dim), "rmsnorm_fp8: hidden size ", dim, " exceeds ",
               kNormFp8MaxDim);
  launch({unsigned(n), kQuantThreads, 0, s}, rmsnorm_fp8_kernel<T>, x, w, dim, eps, static_scale,
         out, scale);
}

#define HAYATE_QUANT_INSTANTIATE(T)                                                              \
  template void quantize_rows_fp8<T>(const T*, int, int, float, uint8_t*, float*, cudaStream_t); \
  template void silu_mul_fp8<T>(const T*, int, int, float, uint8_t*, float*, cudaStream_t);      \
  template void rmsnorm_fp8<T>(const float*, const T*, int, int, float, float, uint8_t*, float*, \
                               cudaStream_t);
HAYATE_QUANT_INSTANTIATE(half)
HAYATE_QUANT_INSTANTIATE(__nv_bfloat16)
#undef HAYATE_QUANT_INSTANTIATE

}  // namespace hayate::cuda
