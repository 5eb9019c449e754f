// Token embedding lookup into the fp32 residual stream.
#include "cuda/kernels/common.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"

namespace hayate::cuda {

// ---- kernels -------------------------------------------------------------------

template <typename T>
__global__ void embed_kernel(const T* __restrict__ table,   // [vocab, dim]
                             const int32_t* __restrict__ tokens,  // [n] (validated on the host)
                             int dim, float* __restrict__ h) {   // [n, dim]
  griddep_launch();
  griddep_wait();  // tokens may come from the previous step's sampler
  const T* row = table + size_t(tokens[blockIdx.x]) * dim;
  float* out = h + size_t(blockIdx.x) * dim;
  for (int k = threadIdx.x; k < dim; k += blockDim.x) out[k] = to_f32(row[k]);
}

// ---- launchers -------------------------------------------------------------------

template <typename T>
void embed(const T* table, const int32_t* tokens, int n, int dim, float* h, cudaStream_t s, bool pdl) {
  launch({unsigned(n), 256, 0, s, pdl}, embed_kernel<T>, table, tokens, dim, h);
}

template void embed<half>(const half*, const int32_t*, int, int, float*, cudaStream_t, bool);
template void embed<__nv_bfloat16>(const __nv_bfloat16*, const int32_t*, int, int, float*,
                                   cudaStream_t, bool);

}  // namespace hayate::cuda
