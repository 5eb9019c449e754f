// Paged KV kernels of the batched backend (declarations and shapes in
// paged_attention.cuh): decode attention v2 (fp32 math on K/V read in T or e4m3,
// online softmax, split over the KV length; head_dim 128 goes to the
// tensor-core kernel of paged_decode_mma.cu unless tuned off), the split
// combine, the per-row argmax. The prefill attention lives in paged_prefill.cu.
#include <cub/block/block_reduce.cuh>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/check.h"
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/fp8.cuh"
#include "cuda/kernels/paged_common.cuh"
#include "cuda/kernels/paged_decode.cuh"
#include "cuda/launch.h"
#include "cuda/paged_attention.cuh"

namespace hayate::cuda {

namespace {

// ---- decode attention ------------------------------------------------------------

// Decode is a stream of K/V rows: per step it reads len x 2 x kv_dim x 2 B for
// every sequence and does 4 FMAs per byte at most, so the kernel is built to
// keep HBM busy (bench/kernels/NOTES.md, "Paged attention"):
// - a key's head row (HD x 2 B) is read by LPK = HD / 8 lanes with one 16-byte
//   load each, so a warp holds 32 / LPK keys per load and U of those loads of K
//   and of V are in flight per lane before any math (2 U with prefetch PF:
//   the next chunk's loads go out before this chunk's math);
// - the group's G query heads share every K/V load (GQA);
// - the softmax is online per chunk of U x 32 / LPK keys (one rescale per
//   chunk, not per key), in the log2 domain (exp2);
// - the number of KV splits is chosen per launch from the number of (row, kv
//   head) pairs and per row from its own length (decode_split_plan), so a
//   short context is not cut into splits that only cost blocks and combining.
__host__ __device__ __forceinline__ int decode_splits_wanted(int pairs, int target_blocks) {
  return (target_blocks + pairs - 1) / pairs;
}

// Lane's K and V slices of keys k + u KPW (u < U), zeros past k1: 16 bytes
// of T or 8 of e4m3 each.
template <typename KV, int U, int KPW>
__device__ __forceinline__ void load_chunk(const KV* __restrict__ k_pool,
                                           const KV* __restrict__ v_pool,
                                           const int32_t* __restrict__ table, int k, int k1, int bs,
                                           int kv_dim, size_t col, KvVec<KV> (&kr)[U],
                                           KvVec<KV> (&vr)[U]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int kk = k + u * KPW;
    kr[u] = vr[u] = KvVec<KV>{};
    if (kk < k1) {
      const size_t off = (size_t(table[kk / bs]) * bs + kk % bs) * kv_dim + col;
      kr[u] = kv_load8(k_pool + off);
      vr[u] = kv_load8(v_pool + off);
    }
  }
}

// Block (row i, kv head, split): 4 warps take chunks of U x KPW consecutive
// keys round-robin. Lane = (key slot kg, 8-dim slice sub). Each warp keeps
// (m, l, acc) for the G heads; the block merges its warps in shared memory
// and writes the split's normalised output and (m, l) in log2 units, or,
// when the row has one split, the final output.
template <typename T, typename KV, int HD, int G, int U, bool PF>
__global__ void __launch_bounds__(kDecodeWarps * 32)
    paged_decode_kernel(const float* __restrict__ q, const KV* __restrict__ k_pool,
                        const KV* __restrict__ v_pool, PagedShape sh, PagedMeta meta,
                        const int32_t* __restrict__ rows, int n_splits, int min_part,
                        float* __restrict__ part_o, float* __restrict__ part_ml,
                        T* __restrict__ out) {
  griddep_enter();
  constexpr int LPK = HD / 8, KPW = 32 / LPK, KPI = U * KPW;
  const int i = blockIdx.x, kh = blockIdx.y, sp = blockIdx.z;
  const int row = rows[i], len = meta.tok_pos[row] + 1;
  const int2 plan = decode_split_plan(len, int(gridDim.z), min_part);
  if (sp >= plan.x) return;
  const int k0 = sp * plan.y, k1 = min(len, k0 + plan.y);
  const int Gr = sh.n_heads / sh.n_kv_heads, kv_dim = sh.n_kv_heads * HD, q_dim = sh.n_heads * HD,
            bs = sh.block_size;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, kg = lane / LPK, sub = lane % LPK;
  const int32_t* table = table_of(meta, meta.tok_seq[row], sh.max_blocks);
  const float scale = q_scale(HD, sh);

  float qf[G][8], acc[G][8], m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
    float4 lo = make_float4(0, 0, 0, 0), hi = lo;
    if (g < Gr) {  // 32-byte aligned: q rows and head offsets are multiples of 8 floats
      const float4* qp =
          reinterpret_cast<const float4*>(q + size_t(row) * q_dim + (kh * Gr + g) * HD + sub * 8);
      lo = qp[0];
      hi = qp[1];
    }
    const float qv[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      qf[g][e] = qv[e] * scale;
      acc[g][e] = 0.0f;
    }
  }
  const size_t col = size_t(kh) * HD + sub * 8;
  // PF: the next chunk's K/V loads are issued before this chunk's math, so
  // each warp always has a chunk in flight (2 x U x 16 B per lane more registers).
  constexpr int kStride = kDecodeWarps * KPI;
  KvVec<KV> kr[U], vr[U];
  int base = k0 + warp * KPI;
  if constexpr (PF)
    load_chunk<KV, U, KPW>(k_pool, v_pool, table, base + kg, k1, bs, kv_dim, col, kr, vr);
  for (; base < k1; base += kStride) {
    KvVec<KV> kn[U], vn[U];
    if constexpr (PF)
      load_chunk<KV, U, KPW>(k_pool, v_pool, table, base + kStride + kg, k1, bs, kv_dim, col, kn,
                             vn);
    else
      load_chunk<KV, U, KPW>(k_pool, v_pool, table, base + kg, k1, bs, kv_dim, col, kr, vr);
    float s[U][G];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float kf[8];
      kv_unpack8<KV>(kr[u], kf);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float d = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) d += qf[g][e] * kf[e];
#pragma unroll
        for (int o = LPK / 2; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
        s[u][g] = base + u * KPW + kg < k1 ? d : -INFINITY;
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float mx = s[0][g];
#pragma unroll
      for (int u = 1; u < U; ++u) mx = fmaxf(mx, s[u][g]);
#pragma unroll
      for (int o = LPK; o < 32; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      // mx is finite: key `base` (< k1) sits in slot 0 of u = 0.
      const float m_new = fmaxf(m[g], mx), corr = exp2f(m[g] - m_new);
      m[g] = m_new;
      l[g] *= corr;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[g][e] *= corr;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float vf[8];
      kv_unpack8<KV>(vr[u], vf);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float p = exp2f(s[u][g] - m[g]);
        l[g] += p;
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[g][e] += p * vf[e];
      }
    }
    if constexpr (PF) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        kr[u] = kn[u];
        vr[u] = vn[u];
      }
    }
  }
  // Sum the key slots of the warp (they share m); then merge the 4 warps.
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int o = LPK; o < 32; o <<= 1) {
      l[g] += __shfl_xor_sync(0xffffffffu, l[g], o);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[g][e] += __shfl_xor_sync(0xffffffffu, acc[g][e], o);
    }
  }
  __shared__ float s_acc[kDecodeWarps][G][HD];
  __shared__ float s_ml[kDecodeWarps][G][2];
  if (kg == 0) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
      for (int e = 0; e < 8; ++e) s_acc[warp][g][sub * 8 + e] = acc[g][e];
      if (sub == 0) {
        s_ml[warp][g][0] = m[g];
        s_ml[warp][g][1] = l[g];
      }
    }
  }
  __syncthreads();  // every warp's state is in shared memory
  decode_merge_store<T, HD, G>(s_acc, s_ml, Gr, kh, i, row, sp, n_splits, plan.x == 1, sh, part_o,
                               part_ml, out, sh.v_scale);
}

