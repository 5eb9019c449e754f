// SiLU(gate) * up for prefill rows (decode fuses it into the gate/up GEMV).
#include "cuda/common.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"

namespace hayate::cuda {

// ---- kernels -------------------------------------------------------------------

template <typename T>
__global__ void silu_mul_kernel(const float* __restrict__ gu,  // [n, 2 inter]: gate ; up
                                int inter, size_t total, T* __restrict__ out) {  // [n, inter]
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    const size_t row = i / inter, j = i % inter;
    const float g = gu[row * 2 * inter + j], u = gu[row * 2 * inter + inter + j];
    out[i] = from_f32<T>(g / (1.0f + __expf(-g)) * u);
  }
}

// ---- launchers -------------------------------------------------------------------

template <typename T>
void silu_mul(const float* gu, int n, int inter, T* out, cudaStream_t s) {
  const size_t total = size_t(n) * inter;
  launch({std::min(ceil_div(total, 256), 4096u), 256, 0, s}, silu_mul_kernel<T>, gu, inter, total, out);
}

template void silu_mul<half>(const float*, int, int, half*, cudaStream_t);
template void silu_mul<__nv_bfloat16>(const float*, int, int, __nv_bfloat16*, cudaStream_t);

}  // namespace hayate::cuda
