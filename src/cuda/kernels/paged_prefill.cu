// Paged prefill attention of the batched backend (declared in
// paged_attention.cuh): causal attention of chunked-prefill query tiles over
// the paged KV pool, Q K^T and P V on tensor cores (mma.sync, T inputs, fp32
// accumulate), online softmax in fp32, S and P in registers. An e4m3 pool
// (KvFp8) is widened to T on its way into shared memory (exact: every e4m3
// value is a T value), its scales folded into Q's and O's.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "cuda/kernels/common.cuh"
#include "cuda/kernels/fp8.cuh"
#include "cuda/kernels/mma.cuh"
#include "cuda/kernels/paged_common.cuh"
#include "cuda/launch.h"
#include "cuda/paged_attention.cuh"

namespace hayate::cuda {

namespace {

// Block (tile, kv head): the tile's tokens x the group's heads form up to 64
// query rows (row r = token r / G, head r % G); warp w owns rows [16 w, 16 w
// + 16). Keys [0, last position of the tile] stream through shared memory in
// 64-key tiles; everything between the two products stays in registers, as
// FlashAttention-2 does. Per key tile a warp does
// - S [16, 64] = Q K^T: Q's A fragments sit in registers for the whole block
//   (loaded once from the fp32 q, scaled by log2(e)/sqrt(HD), rounded to T);
//   K's B fragments come from shared memory by ldmatrix (a K row is a column
//   of K^T: dims contiguous); HD/16 x 8 mma;
// - the causal mask and online softmax on the C fragment (rows g, g + 8;
//   keys 2t, 2t + 1 of each 8-key n-tile): 2 shuffles per row for max and sum;
// - O [16, HD] += P V: the C fragment of S is, rounded to T, the A fragment
//   of P (keys 16 kk .. 16 kk + 15 = n-tiles 2 kk, 2 kk + 1); V's B fragments
//   by ldmatrix.trans (a V row holds one key: the mma wants key pairs per
//   dim); 4 x HD/8 mma.
// K and V tiles stream through two shared-memory buffers by cp.async, the
// next tile's copies in flight during this tile's math. The wmma kernel this
// replaced staged S, P and P V through shared memory between 16x16x16
// products with two blocks per SM: 1,565 against 258 us for max load's
// 128 x 128-token prefill step (paged_attn_lab, H200; bench/kernels/NOTES.md,
// prefill attention on mma.sync).
constexpr int kFaWarps = 4;
constexpr int kPrefillRows = kFaWarps * 16;  // query-head rows per block (tile tokens x group)
constexpr int kKeyTile = 64;                 // keys per shared-memory tile

template <typename T, int HD>
struct FaSmem {
  static constexpr int kLd = HD + 8;  // 16-byte pad: ldmatrix's 8 rows hit distinct banks
  T k[2][kKeyTile][kLd];
  T v[2][kKeyTile][kLd];
};

// 8 e4m3 codes (one 8-byte load) as 8 T values in one 16-byte store.
template <typename T>
__device__ __forceinline__ void widen8_to(T* dst, const uint2& u) {
  float f[8];
  unpack8_fp8(u, f);
  uint4 w;
  w.x = pack2<T>(f[0], f[1]);
  w.y = pack2<T>(f[2], f[3]);
  w.z = pack2<T>(f[4], f[5]);
  w.w = pack2<T>(f[6], f[7]);
  *reinterpret_cast<uint4*>(dst) = w;
}

template <typename T, typename KV, int HD>
__global__ void __launch_bounds__(kFaWarps * 32, 3)
    paged_prefill_mma_kernel(const float* __restrict__ q, const KV* __restrict__ k_pool,
                             const KV* __restrict__ v_pool, PagedShape sh, PagedMeta meta,
                             const int2* __restrict__ tiles, T* __restrict__ out) {
  griddep_enter();
  using Sm = FaSmem<T, HD>;
  constexpr int kKs = HD / 16;           // k-steps of Q K^T; dim pairs of P V
  constexpr int kNt = kKeyTile / 8;      // 8-key n-tiles of S
  constexpr int kChunks = HD / 8;        // 16-byte chunks per K or V row
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Sm& sm = *reinterpret_cast<Sm*>(smem_raw);
  const int kh = blockIdx.y;
  const int2 tile = tiles[blockIdx.x];
  const int G = sh.n_heads / sh.n_kv_heads, R = tile.y * G;
  const int kv_dim = sh.n_kv_heads * HD, q_dim = sh.n_heads * HD;
  const int32_t* table = table_of(meta, meta.tok_seq[tile.x], sh.max_blocks);
  const int last = meta.tok_pos[tile.x + tile.y - 1];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;

  // K and V rows [kt, kt + 64) into buffer b; keys past `last` are zeros
  // (their P is 0, and 0 * garbage could be NaN). e4m3 pools: loaded and
  // widened by the threads themselves (no cp.async; the commit keeps the
  // group count the loop's waits expect).
  auto load_tile = [&](int kt, int b) {
    for (int j = threadIdx.x; j < kKeyTile * kChunks; j += kFaWarps * 32) {
      const int kk = j / kChunks, ch = j % kChunks, p = kt + kk;
      const bool ok = p <= last;
      const size_t off =
          ok ? (size_t(table[p / sh.block_size]) * sh.block_size + p % sh.block_size) * kv_dim +
                   kh * HD + ch * 8
             : 0;
      if constexpr (kKvFp8<KV>) {
        const uint2 zero = make_uint2(0, 0);
        widen8_to(&sm.k[b][kk][ch * 8], ok ? kv_load8(k_pool + off) : zero);
        widen8_to(&sm.v[b][kk][ch * 8], ok ? kv_load8(v_pool + off) : zero);
      } else {
        cp_async16(&sm.k[b][kk][ch * 8], k_pool + off, ok);
        cp_async16(&sm.v[b][kk][ch * 8], v_pool + off, ok);
      }
    }
    cp_async_commit();
  };
  load_tile(0, 0);

  // This lane's rows: r0 = 16 warp + g and r0 + 8 (token r / G, head r % G).
  const int r0 = warp * 16 + g, r1 = r0 + 8;
  const int pos0 = r0 < R ? meta.tok_pos[tile.x + r0 / G] : -1;
  const int pos1 = r1 < R ? meta.tok_pos[tile.x + r1 / G] : -1;
  int warp_last = max(pos0, pos1);  // the warp's last visible key
  warp_last = max(warp_last, __shfl_xor_sync(0xffffffffu, warp_last, 4));
  warp_last = max(warp_last, __shfl_xor_sync(0xffffffffu, warp_last, 8));
  warp_last = max(warp_last, __shfl_xor_sync(0xffffffffu, warp_last, 16));

  // Q's A fragments: qa[ks] = {row r0 cols 16ks + 2t, +1; r1 same; r0 +8; r1 +8}.
  const float scale = q_scale(HD, sh);
  uint32_t qa[kKs][4];
  {
    const float* q0 = q + size_t(tile.x + r0 / G) * q_dim + (kh * G + r0 % G) * HD;
    const float* q1 = q + size_t(tile.x + r1 / G) * q_dim + (kh * G + r1 % G) * HD;
#pragma unroll
    for (int ks = 0; ks < kKs; ++ks)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int col = 16 * ks + 8 * h + 2 * t;
        float2 a = make_float2(0.0f, 0.0f), b = a;
        if (pos0 >= 0) a = *reinterpret_cast<const float2*>(q0 + col);
        if (pos1 >= 0) b = *reinterpret_cast<const float2*>(q1 + col);
        qa[ks][2 * h] = pack2<T>(a.x * scale, a.y * scale);
        qa[ks][2 * h + 1] = pack2<T>(b.x * scale, b.y * scale);
      }
  }

