// SiLU(gate) * up for prefill rows (decode fuses it into the gate/up GEMV).
#include <algorithm>
#include <cstdint>

#include "cuda/kernels/common.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"

namespace hayate::cuda {

// ---- kernels -------------------------------------------------------------------

__device__ __forceinline__ float silu(float g) {
  return g / (1.0f + __expf(-g));
}

// Any inter: one element per thread, grid-stride over [n, inter].
template <typename T>
__global__ void silu_mul_kernel(const float* __restrict__ gu,  // [n, 2 inter]: gate ; up
                                int inter, size_t total, T* __restrict__ out) {  // [n, inter]
  griddep_enter();
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    const size_t row = i / inter, j = i % inter;
    out[i] = from_f32<T>(silu(gu[row * 2 * inter + j]) * gu[row * 2 * inter + inter + j]);
  }
}

// inter % 4 == 0 (Llama: 14336): four elements per thread from 16-byte loads of
// gate and up, rows on grid.y (striding past 65535), so no 64-bit division per
// element. The scalar kernel's i / inter and i % inter made it issue-bound:
// ~150 instructions per element on a kernel that moves 10 bytes per element.
template <typename T>
__global__ void silu_mul4_kernel(const float* __restrict__ gu, int n, int inter,
                                 T* __restrict__ out) {
  griddep_enter();
  const int j4 = blockIdx.x * blockDim.x + threadIdx.x;  // elements 4 j4 .. 4 j4 + 3
  if (4 * j4 >= inter) return;
  for (int row = blockIdx.y; row < n; row += gridDim.y) {
    const float* g_row = gu + size_t(row) * 2 * inter;
    const float4 g = reinterpret_cast<const float4*>(g_row)[j4];
    const float4 u = reinterpret_cast<const float4*>(g_row + inter)[j4];
    T* o = out + size_t(row) * inter + 4 * size_t(j4);
    o[0] = from_f32<T>(silu(g.x) * u.x);
    o[1] = from_f32<T>(silu(g.y) * u.y);
    o[2] = from_f32<T>(silu(g.z) * u.z);
    o[3] = from_f32<T>(silu(g.w) * u.w);
  }
}

// T input (the gate/up GEMM writes T when its output only feeds this kernel:
// half the bytes of fp32 on both sides). inter % 8 == 0: eight elements per
// thread from one 16-byte load of gate and one of up, rows on grid.y.
template <typename T>
__global__ void silu_mul8_t_kernel(const T* __restrict__ gu,  // [n, 2 inter]: gate ; up
                                   int n, int inter, T* __restrict__ out) {  // [n, inter]
  griddep_enter();
  const int j8 = blockIdx.x * blockDim.x + threadIdx.x;  // elements 8 j8 .. 8 j8 + 7
  if (8 * j8 >= inter) return;
  for (int row = blockIdx.y; row < n; row += gridDim.y) {
    const T* g_row = gu + size_t(row) * 2 * inter;
    const uint4 g = reinterpret_cast<const uint4*>(g_row)[j8];
    const uint4 u = reinterpret_cast<const uint4*>(g_row + inter)[j8];
    const T* gv = reinterpret_cast<const T*>(&g);
    const T* uv = reinterpret_cast<const T*>(&u);
    uint4 o;
    T* ov = reinterpret_cast<T*>(&o);
#pragma unroll
    for (int e = 0; e < 8; ++e) ov[e] = from_f32<T>(silu(to_f32(gv[e])) * to_f32(uv[e]));
    reinterpret_cast<uint4*>(out + size_t(row) * inter)[j8] = o;
  }
}

// T input, any inter: columns on grid.x (grid-stride), rows on grid.y.
template <typename T>
__global__ void silu_mul_t_kernel(const T* __restrict__ gu, int n, int inter, T* __restrict__ out) {
  griddep_enter();
  for (int row = blockIdx.y; row < n; row += gridDim.y) {
    const T* g_row = gu + size_t(row) * 2 * inter;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < inter; j += gridDim.x * blockDim.x)
      out[size_t(row) * inter + j] = from_f32<T>(silu(to_f32(g_row[j])) * to_f32(g_row[inter + j]));
  }
}

// ---- launchers -------------------------------------------------------------------

template <typename T>
void silu_mul(const float* gu, int n, int inter, T* out, cudaStream_t s, bool pdl) {
  if (n <= 0) return;
  if (inter % 4 == 0 && aligned_to(16, gu)) {
    const unsigned cols = ceil_div(size_t(inter / 4), 256);
    launch({dim3(cols, unsigned(std::min(n, 65535))), 256, 0, s, pdl}, silu_mul4_kernel<T>, gu, n,
           inter, out);
    return;
  }
  const size_t total = size_t(n) * inter;
  launch({std::min(ceil_div(total, 256), 4096u), 256, 0, s, pdl}, silu_mul_kernel<T>, gu, inter,
         total, out);
}

template void silu_mul<half>(const float*, int, int, half*, cudaStream_t, bool);
template void silu_mul<__nv_bfloat16>(const float*, int, int, __nv_bfloat16*, cudaStream_t, bool);

template <typename T>
void silu_mul(const T* gu, int n, int inter, T* out, cudaStream_t s, bool pdl) {
  if (n <= 0) return;
  const unsigned rows = unsigned(std::min(n, 65535));
  if (inter % 8 == 0 && aligned_to(16, gu, out)) {
    launch({dim3(ceil_div(size_t(inter / 8), 256), rows), 256, 0, s, pdl}, silu_mul8_t_kernel<T>,
           gu, n, inter, out);
    return;
  }
  launch({dim3(std::min(ceil_div(size_t(inter), 256), 64u), rows), 256, 0, s, pdl},
         silu_mul_t_kernel<T>, gu, n, inter, out);
}

template void silu_mul<half>(const half*, int, int, half*, cudaStream_t, bool);
template void silu_mul<__nv_bfloat16>(const __nv_bfloat16*, int, int, __nv_bfloat16*, cudaStream_t,
                                      bool);

}  // namespace hayate::cuda
