// Paged KV kernels of the batched backend (declarations and shapes in
// paged_attention.cuh). Attention math is fp32 with K/V read in T; the
// softmax is online (running max m, running sum l), so memory is O(n).
#include <cub/block/block_reduce.cuh>

#include <cmath>

#include "cuda/common.cuh"
#include "cuda/launch.h"
#include "cuda/paged_attention.cuh"
#include "cuda/rope.cuh"

namespace hayate::cuda {

namespace {

constexpr int kDecodeWarps = 4;
constexpr int kPrefillThreads = 128;
constexpr int kPrefillRows = 64;  // query-head rows per prefill block (tile tokens x group)
constexpr int kKeyTile = 32;      // keys per prefill shared-memory tile

__device__ __forceinline__ const int32_t* table_of(const PagedMeta& m, int seq, int max_blocks) {
  return m.block_tables + size_t(seq) * max_blocks;
}

// Start of the kv_dim-wide row of position p in a pool.
template <typename T>
__device__ __forceinline__ const T* kv_row(const T* pool, const int32_t* table, int p, int bs,
                                           int kv_dim) {
  return pool + (size_t(table[p / bs]) * bs + p % bs) * kv_dim;
}

// ---- RoPE + KV write -------------------------------------------------------------

// One block per token; thread j handles pair (i, i + d/2) of head j / (d/2).
template <typename T>
__global__ void paged_rope_kv_kernel(const float* __restrict__ qkv,  // [T, (H + 2 Hkv) d]
                                     PagedShape sh, const float* __restrict__ inv_freq,  // [d/2]
                                     PagedMeta meta, float* __restrict__ q,              // [T, H d]
                                     T* __restrict__ k_pool, T* __restrict__ v_pool) {
  const int half_dim = sh.head_dim / 2, d = sh.head_dim;
  const int token = blockIdx.x, p = meta.tok_pos[token];
  const int heads = sh.n_heads + 2 * sh.n_kv_heads, kv_dim = sh.n_kv_heads * d;
  const int32_t* table = table_of(meta, meta.tok_seq[token], sh.max_blocks);
  const size_t slot =
      (size_t(table[p / sh.block_size]) * sh.block_size + p % sh.block_size) * kv_dim;
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
      T* dst =
          (is_k ? k_pool : v_pool) + slot + (head - sh.n_heads - (is_k ? 0 : sh.n_kv_heads)) * d;
      dst[i] = from_f32<T>(a);
      dst[i + half_dim] = from_f32<T>(b);
    }
  }
}

// ---- decode attention ------------------------------------------------------------

// E consecutive 16-bit values to floats; E = 4 (head_dim 128) as one 8-byte
// load (aligned: kv_dim is a multiple of 32 and the lane offset of 4 elements).
template <typename T, int E>
__device__ __forceinline__ void load_row(const T* p, float (&f)[E]) {
  if constexpr (E == 4) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    const uint32_t w[2] = {u.x, u.y};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const T* h = reinterpret_cast<const T*>(&w[i]);
      f[2 * i] = to_f32(h[0]);
      f[2 * i + 1] = to_f32(h[1]);
    }
  } else {
#pragma unroll
    for (int e = 0; e < E; ++e) f[e] = to_f32(p[e]);
  }
}