  float o[2 * kKs][4];  // O n-tile n: dims 8n + 2t, +1 of rows r0 (0, 1) and r1 (2, 3)
#pragma unroll
  for (int n = 0; n < 2 * kKs; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // l: this lane's share

  const int n_tiles = last / kKeyTile + 1;
  for (int it = 0; it < n_tiles; ++it) {
    const int kt = it * kKeyTile, b = it & 1;
    if (it + 1 < n_tiles) load_tile(kt + kKeyTile, b ^ 1);
    else cp_async_commit();  // an empty group: wait<1> below still means "tile it landed"
    cp_async_wait<1>();
    __syncthreads();  // tile it visible to every warp
    if (kt <= warp_last) {
      float s[kNt][4];
#pragma unroll
      for (int n = 0; n < kNt; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < kKs; ++ks)
#pragma unroll
        for (int np = 0; np < kNt / 2; ++np) {  // keys 16 np .. 16 np + 15
          uint32_t kb[4];  // matrices: keys +0 / +8 (l / 16) x dims +0 / +8 (l / 8 % 2)
          ldmatrix_x4(kb, &sm.k[b][16 * np + (lane / 16) * 8 + lane % 8][16 * ks + (lane / 8 % 2) * 8]);
          mma16816<T>(s[2 * np], qa[ks][0], qa[ks][1], qa[ks][2], qa[ks][3], kb[0], kb[1]);
          mma16816<T>(s[2 * np + 1], qa[ks][0], qa[ks][1], qa[ks][2], qa[ks][3], kb[2], kb[3]);
        }
      float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
      for (int n = 0; n < kNt; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = kt + 8 * n + 2 * t + e;
          if (key > pos0) s[n][e] = -INFINITY;
          if (key > pos1) s[n][2 + e] = -INFINITY;
          mx0 = fmaxf(mx0, s[n][e]);
          mx1 = fmaxf(mx1, s[n][2 + e]);
        }
#pragma unroll
      for (int x = 1; x <= 2; x *= 2) {
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, x));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, x));
      }
      // A row that sees no key yet (or a padding row) stays at zero, NaN-free.
      const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
      const float u0 = n0 == -INFINITY ? 0.0f : n0, u1 = n1 == -INFINITY ? 0.0f : n1;
      const float c0 = exp2f(m0 - u0), c1 = exp2f(m1 - u1);
      m0 = n0;
      m1 = n1;
      float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
      for (int n = 0; n < kNt; ++n) {
        s[n][0] = exp2f(s[n][0] - u0);
        s[n][1] = exp2f(s[n][1] - u0);
        s[n][2] = exp2f(s[n][2] - u1);
        s[n][3] = exp2f(s[n][3] - u1);
        sum0 += s[n][0] + s[n][1];
        sum1 += s[n][2] + s[n][3];
      }
      l0 = l0 * c0 + sum0;
      l1 = l1 * c1 + sum1;
#pragma unroll
      for (int n = 0; n < 2 * kKs; ++n) {
        o[n][0] *= c0;
        o[n][1] *= c0;
        o[n][2] *= c1;
        o[n][3] *= c1;
      }
#pragma unroll
      for (int kk = 0; kk < kKeyTile / 16; ++kk) {
        const uint32_t pa0 = pack2<T>(s[2 * kk][0], s[2 * kk][1]),
                       pa1 = pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                       pa2 = pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                       pa3 = pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
        for (int dp = 0; dp < kKs; ++dp) {  // dims 16 dp .. 16 dp + 15
          uint32_t vb[4];  // matrices: keys +0 / +8 (l / 8 % 2) x dims +0 / +8 (l / 16)
          ldmatrix_x4_trans(vb, &sm.v[b][16 * kk + (lane / 8 % 2) * 8 + lane % 8][16 * dp + (lane / 16) * 8]);
          mma16816<T>(o[2 * dp], pa0, pa1, pa2, pa3, vb[0], vb[1]);
          mma16816<T>(o[2 * dp + 1], pa0, pa1, pa2, pa3, vb[2], vb[3]);
        }
      }
    }
    __syncthreads();  // buffer b read by every warp before tile it + 2 lands in it
  }
