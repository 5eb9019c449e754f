// FP8 quantization kernels (core/fp8.h's arithmetic, kernels/fp8.cuh): the
// weights' per-row quantization at load, and the activations' per-token
// quantization fused into the kernels that produce a linear's input
// (RMSNorm, SiLU * mul) or, for the attention output, one pass of its own.
// Every kernel is one block per row: the row's amax is a block reduction,
// then the row is quantized, from registers (at the model shapes) or read
// again from L1/L2 (the general form); a static scale (> 0) skips the
// reduction.
#include "core/check.h"
#include "cuda/kernels/fp8.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"

namespace hayate::cuda {

// ---- kernels -------------------------------------------------------------------

constexpr int kQuantThreads = 256;

// SiLU with the fast division (2 ulp; g / inf = -0 for g below -88): the FP8
// path's SiLU * mul runs an SM's issue slots out at few rows.
__device__ __forceinline__ float silu_f(float g) {
  return __fdividef(g, 1.0f + __expf(-g));
}

// Row r of the source as fp32: the value of column k (one of three sources)
// and, for the 16-bit ones, 8 values from column k (k % 8 == 0, the rows
// 16-byte aligned) with 16-byte loads.
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
  __device__ void load8(int r, int k, float (&f)[8]) const {
    unpack8<T>(*reinterpret_cast<const uint4*>(x + size_t(r) * cols + k), f);
  }
};
template <typename T>
struct RowSiluMul {  // silu(gate) * up of a [rows, 2 cols] gate ; up row in T
  const T* gu;
  int cols;
  __device__ float operator()(int r, int k) const {
    const T* g = gu + size_t(r) * 2 * cols;
    return silu_f(to_f32(g[k])) * to_f32(g[cols + k]);
  }
  __device__ void load8(int r, int k, float (&f)[8]) const {
    const T* g = gu + size_t(r) * 2 * cols + k;
    float u[8];
    unpack8<T>(*reinterpret_cast<const uint4*>(g), f);
    unpack8<T>(*reinterpret_cast<const uint4*>(g + cols), u);
#pragma unroll
    for (int e = 0; e < 8; ++e) f[e] = silu_f(f[e]) * u[e];
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
  const Fp8RowQuantizer quant(s);
  uint8_t* o = out + size_t(r) * cols;
  for (int k = threadIdx.x; k < cols; k += blockDim.x) o[k] = quant(src(r, k));
  if (threadIdx.x == 0) scale[r] = s;
}

// The same in registers: the row is read once, 8 values a 16-byte load
// (Src::load8), and kept in registers between the amax and the codes, 8 codes
// a 8-byte store (cols % 8 == 0, cols <= C 8 kThreads). With 256 threads, up
// to C = 7 the row fits in 80 registers a thread, three blocks an SM (ptxas,
// sm_90a: 79 at C = 7, no spill), so one block's loads overlap the others'
// reductions and stores. With few rows (kQuantFewRows: the decode steps of a
// few dozen sequences) a block has its SM to itself, so a row takes 512 or
// 1,024 threads of 1 to 3 runs each instead: 4x the warps to hide the loads'
// latency and the SiLU's and the codes' arithmetic (64 rows of Llama's 14,336
// took 9.9 us a launch with 256 threads on an H100, the 16-bit SiLU * mul 3).
template <int C, int kThreads, typename Src>
__global__ void __launch_bounds__(kThreads, kThreads > 256 ? 1 : (C <= 7 ? 3 : 2))
quantize_rows_in_registers_kernel(Src src, int cols, float static_scale,
                                  uint8_t* __restrict__ out, float* __restrict__ scale) {
  constexpr int V = 8;
  __shared__ float red[32];
  const int r = blockIdx.x;
  uint8_t* o = out + size_t(r) * cols;
  float f[C][V];
  float amax = 0.0f;
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int k = (c * kThreads + int(threadIdx.x)) * V;
    if (k >= cols) continue;
    src.load8(r, k, f[c]);
#pragma unroll
    for (int e = 0; e < V; ++e) amax = fmaxf(amax, fabsf(f[c][e]));
  }
  const float s = static_scale != 0.0f ? static_scale : fp8_scale_for_dev(block_max(amax, red));
  const Fp8RowQuantizer quant(s);
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int k = (c * kThreads + int(threadIdx.x)) * V;
    if (k >= cols) continue;
    uint2 codes{0u, 0u};
#pragma unroll
    for (int e = 0; e < V / 2; ++e) {
      codes.x |= uint32_t(quant(f[c][e])) << (8 * e);
      codes.y |= uint32_t(quant(f[c][e + V / 2])) << (8 * e);
    }
    *reinterpret_cast<uint2*>(o + k) = codes;
  }
  if (threadIdx.x == 0) scale[r] = s;
}

