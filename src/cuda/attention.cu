// Causal attention over the KV cache, flash-decoding style: a block takes one
// kv head (and the G = n_heads / n_kv_heads query heads that share it), one
// split of the key range and one query, and walks its keys in tiles of 64 with
// an online softmax. Decode splits the keys over up to kMaxSplits blocks so a
// long context is read by many SMs; the last split block of a kv head to
// finish (a counter per kv head) combines the partials, so no second kernel;
// prefill uses one split per query and writes the normalised output. Memory is
// O(keys per tile), never O(n^2). The cache is addressed as rows of kv_dim, so
// a paged pool later only changes the row lookup (row_of below).
#include <algorithm>
#include <cfloat>

#include "core/check.h"
#include "cuda/attention_short.cuh"
#include "cuda/common.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"

namespace hayate::cuda {

namespace {

constexpr int kAttnThreads = 128;
constexpr int kTile = 64;         // keys per tile (2 per lane in the softmax step)
constexpr int kMaxGroup = 8;      // query heads per kv head
constexpr int kMaxSplits = 32;
constexpr int kMinKeysPerSplit = 32;

__device__ __forceinline__ int decode_splits(int keys) {
  return min(kMaxSplits, (keys + kMinKeysPerSplit - 1) / kMinKeysPerSplit);
}

__device__ __forceinline__ size_t row_of(int token, int kv_dim) { return size_t(token) * kv_dim; }

// ---- kernels -------------------------------------------------------------------

template <typename T, int HD>
__global__ void __launch_bounds__(kAttnThreads)
attention_kernel(const float* __restrict__ q,   // [n, n_heads * HD]
                 const T* __restrict__ kc,      // [max_ctx, n_kv_heads * HD]
                 const T* __restrict__ vc,
                 AttnShape sh, const int32_t* __restrict__ pos0,
                 float* __restrict__ part_o,    // decode: [kMaxSplits, n_heads, HD], else null
                 float* __restrict__ part_ml,   // decode: [kMaxSplits, n_heads, 2]
                 int* __restrict__ done,        // decode: [n_kv_heads] split counters, zero
                 float* __restrict__ out_f32,   // decode: [n_heads * HD]
                 T* __restrict__ out) {         // prefill: [n, n_heads * HD]
  constexpr int TPK = HD / 8;                   // threads per key row, 16 bytes each
  constexpr int KP = kAttnThreads / TPK;        // keys handled in parallel
  static_assert(TPK <= 32 && 32 % TPK == 0);
  __shared__ float qs[kMaxGroup][HD];           // q * 1/sqrt(HD)
  __shared__ float sc[kMaxGroup][kTile];        // scores, then probabilities
  __shared__ float alpha_s[kMaxGroup], m_s[kMaxGroup], l_s[kMaxGroup];
  __shared__ float red[KP][kMaxGroup][HD];      // per-key-lane partial outputs

  const bool decode = part_o != nullptr;
  const int kvh = blockIdx.x, split = blockIdx.y, qi = blockIdx.z;
  const int G = sh.n_heads / sh.n_kv_heads, kv_dim = sh.n_kv_heads * HD;
  const int tid = threadIdx.x, warp = tid / 32;
  griddep_launch();
  griddep_wait();  // q and the new cache row come from the previous kernel

  const int keys = *pos0 + qi + 1;  // causal: positions [0, pos]
  const int nsplit = decode ? decode_splits(keys) : 1;
  if (split >= nsplit) return;
  const int per = (keys + nsplit - 1) / nsplit;
  const int start = split * per, end = min(keys, start + per);

  const float scale = rsqrtf(float(HD));
  for (int i = tid; i < G * HD; i += kAttnThreads)
    qs[i / HD][i % HD] = q[size_t(qi) * sh.n_heads * HD + (kvh * G) * HD + i] * scale;
  if (tid < kMaxGroup) {
    m_s[tid] = -FLT_MAX;
    l_s[tid] = 0.0f;
  }
  __syncthreads();  // qs, m_s, l_s ready

  const int c = tid % TPK, kj = tid / TPK;  // 8-element chunk of the row, key lane
  // Key lane kj takes keys kj, kj + KP, ... of a tile: kPasses rows per thread,
  // all loaded before any is used (the loads of a tile are in flight together;
  // a loop of load-then-use would pay the memory latency kPasses times).
  constexpr int kPasses = (kTile + KP - 1) / KP;
  const size_t col = size_t(kvh) * HD + c * 8;
  float acc[kMaxGroup][8] = {};
  for (int t0 = start; t0 < end; t0 += kTile) {
    const int nt = min(kTile, end - t0);
    uint4 rows[kPasses];
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      const int j = p * KP + kj;
      rows[p] = j < nt ? *reinterpret_cast<const uint4*>(kc + row_of(t0 + j, kv_dim) + col)
                       : make_uint4(0, 0, 0, 0);
    }
    // Scores: TPK threads share one key row; all threads take part in the
    // shuffles, so invalid keys hold zeros instead of leaving the loop.
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      const int j = p * KP + kj;
      float f[8];
      unpack8<T>(rows[p], f);
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        if (g >= G) break;
        float s = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) s += f[e] * qs[g][c * 8 + e];
#pragma unroll
        for (int o = TPK / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (c == 0 && j < nt) sc[g][j] = s;
      }
    }
    // The V rows of the tile: in flight while the softmax runs.
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      const int j = p * KP + kj;
      rows[p] = j < nt ? *reinterpret_cast<const uint4*>(vc + row_of(t0 + j, kv_dim) + col)
                       : make_uint4(0, 0, 0, 0);
    }
    __syncthreads();  // scores of the tile complete
    // Online softmax, one warp per head: new max, probabilities, rescale factor.
    for (int g = warp; g < G; g += kAttnThreads / 32)
      softmax_tile64(sc[g], nt, m_s[g], l_s[g], alpha_s[g]);
    __syncthreads();  // probabilities and alpha ready
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g >= G) break;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[g][e] *= alpha_s[g];
    }
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      const int j = p * KP + kj;
      if (j >= nt) break;  // j grows with p
      float f[8];
      unpack8<T>(rows[p], f);
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        if (g >= G) break;
        const float pr = sc[g][j];
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[g][e] += pr * f[e];
      }
    }
    __syncthreads();  // sc and alpha_s are rewritten by the next tile
  }

