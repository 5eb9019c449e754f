// Decode attention at short context, one pass: the block's part of
// paged_decode_short.cu's kernel. A block of kShortThreads threads holds every
// key row of the context in registers (TPK threads per row, 16 bytes each; KP
// rows side by side; P passes); the kernel loads K and V through the block
// table and hands the rows over here: scores -> one barrier -> softmax
// statistics (every warp redundantly) -> P.V -> one barrier -> the output row,
// through the kernel's store(d, value).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>

#include "cuda/kernels/common.cuh"

namespace hayate::cuda {

constexpr int kShortThreads = 256;
constexpr int kShortPasses = 8;     // key rows per thread, for K and again for V
constexpr int kShortKeysCap = 256;  // bounds the score array and the softmax loop

template <int HD>
constexpr int short_max_keys() {
  return std::min(kShortKeysCap, kShortThreads / (HD / 8) * kShortPasses);
}

// The block's layout for head_dim HD.
template <int HD>
struct ShortLayout {
  static constexpr int TPK = HD / 8;              // threads per key row
  static constexpr int KP = kShortThreads / TPK;  // key rows side by side
  static constexpr int MAXK = short_max_keys<HD>();
  static constexpr int P = MAXK / KP;  // passes (rows per thread)
  static constexpr int NW = kShortThreads / 32;
  static_assert(TPK <= 32 && 32 % TPK == 0 && P * KP == MAXK);
  // This thread's 8-element chunk of a row, and its key lane.
  __device__ static int chunk() { return threadIdx.x % TPK; }
  __device__ static int key_lane() { return threadIdx.x / TPK; }
};

// kr/vr [P]: this thread's K and V chunks of key rows p * KP + key_lane()
// (zero past the context); qf: its chunk of the query, already scaled by
// 1/sqrt(HD); keys: the context length (<= MAXK). Calls store(d, o) for each
// output element d of [0, HD) this thread owns.
template <typename T, int HD, typename Store>
__device__ __forceinline__ void short_attend(const uint4 (&kr)[ShortLayout<HD>::P],
                                             const uint4 (&vr)[ShortLayout<HD>::P],
                                             const float (&qf)[8], int keys, Store store) {
  using L = ShortLayout<HD>;
  __shared__ float sc[L::MAXK];      // scaled scores
  __shared__ float red[L::NW][HD];   // per-warp partial outputs
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int c = L::chunk(), kj = L::key_lane();

  // Scores: the TPK threads of a row reduce by shuffles. `p * KP < keys` is the
  // same for the whole block, so whole warps leave the loop together.
#pragma unroll
  for (int p = 0; p < L::P; ++p) {
    if (p * L::KP >= keys) break;
    const int j = p * L::KP + kj;
    float f[8];
    unpack8<T>(kr[p], f);
    float s = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) s += f[e] * qf[e];
#pragma unroll
    for (int o = L::TPK / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (c == 0 && j < keys) sc[j] = s;
  }
  __syncthreads();  // all scores

  // Softmax statistics: every warp computes them itself (no second barrier).
  float m = -FLT_MAX;
  for (int j = lane; j < keys; j += 32) m = fmaxf(m, sc[j]);
  m = warp_max(m);
  float l = 0.0f;
  for (int j = lane; j < keys; j += 32) l += __expf(sc[j] - m);
  l = warp_sum(l);

  float acc[8] = {};
#pragma unroll
  for (int p = 0; p < L::P; ++p) {
    if (p * L::KP >= keys) break;
    const int j = p * L::KP + kj;
    if (j < keys) {
      const float pr = __expf(sc[j] - m);
      float f[8];
      unpack8<T>(vr[p], f);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[e] += pr * f[e];
    }
  }
  // Sum over the key lanes: first the 32 / TPK lanes of a warp that share a
  // chunk, then the warps through shared memory.
#pragma unroll
  for (int o = L::TPK; o < 32; o <<= 1)
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], o);
  if (lane < L::TPK)
#pragma unroll
    for (int e = 0; e < 8; ++e) red[warp][c * 8 + e] = acc[e];
  __syncthreads();  // all warps' partial outputs
  const float inv_l = 1.0f / l;
  for (int d = tid; d < HD; d += kShortThreads) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < L::NW; ++w) o += red[w][d];
    store(d, o * inv_l);
  }
}

}  // namespace hayate::cuda
