// Pieces shared by the two split decode kernels of the batched backend:
// paged_attention.cu (v2, SIMT fp32 math, any head_dim) and
// paged_decode_mma.cu (tensor cores, head_dim 128): the per-row split plan
// (identical in the decode and combine kernels) and the block's final merge
// of its warps' online-softmax states.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/kernels/common.cuh"
#include "cuda/paged_attention.cuh"

namespace hayate::cuda {

constexpr int kDecodeWarps = 4;  // warps per (row, kv head, split) block, both kernels

// Splits of a row of `len` keys when the grid has z split slots (<= the
// workspace's n_splits, chosen by the launcher from the number of (row, kv
// head) pairs, see PagedDecodeTuning): never splits shorter than min_part
// keys. Parts are multiples of 16 keys so that splits start at KV-block edges
// for the usual block sizes (and at the mma kernel's 16-key steps).
__device__ __forceinline__ int2 decode_split_plan(int len, int z, int min_part) {
  int used = min(z, (len + min_part - 1) / min_part);
  used = max(used, 1);
  int part = (len + used - 1) / used;
  part = (part + 15) / 16 * 16;
  used = (len + part - 1) / part;
  return make_int2(used, part);
}

// The block's warps left (m, l) in log2 units and their unnormalised
// accumulators in s_ml [W][G][2] / s_acc [W][G][HD] (a warp without keys: l =
// 0). Merges them for the Gr real heads and writes the final output (the row
// has one split) or the split's normalised output and (M, L) for the combine
// kernel; the output times v_scale (an e4m3 pool's, else 1). Call after a
// __syncthreads().
template <typename T, int HD, int G>
__device__ __forceinline__ void decode_merge_store(
    const float (&s_acc)[kDecodeWarps][G][HD], const float (&s_ml)[kDecodeWarps][G][2], int Gr,
    int kh, int i, int row, int sp, int n_splits, bool single, const PagedShape& sh,
    float* __restrict__ part_o, float* __restrict__ part_ml, T* __restrict__ out,
    float v_scale = 1.0f) {
  const int q_dim = sh.n_heads * HD;
  for (int j = threadIdx.x; j < Gr * HD; j += blockDim.x) {
    const int g = j / HD, dim = j % HD;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) M = fmaxf(M, s_ml[w][g][0]);
    float L = 0.0f, O = 0.0f;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) {
      const float f = s_ml[w][g][1] > 0.0f ? exp2f(s_ml[w][g][0] - M) : 0.0f;
      L += s_ml[w][g][1] * f;
      O += s_acc[w][g][dim] * f;
    }
    O *= v_scale;
    const int h = kh * Gr + g;
    if (single) {
      out[size_t(row) * q_dim + h * HD + dim] = from_f32<T>(O / L);
    } else {
      const size_t at = (size_t(i) * sh.n_heads + h) * n_splits + sp;
      part_o[at * HD + dim] = O / L;
      if (dim == 0) {
        part_ml[at * 2] = M;
        part_ml[at * 2 + 1] = L;
      }
    }
  }
}

// Streaming tensor-core decode (paged_decode_mma.cu): head_dim 128, group
// <= 8, block_size % 16 == 0, every row in one split of any length (writes
// out directly, no scratch); a warp per (row, kv head). Pools of T or e4m3
// (KV = KvFp8).
template <typename T, typename KV>
void paged_decode_stream_launch(const float* q, const KV* k_pool, const KV* v_pool, PagedShape sh,
                                PagedMeta meta, const int32_t* rows, int n_rows, T* out,
                                cudaStream_t s);

// Tensor-core decode (paged_decode_mma.cu): head_dim 128, group <= 8. Grid
// (n_rows, n_kv_heads, z); row r uses decode_split_plan(len_r, z, min_part);
// min_blocks (3 or 4): blocks per SM its registers are capped for. helpers:
// the grid has one split slot per pair and a small helper grid finds the rows
// that split and runs their splits 1..z-1 (for launches with many pairs).
template <typename T, typename KV>
void paged_decode_mma_launch(const float* q, const KV* k_pool, const KV* v_pool, PagedShape sh,
                             PagedMeta meta, const int32_t* rows, int n_rows, int n_splits, int z,
                             int min_part, int min_blocks, bool helpers, float* part_o,
                             float* part_ml, T* out, cudaStream_t s);

// The split kernel of paged_decode_mma_launch (no helpers) with RoPE and the
// KV append folded in (paged_attention_decode_rope): query heads from qkv
// [*, (n_heads + 2 n_kv_heads) 128] in T (+ bias, or null), the new K/V row
// written by the block of the split holding it.
template <typename T, typename KV>
void paged_decode_mma_rope_launch(const T* qkv, const T* bias, const float* inv_freq, KV* k_pool,
                                  KV* v_pool, PagedShape sh, PagedMeta meta, const int32_t* rows,
                                  int n_rows, int n_splits, int z, int min_part, int min_blocks,
                                  float* part_o, float* part_ml, T* out, cudaStream_t s);

}  // namespace hayate::cuda