#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (g >= G) break;
#pragma unroll
    for (int e = 0; e < 8; ++e) red[kj][g][c * 8 + e] = acc[g][e];
  }
  __syncthreads();  // all key lanes' partial outputs
  for (int i = tid; i < G * HD; i += kAttnThreads) {
    const int g = i / HD, d = i % HD, head = kvh * G + g;
    float o = 0.0f;
#pragma unroll
    for (int k = 0; k < KP; ++k) o += red[k][g][d];
    if (decode) {
      part_o[(size_t(split) * sh.n_heads + head) * HD + d] = o;
      if (d == 0) {
        part_ml[(size_t(split) * sh.n_heads + head) * 2] = m_s[g];
        part_ml[(size_t(split) * sh.n_heads + head) * 2 + 1] = l_s[g];
      }
    } else {
      out[size_t(qi) * sh.n_heads * HD + head * HD + d] = from_f32<T>(o / l_s[g]);
    }
  }
  if (!decode) return;
  // The last split of this kv head combines: out = sum_s e^(m_s - M) o_s /
  // sum_s e^(m_s - M) l_s. Writers fence before counting, so when the count
  // reaches nsplit every partial is visible in L2 (read with ld.cg).
  __shared__ bool last;
  __threadfence();
  __syncthreads();  // all partial writes of this block issued and fenced
  if (tid == 0) last = atomicAdd(&done[kvh], 1) == nsplit - 1;
  __syncthreads();  // last
  if (!last) return;
  __threadfence();
  for (int i = tid; i < G * HD; i += kAttnThreads) {
    const int head = kvh * G + i / HD, d = i % HD;
    float m = -FLT_MAX;
    for (int s = 0; s < nsplit; ++s) m = fmaxf(m, __ldcg(&part_ml[(s * sh.n_heads + head) * 2]));
    float num = 0.0f, den = 0.0f;
    for (int s = 0; s < nsplit; ++s) {
      const float e = __expf(__ldcg(&part_ml[(s * sh.n_heads + head) * 2]) - m);
      den += e * __ldcg(&part_ml[(s * sh.n_heads + head) * 2 + 1]);
      num += e * __ldcg(&part_o[(size_t(s) * sh.n_heads + head) * HD + d]);
    }
    out_f32[head * HD + d] = num / den;
  }
  if (tid == 0) done[kvh] = 0;  // ready for the next layer / step
}

