// Prefill RoPE + KV-cache append: the QKV GEMM's fp32 rows are rotated and
// split into q (fp32, for attention) and the cache rows of k and v.
#include "cuda/common.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"
#include "cuda/rope.cuh"

namespace hayate::cuda {

// ---- kernels -------------------------------------------------------------------

// One block per token; thread j handles pair (i, i + d/2) of head j / (d/2).
template <typename T>
__global__ void rope_kv_kernel(const float* __restrict__ qkv,  // [n, (H + 2 Hkv) d]
                               QkvShape sh, const float* __restrict__ inv_freq,  // [d/2]
                               const int32_t* __restrict__ pos0,
                               float* __restrict__ q,        // [n, H d]
                               T* __restrict__ k_cache,      // [max_ctx, Hkv d]
                               T* __restrict__ v_cache) {
  const int half_dim = sh.head_dim / 2, d = sh.head_dim;
  const int token = blockIdx.x, p = *pos0 + token;
  const int heads = sh.n_heads + 2 * sh.n_kv_heads, kv_dim = sh.n_kv_heads * d;
  const float* row = qkv + size_t(token) * heads * d;
  for (int j = threadIdx.x; j < heads * half_dim; j += blockDim.x) {
    const int head = j / half_dim, i = j % half_dim;
    float a = row[head * d + i], b = row[head * d + i + half_dim];
    if (head < sh.n_heads + sh.n_kv_heads) rope_rotate(a, b, p, inv_freq[i]);
    if (head < sh.n_heads) {
      float* qo = q + size_t(token) * sh.n_heads * d + head * d;
      qo[i] = a;
      qo[i + half_dim] = b;
    } else {
      const bool is_k = head < sh.n_heads + sh.n_kv_heads;
      T* dst = (is_k ? k_cache : v_cache) + size_t(p) * kv_dim +
               (head - sh.n_heads - (is_k ? 0 : sh.n_kv_heads)) * d;
      dst[i] = from_f32<T>(a);
      dst[i + half_dim] = from_f32<T>(b);
    }
  }
}

// ---- launchers -------------------------------------------------------------------

template <typename T>
void rope_kv(const float* qkv, QkvShape shape, int n, const float* inv_freq, const int32_t* pos0,
             float* q, T* k_cache, T* v_cache, cudaStream_t s) {
  launch({unsigned(n), 256, 0, s}, rope_kv_kernel<T>, qkv, shape, inv_freq, pos0, q, k_cache, v_cache);
}

template void rope_kv<half>(const float*, QkvShape, int, const float*, const int32_t*, float*,
                            half*, half*, cudaStream_t);
template void rope_kv<__nv_bfloat16>(const float*, QkvShape, int, const float*, const int32_t*,
                                     float*, __nv_bfloat16*, __nv_bfloat16*, cudaStream_t);

}  // namespace hayate::cuda
