// Paged decode attention on tensor cores (head_dim 128, group <= 8): the
// default split decode kernel of the batched backend at head_dim 128
// (bench/kernels/NOTES.md, paged decode attention on tensor cores), and the
// streaming kernel (a warp per (row, kv head), further down; NOTES.md, the
// streaming decode kernel) that replaces it where every row of a launch is one split
// and the launch has many pairs. Both run the same 16-key step below.
//
// Why: v2 (paged_attention.cu) spends ~600 instructions per warp per 4 KB of
// K/V (fp32 converts, 2 x 128 FMAs, 16-lane shuffle dot products, per-key
// exp2) and is half issue-bound (52 % of the read probe at 256 x 200 keys).
// Here a warp takes 16 keys per step (8 KB of K and V) and does:
// - S = Q K^T with mma.sync m16n8k16: A = Q [16 rows = the G <= 8 query heads
//   of the kv head, rest zero; 16 dims], B = K^T [16 dims, 8 keys]; 2 key
//   tiles x 8 dim steps = 16 mma. The sum over dims is order-free, so each
//   lane loads K with plain 16-byte loads (lane (g, t): key g of the tile,
//   dims (4 j + t) 8 .. + 7, j < 4) and Q is packed in the same dim order.
// - online softmax per step on the S fragment (head g, keys 2t, 2t+1 of each
//   tile): 2 shuffles for the max, 4 exp2, P rounded to T;
// - O^T += V^T P^T with m16n8k16: A = V^T [16 dims, 16 keys], B = P^T [16
//   keys, 8 heads] which is exactly the S fragment (no shuffle); 8 dim tiles =
//   8 mma. V rows are loaded as 16 bytes (lane: dims 16 g .. 16 g + 15 of keys
//   2t, 2t+1, 2t+8, 2t+9) and paired across keys with byte permutes.
// Per step ~24 mma + 32 permutes + ~60 other instructions against ~1200 for
// v2 on the same bytes. Q and P are rounded to T (fp32 accumulation), as in
// the tensor-core prefill. Splits, merge and combine are v2's (paged_decode.cuh).
// e4m3 pools (--kv-cache-dtype fp8): K and V codes load as 8 or 16 bytes and
// turn into f16 pairs (cvt.rn.f16x2.e4m3x2, exact) where the step uses them,
// so the steps run on f16 mma whatever T is (MmaT); k_scale joins Q's scale,
// v_scale the output's.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <type_traits>

#include "cuda/kernels/common.cuh"
#include "cuda/kernels/fp8.cuh"
#include "cuda/kernels/mma.cuh"
#include "cuda/kernels/paged_common.cuh"
#include "cuda/kernels/paged_decode.cuh"
#include "cuda/kernels/rope.cuh"
#include "cuda/launch.h"

