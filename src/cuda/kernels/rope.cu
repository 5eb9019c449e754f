// RoPE + the KV append of the batched backend: the QKV GEMM's rows (fp32, or
// T where the GEMM writes T) are rotated and split into q (fp32, for
// attention) and the K and V rows of each token's (block, row) in the paged
// pools (T, or e4m3 codes under the layer's k_scale / v_scale).
#include <algorithm>
#include <type_traits>

#include "core/check.h"
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/fp8.cuh"
#include "cuda/kernels/paged_common.cuh"
#include "cuda/kernels/rope.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"
#include "cuda/paged_attention.cuh"

namespace hayate::cuda {

namespace {

constexpr int kMaxHalfDim = 128;  // cos/sin table entries per block: head_dim <= 256
constexpr int kMaxNormHeads = 256;  // q + k heads of a token with per-head norms
constexpr int kRopeWideRows = 128;  // launches of up to this many rows: wide blocks

// Where token row `token` sits: its own position, its row in its block
// table's block.
struct PagedCache {
  PagedShape sh;
  PagedMeta meta;
  __device__ int pos(int token) const { return meta.tok_pos[token]; }
  __device__ size_t row(int token, int p) const {
    const int32_t* table = table_of(meta, meta.tok_seq[token], sh.max_blocks);
    return (size_t(table[p / sh.block_size]) * sh.block_size + p % sh.block_size) *
           size_t(sh.n_kv_heads * sh.head_dim);
  }
};

// One block per token (rope_kv_kernel: 256 threads; rope_kv_wide_kernel: up
// to 1,024, the launcher's wide blocks). The position's cos/sin pairs are
// computed once per block (head_dim / 2 rope_cos_sin) and every head's pairs
// (i, i + d/2) turn with them; thread j handles pairs i .. i +
// V - 1 of head j / (d / 2V), i = V (j % (d / 2V)): V = 4 (vector loads and
// stores) when d / 2 is a multiple of 4, else 1. With pre.bias the row's bias is added
// first; with pre.q_norm each q and k head is RMS-normalised before it
// turns: one warp per head sums the squares first (rstd in shared memory).
template <int V, typename In, typename T, typename W>
__device__ __forceinline__ void rope_kv_block(const In* __restrict__ qkv,  // [n, (H + 2 Hkv) d]
                                              PagedShape sh,
                                              const float* __restrict__ inv_freq,  // [d/2]
                                              PagedCache cache, float* __restrict__ q,  // [n, H d]
                                              T* __restrict__ k_cache, T* __restrict__ v_cache,
                                              QkvPre<W> pre) {
  griddep_enter();
  __shared__ float cs[2][kMaxHalfDim];  // cos, sin of pair i at this token's position
  __shared__ float rstd[kMaxNormHeads];  // pre.q_norm: per q and k head
  const int half_dim = sh.head_dim / 2, d = sh.head_dim, runs = half_dim / V;
  const int token = blockIdx.x, p = cache.pos(token);
  const int heads = sh.n_heads + 2 * sh.n_kv_heads, turned = sh.n_heads + sh.n_kv_heads;
  const size_t slot = cache.row(token, p);  // its loads in flight during the tables
  for (int i = threadIdx.x; i < half_dim; i += blockDim.x)
    rope_cos_sin(p, inv_freq[i], cs[0][i], cs[1][i]);
  const In* row = qkv + size_t(token) * heads * d;
  if (pre.q_norm) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int h = warp; h < turned; h += blockDim.x / 32) {
      float ss = 0.0f;
      for (int e = lane; e < d; e += 32) {
        const float x = to_f32(row[h * d + e]) + (pre.bias ? to_f32(pre.bias[h * d + e]) : 0.0f);
        ss += x * x;
      }
      ss = warp_sum(ss);
      if (lane == 0) rstd[h] = rsqrtf(ss / float(d) + pre.eps);
    }
  }
  __syncthreads();  // every head below reads the tables its first threads wrote
  for (int j = threadIdx.x; j < heads * runs; j += blockDim.x) {
    const int head = j / runs, i = (j % runs) * V;
    float a[V], b[V];
    load_run<V>(row + head * d + i, a);
    load_run<V>(row + head * d + i + half_dim, b);
    if (pre.bias) {
      float ba[V], bb[V];
      load_run<V>(pre.bias + head * d + i, ba);
      load_run<V>(pre.bias + head * d + i + half_dim, bb);
#pragma unroll
      for (int k = 0; k < V; ++k) a[k] += ba[k], b[k] += bb[k];
    }
    if (pre.q_norm && head < turned) {
      const W* w = head < sh.n_heads ? pre.q_norm : pre.k_norm;
      float wa[V], wb[V];
      load_run<V>(w + i, wa);
      load_run<V>(w + i + half_dim, wb);
      const float r = rstd[head];
#pragma unroll
      for (int k = 0; k < V; ++k) a[k] *= r * wa[k], b[k] *= r * wb[k];
    }
    if (head < turned)
#pragma unroll
      for (int k = 0; k < V; ++k) rope_turn(a[k], b[k], cs[0][i + k], cs[1][i + k]);
    if (head < sh.n_heads) {
      float* qo = q + size_t(token) * sh.n_heads * d + head * d;
      store_run<V>(qo + i, a);
      store_run<V>(qo + i + half_dim, b);
    } else {
      const bool is_k = head < turned;
      T* dst = (is_k ? k_cache : v_cache) + slot +
               (head - sh.n_heads - (is_k ? 0 : sh.n_kv_heads)) * d;
      const float kv_scale = is_k ? sh.k_scale : sh.v_scale;
      kv_store_run<V>(dst + i, a, kv_scale);
      kv_store_run<V>(dst + i + half_dim, b, kv_scale);
    }
  }
}