#pragma unroll
  for (int x = 1; x <= 2; x *= 2) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, x);
    l1 += __shfl_xor_sync(0xffffffffu, l1, x);
  }
  // Rows with a position have seen key 0, so l > 0.
  if (pos0 >= 0) {
    T* dst = out + size_t(tile.x + r0 / G) * q_dim + (kh * G + r0 % G) * HD + 2 * t;
    const float inv = sh.v_scale / l0;
#pragma unroll
    for (int n = 0; n < 2 * kKs; ++n)
      *reinterpret_cast<uint32_t*>(dst + 8 * n) = pack2<T>(o[n][0] * inv, o[n][1] * inv);
  }
  if (pos1 >= 0) {
    T* dst = out + size_t(tile.x + r1 / G) * q_dim + (kh * G + r1 % G) * HD + 2 * t;
    const float inv = sh.v_scale / l1;
#pragma unroll
    for (int n = 0; n < 2 * kKs; ++n)
      *reinterpret_cast<uint32_t*>(dst + 8 * n) = pack2<T>(o[n][2] * inv, o[n][3] * inv);
  }
}

}  // namespace

int paged_prefill_tile_tokens(int group) {
  return kPrefillRows / group;
}

template <typename T, typename KV, int HD>
void prefill_hd(const float* q, const KV* k_pool, const KV* v_pool, PagedShape sh, PagedMeta meta,
                const int2* tiles, int n_tiles, T* out, cudaStream_t s) {
  launch({dim3(unsigned(n_tiles), unsigned(sh.n_kv_heads)), kFaWarps * 32, sizeof(FaSmem<T, HD>),
          s, sh.pdl},
         paged_prefill_mma_kernel<T, KV, HD>, q, k_pool, v_pool, sh, meta, tiles, out);
}