namespace hayate::cuda {

namespace {

constexpr int kHd = 128, kRowsG = 8;  // head_dim; query-head rows kept (group <= 8)

__device__ __forceinline__ uint32_t word(const uint4& u, int r) {
  return r == 0 ? u.x : r == 1 ? u.y : r == 2 ? u.z : u.w;
}

// The mma element type of a pool of KV: T's own, f16 for e4m3 codes.
template <typename T, typename KV>
using MmaT = std::conditional_t<kKvFp8<KV>, half, T>;


// ---- one 16-key step of a warp, shared by the split and streaming kernels ----
// Lane (g = lane / 4, t = lane % 4) as in the mma fragments.

// A fragment of Q for dim step 2j + h: {qa[j][2h], 0, qa[j][2h + 1], 0}
// (rows g + 8 are zero); qa[j][r] = head g's dims (4j + t) 8 + 2r, + 1, times
// the softmax scale in log2 units. Heads g >= Gr are zero.
template <typename T>
__device__ __forceinline__ void load_q(const float* __restrict__ q, const PagedShape& sh, int row,
                                       int kh, int Gr, int g, int t, uint32_t (&qa)[4][4]) {
  // On e4m3 pools T is f16 even for bf16 models: q * scale stays far inside
  // f16's normal range for scales near 1 (a k_scale below ~1e-3 would push
  // small q entries into subnormals, losing bits).
  const float scale = q_scale(kHd, sh);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    float4 lo = make_float4(0, 0, 0, 0), hi = lo;
    if (g < Gr) {  // 32-byte aligned: q rows and head offsets are multiples of 8 floats
      const float4* qp = reinterpret_cast<const float4*>(q + size_t(row) * sh.n_heads * kHd +
                                                         (kh * Gr + g) * kHd + (4 * j + t) * 8);
      lo = qp[0];
      hi = qp[1];
    }
    qa[j][0] = pack2<T>(lo.x * scale, lo.y * scale);
    qa[j][1] = pack2<T>(lo.z * scale, lo.w * scale);
    qa[j][2] = pack2<T>(hi.x * scale, hi.y * scale);
    qa[j][3] = pack2<T>(hi.z * scale, hi.w * scale);
  }
}

// load_q's fragments from the QKV product's row instead of q (the split
// kernel with RoPE folded in, paged_decode_mma_rope_kernel): head g's dims as
// T, the bias added (Qwen2's; null: none), pairs (i, i + 64) turned by cs,
// then load_q's scale and rounding. A lane's dims (4j + t) 8 .. + 7 and
// (4(j + 2) + t) 8 .. + 7 are such pairs (j < 2), so the turn needs no
// exchange. src: the row's QKV [(n_heads + 2 n_kv_heads) kHd], 16-byte aligned.
template <typename M, typename T>
__device__ __forceinline__ void load_q_roped(const T* __restrict__ src, const T* __restrict__ bias,
                                             const PagedShape& sh, int kh, int Gr, int g, int t,
                                             const float (&cs)[2][kHd / 2], uint32_t (&qa)[4][4]) {
  const float scale = q_scale(kHd, sh);
  float f[4][8];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int e = (kh * Gr + g) * kHd + (4 * j + t) * 8;
#pragma unroll
    for (int r = 0; r < 8; ++r) f[j][r] = 0.0f;
    if (g < Gr) {
      unpack8<T>(*reinterpret_cast<const uint4*>(src + e), f[j]);
      if (bias)
#pragma unroll
        for (int r = 0; r < 8; ++r) f[j][r] += to_f32(bias[e + r]);
    }
  }
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int r = 0; r < 8; ++r) {
      const int i = (4 * j + t) * 8 + r;
      rope_turn(f[j][r], f[j + 2][r], cs[0][i], cs[1][i]);
    }
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int r = 0; r < 4; ++r) qa[j][r] = pack2<M>(f[j][2 * r] * scale, f[j][2 * r + 1] * scale);
}

// K and V stay in registers as loaded (e4m3 codes or T) and turn into MmaT
// where the step uses them, so a prefetched step's loads (the streaming
// kernel's) stay in flight through the current step's math instead of
// waiting for conversions right after the load.

// 8 elements of a K or V row as loaded -> 8 MmaT (e4m3: cvt.rn.f16x2.e4m3x2).
template <typename KV>
__device__ __forceinline__ uint4 as_mma(const KvVec<KV>& r) {
  if constexpr (kKvFp8<KV>)
    return e4m3x8_to_h8(r);
  else
    return r;
}

// The V elements of one key a lane holds: dims 16g .. 16g + 15, as loaded
// (16 codes: one 16-byte load; 16 T: two).
template <typename KV>
struct VRaw {
  uint4 w[kKvFp8<KV> ? 1 : 2];
};
// Dims 16g + 8u .. + 7 of v as 8 MmaT.
template <typename KV>
__device__ __forceinline__ uint4 v_half(const VRaw<KV>& v, int u) {
  if constexpr (kKvFp8<KV>)
    return e4m3x8_to_h8(u == 0 ? make_uint2(v.w[0].x, v.w[0].y) : make_uint2(v.w[0].z, v.w[0].w));
  else
    return v.w[u];
}

// K of keys [base, base + 16) (zeros from k1 on): lane (g, t) holds key
// 8 nt + g, dims (4j + t) 8 .. + 7 in kr[nt][j]. off(key): the key's element
// offset in the pool (its kv head's column included).
template <typename KV, typename Off>
__device__ __forceinline__ void load_k(KvVec<KV> (&kr)[2][4], const KV* __restrict__ k_pool,
                                       Off off, int base, int k1, int g, int t) {
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    const int key = base + 8 * nt + g;
#pragma unroll
    for (int j = 0; j < 4; ++j) kr[nt][j] = KvVec<KV>{};
    if (key < k1) {
      const KvVec<KV>* kp = reinterpret_cast<const KvVec<KV>*>(k_pool + off(key));
#pragma unroll
      for (int j = 0; j < 4; ++j) kr[nt][j] = kp[4 * j + t];
    }
  }
}

// V of keys base + 2t, 2t + 1, 2t + 8, 2t + 9 (vr[e]), dims 16g .. 16g + 15;
// zeros from k1 on (P = 0 must not meet NaN).
template <typename KV, typename Off>
__device__ __forceinline__ void load_v(VRaw<KV> (&vr)[4], const KV* __restrict__ v_pool, Off off,
                                       int base, int k1, int g, int t) {
  constexpr int kW = kKvFp8<KV> ? 1 : 2;  // 16-byte loads per key
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int key = base + 2 * t + (e & 1) + (e >> 1) * 8;
    vr[e] = VRaw<KV>{};
    if (key < k1) {
      const uint4* vp = reinterpret_cast<const uint4*>(v_pool + off(key)) + kW * g;
#pragma unroll
      for (int w = 0; w < kW; ++w) vr[e].w[w] = vp[w];
    }
  }
}