// Block (row i, kCombineHeads heads), thread = (head h, dim): weights each
// split by l * 2^(m - M). Several heads per block: at many rows nearly every
// row has one split and its blocks only read the length and exit.
constexpr int kCombineHeads = 4;
template <typename T>
__global__ void paged_decode_combine_kernel(PagedShape sh, PagedMeta meta,
                                            const int32_t* __restrict__ rows, int n_splits, int z,
                                            int min_part, const float* __restrict__ part_o,
                                            const float* __restrict__ part_ml,
                                            T* __restrict__ out) {
  griddep_enter();
  const int HD = sh.head_dim, i = blockIdx.x, dim = threadIdx.x % HD;
  const int h = blockIdx.y * kCombineHeads + int(threadIdx.x) / HD;
  if (h >= sh.n_heads) return;
  const int row = rows[i], len = meta.tok_pos[row] + 1;
  const int used = decode_split_plan(len, z, min_part).x;
  if (used == 1) return;  // the decode kernel wrote the output
  const size_t base = (size_t(i) * sh.n_heads + h) * n_splits;
  float M = -INFINITY;
  for (int sp = 0; sp < used; ++sp) M = fmaxf(M, part_ml[(base + sp) * 2]);
  float L = 0.0f, O = 0.0f;
  for (int sp = 0; sp < used; ++sp) {
    const float w = part_ml[(base + sp) * 2 + 1] * exp2f(part_ml[(base + sp) * 2] - M);
    L += w;
    O += w * part_o[(base + sp) * HD + dim];
  }
  out[size_t(row) * sh.n_heads * HD + h * HD + dim] = from_f32<T>(O / L);
}