// RMSNorm then quantization: row blockIdx.x of x [n, dim] (fp32), normalised
// and scaled by w in fp32 (norm.cu's arithmetic), then quantized with the
// row's scale. V = 4: 16-byte loads of x, 8-byte loads of w, 4 codes per
// 4-byte store (dim % 4 == 0); C > 0 (dim <= C V kQuantThreads): the row
// stays in registers between the sum of squares, the amax and the codes
// (norm.cu's rmsnorm_kernel, one read of x); C = 0: any dim <=
// kNormFp8MaxDim, scalar, the row kept in shared memory. (The shared-memory
// form for every dim, 32 KB a block and scalar accesses, took 25 us a launch
// at max load's 1,024 rows x 4,096 on an H100: 3x the plain RMSNorm.)
constexpr int kNormFp8MaxDim = 8192;
template <int V, int C, typename T>
__global__ void __launch_bounds__(kQuantThreads)
rmsnorm_fp8_kernel(const float* __restrict__ x, const T* __restrict__ w, int dim, float eps,
                   float static_scale, uint8_t* __restrict__ out, float* __restrict__ scale) {
  __shared__ float red[32];
  const float* xr = x + size_t(blockIdx.x) * dim;
  uint8_t* o = out + size_t(blockIdx.x) * dim;
  float amax = 0.0f;
  if constexpr (C > 0) {
    float f[C][V];
    float ss = 0.0f;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int k = (c * kQuantThreads + int(threadIdx.x)) * V;
      if (k >= dim) continue;
      load_run<V>(xr + k, f[c]);
#pragma unroll
      for (int e = 0; e < V; ++e) ss += f[c][e] * f[c][e];
    }
    const float rstd = block_rstd<kQuantThreads>(ss, dim, eps, red);
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int k = (c * kQuantThreads + int(threadIdx.x)) * V;
      if (k >= dim) continue;
      float wf[V];
      load_run<V>(w + k, wf);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        f[c][e] = f[c][e] * rstd * wf[e];
        amax = fmaxf(amax, fabsf(f[c][e]));
      }
    }
    const float s = static_scale != 0.0f ? static_scale : fp8_scale_for_dev(block_max(amax, red));
    const Fp8RowQuantizer quant(s);
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int k = (c * kQuantThreads + int(threadIdx.x)) * V;
      if (k >= dim) continue;
      uint32_t codes = 0;
#pragma unroll
      for (int e = 0; e < V; ++e) codes |= uint32_t(quant(f[c][e])) << (8 * e);
      if constexpr (V == 4)
        *reinterpret_cast<uint32_t*>(o + k) = codes;
      else
        o[k] = uint8_t(codes);
    }
    if (threadIdx.x == 0) scale[blockIdx.x] = s;
  } else {
    __shared__ float y[kNormFp8MaxDim];
    float ss = 0.0f;
    for (int k = threadIdx.x; k < dim; k += kQuantThreads) {
      const float v = xr[k];
      y[k] = v;
      ss += v * v;
    }
    const float rstd = block_rstd<kQuantThreads>(ss, dim, eps, red);
    for (int k = threadIdx.x; k < dim; k += kQuantThreads) {
      const float v = y[k] * rstd * to_f32(w[k]);
      y[k] = v;  // each thread rewrites only its own elements
      amax = fmaxf(amax, fabsf(v));
    }
    const float s = static_scale != 0.0f ? static_scale : fp8_scale_for_dev(block_max(amax, red));
    for (int k = threadIdx.x; k < dim; k += kQuantThreads) o[k] = fp8_quantize_dev(y[k], s);
    if (threadIdx.x == 0) scale[blockIdx.x] = s;
  }
}

// ---- launchers -------------------------------------------------------------------

void quantize_weight_rows(const float* w, int rows, int cols, uint8_t* out, float* scale,
                          cudaStream_t s) {
  if (rows <= 0) return;
  launch({unsigned(rows), kQuantThreads, 0, s}, quantize_rows_kernel<RowF32>, RowF32{w, cols},
         cols, 0.0f, out, scale);
}