// S [head g][keys 8nt + 2t, + 1] in s[nt][0..1] (s[nt][2..3]: zero rows).
template <typename T, typename KV>
__device__ __forceinline__ void scores(const uint32_t (&qa)[4][4], const KvVec<KV> (&kr)[2][4],
                                       float (&s)[2][4]) {
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint4 k = as_mma<KV>(kr[nt][j]);
#pragma unroll
      for (int h = 0; h < 2; ++h)
        mma16816<T>(s[nt], qa[j][2 * h], 0u, qa[j][2 * h + 1], 0u, word(k, 2 * h),
                    word(k, 2 * h + 1));
    }
  }
}

// Online softmax of the step's scores (keys from k1 on masked; key `base` <
// k1) and O^T += V^T P^T. o[4u + r]: O^T tile (dims 16g + 8u + 2r in c0/c1,
// + 1 in c2/c3; heads 2t, 2t + 1); m_run: head g's max (log2 units), l_run:
// this lane's share of head g's sum.
template <typename T, typename KV>
__device__ __forceinline__ void softmax_pv(float (&s)[2][4], int base, int k1, int t, float& m_run,
                                           float& l_run, const VRaw<KV> (&vr)[4],
                                           float (&o)[8][4]) {
  float mx = -INFINITY;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      if (base + 8 * nt + 2 * t + e >= k1) s[nt][e] = -INFINITY;
      mx = fmaxf(mx, s[nt][e]);
    }
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  // mx is finite: key `base` (< k1) is key 0 of tile 0.
  const float m_new = fmaxf(m_run, mx), corr = exp2f(m_run - m_new);
  m_run = m_new;
  float p[2][2];
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) p[nt][e] = exp2f(s[nt][e] - m_new);
  l_run = l_run * corr + (p[0][0] + p[0][1]) + (p[1][0] + p[1][1]);
  const uint32_t pb0 = pack2<T>(p[0][0], p[0][1]), pb1 = pack2<T>(p[1][0], p[1][1]);
  // The O^T fragment holds heads 2t and 2t + 1, whose corr sits in lanes 8t, 8t + 4.
  const float c0 = __shfl_sync(0xffffffffu, corr, 8 * t),
              c1 = __shfl_sync(0xffffffffu, corr, 8 * t + 4);
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const uint4 v0 = v_half<KV>(vr[0], u), v1 = v_half<KV>(vr[1], u);
    const uint4 v2 = v_half<KV>(vr[2], u), v3 = v_half<KV>(vr[3], u);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      float(&c)[4] = o[4 * u + r];
      c[0] *= c0;
      c[1] *= c1;
      c[2] *= c0;
      c[3] *= c1;
      const uint32_t x0 = word(v0, r), x1 = word(v1, r);
      const uint32_t x2 = word(v2, r), x3 = word(v3, r);
      // A rows: dim (g) = low halves, dim + 1 (g + 8) = high halves; cols: key pairs.
      mma16816<T>(c, __byte_perm(x0, x1, 0x5410), __byte_perm(x0, x1, 0x7632),
                  __byte_perm(x2, x3, 0x5410), __byte_perm(x2, x3, 0x7632), pb0, pb1);
    }
  }
}

// f(dim, c) for each of the lane's O^T tiles: c = o[4u + r] holds dims dim
// (c0, c1) and dim + 1 (c2, c3) of heads 2t (c0, c2) and 2t + 1 (c1, c3).
template <typename F>
__device__ __forceinline__ void for_each_o_tile(const float (&o)[8][4], int g, F f) {
#pragma unroll
  for (int u = 0; u < 2; ++u)
#pragma unroll
    for (int r = 0; r < 4; ++r) f(16 * g + 8 * u + 2 * r, o[4 * u + r]);
}

// ---- the split kernel: a block of 4 warps per (row, kv head, split) ----

