// Prefill RoPE + KV-cache append: the QKV GEMM's fp32 rows are rotated and
// split into q (fp32, for attention) and the cache rows of k and v.
#include "cuda/common.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"
#include "cuda/paged_common.cuh"
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

// Paged, T input (the batched backend's QKV GEMM writes T when its output only
// feeds this kernel): one block per token row. The position's cos/sin pairs are
// computed once per block (head_dim / 2 precise sincosf) instead of once per
// head, then every head's pairs rotate with them (rope_turn, as rope_rotate).
template <typename T>
__global__ void paged_rope_kv_t_kernel(const T* __restrict__ qkv,  // [T, (H + 2 Hkv) d]
                                       PagedShape sh, const float* __restrict__ inv_freq,  // [d/2]
                                       PagedMeta meta, float* __restrict__ q,  // [T, H d] fp32
                                       T* __restrict__ k_pool, T* __restrict__ v_pool) {
  __shared__ float cs[2][64];  // cos, sin of pair i at this position (head_dim <= 128)
  const int half_dim = sh.head_dim / 2, d = sh.head_dim;
  const int token = blockIdx.x, p = meta.tok_pos[token];
  const int heads = sh.n_heads + 2 * sh.n_kv_heads, kv_dim = sh.n_kv_heads * d;
  for (int i = threadIdx.x; i < half_dim; i += blockDim.x)
    sincosf(float(p) * inv_freq[i], &cs[1][i], &cs[0][i]);
  __syncthreads();  // every head below reads the table its first threads wrote
  const int32_t* table = table_of(meta, meta.tok_seq[token], sh.max_blocks);
  const size_t slot =
      (size_t(table[p / sh.block_size]) * sh.block_size + p % sh.block_size) * kv_dim;
  const T* row = qkv + size_t(token) * heads * d;
  for (int j = threadIdx.x; j < heads * half_dim; j += blockDim.x) {
    const int head = j / half_dim, i = j % half_dim;
    float a = to_f32(row[head * d + i]), b = to_f32(row[head * d + i + half_dim]);
    if (head < sh.n_heads + sh.n_kv_heads) rope_turn(a, b, cs[0][i], cs[1][i]);
    if (head < sh.n_heads) {
      float* qo = q + size_t(token) * sh.n_heads * d + head * d;
      qo[i] = a;
      qo[i + half_dim] = b;
    } else {
      const bool is_k = head < sh.n_heads + sh.n_kv_heads;
      T* dst =
          (is_k ? k_pool : v_pool) + slot + (head - sh.n_heads - (is_k ? 0 : sh.n_kv_heads)) * d;
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

template <typename T>
void paged_rope_kv(const T* qkv, PagedShape sh, int n_tokens, const float* inv_freq, PagedMeta meta,
                   float* q, T* k_pool, T* v_pool, cudaStream_t s) {
  if (n_tokens <= 0) return;
  launch({unsigned(n_tokens), 256, 0, s}, paged_rope_kv_t_kernel<T>, qkv, sh, inv_freq, meta, q,
         k_pool, v_pool);
}

template void paged_rope_kv<half>(const half*, PagedShape, int, const float*, PagedMeta, float*,
                                  half*, half*, cudaStream_t);
template void paged_rope_kv<__nv_bfloat16>(const __nv_bfloat16*, PagedShape, int, const float*,
                                           PagedMeta, float*, __nv_bfloat16*, __nv_bfloat16*,
                                           cudaStream_t);

}  // namespace hayate::cuda