// ---- greedy pick -------------------------------------------------------------------

constexpr int kArgmaxThreads = 1024;

__device__ __forceinline__ uint32_t ordered(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// One block per row; key = (ordered logit, ~id): the max is the lowest id among ties.
__global__ void __launch_bounds__(kArgmaxThreads)
    argmax_rows_kernel(const float* __restrict__ logits, int vocab, int32_t* __restrict__ out) {
  griddep_enter();
  const float* row = logits + size_t(blockIdx.x) * vocab;
  unsigned long long key = 0;
  for (int i = threadIdx.x; i < vocab; i += kArgmaxThreads) {
    const unsigned long long k = (uint64_t(ordered(row[i])) << 32) | uint32_t(~uint32_t(i));
    key = k > key ? k : key;
  }
  using Reduce = cub::BlockReduce<unsigned long long, kArgmaxThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  key = Reduce(tmp).Reduce(key, [](auto a, auto b) { return a > b ? a : b; });
  if (threadIdx.x == 0) out[blockIdx.x] = int32_t(~uint32_t(key & 0xffffffffu));
}

// One block per masked row b (logits row rows[b], mask bits masks[b]): the
// ids outside the mask become -inf in place (for the samplers that follow),
// and out[rows[b]] the argmax of the rest (-1 when the mask allows none).
__global__ void __launch_bounds__(kArgmaxThreads)
    mask_argmax_rows_kernel(float* __restrict__ logits, int vocab, const int32_t* __restrict__ rows,
                            const uint32_t* __restrict__ masks, int words,
                            int32_t* __restrict__ out) {
  const int32_t r = rows[blockIdx.x];
  float* row = logits + size_t(r) * vocab;
  const uint32_t* bits = masks + size_t(blockIdx.x) * words;
  unsigned long long key = 0;
  for (int i = threadIdx.x; i < vocab; i += kArgmaxThreads) {
    if (!((bits[i >> 5] >> (i & 31)) & 1u)) {
      row[i] = -INFINITY;
      continue;
    }
    // Allowed ids rank above every masked one (key 0), -inf logits included.
    const unsigned long long k = (uint64_t(ordered(row[i])) << 32) | uint32_t(~uint32_t(i));
    key = k > key ? k : key;
  }
  using Reduce = cub::BlockReduce<unsigned long long, kArgmaxThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  key = Reduce(tmp).Reduce(key, [](auto a, auto b) { return a > b ? a : b; });
  if (threadIdx.x == 0) out[r] = key == 0 ? -1 : int32_t(~uint32_t(key & 0xffffffffu));
}

}  // namespace

// ---- launchers -------------------------------------------------------------------

bool paged_shape_supported(int n_heads, int n_kv_heads, int head_dim) {
  return n_kv_heads > 0 && n_heads % n_kv_heads == 0 && n_heads / n_kv_heads <= kPagedMaxGroup &&
         (head_dim == 32 || head_dim == 64 || head_dim == 128);
}