// Split sp (keys [k0, k1)) of row i = rows[i], kv head kh, by the block's 4
// warps (16-key steps round-robin). Ends with the block's merge (a
// __syncthreads inside).
// qa: the lane's Q fragments (load_q or load_q_roped). The pools are not
// declared read-only here: the RoPE kernel has written its new row just before.
template <typename T, typename KV>
__device__ __forceinline__ void mma_split(
    const uint32_t (&qa)[4][4], const KV* k_pool, const KV* v_pool, const PagedShape& sh,
    const PagedMeta& meta, int i, int row, int kh, int sp, int2 plan, int len, int n_splits,
    float* __restrict__ part_o, float* __restrict__ part_ml, T* __restrict__ out,
    float (&s_acc)[kDecodeWarps][kRowsG][kHd], float (&s_ml)[kDecodeWarps][kRowsG][2]) {
  const int k0 = sp * plan.y, k1 = min(len, k0 + plan.y);
  const int Gr = sh.n_heads / sh.n_kv_heads, kv_dim = sh.n_kv_heads * kHd, bs = sh.block_size;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int32_t* table = table_of(meta, meta.tok_seq[row], sh.max_blocks);

  using M = MmaT<T, KV>;
  float o[8][4];
#pragma unroll
  for (int mt = 0; mt < 8; ++mt) o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.0f;
  float m_run = -INFINITY, l_run = 0.0f;
  const size_t col = size_t(kh) * kHd;
  // Steps start at multiples of 16 (split parts are), so with bs % 16 == 0 a
  // step's 16 keys share one KV block: one table read per step.
  // The table entries of the warp's first 32 steps are read up front (lane j:
  // step j), so a step's K/V loads do not wait on a table load first.
  const bool one_block = bs % 16 == 0;
  constexpr int kStride = kDecodeWarps * 16;  // keys between a warp's steps
  int tab = 0;
  if (one_block && k0 + warp * 16 + lane * kStride < k1)
    tab = table[(k0 + warp * 16 + lane * kStride) / bs];
  int step = 0;
  for (int base = k0 + warp * 16; base < k1; base += kStride, ++step) {
    size_t blk = 0;
    if (one_block) {
      const int e = step < 32 ? __shfl_sync(0xffffffffu, tab, step) : table[base / bs];
      blk = (size_t(e) * bs + base % bs) * kv_dim + col;
    }
    auto off = [&](int key) {
      return one_block ? blk + size_t(key - base) * kv_dim
                       : (size_t(table[key / bs]) * bs + key % bs) * kv_dim + col;
    };
    KvVec<KV> kr[2][4];
    VRaw<KV> vr[4];
    load_k<KV>(kr, k_pool, off, base, k1, g, t);
    load_v<KV>(vr, v_pool, off, base, k1, g, t);
    float s[2][4];
    scores<M, KV>(qa, kr, s);
    softmax_pv<M, KV>(s, base, k1, t, m_run, l_run, vr, o);
  }
  l_run += __shfl_xor_sync(0xffffffffu, l_run, 1);
  l_run += __shfl_xor_sync(0xffffffffu, l_run, 2);

  if (t == 0) {
    s_ml[warp][g][0] = m_run;
    s_ml[warp][g][1] = l_run;
  }
  for_each_o_tile(o, g, [&](int dim, const float(&c)[4]) {
    s_acc[warp][2 * t][dim] = c[0];
    s_acc[warp][2 * t][dim + 1] = c[2];
    s_acc[warp][2 * t + 1][dim] = c[1];
    s_acc[warp][2 * t + 1][dim + 1] = c[3];
  });
  __syncthreads();  // every warp's state is in shared memory
  decode_merge_store<T, kHd, kRowsG>(s_acc, s_ml, Gr, kh, i, row, sp, n_splits, plan.x == 1, sh,
                                     part_o, part_ml, out, sh.v_scale);
}

// MINB: blocks per SM the registers are capped for (3: 168 registers, no
// spill; 4: 128 registers, ~100 B spilled; the lab compares them).
// Block (row i, kv head, split sp0 + blockIdx.z); rows split by
// decode_split_plan(len, z, min_part).
template <typename T, typename KV, int MINB>
__global__ void __launch_bounds__(kDecodeWarps * 32, MINB)
    paged_decode_mma_kernel(const float* __restrict__ q, const KV* __restrict__ k_pool,
                            const KV* __restrict__ v_pool, PagedShape sh, PagedMeta meta,
                            const int32_t* __restrict__ rows, int n_splits, int z, int min_part,
                            float* __restrict__ part_o, float* __restrict__ part_ml,
                            T* __restrict__ out) {
  griddep_enter();
  __shared__ float s_acc[kDecodeWarps][kRowsG][kHd];
  __shared__ float s_ml[kDecodeWarps][kRowsG][2];
  const int i = blockIdx.x, kh = blockIdx.y, sp = blockIdx.z;
  const int row = rows[i], len = meta.tok_pos[row] + 1;
  const int2 plan = decode_split_plan(len, z, min_part);
  if (sp >= plan.x) return;
  const int lane = threadIdx.x % 32;
  uint32_t qa[4][4];
  load_q<MmaT<T, KV>>(q, sh, row, kh, sh.n_heads / sh.n_kv_heads, lane / 4, lane % 4, qa);
  mma_split<T, KV>(qa, k_pool, v_pool, sh, meta, i, row, kh, sp, plan, len, n_splits, part_o,
                   part_ml, out, s_acc, s_ml);
}

