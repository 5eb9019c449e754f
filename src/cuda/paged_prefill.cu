// Paged prefill attention of the batched backend (declared in
// paged_attention.cuh): causal attention of chunked-prefill query tiles over
// the paged KV pool, Q K^T and P V on tensor cores (wmma, T inputs, fp32
// accumulate), online softmax in fp32.
#include <mma.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "cuda/common.cuh"
#include "cuda/launch.h"
#include "cuda/paged_attention.cuh"
#include "cuda/paged_common.cuh"

namespace hayate::cuda {

namespace {

// ---- prefill attention -----------------------------------------------------------

// Block (tile, kv head): the tile's tokens x the group's heads form up to 64
// query rows (row r = token r / G, head r % G); warp w owns rows [16 w, 16 w
// + 16). Keys [0, last position of the tile] stream through shared memory in
// tiles of 64 (K and V as T). Per key tile each warp computes S = Q K^T on
// tensor cores (wmma 16x16x16, fp32 accumulate) into its own scratch, does
// the online softmax of its 16 rows (2 lanes per row), writes P in T, and
// computes P V on tensor cores into the same scratch; lane l keeps the
// output columns [l HD/32, (l+1) HD/32) of its warp's 16 rows in registers.
// Only the K/V tile loads need the whole block (__syncthreads); the rest is
// per warp (__syncwarp).
constexpr int kPrefillThreads = 128;
constexpr int kPrefillRows = 64;  // query-head rows per prefill block (tile tokens x group)
constexpr int kKeyTile = 64;      // keys per shared-memory tile

template <typename T, int HD>
struct PrefillSmem {
  static constexpr int kLd = HD + 8;  // T row stride (16-byte multiple, fewer bank conflicts)
  static constexpr int kSLd = kKeyTile + 4;  // fp32 scores row stride
  static constexpr int kOLd = HD + 4;        // fp32 P V row stride
  T q[kPrefillRows][kLd];
  T k[kKeyTile][kLd];
  T v[kKeyTile][kLd];
  T p[kPrefillRows][kKeyTile + 8];
  // Per warp: scores [16][kSLd], then P V [16][kOLd] (the warp's own rows only).
  float scratch[kPrefillThreads / 32][16 * (kOLd > kSLd ? kOLd : kSLd)];
  float corr[kPrefillRows];
  int qpos[kPrefillRows];
};

template <typename T, int HD>
__global__ void __launch_bounds__(kPrefillThreads)
    paged_prefill_kernel(const float* __restrict__ q, const T* __restrict__ k_pool,
                         const T* __restrict__ v_pool, PagedShape sh, PagedMeta meta,
                         const int2* __restrict__ tiles, T* __restrict__ out) {
  using namespace nvcuda;
  using Sm = PrefillSmem<T, HD>;
  constexpr int kCpl = HD / 32;  // output columns per lane
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Sm& sm = *reinterpret_cast<Sm*>(smem_raw);
  const int kh = blockIdx.y;
  const int2 tile = tiles[blockIdx.x];
  const int G = sh.n_heads / sh.n_kv_heads, R = tile.y * G;
  const int kv_dim = sh.n_kv_heads * HD, q_dim = sh.n_heads * HD;
  const int32_t* table = table_of(meta, meta.tok_seq[tile.x], sh.max_blocks);
  const int last = meta.tok_pos[tile.x + tile.y - 1];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float scale = rsqrtf(float(HD)) * 1.4426950408889634f;  // log2(e): softmax via exp2

  for (int j = threadIdx.x; j < kPrefillRows * HD; j += kPrefillThreads) {
    const int r = j / HD, dim = j % HD;
    sm.q[r][dim] = from_f32<T>(
        r < R ? q[size_t(tile.x + r / G) * q_dim + (kh * G + r % G) * HD + dim] * scale : 0.0f);
  }
  for (int r = threadIdx.x; r < kPrefillRows; r += kPrefillThreads)
    sm.qpos[r] = r < R ? meta.tok_pos[tile.x + r / G] : -1;

  // Softmax state: lane pair (2 r', 2 r' + 1) owns warp row r' = lane / 2.
  const int my_row = warp * 16 + lane / 2, half_keys = kKeyTile / 2, k_off = (lane % 2) * half_keys;
  float m_run = -INFINITY, l_run = 0.0f;
  float o[16][kCpl];
#pragma unroll
  for (int r = 0; r < 16; ++r)
#pragma unroll
    for (int c = 0; c < kCpl; ++c) o[r][c] = 0.0f;
  float* scr = sm.scratch[warp];

  for (int kt = 0; kt <= last; kt += kKeyTile) {
    __syncthreads();  // previous tile's K, V fully used (first pass: q, qpos written)
    constexpr int kChunks = HD / 8;  // 16-byte chunks per key row
    for (int j = threadIdx.x; j < kKeyTile * kChunks; j += kPrefillThreads) {
      const int kk = j / kChunks, ch = j % kChunks, p = kt + kk;
      uint4 kv = make_uint4(0, 0, 0, 0), vv = kv;
      if (p <= last) {
        const size_t off =
            (size_t(table[p / sh.block_size]) * sh.block_size + p % sh.block_size) * kv_dim +
            kh * HD + ch * 8;
        kv = *reinterpret_cast<const uint4*>(k_pool + off);
        vv = *reinterpret_cast<const uint4*>(v_pool + off);
      }
      *reinterpret_cast<uint4*>(&sm.k[kk][ch * 8]) = kv;
      *reinterpret_cast<uint4*>(&sm.v[kk][ch * 8]) = vv;
    }
    __syncthreads();               // K, V tile loaded
    if (warp * 16 >= R) continue;  // no query rows in this warp (short tail tile)

    // S [16, 64] = Q [16, HD] K^T: K rows as a column-major B operand.
    {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> s[kKeyTile / 16];
#pragma unroll
      for (int n = 0; n < kKeyTile / 16; ++n) wmma::fill_fragment(s[n], 0.0f);
#pragma unroll
      for (int kd = 0; kd < HD / 16; ++kd) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::load_matrix_sync(a, &sm.q[warp * 16][kd * 16], Sm::kLd);
#pragma unroll
        for (int n = 0; n < kKeyTile / 16; ++n) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b;
          wmma::load_matrix_sync(b, &sm.k[n * 16][kd * 16], Sm::kLd);
          wmma::mma_sync(s[n], a, b, s[n]);
        }
      }
#pragma unroll
      for (int n = 0; n < kKeyTile / 16; ++n)
        wmma::store_matrix_sync(scr + n * 16, s[n], Sm::kSLd, wmma::mem_row_major);
    }
    __syncwarp();  // scores in scratch
    {
      const float* srow = scr + (lane / 2) * Sm::kSLd + k_off;
      const int qp = sm.qpos[my_row];
      float mx = -INFINITY;
      for (int kk = 0; kk < half_keys; ++kk)
        if (kt + k_off + kk <= qp) mx = fmaxf(mx, srow[kk]);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      // Padding rows (qp = -1) see no key: keep them at zero without NaNs.
      const float m_new = fmaxf(m_run, mx), m_use = m_new == -INFINITY ? 0.0f : m_new;
      const float c = exp2f(m_run - m_use);
      float sum = 0.0f;
      for (int kk = 0; kk < half_keys; ++kk) {
        const float e = kt + k_off + kk <= qp ? exp2f(srow[kk] - m_use) : 0.0f;
        sm.p[my_row][k_off + kk] = from_f32<T>(e);
        sum += e;
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      l_run = l_run * c + sum;
      m_run = m_new;
      if (lane % 2 == 0) sm.corr[my_row] = c;
    }
    __syncwarp();  // P and corrections written, scores read
    // PV [16, HD] = P [16, 64] V [64, HD], into the scratch (scores are dead).
    {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[HD / 16];
#pragma unroll
      for (int n = 0; n < HD / 16; ++n) wmma::fill_fragment(acc[n], 0.0f);
#pragma unroll
      for (int kk = 0; kk < kKeyTile / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::load_matrix_sync(a, &sm.p[warp * 16][kk * 16], kKeyTile + 8);
#pragma unroll
        for (int n = 0; n < HD / 16; ++n) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;
          wmma::load_matrix_sync(b, &sm.v[kk * 16][n * 16], Sm::kLd);
          wmma::mma_sync(acc[n], a, b, acc[n]);
        }
      }
#pragma unroll
      for (int n = 0; n < HD / 16; ++n)
        wmma::store_matrix_sync(scr + n * 16, acc[n], Sm::kOLd, wmma::mem_row_major);
    }
    __syncwarp();  // P V in scratch
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      const float c = sm.corr[warp * 16 + r];
#pragma unroll
      for (int cc = 0; cc < kCpl; ++cc)
        o[r][cc] = o[r][cc] * c + scr[r * Sm::kOLd + lane * kCpl + cc];
    }
    __syncwarp();  // scratch read before the next tile's scores overwrite it
  }
  // Each lane pair knows l of its row; share it through corr (now free).
  if (lane % 2 == 0) sm.corr[my_row] = l_run;
  __syncwarp();  // final l visible to the warp
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const int row = warp * 16 + r;
    if (row >= R) break;
    const float inv = 1.0f / sm.corr[row];
#pragma unroll
    for (int cc = 0; cc < kCpl; ++cc)
      out[size_t(tile.x + row / G) * q_dim + (kh * G + row % G) * HD + lane * kCpl + cc] =
          from_f32<T>(o[r][cc] * inv);
  }
}

}  // namespace

int paged_prefill_tile_tokens(int group) {
  return kPrefillRows / group;
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

#define HAYATE_PAGED_PREFILL_INSTANTIATE(T)                                              \
  template void paged_attention_prefill<T>(const float*, const T*, const T*, PagedShape, \
                                           PagedMeta, const int2*, int, T*, cudaStream_t);
HAYATE_PAGED_PREFILL_INSTANTIATE(half)
HAYATE_PAGED_PREFILL_INSTANTIATE(__nv_bfloat16)
#undef HAYATE_PAGED_PREFILL_INSTANTIATE

}  // namespace hayate::cuda