template <typename T, typename KV>
void paged_attention_prefill(const float* q, const KV* k_pool, const KV* v_pool, PagedShape sh,
                             PagedMeta meta, const int2* tiles, int n_tiles, T* out,
                             cudaStream_t s) {
  switch (sh.head_dim) {
    case 32:
      return prefill_hd<T, KV, 32>(q, k_pool, v_pool, sh, meta, tiles, n_tiles, out, s);
    case 64:
      return prefill_hd<T, KV, 64>(q, k_pool, v_pool, sh, meta, tiles, n_tiles, out, s);
    case 128:
      return prefill_hd<T, KV, 128>(q, k_pool, v_pool, sh, meta, tiles, n_tiles, out, s);
    default:
      break;
  }
  std::fprintf(stderr, "hayate: paged attention: unsupported head_dim %d\n", sh.head_dim);
  std::abort();
}

template <typename T, typename KV>
void allow_smem() {
  const auto set = [](auto kernel, size_t bytes) {
    HAYATE_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  };
  set(paged_prefill_mma_kernel<T, KV, 32>, sizeof(FaSmem<T, 32>));
  set(paged_prefill_mma_kernel<T, KV, 64>, sizeof(FaSmem<T, 64>));
  set(paged_prefill_mma_kernel<T, KV, 128>, sizeof(FaSmem<T, 128>));
}

void paged_attention_init() {
  allow_smem<half, half>();
  allow_smem<__nv_bfloat16, __nv_bfloat16>();
  allow_smem<half, KvFp8>();
  allow_smem<__nv_bfloat16, KvFp8>();
}

#define HAYATE_PAGED_PREFILL_INSTANTIATE(T, KV)                                            \
  template void paged_attention_prefill<T, KV>(const float*, const KV*, const KV*, PagedShape, \
                                               PagedMeta, const int2*, int, T*, cudaStream_t);
HAYATE_PAGED_PREFILL_INSTANTIATE(half, half)
HAYATE_PAGED_PREFILL_INSTANTIATE(__nv_bfloat16, __nv_bfloat16)
HAYATE_PAGED_PREFILL_INSTANTIATE(half, KvFp8)
HAYATE_PAGED_PREFILL_INSTANTIATE(__nv_bfloat16, KvFp8)
#undef HAYATE_PAGED_PREFILL_INSTANTIATE

}  // namespace hayate::cuda