// The splits 1..z-1 of a launch with many (row, kv head) pairs, where few
// rows are long enough to split: a grid of (row, kv head, split) slots would
// be mostly empty blocks, each holding one of the 3 block slots of an SM while
// it reads its row's length (lab: 300 vs 245 us at 1024 x 192 keys).
// Instead kHelpers blocks per (kv head, split sp = 1 + blockIdx.z) scan all
// rows' lengths (kScan per pass, in shared memory) and take every kHelpers-th
// row that has split sp. Opt-in (PagedDecodeTuning::mma_helpers): it lost in
// the lab (1024 x 192: 348 us vs 304 with the slots; 64 x 4000: 374 vs 268),
// most likely to the serial walk over all kScan entries of s_len per block and
// to 4 long rows per helper block when all rows split; a block-wide
// compaction of the long rows is the next thing to try.
constexpr int kHelpers = 16, kScan = 1024;
template <typename T, typename KV, int MINB>
__global__ void __launch_bounds__(kDecodeWarps * 32, MINB)
    paged_decode_mma_helper_kernel(const float* __restrict__ q, const KV* __restrict__ k_pool,
                                   const KV* __restrict__ v_pool, PagedShape sh, PagedMeta meta,
                                   const int32_t* __restrict__ rows, int n_rows, int n_splits,
                                   int z, int min_part, float* __restrict__ part_o,
                                   float* __restrict__ part_ml, T* __restrict__ out) {
  griddep_enter();
  __shared__ float s_acc[kDecodeWarps][kRowsG][kHd];
  __shared__ float s_ml[kDecodeWarps][kRowsG][2];
  __shared__ int s_len[kScan];  // length of the row if it has split sp, else 0
  constexpr int kPer = kScan / (kDecodeWarps * 32);
  const int kh = blockIdx.y, sp = 1 + blockIdx.z;
  int seen = 0;  // rows with split sp before this pass (same in every block)
  for (int first = 0; first < n_rows; first += kScan) {
    int lens[kPer];
#pragma unroll
    for (int u = 0; u < kPer; ++u) {  // all loads of the pass in flight together
      const int j = first + u * kDecodeWarps * 32 + int(threadIdx.x);
      lens[u] = j < n_rows ? meta.tok_pos[rows[j]] + 1 : 0;
    }
#pragma unroll
    for (int u = 0; u < kPer; ++u)
      s_len[u * kDecodeWarps * 32 + threadIdx.x] =
          lens[u] > 0 && decode_split_plan(lens[u], z, min_part).x > sp ? lens[u] : 0;
    __syncthreads();  // s_len complete
    for (int j = 0; j < kScan && first + j < n_rows; ++j) {
      const int len = s_len[j];  // uniform over the block
      if (len == 0) continue;
      if (seen++ % kHelpers != int(blockIdx.x)) continue;
      const int i = first + j, lane = threadIdx.x % 32;
      uint32_t qa[4][4];
      load_q<MmaT<T, KV>>(q, sh, rows[i], kh, sh.n_heads / sh.n_kv_heads, lane / 4, lane % 4, qa);
      mma_split<T, KV>(qa, k_pool, v_pool, sh, meta, i, rows[i], kh, sp,
                       decode_split_plan(len, z, min_part), len, n_splits, part_o, part_ml, out,
                       s_acc, s_ml);
      __syncthreads();  // s_acc / s_ml free for the next row
    }
    __syncthreads();  // s_len free for the next pass
  }
}

// ---- the split kernel with RoPE and the KV append folded in ----