namespace {

// The launch's split grid: z split slots per (row, kv head) pair, rows cut
// into parts of at least min_part keys (decode_split_plan on the device).
struct SplitGrid {
  int pairs;     // (row, kv head) pairs
  bool many;     // pairs >= tune.many_pairs
  int max_keys;  // no row of the launch is longer
  int z, min_part;
};

SplitGrid split_grid(int n_rows, const PagedShape& sh, int n_splits, const PagedDecodeTuning& tune) {
  const int pairs = std::max(1, n_rows * sh.n_kv_heads);
  const bool many = pairs >= tune.many_pairs;
  // Many pairs: no row is cut below big_min_part keys, so when the longest
  // possible context (tune.max_keys if set, else the block table's reach) is
  // no longer than that, every row is one split and the other slots would
  // only launch empty blocks (lab, 1024 x 192 keys: 246 vs 304 us per layer
  // with 4 slots).
  const int reach = sh.max_blocks * sh.block_size;
  const int max_keys = tune.max_keys > 0 ? std::min(tune.max_keys, reach) : reach;
  const int big_want = int(ceil_div(max_keys, std::max(1, tune.big_min_part)));
  const int want =
      many ? std::min(tune.big_splits, big_want) : decode_splits_wanted(pairs, tune.target_blocks);
  return {pairs, many, max_keys, std::max(1, std::min(n_splits, want)),
          std::max(1, many ? tune.big_min_part : tune.min_part)};
}

bool stream_applies(const SplitGrid& grid, const PagedShape& sh, const PagedDecodeTuning& tune,
                    bool e4m3) {
  const int short_keys = e4m3 ? tune.stream_short_keys_e4m3 : tune.stream_short_keys;
  return sh.head_dim == 128 && tune.mma && grid.many && grid.z == 1 &&
         (grid.pairs >= tune.stream_pairs || grid.max_keys <= short_keys) &&
         sh.block_size % 16 == 0 && sh.n_heads / sh.n_kv_heads <= kPagedMaxGroup;
}

// Whether a launch with this grid runs the tensor-core split kernel (without
// helpers), the one paged_attention_decode_rope folds RoPE into.
bool rope_applies(const SplitGrid& grid, const PagedShape& sh, const PagedDecodeTuning& tune,
                  bool e4m3) {
  return sh.head_dim == 128 && tune.mma && paged_shape_supported(sh.n_heads, sh.n_kv_heads, 128) &&
         !stream_applies(grid, sh, tune, e4m3) && !(grid.many && tune.mma_helpers);
}

}  // namespace

bool paged_decode_uses_stream(int n_rows, const PagedShape& sh, int n_splits,
                              const PagedDecodeTuning& tune, bool e4m3) {
  return stream_applies(split_grid(n_rows, sh, n_splits, tune), sh, tune, e4m3);
}

int paged_decode_split_slots(int n_rows, const PagedShape& sh, int n_splits,
                             const PagedDecodeTuning& tune) {
  return split_grid(n_rows, sh, n_splits, tune).z;
}

// The splits' combine (launches whose grid has z > 1 split slots).
template <typename T, int HD>
void combine_launch(const PagedShape& sh, PagedMeta meta, const int32_t* rows, int n_rows,
                    int n_splits, int z, int min_part, const float* part_o, const float* part_ml,
                    T* out, cudaStream_t s) {
  launch({dim3(unsigned(n_rows), unsigned((sh.n_heads + kCombineHeads - 1) / kCombineHeads)),
          unsigned(kCombineHeads * HD), 0, s, sh.pdl},
         paged_decode_combine_kernel<T>, sh, meta, rows, n_splits, z, min_part, part_o, part_ml,
         out);
}

template <typename T, typename KV, int HD, int G, int U, bool PF>
void decode_launch(const float* q, const KV* k_pool, const KV* v_pool, PagedShape sh,
                   PagedMeta meta, const int32_t* rows, int n_rows, int n_splits,
                   PagedDecodeTuning tune, float* part_o, float* part_ml, T* out, cudaStream_t s) {
  const SplitGrid grid = split_grid(n_rows, sh, n_splits, tune);
  const int z = grid.z, min_part = grid.min_part;
  bool done = false;
  // Tensor cores (paged_decode_mma.cu, T or e4m3 pools): the streaming kernel, or
  // the split one with the same splits and combine.
  if (stream_applies(grid, sh, tune, kKvFp8<KV>))
    return paged_decode_stream_launch(q, k_pool, v_pool, sh, meta, rows, n_rows, out, s);
  if (HD == 128 && tune.mma) {
    paged_decode_mma_launch(q, k_pool, v_pool, sh, meta, rows, n_rows, n_splits, z, min_part,
                            tune.mma_blocks, grid.many && tune.mma_helpers, part_o, part_ml, out,
                            s);
    done = true;
  }
  if (!done)
    launch({dim3(unsigned(n_rows), unsigned(sh.n_kv_heads), unsigned(z)), kDecodeWarps * 32, 0, s,
            sh.pdl},
           paged_decode_kernel<T, KV, HD, G, U, PF>, q, k_pool, v_pool, sh, meta, rows, n_splits,
           min_part, part_o, part_ml, out);
  if (z > 1)
    combine_launch<T, HD>(sh, meta, rows, n_rows, n_splits, z, min_part, part_o, part_ml, out, s);
}

