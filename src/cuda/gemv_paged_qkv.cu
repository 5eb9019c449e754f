// Bucket 1 of the batched backend: the single-stream QKV GEMV (gemv.cuh, RMSNorm
// fused in its prologue) with an epilogue that applies RoPE at the row's
// position and writes K and V into the paged pools, so one kernel replaces
// rmsnorm + QKV + paged_rope_kv. Only the epilogue is new: the position comes
// from the step metadata (tok_pos[0]) and the pool row from block_tables[0, :],
// where the single-stream epilogue uses the position as the cache row.
#include <algorithm>
#include <cstdint>

#include "core/check.h"
#include "cuda/gemv.cuh"
#include "cuda/gemv_batched.h"
#include "cuda/launch.h"
#include "cuda/rope.cuh"

namespace hayate::cuda {
namespace {

// Row group g holds rows i and i + d/2 of one head (the pair RoPE rotates):
// heads [0, n_heads) are q, then n_kv_heads of k, then of v.
template <typename T>
struct PagedQkvRopeEpi {
  float* q;   // [n_heads * d]
  T* k_pool;  // [blocks, block_size, kv_dim], this layer
  T* v_pool;
  const int32_t* tok_pos;      // [1] the row's position
  const int32_t* block_table;  // [max_blocks] of the row's sequence
  const float* inv_freq;       // [d / 2]
  int half_dim, n_heads, n_kv_heads, block_size;
  // Inputs are read in store(), after the reduction (NOTES.md run 8b: reading
  // them at round start cost ~1 us per launch on the single-stream twin).
  using Pre = NoPre;
  __device__ int row(int g, int r) const {
    const int head = g / half_dim, i = g % half_dim;
    return head * 2 * half_dim + i + r * half_dim;
  }
  __device__ Pre prepare(int) const { return {}; }
  __device__ void store(int g, const float (&acc)[2], const Pre&) const {
    const int head = g / half_dim, i = g % half_dim, d = 2 * half_dim;
    const int p = *tok_pos;
    float a = acc[0], b = acc[1];
    if (head < n_heads + n_kv_heads) rope_rotate(a, b, p, inv_freq[i]);
    if (head < n_heads) {
      q[head * d + i] = a;
      q[head * d + i + half_dim] = b;
      return;
    }
    const int kv_dim = n_kv_heads * d;
    const bool is_k = head < n_heads + n_kv_heads;
    const int slot = block_table[p / block_size] * block_size + p % block_size;  // pool row
    T* dst = (is_k ? k_pool : v_pool) + size_t(slot) * kv_dim +
             (head - n_heads - (is_k ? 0 : n_kv_heads)) * d;
    dst[i] = from_f32<T>(a);
    dst[i + half_dim] = from_f32<T>(b);
  }
};

}  // namespace

template <typename T>
void gemv_qkv_rope_paged(const T* W, PagedQkvShape sh, int K, const float* h, const T* norm_w,
                         float eps, const float* inv_freq, const int32_t* tok_pos,
                         const int32_t* block_table, float* q, T* k_pool, T* v_pool,
                         cudaStream_t s) {
  HAYATE_CHECK(sh.head_dim % 2 == 0 && K % 8 == 0, "gemv_qkv_rope_paged: head_dim ", sh.head_dim,
               " must be even and K ", K, " a multiple of 8");
  HAYATE_CHECK(
      reinterpret_cast<uintptr_t>(h) % 16 == 0 && reinterpret_cast<uintptr_t>(norm_w) % 8 == 0,
      "gemv_qkv_rope_paged: x or norm weight not aligned for vector loads");
  const int half = sh.head_dim / 2;
  const int groups = (sh.n_heads + 2 * sh.n_kv_heads) * half;
  const PagedQkvRopeEpi<T> epi{q,        k_pool, v_pool,     tok_pos,       block_table,
                               inv_freq, half,   sh.n_heads, sh.n_kv_heads, sh.block_size};
  // The single-stream QKV variant (gemv.cu): row pairs, K over all 8 warps,
  // one wave of blocks; two rounds of 2 loads in flight where K fits them
  // (gemv2_kernel, K <= 4096), else one round of 4.
  constexpr int kSplit = 8, kGroupsPerBlock = kGemvThreads / (32 * kSplit);
  auto kernel = K <= 2 * 8 * 32 * kSplit ? gemv2_kernel<T, 2, 2, kSplit, true, PagedQkvRopeEpi<T>>
                                         : gemv_kernel<T, 2, 4, kSplit, true, PagedQkvRopeEpi<T>>;
  const size_t smem = size_t(K) * sizeof(float);
  if (smem > 48 * 1024)
    HAYATE_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  int device = 0, sms = 0, per_sm = 0;
  HAYATE_CUDA_CHECK(cudaGetDevice(&device));
  HAYATE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  HAYATE_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kGemvThreads, smem));
  const unsigned blocks = std::min<unsigned>(ceil_div(size_t(groups), kGroupsPerBlock),
                                             unsigned(std::max(per_sm, 1) * sms));
  launch({blocks, kGemvThreads, smem, s, false}, kernel, W, K, groups, GemvInput<T>{h, norm_w, eps},
         epi);
}

#define HAYATE_INSTANTIATE(T)                                                                \
  template void gemv_qkv_rope_paged<T>(const T*, PagedQkvShape, int, const float*, const T*, \
                                       float, const float*, const int32_t*, const int32_t*,  \
                                       float*, T*, T*, cudaStream_t);
HAYATE_INSTANTIATE(half)
HAYATE_INSTANTIATE(__nv_bfloat16)
#undef HAYATE_INSTANTIATE

}  // namespace hayate::cuda