// paged_attention_decode_rope: the split kernel's block (row i, kv head kh,
// split sp) of a decode-only step reads its query heads from the QKV
// product's row (load_q_roped) instead of a roped q, and the block of the
// split that holds the new position first turns the row's K head and writes
// K and V into the pools (rope_kv's arithmetic: precise sincosf, the turn in
// fp32, kv_store_run), so no other kernel runs between the product and the
// attention. Threads 0..63 compute pair tid's cos/sin (the table load_q_roped
// reads) and turn K's pair tid; threads 64..127 copy V's dims 2(tid - 64),
// + 1. One barrier makes the table and the pool row visible to the block's
// warps; no other block reads that (row, kv head)'s pool row in the launch.
// The pools are plain pointers (not read-only): this launch writes them.
template <typename T, typename KV, int MINB>
__global__ void __launch_bounds__(kDecodeWarps * 32, MINB)
    paged_decode_mma_rope_kernel(const T* __restrict__ qkv, const T* __restrict__ bias,
                                 const float* __restrict__ inv_freq, KV* k_pool, KV* v_pool,
                                 PagedShape sh, PagedMeta meta, const int32_t* __restrict__ rows,
                                 int n_splits, int z, int min_part, float* __restrict__ part_o,
                                 float* __restrict__ part_ml, T* __restrict__ out) {
  static_assert(kDecodeWarps * 32 == kHd, "a thread per K pair and per V pair");
  griddep_enter();
  __shared__ float s_acc[kDecodeWarps][kRowsG][kHd];
  __shared__ float s_ml[kDecodeWarps][kRowsG][2];
  __shared__ float s_cs[2][kHd / 2];
  const int i = blockIdx.x, kh = blockIdx.y, sp = blockIdx.z, tid = threadIdx.x;
  const int row = rows[i], p = meta.tok_pos[row], len = p + 1;
  const int2 plan = decode_split_plan(len, z, min_part);
  if (sp >= plan.x) return;
  const int Gr = sh.n_heads / sh.n_kv_heads, kv_dim = sh.n_kv_heads * kHd;
  const T* src = qkv + size_t(row) * (sh.n_heads + 2 * sh.n_kv_heads) * kHd;
  const bool append = sp == plan.x - 1;  // this split holds position p
  size_t slot = 0;
  if (append) {
    const int32_t* table = table_of(meta, meta.tok_seq[row], sh.max_blocks);
    slot = (size_t(table[p / sh.block_size]) * sh.block_size + p % sh.block_size) * kv_dim +
           size_t(kh) * kHd;
  }
  if (tid < kHd / 2) {
    float c, s;
    rope_cos_sin(p, inv_freq[tid], c, s);
    s_cs[0][tid] = c;
    s_cs[1][tid] = s;
    if (append) {
      const int e = (sh.n_heads + kh) * kHd + tid;
      float a[1] = {to_f32(src[e])}, b[1] = {to_f32(src[e + kHd / 2])};
      if (bias) a[0] += to_f32(bias[e]), b[0] += to_f32(bias[e + kHd / 2]);
      rope_turn(a[0], b[0], c, s);
      kv_store_run<1>(k_pool + slot + tid, a, sh.k_scale);
      kv_store_run<1>(k_pool + slot + tid + kHd / 2, b, sh.k_scale);
    }
  } else if (append) {
    const int d = 2 * (tid - kHd / 2), e = (sh.n_heads + sh.n_kv_heads + kh) * kHd + d;
    float v[2] = {to_f32(src[e]), to_f32(src[e + 1])};
    if (bias) v[0] += to_f32(bias[e]), v[1] += to_f32(bias[e + 1]);
    kv_store_run<2>(v_pool + slot + d, v, sh.v_scale);
  }
  __syncthreads();  // s_cs, and the new K/V row for this block's warps
  const int lane = tid % 32;
  uint32_t qa[4][4];
  load_q_roped<MmaT<T, KV>>(src, bias, sh, kh, Gr, lane / 4, lane % 4, s_cs, qa);
  mma_split<T, KV>(qa, k_pool, v_pool, sh, meta, i, row, kh, sp, plan, len, n_splits, part_o,
                   part_ml, out, s_acc, s_ml);
}

// ---- the streaming kernel: a warp per (row, kv head), every row one split ----