// The one dispatch place: head_dim, group (rounded up to a power of two; the
// extra heads compute on zero queries and are never written), unroll and
// prefetch. The unroll/prefetch knobs are compiled for head_dim 128 only (the
// lab's shapes); 32 and 64 use the default pair.
constexpr int kDefaultUnroll = 2;
constexpr bool kDefaultPrefetch = true;

template <typename T, typename KV, int HD, int U, bool PF>
void decode_group(const float* q, const KV* k_pool, const KV* v_pool, PagedShape sh, PagedMeta meta,
                  const int32_t* rows, int n_rows, int n_splits, PagedDecodeTuning tune,
                  float* part_o, float* part_ml, T* out, cudaStream_t s) {
  const int g = sh.n_heads / sh.n_kv_heads;
  if (g == 1)
    decode_launch<T, KV, HD, 1, U, PF>(q, k_pool, v_pool, sh, meta, rows, n_rows, n_splits, tune,
                                   part_o, part_ml, out, s);
  else if (g == 2)
    decode_launch<T, KV, HD, 2, U, PF>(q, k_pool, v_pool, sh, meta, rows, n_rows, n_splits, tune,
                                   part_o, part_ml, out, s);
  else if (g <= 4)
    decode_launch<T, KV, HD, 4, U, PF>(q, k_pool, v_pool, sh, meta, rows, n_rows, n_splits, tune,
                                   part_o, part_ml, out, s);
  else
    decode_launch<T, KV, HD, 8, (U > 2 ? 2 : U), PF>(q, k_pool, v_pool, sh, meta, rows, n_rows,
                                                 n_splits, tune, part_o, part_ml, out, s);
}

template <typename T, typename KV, int HD>
void decode_variant(const float* q, const KV* k_pool, const KV* v_pool, PagedShape sh,
                    PagedMeta meta, const int32_t* rows, int n_rows, int n_splits,
                    PagedDecodeTuning tune, float* part_o, float* part_ml, T* out, cudaStream_t s) {
  if constexpr (HD == 128 && !kKvFp8<KV>) {
    if (tune.unroll > 2 && tune.prefetch)
      return decode_group<T, KV, HD, 4, true>(q, k_pool, v_pool, sh, meta, rows, n_rows, n_splits, tune,
                                          part_o, part_ml, out, s);
    if (tune.unroll > 2)
      return decode_group<T, KV, HD, 4, false>(q, k_pool, v_pool, sh, meta, rows, n_rows, n_splits,
                                           tune, part_o, part_ml, out, s);
    if (!tune.prefetch)
      return decode_group<T, KV, HD, 2, false>(q, k_pool, v_pool, sh, meta, rows, n_rows, n_splits,
                                           tune, part_o, part_ml, out, s);
  }
  decode_group<T, KV, HD, kDefaultUnroll, kDefaultPrefetch>(q, k_pool, v_pool, sh, meta, rows, n_rows,
                                                        n_splits, tune, part_o, part_ml, out, s);
}

template <typename T, typename KV>
void paged_attention_decode_tuned(const float* q, const KV* k_pool, const KV* v_pool, PagedShape sh,
                                  PagedMeta meta, const int32_t* rows, int n_rows, int n_splits,
                                  PagedDecodeTuning tune, float* part_o, float* part_ml, T* out,
                                  cudaStream_t s) {
  switch (sh.head_dim) {
    case 32:
      return decode_variant<T, KV, 32>(q, k_pool, v_pool, sh, meta, rows, n_rows, n_splits, tune,
                                   part_o, part_ml, out, s);
    case 64:
      return decode_variant<T, KV, 64>(q, k_pool, v_pool, sh, meta, rows, n_rows, n_splits, tune,
                                   part_o, part_ml, out, s);
    case 128:
      return decode_variant<T, KV, 128>(q, k_pool, v_pool, sh, meta, rows, n_rows, n_splits, tune,
                                    part_o, part_ml, out, s);
    default:
      break;
  }
  std::fprintf(stderr, "hayate: paged attention: unsupported head_dim %d\n", sh.head_dim);
  std::abort();
}