// ---- decode at short context: one pass, no split -----------------------------------
// One block per query head; the block's threads cover every key row at once
// (attention_short.cuh: TPK threads per row, KP rows side by side, kShortPasses
// rows per thread), so all K and V loads of the step are in flight together and
// there is no second-split combine. At context ~128 the split kernel above
// spends its time in serial phases (q staging, tile loop, partial write,
// counter, combine); here the chain is: loads -> scores -> one barrier ->
// softmax (each warp redundantly) -> P.V -> one barrier -> output.
template <typename T, int HD>
__global__ void __launch_bounds__(kShortThreads)
attention_short_kernel(const float* __restrict__ q,  // [n_heads * HD]
                       const T* __restrict__ kc,     // [rows, n_kv_heads * HD]
                       const T* __restrict__ vc,
                       AttnShape sh, const int32_t* __restrict__ pos, int rows,
                       float* __restrict__ out) {    // [n_heads * HD]
  using L = ShortLayout<HD>;
  constexpr int KP = L::KP, P = L::P, MAXK = L::MAXK;
  const int head = blockIdx.x, kvh = head / (sh.n_heads / sh.n_kv_heads);
  const int kv_dim = sh.n_kv_heads * HD;
  const int c = L::chunk(), kj = L::key_lane();
  const size_t col = size_t(kvh) * HD + c * 8;
  griddep_launch();
  // Every cached row below min(MAXK, rows) is loaded before the position is
  // known (rows past it are never used), so no dependent read of *pos comes
  // first. Rows before the position were written by earlier steps; the row at
  // the position comes from the previous kernel (QKV) and is loaded again after
  // griddep_wait. L2 loads (ld.cg): an L1 copy of that row could be stale.
  uint4 kr[P], vr[P];
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int j = p * KP + kj;
    kr[p] = j < rows ? __ldcg(reinterpret_cast<const uint4*>(kc + row_of(j, kv_dim) + col))
                     : make_uint4(0, 0, 0, 0);
    vr[p] = j < rows ? __ldcg(reinterpret_cast<const uint4*>(vc + row_of(j, kv_dim) + col))
                     : make_uint4(0, 0, 0, 0);
  }
  griddep_wait();  // q and the cache row at *pos come from the previous kernel
  const int now = *pos, keys = now + 1;
  if (keys > MAXK) __trap();  // the host picks this kernel only for short contexts
#pragma unroll
  for (int p = 0; p < P; ++p) {
    if (p * KP + kj == now) {
      kr[p] = __ldcg(reinterpret_cast<const uint4*>(kc + row_of(now, kv_dim) + col));
      vr[p] = __ldcg(reinterpret_cast<const uint4*>(vc + row_of(now, kv_dim) + col));
    }
  }
  const float scale = rsqrtf(float(HD));
  float qf[8];
  {
    const float4 a = __ldcg(reinterpret_cast<const float4*>(q + size_t(head) * HD + c * 8));
    const float4 b = __ldcg(reinterpret_cast<const float4*>(q + size_t(head) * HD + c * 8 + 4));
    qf[0] = a.x * scale, qf[1] = a.y * scale, qf[2] = a.z * scale, qf[3] = a.w * scale;
    qf[4] = b.x * scale, qf[5] = b.y * scale, qf[6] = b.z * scale, qf[7] = b.w * scale;
  }

  short_attend<T, HD>(kr, vr, qf, keys, [&](int d, float o) { out[size_t(head) * HD + d] = o; });
}

template <typename T, typename F>
void with_head_dim_short(int head_dim, F&& f) {
  switch (head_dim) {
    case 8: f(attention_short_kernel<T, 8>, short_max_keys<8>()); break;
    case 16: f(attention_short_kernel<T, 16>, short_max_keys<16>()); break;
    case 32: f(attention_short_kernel<T, 32>, short_max_keys<32>()); break;
    case 64: f(attention_short_kernel<T, 64>, short_max_keys<64>()); break;
    case 128: f(attention_short_kernel<T, 128>, short_max_keys<128>()); break;
    case 256: f(attention_short_kernel<T, 256>, short_max_keys<256>()); break;
    default: fail(cat("attention: head_dim ", head_dim, " is not supported (8, 16, 32, 64, 128, 256)"));
  }
}