// For launches with many (row, kv head) pairs whose grid has one split slot,
// so every row is whole whatever its length (PagedDecodeTuning::stream_pairs
// and stream_short_keys say which). At max load (8,192 pairs of 128..256
// keys) the split kernel's block runs 3 steps per warp, behind a prologue of
// dependent loads (row, length and table, then K/V) and ahead of a
// shared-memory merge. Here a warp owns a pair's whole row, so there is no
// merge, and it keeps the next D 16-key steps' K/V loads in flight during the
// current step's math: K(s + D) is issued once S(s) is computed, V(s + D) once
// P V(s) is (D = 1 for T, 2 for e4m3). Lab (1,024 rows x 192 keys, fp16):
// 218 vs 241 us, 82 % of the read probe (NOTES.md). Requires
// block_size % 16 == 0 (a step's keys share one KV block). Same math as the
// split kernel (Q and P rounded to T, fp32 accumulation).
template <typename T, typename KV>
__global__ void __launch_bounds__(kDecodeWarps * 32, 3)
    paged_decode_stream_kernel(const float* __restrict__ q, const KV* __restrict__ k_pool,
                               const KV* __restrict__ v_pool, PagedShape sh, PagedMeta meta,
                               const int32_t* __restrict__ rows, int n_rows, T* __restrict__ out) {
  using M = MmaT<T, KV>;
  griddep_enter();
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int kvh = sh.n_kv_heads, Gr = sh.n_heads / kvh, kv_dim = kvh * kHd, bs = sh.block_size;
  const int pair = int(blockIdx.x) * kDecodeWarps + int(threadIdx.x) / 32;
  if (pair >= n_rows * kvh) return;
  const int row = rows[pair / kvh], kh = pair % kvh, len = meta.tok_pos[row] + 1;
  const int32_t* table = table_of(meta, meta.tok_seq[row], sh.max_blocks);
  // Lane j holds the table entry of step 32 w + j (tab) and 32 (w + 1) + j
  // (nx), w = the current step's window of 32 steps; 0 past the row.
  auto entries = [&](int first_step) {
    const int key = (first_step + lane) * 16;
    return key < len ? table[key / bs] : 0;
  };
  int tab = entries(0), nx = entries(32);
  // Element offset of step s's key `key` (tab holds s's window).
  auto at = [&](int s) {
    const int e = __shfl_sync(0xffffffffu, tab, s % 32);
    return (size_t(e) * bs + (s * 16) % bs) * size_t(kv_dim) + size_t(kh) * kHd;
  };

  uint32_t qa[4][4];
  load_q<M>(q, sh, row, kh, Gr, g, t, qa);
  // D steps' K/V in flight: an e4m3 step is half a 16-bit step's bytes, so
  // it keeps two steps ahead in the registers of one.
  constexpr int D = kKvFp8<KV> ? 2 : 1;
  KvVec<KV> kr[D][2][4];
  VRaw<KV> vr[D][4];
  const int n_steps = (len + 15) / 16;
#pragma unroll
  for (int d = 0; d < D; ++d) {  // steps past the row load zeros
    const size_t a0 = at(d);
    auto off = [&](int key) { return a0 + size_t(key - 16 * d) * kv_dim; };
    load_k<KV>(kr[d], k_pool, off, 16 * d, len, g, t);
    load_v<KV>(vr[d], v_pool, off, 16 * d, len, g, t);
  }
  float o[8][4];
#pragma unroll
  for (int mt = 0; mt < 8; ++mt) o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.0f;
  float m_run = -INFINITY, l_run = 0.0f;
  for (int step0 = 0; step0 < n_steps; step0 += D) {
#pragma unroll
    for (int d = 0; d < D; ++d) {  // step step0 + d in buffer d, then step + D into it
      const int step = step0 + d;
      if (step >= n_steps) break;
      float s[2][4];
      scores<M, KV>(qa, kr[d], s);
      const int next = step + D, base = next * 16;
      const bool more = next < n_steps;
      if (more && next % 32 == 0) {  // the next window of table entries
        tab = nx;
        nx = entries(next + 32);
      }
      const size_t a = more ? at(next) : 0;
      auto off = [&](int key) { return a + size_t(key - base) * kv_dim; };
      if (more) load_k<KV>(kr[d], k_pool, off, base, len, g, t);
      softmax_pv<M, KV>(s, step * 16, len, t, m_run, l_run, vr[d], o);
      if (more) load_v<KV>(vr[d], v_pool, off, base, len, g, t);
    }
  }
  // Normalise (and v_scale: an e4m3 pool's V scale, 1 for T) and store heads
  // 2t, 2t + 1 (those < Gr).
  l_run += __shfl_xor_sync(0xffffffffu, l_run, 1);
  l_run += __shfl_xor_sync(0xffffffffu, l_run, 2);
  const float l0 = __shfl_sync(0xffffffffu, l_run, 8 * t) / sh.v_scale,
              l1 = __shfl_sync(0xffffffffu, l_run, 8 * t + 4) / sh.v_scale;
  T* o_row = out + size_t(row) * sh.n_heads * kHd + size_t(kh) * Gr * kHd;
  for_each_o_tile(o, g, [&](int dim, const float(&c)[4]) {
    if (2 * t < Gr)
      *reinterpret_cast<uint32_t*>(o_row + 2 * t * kHd + dim) = pack2<T>(c[0] / l0, c[2] / l0);
    if (2 * t + 1 < Gr)
      *reinterpret_cast<uint32_t*>(o_row + (2 * t + 1) * kHd + dim) =
          pack2<T>(c[1] / l1, c[3] / l1);
  });
}