// Block (row i, kv head, split): 4 warps share the split's keys round-robin;
// lane owns E = HD / 32 dims of each of the group's G query heads, so a key's
// K and V rows are read once for the whole group. Writes the split's
// normalised output and (m, l), or, when the split is the only one, the
// final output directly.
template <typename T, int HD>
__global__ void __launch_bounds__(kDecodeWarps * 32)
    paged_decode_kernel(const float* __restrict__ q, const T* __restrict__ k_pool,
                        const T* __restrict__ v_pool, PagedShape sh, PagedMeta meta,
                        const int32_t* __restrict__ rows, int n_splits, int part,
                        float* __restrict__ part_o, float* __restrict__ part_ml,
                        T* __restrict__ out) {
  constexpr int E = HD / 32;
  const int i = blockIdx.x, kh = blockIdx.y, sp = blockIdx.z;
  const int row = rows[i], len = meta.tok_pos[row] + 1;
  const int k0 = sp * part, k1 = min(len, k0 + part);
  if (k0 >= len) return;
  const int G = sh.n_heads / sh.n_kv_heads, kv_dim = sh.n_kv_heads * HD, q_dim = sh.n_heads * HD;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t* table = table_of(meta, meta.tok_seq[row], sh.max_blocks);
  const float scale = rsqrtf(float(HD));

  float qr[kPagedMaxGroup][E], acc[kPagedMaxGroup][E], m[kPagedMaxGroup], l[kPagedMaxGroup];
#pragma unroll
  for (int g = 0; g < kPagedMaxGroup; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      qr[g][e] = g < G ? q[size_t(row) * q_dim + (kh * G + g) * HD + lane * E + e] * scale : 0.0f;
      acc[g][e] = 0.0f;
    }
  }
  for (int k = k0 + warp; k < k1; k += kDecodeWarps) {
    const T* kr = kv_row(k_pool, table, k, sh.block_size, kv_dim) + kh * HD + lane * E;
    const T* vr = kv_row(v_pool, table, k, sh.block_size, kv_dim) + kh * HD + lane * E;
    float kf[E], vf[E];
    load_row<T, E>(kr, kf);
    load_row<T, E>(vr, vf);
#pragma unroll
    for (int g = 0; g < kPagedMaxGroup; ++g) {
      if (g >= G) break;
      float s = 0.0f;
#pragma unroll
      for (int e = 0; e < E; ++e) s += qr[g][e] * kf[e];
      s = warp_sum(s);
      const float m_new = fmaxf(m[g], s);
      const float corr = __expf(m[g] - m_new), p = __expf(s - m_new);
      l[g] = l[g] * corr + p;
#pragma unroll
      for (int e = 0; e < E; ++e) acc[g][e] = acc[g][e] * corr + p * vf[e];
      m[g] = m_new;
    }
  }

  // Merge the 4 warps' states.
  __shared__ float s_acc[kDecodeWarps][kPagedMaxGroup][HD];
  __shared__ float s_ml[kDecodeWarps][kPagedMaxGroup][2];
#pragma unroll
  for (int g = 0; g < kPagedMaxGroup; ++g) {
    if (g >= G) break;
#pragma unroll
    for (int e = 0; e < E; ++e) s_acc[warp][g][lane * E + e] = acc[g][e];
    if (lane == 0) {
      s_ml[warp][g][0] = m[g];
      s_ml[warp][g][1] = l[g];
    }
  }
  __syncthreads();  // every warp's state is in shared memory
  const bool single = n_splits == 1 || len <= part;
  for (int j = threadIdx.x; j < G * HD; j += blockDim.x) {
    const int g = j / HD, dim = j % HD;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) M = fmaxf(M, s_ml[w][g][0]);
    float L = 0.0f, O = 0.0f;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) {
      const float f = s_ml[w][g][1] > 0.0f ? __expf(s_ml[w][g][0] - M) : 0.0f;
      L += s_ml[w][g][1] * f;
      O += s_acc[w][g][dim] * f;
    }
    const int h = kh * G + g;
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

// Block (row i, head h), thread = dim: weights each split by l * exp(m - M).
template <typename T>
__global__ void paged_decode_combine_kernel(PagedShape sh, PagedMeta meta,
                                            const int32_t* __restrict__ rows, int n_splits,
                                            int part, const float* __restrict__ part_o,
                                            const float* __restrict__ part_ml,
                                            T* __restrict__ out) {
  const int i = blockIdx.x, h = blockIdx.y, dim = threadIdx.x, HD = sh.head_dim;
  const int row = rows[i], len = meta.tok_pos[row] + 1;
  const int used = (len + part - 1) / part;
  if (n_splits == 1 || used == 1) return;  // the decode kernel wrote the output
  const size_t base = (size_t(i) * sh.n_heads + h) * n_splits;
  float M = -INFINITY;
  for (int sp = 0; sp < used; ++sp) M = fmaxf(M, part_ml[(base + sp) * 2]);
  float L = 0.0f, O = 0.0f;
  for (int sp = 0; sp < used; ++sp) {
    const float w = part_ml[(base + sp) * 2 + 1] * __expf(part_ml[(base + sp) * 2] - M);
    L += w;
    O += w * part_o[(base + sp) * HD + dim];
  }
  out[size_t(row) * sh.n_heads * HD + h * HD + dim] = from_f32<T>(O / L);
}

// ---- prefill attention -----------------------------------------------------------