template <typename T, typename KV>
void paged_attention_decode(const float* q, const KV* k_pool, const KV* v_pool, PagedShape sh,
                            PagedMeta meta, const int32_t* rows, int n_rows, int n_splits,
                            int max_keys, float* part_o, float* part_ml, T* out, cudaStream_t s) {
  PagedDecodeTuning tune;
  tune.max_keys = max_keys;
  paged_attention_decode_tuned(q, k_pool, v_pool, sh, meta, rows, n_rows, n_splits, tune, part_o,
                               part_ml, out, s);
}

bool paged_decode_rope_supported(int n_rows, const PagedShape& sh, int n_splits, int max_keys,
                                 bool e4m3) {
  PagedDecodeTuning tune;
  tune.max_keys = max_keys;
  return rope_applies(split_grid(n_rows, sh, n_splits, tune), sh, tune, e4m3);
}

template <typename T, typename KV>
void paged_attention_decode_rope(const T* qkv, const T* bias, const float* inv_freq, KV* k_pool,
                                 KV* v_pool, PagedShape sh, PagedMeta meta, const int32_t* rows,
                                 int n_rows, int n_splits, int max_keys, float* part_o,
                                 float* part_ml, T* out, cudaStream_t s) {
  PagedDecodeTuning tune;
  tune.max_keys = max_keys;
  const SplitGrid grid = split_grid(n_rows, sh, n_splits, tune);
  HAYATE_CHECK(rope_applies(grid, sh, tune, kKvFp8<KV>),
               "paged_attention_decode_rope: the launch (", n_rows, " rows, head_dim ", sh.head_dim,
               ") does not run the tensor-core split kernel");
  paged_decode_mma_rope_launch(qkv, bias, inv_freq, k_pool, v_pool, sh, meta, rows, n_rows,
                               n_splits, grid.z, grid.min_part, tune.mma_blocks, part_o, part_ml,
                               out, s);
  if (grid.z > 1)
    combine_launch<T, 128>(sh, meta, rows, n_rows, n_splits, grid.z, grid.min_part, part_o, part_ml,
                           out, s);
}

int paged_decode_whole_row_keys(int n_rows, int n_kv_heads) {
  const PagedDecodeTuning tune;
  return std::max(1, n_rows * n_kv_heads) >= tune.many_pairs ? tune.big_min_part : 0;
}

void argmax_rows(const float* logits, int rows, int vocab, int32_t* out, cudaStream_t s,
                 bool pdl) {
  launch({unsigned(rows), kArgmaxThreads, 0, s, pdl}, argmax_rows_kernel, logits, vocab, out);
}

void mask_argmax_rows(float* logits, int vocab, const int32_t* rows, const uint32_t* masks,
                      int words, int n, int32_t* out, cudaStream_t s) {
  if (n == 0) return;
  launch({unsigned(n), kArgmaxThreads, 0, s}, mask_argmax_rows_kernel, logits, vocab, rows, masks,
         words, out);
}

#define HAYATE_PAGED_INSTANTIATE(T, KV)                                                         \
  template void paged_attention_decode<T, KV>(const float*, const KV*, const KV*, PagedShape,   \
                                              PagedMeta, const int32_t*, int, int, int, float*, \
                                              float*, T*, cudaStream_t);                        \
  template void paged_attention_decode_tuned<T, KV>(                                            \
      const float*, const KV*, const KV*, PagedShape, PagedMeta, const int32_t*, int, int,      \
      PagedDecodeTuning, float*, float*, T*, cudaStream_t);                                     \
  template void paged_attention_decode_rope<T, KV>(const T*, const T*, const float*, KV*, KV*,  \
                                                   PagedShape, PagedMeta, const int32_t*, int,  \
                                                   int, int, float*, float*, T*, cudaStream_t);
HAYATE_PAGED_INSTANTIATE(half, half)
HAYATE_PAGED_INSTANTIATE(__nv_bfloat16, __nv_bfloat16)
HAYATE_PAGED_INSTANTIATE(half, KvFp8)
HAYATE_PAGED_INSTANTIATE(__nv_bfloat16, KvFp8)
#undef HAYATE_PAGED_INSTANTIATE

}  // namespace hayate::cuda