template <typename T, typename KV, int MINB>
void mma_launch(const float* q, const KV* k_pool, const KV* v_pool, PagedShape sh, PagedMeta meta,
                const int32_t* rows, int n_rows, int n_splits, int z, int min_part, bool helpers,
                float* part_o, float* part_ml, T* out, cudaStream_t s) {
  const unsigned kvh = unsigned(sh.n_kv_heads);
  launch({dim3(unsigned(n_rows), kvh, helpers ? 1u : unsigned(z)), kDecodeWarps * 32, 0, s, sh.pdl},
         paged_decode_mma_kernel<T, KV, MINB>, q, k_pool, v_pool, sh, meta, rows, n_splits, z,
         min_part, part_o, part_ml, out);
  if (helpers && z > 1)
    launch({dim3(unsigned(kHelpers), kvh, unsigned(z - 1)), kDecodeWarps * 32, 0, s, sh.pdl},
           paged_decode_mma_helper_kernel<T, KV, MINB>, q, k_pool, v_pool, sh, meta, rows, n_rows,
           n_splits, z, min_part, part_o, part_ml, out);
}

}  // namespace

template <typename T, typename KV>
void paged_decode_stream_launch(const float* q, const KV* k_pool, const KV* v_pool, PagedShape sh,
                                PagedMeta meta, const int32_t* rows, int n_rows, T* out,
                                cudaStream_t s) {
  launch({ceil_div(size_t(n_rows) * sh.n_kv_heads, kDecodeWarps), kDecodeWarps * 32, 0, s, sh.pdl},
         paged_decode_stream_kernel<T, KV>, q, k_pool, v_pool, sh, meta, rows, n_rows, out);
}

template <typename T, typename KV>
void paged_decode_mma_launch(const float* q, const KV* k_pool, const KV* v_pool, PagedShape sh,
                             PagedMeta meta, const int32_t* rows, int n_rows, int n_splits, int z,
                             int min_part, int min_blocks, bool helpers, float* part_o,
                             float* part_ml, T* out, cudaStream_t s) {
  if (min_blocks >= 4)
    mma_launch<T, KV, 4>(q, k_pool, v_pool, sh, meta, rows, n_rows, n_splits, z, min_part,
                         helpers, part_o, part_ml, out, s);
  else
    mma_launch<T, KV, 3>(q, k_pool, v_pool, sh, meta, rows, n_rows, n_splits, z, min_part,
                         helpers, part_o, part_ml, out, s);
}

template <typename T, typename KV>
void paged_decode_mma_rope_launch(const T* qkv, const T* bias, const float* inv_freq, KV* k_pool,
                                  KV* v_pool, PagedShape sh, PagedMeta meta, const int32_t* rows,
                                  int n_rows, int n_splits, int z, int min_part, int min_blocks,
                                  float* part_o, float* part_ml, T* out, cudaStream_t s) {
  const LaunchConfig cfg{dim3(unsigned(n_rows), unsigned(sh.n_kv_heads), unsigned(z)),
                         kDecodeWarps * 32, 0, s, sh.pdl};
  if (min_blocks >= 4)
    launch(cfg, paged_decode_mma_rope_kernel<T, KV, 4>, qkv, bias, inv_freq, k_pool, v_pool, sh,
           meta, rows, n_splits, z, min_part, part_o, part_ml, out);
  else
    launch(cfg, paged_decode_mma_rope_kernel<T, KV, 3>, qkv, bias, inv_freq, k_pool, v_pool, sh,
           meta, rows, n_splits, z, min_part, part_o, part_ml, out);
}

#define HAYATE_DECODE_MMA(T, KV)                                                                   \
  template void paged_decode_stream_launch<T, KV>(const float*, const KV*, const KV*, PagedShape,  \
                                                  PagedMeta, const int32_t*, int, T*,              \
                                                  cudaStream_t);                                   \
  template void paged_decode_mma_launch<T, KV>(const float*, const KV*, const KV*, PagedShape,     \
                                               PagedMeta, const int32_t*, int, int, int, int, int, \
                                               bool, float*, float*, T*, cudaStream_t);            \
  template void paged_decode_mma_rope_launch<T, KV>(                                               \
      const T*, const T*, const float*, KV*, KV*, PagedShape, PagedMeta, const int32_t*, int, int, \
      int, int, int, float*, float*, T*, cudaStream_t);
HAYATE_DECODE_MMA(half, half)
HAYATE_DECODE_MMA(__nv_bfloat16, __nv_bfloat16)
HAYATE_DECODE_MMA(half, KvFp8)
HAYATE_DECODE_MMA(__nv_bfloat16, KvFp8)
#undef HAYATE_DECODE_MMA

}  // namespace hayate::cuda