// Block (tile, kv head): the tile's tokens x the group's heads form up to 64
// query rows (row r = token r / G, head r % G) kept in shared memory; keys
// [0, last position of the tile] stream through in tiles of 32. Thread t owns
// output column t % HD of rows t / HD + j * (128 / HD).
template <typename T, int HD>
struct PrefillSmem {
  float q[kPrefillRows][HD];
  float k[kKeyTile][HD + 1];  // +1: lanes read different keys at the same dim
  float v[kKeyTile][HD];
  float p[kPrefillRows][kKeyTile + 1];
  float m[kPrefillRows], l[kPrefillRows], corr[kPrefillRows];
  int qpos[kPrefillRows];
};

template <typename T, int HD>
__global__ void __launch_bounds__(kPrefillThreads)
    paged_prefill_kernel(const float* __restrict__ q, const T* __restrict__ k_pool,
                         const T* __restrict__ v_pool, PagedShape sh, PagedMeta meta,
                         const int2* __restrict__ tiles, T* __restrict__ out) {
  constexpr int kColThreads = kPrefillThreads / HD;     // threads per column
  constexpr int kRowsPer = kPrefillRows / kColThreads;  // rows per thread
  extern __shared__ __align__(16) unsigned char smem_raw[];
  PrefillSmem<T, HD>& sm = *reinterpret_cast<PrefillSmem<T, HD>*>(smem_raw);
  const int kh = blockIdx.y;
  const int2 tile = tiles[blockIdx.x];
  const int G = sh.n_heads / sh.n_kv_heads, R = tile.y * G;
  const int kv_dim = sh.n_kv_heads * HD, q_dim = sh.n_heads * HD;
  const int32_t* table = table_of(meta, meta.tok_seq[tile.x], sh.max_blocks);
  const int last = meta.tok_pos[tile.x + tile.y - 1];
  const float scale = rsqrtf(float(HD));

  for (int j = threadIdx.x; j < kPrefillRows * HD; j += kPrefillThreads) {
    const int r = j / HD, dim = j % HD;
    sm.q[r][dim] =
        r < R ? q[size_t(tile.x + r / G) * q_dim + (kh * G + r % G) * HD + dim] * scale : 0.0f;
  }
  for (int r = threadIdx.x; r < kPrefillRows; r += kPrefillThreads) {
    sm.m[r] = -INFINITY;
    sm.l[r] = 0.0f;
    sm.qpos[r] = r < R ? meta.tok_pos[tile.x + r / G] : -1;
  }
  const int col = threadIdx.x % HD, row0 = threadIdx.x / HD;
  float acc[kRowsPer];
#pragma unroll
  for (int j = 0; j < kRowsPer; ++j) acc[j] = 0.0f;

  for (int kt = 0; kt <= last; kt += kKeyTile) {
    __syncthreads();  // previous tile's k, v, p fully used (and q/m/l/qpos written)
    for (int j = threadIdx.x; j < kKeyTile * HD; j += kPrefillThreads) {
      const int kk = j / HD, dim = j % HD, p = kt + kk;
      float kv = 0.0f, vv = 0.0f;
      if (p <= last) {
        kv = to_f32(kv_row(k_pool, table, p, sh.block_size, kv_dim)[kh * HD + dim]);
        vv = to_f32(kv_row(v_pool, table, p, sh.block_size, kv_dim)[kh * HD + dim]);
      }
      sm.k[kk][dim] = kv;
      sm.v[kk][dim] = vv;
    }
    __syncthreads();  // k, v tile loaded
    {
      // Scores: thread -> key kk, rows w, w + 4, ...; one K load per 16 FMAs.
      const int kk = threadIdx.x % kKeyTile, rb = threadIdx.x / kKeyTile;
      constexpr int kStep = kPrefillThreads / kKeyTile;
      float s[kPrefillRows / kStep];
#pragma unroll
      for (int j = 0; j < kPrefillRows / kStep; ++j) s[j] = 0.0f;
      for (int dim = 0; dim < HD; ++dim) {
        const float kd = sm.k[kk][dim];
#pragma unroll
        for (int j = 0; j < kPrefillRows / kStep; ++j) s[j] += sm.q[rb + j * kStep][dim] * kd;
      }
#pragma unroll
      for (int j = 0; j < kPrefillRows / kStep; ++j) {
        const int r = rb + j * kStep;
        sm.p[r][kk] = (kt + kk <= sm.qpos[r]) ? s[j] : -INFINITY;
      }
    }
    __syncthreads();  // scores complete
    for (int r = threadIdx.x; r < kPrefillRows; r += kPrefillThreads) {
      if (r >= R) continue;
      float mx = sm.m[r];
      for (int kk = 0; kk < kKeyTile; ++kk) mx = fmaxf(mx, sm.p[r][kk]);
      // mx is finite: key 0 is visible to every query, and it is in the first tile.
      const float c = __expf(sm.m[r] - mx);
      float sum = 0.0f;
      for (int kk = 0; kk < kKeyTile; ++kk) {
        const float e = __expf(sm.p[r][kk] - mx);
        sm.p[r][kk] = e;
        sum += e;
      }
      sm.l[r] = sm.l[r] * c + sum;
      sm.m[r] = mx;
      sm.corr[r] = c;
    }
    __syncthreads();  // probabilities and corrections ready
#pragma unroll
    for (int j = 0; j < kRowsPer; ++j) {
      const int r = row0 + j * kColThreads;
      if (r >= R) break;
      float a = acc[j] * sm.corr[r];
#pragma unroll 8
      for (int kk = 0; kk < kKeyTile; ++kk) a += sm.p[r][kk] * sm.v[kk][col];
      acc[j] = a;
    }
  }
  __syncthreads();  // final l visible
#pragma unroll
  for (int j = 0; j < kRowsPer; ++j) {
    const int r = row0 + j * kColThreads;
    if (r >= R) break;
    out[size_t(tile.x + r / G) * q_dim + (kh * G + r % G) * HD + col] =
        from_f32<T>(acc[j] / sm.l[r]);
  }
}