template <int V, typename In, typename T, typename W>
__global__ void rope_kv_kernel(const In* __restrict__ qkv, PagedShape sh,
                               const float* __restrict__ inv_freq, PagedCache cache,
                               float* __restrict__ q, T* __restrict__ k_cache,
                               T* __restrict__ v_cache, QkvPre<W> pre) {
  rope_kv_block<V>(qkv, sh, inv_freq, cache, q, k_cache, v_cache, pre);
}

template <int V, typename In, typename T, typename W>
__global__ void __launch_bounds__(1024, 1)
    rope_kv_wide_kernel(const In* __restrict__ qkv, PagedShape sh,
                        const float* __restrict__ inv_freq, PagedCache cache,
                        float* __restrict__ q, T* __restrict__ k_cache, T* __restrict__ v_cache,
                        QkvPre<W> pre) {
  rope_kv_block<V>(qkv, sh, inv_freq, cache, q, k_cache, v_cache, pre);
}

}  // namespace

// ---- launchers -------------------------------------------------------------------

template <typename In, typename T, typename W>
void paged_rope_kv(const In* qkv, PagedShape sh, int n, const float* inv_freq, PagedMeta meta,
                   float* q, T* k, T* v, cudaStream_t s, QkvPre<W> pre) {
  HAYATE_CHECK(!pre.q_norm || sh.n_heads + sh.n_kv_heads <= kMaxNormHeads,
               "paged_rope_kv: per-head q/k norms take at most ", kMaxNormHeads,
               " q and k heads, got ", sh.n_heads + sh.n_kv_heads);
  HAYATE_CHECK(!pre.q_norm == !pre.k_norm, "paged_rope_kv: q_norm and k_norm come together");
  HAYATE_CHECK(sh.head_dim % 2 == 0 && sh.head_dim / 2 <= kMaxHalfDim,
               "paged_rope_kv: head_dim must be even and at most ", 2 * kMaxHalfDim, ", got ",
               sh.head_dim);
  if (n <= 0) return;
  const PagedCache cache{sh, meta};
  const LaunchConfig cfg{unsigned(n), 256, 0, s, sh.pdl};
  // Vector accesses: every row and head offset is a multiple of 4 elements;
  // the pointers must be too (fp32: 16 bytes, 16-bit: 8).
  const bool vec = sh.head_dim % 8 == 0 && aligned_to(4 * sizeof(In), qkv) && aligned_to(16, q) &&
                   aligned_to(4 * sizeof(T), k, v) &&
                   aligned_to(4 * sizeof(W), pre.bias, pre.q_norm, pre.k_norm);
  if constexpr (std::is_same_v<In, W>) {  // QKV in T: the batched steps' GEMM output
    // Up to kRopeWideRows rows (fewer blocks than a Hopper GPU has SMs): a
    // thread per run of every head (Llama-3-8B: 48 heads x 16 runs = 768), so
    // no thread waits on a second round of loads. H100, 64 rows: 4.5 -> 3.3 us
    // a launch, llmib-128-b64 FP8 + e4m3 KV +0.5 %. More rows keep 256 threads:
    // wide blocks there slowed max load (bench/kernels/NOTES.md, "rope_kv's
    // wide blocks at few rows").
    const int runs = (sh.n_heads + 2 * sh.n_kv_heads) * sh.head_dim / 8;
    if (vec && n <= kRopeWideRows && runs > 256)
      return launch({unsigned(n), unsigned(std::min(1024, (runs + 31) / 32 * 32)), 0, s, sh.pdl},
                    rope_kv_wide_kernel<4, In, T, W>, qkv, sh, inv_freq, cache, q, k, v, pre);
  }
  if (vec)
    launch(cfg, rope_kv_kernel<4, In, T, W>, qkv, sh, inv_freq, cache, q, k, v, pre);
  else
    launch(cfg, rope_kv_kernel<1, In, T, W>, qkv, sh, inv_freq, cache, q, k, v, pre);
}

#define HAYATE_ROPE_INSTANTIATE(T)                                                                 \
  template void paged_rope_kv<float, T, T>(const float*, PagedShape, int, const float*,           \
                                           PagedMeta, float*, T*, T*, cudaStream_t, QkvPre<T>);    \
  template void paged_rope_kv<T, T, T>(const T*, PagedShape, int, const float*, PagedMeta, float*, \
                                       T*, T*, cudaStream_t, QkvPre<T>);                           \
  /* e4m3 pools (--kv-cache-dtype fp8), from either QKV output */                                  \
  template void paged_rope_kv<float, KvFp8, T>(const float*, PagedShape, int, const float*,       \
                                               PagedMeta, float*, KvFp8*, KvFp8*, cudaStream_t,    \
                                               QkvPre<T>);                                         \
  template void paged_rope_kv<T, KvFp8, T>(const T*, PagedShape, int, const float*, PagedMeta,    \
                                           float*, KvFp8*, KvFp8*, cudaStream_t, QkvPre<T>);
HAYATE_ROPE_INSTANTIATE(half)
HAYATE_ROPE_INSTANTIATE(__nv_bfloat16)
#undef HAYATE_ROPE_INSTANTIATE

}  // namespace hayate::cuda