// The one place where head_dim becomes a template argument.
template <typename T, typename F>
void with_head_dim(int head_dim, F&& f) {
  switch (head_dim) {
    case 8: f(attention_kernel<T, 8>); break;
    case 16: f(attention_kernel<T, 16>); break;
    case 32: f(attention_kernel<T, 32>); break;
    case 64: f(attention_kernel<T, 64>); break;
    case 128: f(attention_kernel<T, 128>); break;
    case 256: f(attention_kernel<T, 256>); break;
    default: fail(cat("attention: head_dim ", head_dim, " is not supported (8, 16, 32, 64, 128, 256)"));
  }
}

void check_shape(const AttnShape& sh) {
  HAYATE_CHECK(sh.n_kv_heads > 0 && sh.n_heads % sh.n_kv_heads == 0, "attention: ", sh.n_heads,
               " heads are not a multiple of ", sh.n_kv_heads, " kv heads");
  HAYATE_CHECK(sh.n_heads / sh.n_kv_heads <= kMaxGroup, "attention: more than ", kMaxGroup,
               " query heads per kv head");
}

}  // namespace

// ---- launchers -------------------------------------------------------------------

int attention_max_splits() { return kMaxSplits; }

template <typename T>
void attention_decode(const float* q, const T* k_cache, const T* v_cache, AttnShape shape,
                      const int32_t* pos, float* part_o, float* part_ml, int* counters, float* out,
                      cudaStream_t s, bool pdl) {
  check_shape(shape);
  with_head_dim<T>(shape.head_dim, [&](auto kernel) {
    launch({dim3(shape.n_kv_heads, kMaxSplits, 1), kAttnThreads, 0, s, pdl}, kernel, q, k_cache,
           v_cache, shape, pos, part_o, part_ml, counters, out, static_cast<T*>(nullptr));
  });
}

int attention_short_max_keys(int head_dim) {
  int keys = 0;
  with_head_dim_short<half>(head_dim, [&](auto, int max_keys) { keys = max_keys; });
  return keys;
}

template <typename T>
void attention_decode_short(const float* q, const T* k_cache, const T* v_cache, AttnShape shape,
                            const int32_t* pos, int max_ctx, float* out, cudaStream_t s, bool pdl) {
  check_shape(shape);
  HAYATE_CHECK(max_ctx > 0, "attention: cache of ", max_ctx, " rows");
  with_head_dim_short<T>(shape.head_dim, [&](auto kernel, int) {
    launch({unsigned(shape.n_heads), kShortThreads, 0, s, pdl}, kernel, q, k_cache, v_cache, shape,
           pos, max_ctx, out);
  });
}

template <typename T>
void attention_prefill(const float* q, const T* k_cache, const T* v_cache, AttnShape shape,
                       const int32_t* pos0, int n, T* out, cudaStream_t s) {
  check_shape(shape);
  HAYATE_CHECK(n <= 65535, "attention: ", n, " queries in one call (at most 65535)");
  with_head_dim<T>(shape.head_dim, [&](auto kernel) {
    launch({dim3(shape.n_kv_heads, 1, n), kAttnThreads, 0, s}, kernel, q, k_cache, v_cache, shape,
           pos0, static_cast<float*>(nullptr), static_cast<float*>(nullptr), static_cast<int*>(nullptr),
           static_cast<float*>(nullptr), out);
  });
}

#define HAYATE_INSTANTIATE(T)                                                                  \
  template void attention_decode<T>(const float*, const T*, const T*, AttnShape, const int32_t*, \
                                    float*, float*, int*, float*, cudaStream_t, bool);         \
  template void attention_decode_short<T>(const float*, const T*, const T*, AttnShape,         \
                                          const int32_t*, int, float*, cudaStream_t, bool);    \
  template void attention_prefill<T>(const float*, const T*, const T*, AttnShape,              \
                                     const int32_t*, int, T*, cudaStream_t);
HAYATE_INSTANTIATE(half)
HAYATE_INSTANTIATE(__nv_bfloat16)
#undef HAYATE_INSTANTIATE

}  // namespace hayate::cuda