// ---- LM head input and greedy pick -------------------------------------------------

constexpr int kNormThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kNormThreads)
    rmsnorm_gather_kernel(const float* __restrict__ x, const int32_t* __restrict__ rows,
                          const T* __restrict__ w, int dim, float eps, T* __restrict__ out) {
  __shared__ float red[kNormThreads / 32];
  const float* xr = x + size_t(rows[blockIdx.x]) * dim;
  float ss = 0.0f;
  for (int k = threadIdx.x; k < dim; k += kNormThreads) ss += xr[k] * xr[k];
  ss = warp_sum(ss);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = ss;
  __syncthreads();  // red complete
  ss = 0.0f;
#pragma unroll
  for (int i = 0; i < kNormThreads / 32; ++i) ss += red[i];
  const float rstd = rsqrtf(ss / float(dim) + eps);
  T* o = out + size_t(blockIdx.x) * dim;
  for (int k = threadIdx.x; k < dim; k += kNormThreads)
    o[k] = from_f32<T>(xr[k] * rstd * to_f32(w[k]));
}

constexpr int kArgmaxThreads = 1024;

__device__ __forceinline__ uint32_t ordered(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// One block per row; key = (ordered logit, ~id): the max is the lowest id among ties.
__global__ void __launch_bounds__(kArgmaxThreads)
    argmax_rows_kernel(const float* __restrict__ logits, int vocab, int32_t* __restrict__ out) {
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

}  // namespace

// ---- launchers -------------------------------------------------------------------

bool paged_shape_supported(int n_heads, int n_kv_heads, int head_dim) {
  return n_kv_heads > 0 && n_heads % n_kv_heads == 0 && n_heads / n_kv_heads <= kPagedMaxGroup &&
         (head_dim == 32 || head_dim == 64 || head_dim == 128);
}

int paged_prefill_tile_tokens(int group) {
  return kPrefillRows / group;
}

template <typename T>
void paged_rope_kv(const float* qkv, PagedShape sh, int n_tokens, const float* inv_freq,
                   PagedMeta meta, float* q, T* k_pool, T* v_pool, cudaStream_t s) {
  launch({unsigned(n_tokens), 256, 0, s}, paged_rope_kv_kernel<T>, qkv, sh, inv_freq, meta, q,
         k_pool, v_pool);
}

template <typename T, int HD>
void decode_hd(const float* q, const T* k_pool, const T* v_pool, PagedShape sh, PagedMeta meta,
               const int32_t* rows, int n_rows, int n_splits, int part, float* part_o,
               float* part_ml, T* out, cudaStream_t s) {
  launch({dim3(unsigned(n_rows), unsigned(sh.n_kv_heads), unsigned(n_splits)), kDecodeWarps * 32, 0,
          s},
         paged_decode_kernel<T, HD>, q, k_pool, v_pool, sh, meta, rows, n_splits, part, part_o,
         part_ml, out);
  if (n_splits > 1)
    launch({dim3(unsigned(n_rows), unsigned(sh.n_heads)), unsigned(HD), 0, s},
           paged_decode_combine_kernel<T>, sh, meta, rows, n_splits, part,
           static_cast<const float*>(part_o), static_cast<const float*>(part_ml), out);
}

template <typename T>
void paged_attention_decode(const float* q, const T* k_pool, const T* v_pool, PagedShape sh,
                            PagedMeta meta, const int32_t* rows, int n_rows, int n_splits, int part,
                            float* part_o, float* part_ml, T* out, cudaStream_t s) {
  switch (sh.head_dim) {
    case 32:
      return decode_hd<T, 32>(q, k_pool, v_pool, sh, meta, rows, n_rows, n_splits, part, part_o,
                              part_ml, out, s);
    case 64:
      return decode_hd<T, 64>(q, k_pool, v_pool, sh, meta, rows, n_rows, n_splits, part, part_o,
                              part_ml, out, s);
    case 128:
      return decode_hd<T, 128>(q, k_pool, v_pool, sh, meta, rows, n_rows, n_splits, part, part_o,
                               part_ml, out, s);
    default:
      break;
  }
  std::fprintf(stderr, "hayate: paged attention: unsupported head_dim %d\n", sh.head_dim);
  std::abort();
}

template <typename T, int HD>
void prefill_hd(const float* q, const T* k_pool, const T* v_pool, PagedShape sh, PagedMeta meta,
                const int2* tiles, int n_tiles, T* out, cudaStream_t s) {
  launch({dim3(unsigned(n_tiles), unsigned(sh.n_kv_heads)), kPrefillThreads,
          sizeof(PrefillSmem<T, HD>), s},
         paged_prefill_kernel<T, HD>, q, k_pool, v_pool, sh, meta, tiles, out);
}

template <typename T>
void paged_attention_prefill(const float* q, const T* k_pool, const T* v_pool, PagedShape sh,
                             PagedMeta meta, const int2* tiles, int n_tiles, T* out,
                             cudaStream_t s) {
  switch (sh.head_dim) {
    case 32:
      return prefill_hd<T, 32>(q, k_pool, v_pool, sh, meta, tiles, n_tiles, out, s);
    case 64:
      return prefill_hd<T, 64>(q, k_pool, v_pool, sh, meta, tiles, n_tiles, out, s);
    case 128:
      return prefill_hd<T, 128>(q, k_pool, v_pool, sh, meta, tiles, n_tiles, out, s);
    default:
      break;
  }
  std::fprintf(stderr, "hayate: paged attention: unsupported head_dim %d\n", sh.head_dim);
  std::abort();
}

template <typename T, int HD>
void allow_smem() {
  HAYATE_CUDA_CHECK(cudaFuncSetAttribute(paged_prefill_kernel<T, HD>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         int(sizeof(PrefillSmem<T, HD>))));
}

void paged_attention_init() {
  allow_smem<half, 32>();
  allow_smem<half, 64>();
  allow_smem<half, 128>();
  allow_smem<__nv_bfloat16, 32>();
  allow_smem<__nv_bfloat16, 64>();
  allow_smem<__nv_bfloat16, 128>();
}

template <typename T>
void rmsnorm_gather(const float* x, const int32_t* rows, const T* w, int n, int dim, float eps,
                    T* out, cudaStream_t s) {
  launch({unsigned(n), kNormThreads, 0, s}, rmsnorm_gather_kernel<T>, x, rows, w, dim, eps, out);
}

void argmax_rows(const float* logits, int rows, int vocab, int32_t* out, cudaStream_t s) {
  launch({unsigned(rows), kArgmaxThreads, 0, s}, argmax_rows_kernel, logits, vocab, out);
}

#define HAYATE_PAGED_INSTANTIATE(T)                                                                \
  template void paged_rope_kv<T>(const float*, PagedShape, int, const float*, PagedMeta, float*,   \
                                 T*, T*, cudaStream_t);                                            \
  template void paged_attention_decode<T>(const float*, const T*, const T*, PagedShape, PagedMeta, \
                                          const int32_t*, int, int, int, float*, float*, T*,       \
                                          cudaStream_t);                                           \
  template void paged_attention_prefill<T>(const float*, const T*, const T*, PagedShape,           \
                                           PagedMeta, const int2*, int, T*, cudaStream_t);         \
  template void rmsnorm_gather<T>(const float*, const int32_t*, const T*, int, int, float, T*,     \
                                  cudaStream_t);
HAYATE_PAGED_INSTANTIATE(half)
HAYATE_PAGED_INSTANTIATE(__nv_bfloat16)
#undef HAYATE_PAGED_INSTANTIATE

}  // namespace hayate::cuda