// Rows of a 16-bit source (src_aligned: its rows start 16-byte aligned) in
// registers where the width allows, C = 2, 4, 6, 7, 8 or 12 runs of 8 a
// thread (the attention output of Llama 8B, 4,096 wide, takes 2; the SiLU *
// mul of Qwen3 8B's 12,288 6, of Llama 8B's 14,336 7, of Qwen2.5 7B's 18,944
// 12), or, up to kQuantFewRows rows, 1 to 3 runs of 512 or 1,024 threads;
// else the two-pass kernel.
constexpr int kQuantFewRows = 128;
template <typename Src>
void quantize_rows(Src src, int rows, int cols, bool src_aligned, float static_scale,
                   uint8_t* out, float* scale, cudaStream_t s) {
  if (rows <= 0) return;
  const LaunchConfig cfg{unsigned(rows), kQuantThreads, 0, s};
  constexpr int kRun = 8 * kQuantThreads;  // elements of one 8-wide pass of the block
  const bool vec = cols % 8 == 0 && src_aligned && aligned_to(8, out);
  const auto go = [&](auto kernel, unsigned threads) {
    launch({unsigned(rows), threads, 0, s}, kernel, src, cols, static_scale, out, scale);
  };
  if (vec && rows <= kQuantFewRows && cols <= 3 * 8 * 1024) {
    if (cols <= 8 * 512)
      go(quantize_rows_in_registers_kernel<1, 512, Src>, 512);
    else if (cols <= 8 * 1024)
      go(quantize_rows_in_registers_kernel<1, 1024, Src>, 1024);
    else if (cols <= 2 * 8 * 1024)
      go(quantize_rows_in_registers_kernel<2, 1024, Src>, 1024);
    else
      go(quantize_rows_in_registers_kernel<3, 1024, Src>, 1024);
  } else if (vec && cols <= 12 * kRun) {
    constexpr int N = kQuantThreads;
    if (cols <= 2 * kRun)
      go(quantize_rows_in_registers_kernel<2, N, Src>, N);
    else if (cols <= 4 * kRun)
      go(quantize_rows_in_registers_kernel<4, N, Src>, N);
    else if (cols <= 6 * kRun)
      go(quantize_rows_in_registers_kernel<6, N, Src>, N);
    else if (cols <= 7 * kRun)
      go(quantize_rows_in_registers_kernel<7, N, Src>, N);
    else if (cols <= 8 * kRun)
      go(quantize_rows_in_registers_kernel<8, N, Src>, N);
    else
      go(quantize_rows_in_registers_kernel<12, N, Src>, N);
  } else {
    launch(cfg, quantize_rows_kernel<Src>, src, cols, static_scale, out, scale);
  }
}

template <typename T>
void quantize_rows_fp8(const T* x, int n, int dim, float static_scale, uint8_t* out,
                       float* scale, cudaStream_t s) {
  quantize_rows(RowT<T>{x, dim}, n, dim, aligned_to(16, x), static_scale, out, scale, s);
}

template <typename T>
void silu_mul_fp8(const T* gu, int n, int inter, float static_scale, uint8_t* out, float* scale,
                  cudaStream_t s) {
  quantize_rows(RowSiluMul<T>{gu, inter}, n, inter, aligned_to(16, gu), static_scale, out, scale,
                s);
}

bool rmsnorm_fp8_supported(int dim) { return dim <= kNormFp8MaxDim; }

template <typename T>
void rmsnorm_fp8(const float* x, const T* w, int n, int dim, float eps, float static_scale,
                 uint8_t* out, float* scale, cudaStream_t s) {
  if (n <= 0) return;
  HAYATE_CHECK(rmsnorm_fp8_supported(dim), "rmsnorm_fp8: hidden size ", dim, " exceeds ",
               kNormFp8MaxDim);
  const LaunchConfig cfg{unsigned(n), kQuantThreads, 0, s};
  constexpr int kRun = 4 * kQuantThreads;  // elements of one 4-wide pass of the block
  if (dim % 4 == 0 && aligned_to(16, x) && aligned_to(8, w) && aligned_to(4, out)) {
    if (dim <= 4 * kRun)  // Llama 8B's 4,096
      launch(cfg, rmsnorm_fp8_kernel<4, 4, T>, x, w, dim, eps, static_scale, out, scale);
    else
      launch(cfg, rmsnorm_fp8_kernel<4, 8, T>, x, w, dim, eps, static_scale, out, scale);
  } else {
    launch(cfg, rmsnorm_fp8_kernel<1, 0, T>, x, w, dim, eps, static_scale, out, scale);
  }
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
