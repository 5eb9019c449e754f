// Paged decode attention at short context: one pass, no split, no combine
// (bench/kernels/NOTES.md: a contiguous-cache twin saved 0.25 ms/token at
// contexts <= 128 on the 8B model).
//
// Why a second decode kernel: at one row and ~100 keys the split kernel of
// paged_attention.cu is latency-bound (~15 us per layer in the lab): its
// 4 warps walk the keys chunk by chunk, each chunk a dependent round of loads
// and an online-softmax rescale. Here a block of 256 threads covers every key
// row of the context at once (TPK = HD / 8 threads per row, 16 bytes each;
// KP = 256 / TPK rows side by side; P passes), so all K and V loads of the
// block are in flight together; the chain is: position and block table ->
// loads -> scores -> one barrier -> softmax (each warp redundantly) -> P.V ->
// one barrier -> output.
//
// One block per (row, query head), not per (row, kv head): at batch 1 that is
// 32 blocks for Llama-3-8B instead of 8, and the G query heads of a kv head
// read the same K/V rows, which the second to fourth reader finds in L2.
#include <algorithm>
#include <cfloat>

#include "core/check.h"
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/fp8.cuh"
#include "cuda/kernels/paged_common.cuh"
#include "cuda/launch.h"
#include "cuda/paged_attention.cuh"

namespace hayate::cuda {

namespace {

// ---- the block's part: every key row in registers -----------------------------
// A block of kShortThreads threads holds every key row of the context in
// registers (TPK threads per row, 16 bytes each; KP rows side by side; P
// passes); the kernel loads K and V through the block table and hands the
// rows over to short_attend: scores -> one barrier -> softmax statistics
// (every warp redundantly) -> P.V -> one barrier -> the output row, through
// the kernel's store(d, value).
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
// 1/sqrt(HD) (and an e4m3 pool's k_scale); keys: the context length (<=
// MAXK). Calls store(d, o) for each output element d of [0, HD) this thread
// owns (o in V's units: an e4m3 pool's v_scale is the caller's).
template <typename KV, int HD, typename Store>
__device__ __forceinline__ void short_attend(const KvVec<KV> (&kr)[ShortLayout<HD>::P],
                                             const KvVec<KV> (&vr)[ShortLayout<HD>::P],
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
    kv_unpack8<KV>(kr[p], f);
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
      kv_unpack8<KV>(vr[p], f);
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

// ---- kernel ------------------------------------------------------------------

// Block (row i, query head). q [T, n_heads * HD] fp32 roped; out [T, n_heads * HD] in T.
template <typename T, typename KV, int HD>
__global__ void __launch_bounds__(kShortThreads)
    paged_decode_short_kernel(const float* __restrict__ q, const KV* __restrict__ k_pool,
                              const KV* __restrict__ v_pool, PagedShape sh, PagedMeta meta,
                              const int32_t* __restrict__ rows, T* __restrict__ out) {
  griddep_enter();
  using L = ShortLayout<HD>;
  constexpr int KP = L::KP, P = L::P, MAXK = L::MAXK;
  const int row = rows[blockIdx.x], head = blockIdx.y;
  const int kvh = head / (sh.n_heads / sh.n_kv_heads), bs = sh.block_size;
  const int kv_dim = sh.n_kv_heads * HD, q_dim = sh.n_heads * HD;
  const int c = L::chunk(), kj = L::key_lane();
  const int keys = meta.tok_pos[row] + 1;
  if (keys > MAXK) __trap();  // the host picks this kernel only when every row fits
  const int32_t* table = table_of(meta, meta.tok_seq[row], sh.max_blocks);
  const size_t col = size_t(kvh) * HD + c * 8;

  // Only table entries below the context are read: the rest of a row of the
  // block table is stale (the host copies each sequence's own blocks only).
  KvVec<KV> kr[P], vr[P];
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int j = p * KP + kj;
    kr[p] = vr[p] = KvVec<KV>{};
    if (j < keys) {
      const size_t off = (size_t(table[j / bs]) * bs + j % bs) * kv_dim + col;
      kr[p] = kv_load8(k_pool + off);
      vr[p] = kv_load8(v_pool + off);
    }
  }
  const float scale = rsqrtf(float(HD)) * sh.k_scale, v_scale = sh.v_scale;
  float qf[8];
  {  // 32-byte aligned: q rows and head offsets are multiples of 8 floats
    const float4* qp = reinterpret_cast<const float4*>(q + size_t(row) * q_dim + head * HD + c * 8);
    const float4 a = qp[0], b = qp[1];
    qf[0] = a.x * scale, qf[1] = a.y * scale, qf[2] = a.z * scale, qf[3] = a.w * scale;
    qf[4] = b.x * scale, qf[5] = b.y * scale, qf[6] = b.z * scale, qf[7] = b.w * scale;
  }

  short_attend<KV, HD>(kr, vr, qf, keys, [&](int d, float o) {
    out[size_t(row) * q_dim + head * HD + d] = from_f32<T>(o * v_scale);
  });
}

// The one place where head_dim becomes a template argument.
template <typename T, typename KV, typename F>
void with_short_head_dim(int head_dim, F&& f) {
  switch (head_dim) {
    case 32:
      return f(paged_decode_short_kernel<T, KV, 32>, short_max_keys<32>());
    case 64:
      return f(paged_decode_short_kernel<T, KV, 64>, short_max_keys<64>());
    case 128:
      return f(paged_decode_short_kernel<T, KV, 128>, short_max_keys<128>());
    default:
      break;
  }
  fail(cat("paged short attention: head_dim ", head_dim, " is not supported (32, 64, 128)"));
}

}  // namespace

int paged_decode_short_max_keys(int head_dim) {
  int keys = 0;
  with_short_head_dim<half, half>(head_dim, [&](auto, int max_keys) { keys = max_keys; });
  return keys;
}

template <typename T, typename KV>
void paged_attention_decode_short(const float* q, const KV* k_pool, const KV* v_pool, PagedShape sh,
                                  PagedMeta meta, const int32_t* rows, int n_rows, T* out,
                                  cudaStream_t s) {
  HAYATE_CHECK(paged_shape_supported(sh.n_heads, sh.n_kv_heads, sh.head_dim),
               "paged short attention: unsupported shape (", sh.n_heads, " heads, ", sh.n_kv_heads,
               " kv heads, head_dim ", sh.head_dim, ")");
  with_short_head_dim<T, KV>(sh.head_dim, [&](auto kernel, int) {
    launch({dim3(unsigned(n_rows), unsigned(sh.n_heads)), kShortThreads, 0, s, sh.pdl}, kernel, q,
           k_pool, v_pool, sh, meta, rows, out);
  });
}

#define HAYATE_PAGED_SHORT_INSTANTIATE(T, KV)                                           \
  template void paged_attention_decode_short<T, KV>(const float*, const KV*, const KV*, \
                                                    PagedShape, PagedMeta, const int32_t*, int, \
                                                    T*, cudaStream_t);
HAYATE_PAGED_SHORT_INSTANTIATE(half, half)
HAYATE_PAGED_SHORT_INSTANTIATE(__nv_bfloat16, __nv_bfloat16)
HAYATE_PAGED_SHORT_INSTANTIATE(half, KvFp8)
HAYATE_PAGED_SHORT_INSTANTIATE(__nv_bfloat16, KvFp8)
#undef HAYATE_PAGED_SHORT_INSTANTIATE

}  // namespace hayate::cuda
