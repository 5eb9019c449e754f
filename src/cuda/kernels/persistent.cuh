// The persistent decode step's machinery: one block per SM, alive for the
// whole step, streams every weight matrix of the step through a ring of
// shared-memory stages (ring.cuh), and the phases of the step (QKV, attention,
// o_proj, gate/up, down per layer, then the LM head) meet at grid barriers.
//
// Why: a separate kernel per GEMV pays its ramp (first bytes after ~1 us) and
// its tail (the last wave draining) on every launch: QKV and o_proj reached
// only 65-84 % of the read bandwidth as separate kernels in the lab
// (bench/kernels/NOTES.md), and programmatic dependent launch recovered little
// of it. Here the producer warp of each block walks the weight tiles of *all*
// phases in order, independent of the activations (weights never depend on
// them), so while the consumer warps wait at a grid barrier or run the
// attention, the next phase's weights are already landing: up to
// kPersistStages x 32 KB per SM (25 MB over 132 SMs, ~5 us of HBM time)
// absorb the barrier and the attention.
//
// Roles: warps 0-7 consume (thread t of a group holds its slice of x in
// registers; a warp reduces each row of a stage; the partial sums meet on
// `done` mbarriers; one warp in turn runs a tile's epilogue), warp 8 lane 0
// produces (one cp.async.bulk per weight row into the stage, completing on the
// stage's `full` mbarrier); warps 9-11 only complete the producer's warpgroup,
// which gives its registers to the consumers' two (setmaxnreg: 232 registers
// each, where the 168 of a 384-thread block made the head_dim-128 FP8 and wide
// kernels spill). Producer and consumers count stages with the same
// running index j across phases, so the ring's stage (j % S) and parity (j /
// S) line up without any other protocol.
//
// Tiles are claimed, not assigned: the producer takes the next tile of the
// phase from a global counter (one atomicAdd per tile, issued before it waits
// for a free stage), writes its index beside the stage, and closes the phase
// with an empty stage (index -1). A grid barrier waits for the slowest block,
// and with a fixed tile -> block map the same low blocks carried the extra
// tile of every phase and an SM that streamed slower held everyone; claimed
// tiles go to whichever SM has room.
//
// Memory: activations written by one block and read by another inside the
// kernel (h, q, act, the attention partials, the KV row at pos) are read with
// ld.global.cg (L2): L1 is not coherent across SMs, and an SM may hold a line
// of h from an earlier phase.
#pragma once

#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>
#include <type_traits>

#include "cuda/kernels/common.cuh"
#include "cuda/kernels/ring.cuh"
#include "cuda/kernels/rope.cuh"
#include "cuda/ops.h"

namespace hayate::cuda {

constexpr int kPersistConsumers = 256;  // consumer threads: 8 warps
constexpr int kPersistStages = 6;
// 16-bit rows: 4 of K = 4096, or one of K <= 16384; e4m3 rows: 8, or 2.
constexpr int kPersistStageBytes = 32 * 1024;
constexpr int kPersistWarps = kPersistConsumers / 32;  // consumer warps
// + the producer's warpgroup: 4 warps, of which warp 8's lane 0 produces (a
// whole warpgroup, so that setmaxnreg can move its registers to the consumers).
constexpr int kPersistThreads = kPersistConsumers + 128;
// setmaxnreg: the kernel is compiled for 384 threads at 168 registers (65,536
// / 384, rounded to 8); the producer's warpgroup gives its registers back
// (kPersistProducerRegs) and the two consumer warpgroups take them
// (kPersistConsumerRegs: 2 x 128 x 232 + 128 x 40 = 64,512 <= 65,536).
constexpr int kPersistProducerRegs = 40;
constexpr int kPersistConsumerRegs = 232;
constexpr int kPersistParts = 2 * kPersistStages;  // `done` slots: see persist_consume
constexpr int kPersistPartRows = 8;    // rows of a tile's partial sums: 2 (16-bit), 8 (FP8)
constexpr int kPersistMaxGroup = 4;    // query heads per attention unit
constexpr int kPersistMaxSplits = 16;  // attention splits per attention unit
constexpr int kPersistTile = 64;       // keys per attention tile
// Wide down rows (persist_produce): x's chunks past the first stage's, in
// shared memory; 384 chunks of 8 make K <= 16384 + 3072 = 19456 (Qwen2.5-7B:
// 18944), 12 KB beside the 192 KB ring and the attention's 21 KB.
constexpr int kPersistWideTail = 384;

// The block's ring: stages in dynamic shared memory, barriers and partial sums
// in static shared memory (declared by the kernel, passed here).
struct PersistRing {
  unsigned char* stages;  // [kPersistStages][kPersistStageBytes]
  int* tile;              // [kPersistStages]: the tile in the stage, -1: end of the phase
  uint64_t* full;         // [kPersistStages]: 1 arrival (the producer) + the bytes
  uint64_t* empty;        // [kPersistStages]: one arrival per consumer warp
  uint64_t* done;         // [kPersistParts]: one arrival per consumer warp
  // [kPersistParts]: each warp's row sums of a tile
  float (*part)[kPersistWarps][kPersistPartRows];
};

// The ring's mbarriers, by one thread before the block's one __syncthreads.
__device__ __forceinline__ void persist_ring_init(uint64_t* full, uint64_t* empty, uint64_t* done) {
  for (int s = 0; s < kPersistStages; ++s) {
    mbar_init(smem_u32(&full[s]), 1);  // the producer's arrival, plus the bytes
    mbar_init(smem_u32(&empty[s]), kPersistWarps);
  }
  for (int p = 0; p < kPersistParts; ++p) mbar_init(smem_u32(&done[p]), kPersistWarps);
  mbar_init_fence();
}

// Barrier of the 256 consumer threads only (named barrier 1; the producer
// warp never takes part, and nobody uses __syncthreads after the role split).
__device__ __forceinline__ void consumer_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(kPersistConsumers) : "memory");
}

__device__ __forceinline__ unsigned ld_acquire_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Grid barrier of the consumers of all blocks. bar [2]: arrivals, exits;
// zero at launch. The k-th barrier of a launch waits until k * gridDim.x
// arrivals are counted: one release-add and a polling acquire-load per block,
// no reset on the way (a generation scheme paid three more L2 round trips in
// the last arriver). persist_exit() zeroes both counters for the
// next launch once every block is past its last barrier. k: barriers passed,
// kept by thread 0. Requires every block resident: cooperative launch, one
// block per SM. (Polling every 100 or 500 ns instead of back to back: no
// change.)
__device__ __forceinline__ void grid_sync(unsigned* bar, unsigned& k) {
  consumer_sync();  // this block's writes are done (and ordered before thread 0's release)
  if (threadIdx.x == 0) {
    const unsigned target = ++k * gridDim.x;
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(bar) : "memory");
    while (ld_acquire_gpu(bar) < target) {
    }
  }
  consumer_sync();
}

// ... and the tile counters claims [n_claims] (every producer has made its
// last claim before its block's consumers get here).
__device__ __forceinline__ void persist_exit(unsigned* bar, int* claims, int n_claims) {
  if (threadIdx.x == 0 && atomicAdd(bar + 1, 1u) == gridDim.x - 1) {
    for (int i = 0; i < n_claims; ++i) claims[i] = 0;
    bar[0] = 0;  // nobody polls any more: every block has arrived here
    bar[1] = 0;
  }
}

// Point-to-point dependencies instead of a grid barrier where only some
// blocks produce what the others wait for (the attention output): a producer
// block's thread 0 counts after its writers synchronised with it
// (persist_signal: release, so the writes are visible first); a consumer's
// thread 0 polls the count, then its block synchronises (persist_wait).
// Counting every QKV tile for its kv head, so attention could start without
// the grid barrier, made QKV 8 us per layer slower (the release per tile in
// the epilogue warps), more than the barrier costs.
__device__ __forceinline__ void persist_signal(int* counter) {
  asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(counter) : "memory");
}
__device__ __forceinline__ void persist_wait(const int* counter, int target) {
  if (threadIdx.x == 0)
    while (int(ld_acquire_gpu(reinterpret_cast<const unsigned*>(counter))) < target) {
    }
  consumer_sync();
}

// 8 floats at p (16-byte aligned) through L2 only.
__device__ __forceinline__ void load8_cg(const float* p, float (&v)[8]) {
  const float4 a = __ldcg(reinterpret_cast<const float4*>(p));
  const float4 b = __ldcg(reinterpret_cast<const float4*>(p) + 1);
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

// out[row] = in[row] + sum: the residual add, reading `in` through L2 (L1
// may hold a line another block has since changed) as soon as the tile has
// landed (prepare), so the read is in flight during the dot products. The
// kernel keeps h in two buffers, o_proj writing the second and down_proj the
// first. With the grid barrier after QKV one buffer would do, as each tile
// reads and writes only its own rows; the second is what lets a block still
// reading h for QKV never see o_proj's writes, should that barrier go, and
// costs 16 KB.
template <int R>
struct ResidualCgEpi {
  const float* in;
  float* out;
  struct Pre {
    float v[R];
  };
  __device__ int row(int g, int r) const { return g * R + r; }
  __device__ Pre prepare(int g) const {
    Pre p;
#pragma unroll
    for (int r = 0; r < R; ++r) p.v[r] = __ldcg(in + g * R + r);
    return p;
  }
  __device__ void store(int g, const float (&acc)[R], const Pre& p) const {
#pragma unroll
    for (int r = 0; r < R; ++r) out[g * R + r] = p.v[r] + acc[r];
  }
};

// A layer's paged KV pool: k, v [blocks * block_size, kv_dim]; position r of
// the step's one sequence is row table[r / block_size] * block_size + r %
// block_size.
template <typename T>
struct PersistCache {
  T* k;
  T* v;
  const int32_t* table;  // [max_blocks] the sequence's block table
  int block_size;
  __device__ size_t row(int r) const {
    return size_t(table[r / block_size]) * block_size + r % block_size;
  }
};

// The QKV epilogue: the bias (Qwen2), RoPE and the KV append. Row group g
// holds rows i and i + d/2 of one head (the pair RoPE rotates together):
// heads [0, n_heads) are q, then n_kv_heads of k, then of v. The step's
// cos/sin of pos * inv_freq[i] come from a table each block fills at entry
// (cs [2][half_dim] in shared memory), not from a precise sincosf per row
// pair in the epilogue warp. With per-head q/k norms (k_raw set) q and k
// leave un-normalised and unturned: q to q, k to k_raw (persist_attend
// finishes both).
template <typename T>
struct QkvRopeTableEpi {
  float* q;               // [n_heads * d]
  PersistCache<T> cache;  // this layer's
  const int32_t* pos;
  const float* cs;  // [2][half_dim]: cos, sin
  int half_dim, n_heads, n_kv_heads;
  const T* bias;  // [(n_heads + 2 n_kv_heads) d] or null
  float* k_raw;   // [n_kv_heads d]: qk_norm's k, or null
  struct Pre {
    float b[2];
  };
  __device__ int row(int g, int r) const {
    const int head = g / half_dim, i = g % half_dim;
    return head * 2 * half_dim + i + r * half_dim;
  }
  __device__ Pre prepare(int g) const {
    if (!bias) return {{0.0f, 0.0f}};
    return {{to_f32(__ldg(bias + row(g, 0))), to_f32(__ldg(bias + row(g, 1)))}};
  }
  __device__ void store(int g, const float (&acc)[2], const Pre& pre) const {
    const int head = g / half_dim, i = g % half_dim, d = 2 * half_dim;
    float a = acc[0] + pre.b[0], b = acc[1] + pre.b[1];
    if (k_raw && head < n_heads + n_kv_heads) {
      float* dst = head < n_heads ? q + head * d : k_raw + (head - n_heads) * d;
      dst[i] = a;
      dst[i + half_dim] = b;
      return;
    }
    if (head < n_heads + n_kv_heads) rope_turn(a, b, cs[i], cs[half_dim + i]);
    if (head < n_heads) {
      q[head * d + i] = a;
      q[head * d + i + half_dim] = b;
      return;
    }
    const int p = *pos, kv_dim = n_kv_heads * d;
    const bool is_k = head < n_heads + n_kv_heads;
    T* dst = (is_k ? cache.k : cache.v) + cache.row(p) * kv_dim +
             (head - n_heads - (is_k ? 0 : n_kv_heads)) * d;
    dst[i] = from_f32<T>(a);
    dst[i + half_dim] = from_f32<T>(b);
  }
};

// ---- producer: the weight tiles of one phase --------------------------------
// Tile = G row groups of R rows (epi.row maps them), claimed from *claim
// (zero before the phase; every block's producer adds to it). Lane 0 of the
// producer warp only. kWide: one row (R = G = 1) longer than a stage
// (Qwen2.5-7B's down projection, K = 18944: 37,888 bytes), its first
// kPersistStageBytes in stage j and the rest in stage j + 1, each completing
// on its own `full` barrier; the tile takes both stages.
template <typename T, int R, int G, typename Epi, bool kWide = false>
__device__ __forceinline__ void persist_produce(const PersistRing& rg, const T* __restrict__ W,
                                                int K, int groups, const Epi& epi, int* claim,
                                                int& j) {
  static_assert(!kWide || (R == 1 && G == 1));
  const uint32_t row_bytes = uint32_t(K) * sizeof(T);
  const int ntiles = (groups + G - 1) / G;
  auto wait_empty = [&](int jj) {  // every consumer warp released stage use jj - S
    if (jj >= kPersistStages)
      mbar_wait(smem_u32(&rg.empty[jj % kPersistStages]),
                uint32_t((jj - kPersistStages) / kPersistStages) & 1u);
  };
  for (;; ++j) {
    const int tile = atomicAdd(claim, 1);  // in flight while we wait for the stage
    const int buf = j % kPersistStages;
    wait_empty(j);
    const uint32_t bar = smem_u32(&rg.full[buf]);
    if (tile >= ntiles) {  // the phase is done: an empty stage says so
      rg.tile[buf] = -1;
      mbar_arrive(bar);  // release: the index is visible to the waiters
      ++j;
      return;
    }
    rg.tile[buf] = tile;
    if constexpr (kWide) {
      const int buf2 = (j + 1) % kPersistStages;
      const uint32_t bar2 = smem_u32(&rg.full[buf2]);
      const uint32_t head = uint32_t(kPersistStageBytes), rest = row_bytes - head;
      const T* src = W + size_t(epi.row(tile, 0)) * K;
      mbar_expect(bar, head);
      bulk_g2s(smem_u32(rg.stages + size_t(buf) * kPersistStageBytes), src, head, bar);
      wait_empty(++j);
      mbar_expect(bar2, rest);
      bulk_g2s(smem_u32(rg.stages + size_t(buf2) * kPersistStageBytes),
               reinterpret_cast<const unsigned char*>(src) + head, rest, bar2);
      continue;
    }
    const int ng = min(G, groups - tile * G);
    mbar_expect(bar, uint32_t(ng) * R * row_bytes);
    unsigned char* st = rg.stages + size_t(buf) * kPersistStageBytes;
    for (int s = 0; s < ng; ++s)
#pragma unroll
      for (int r = 0; r < R; ++r)
        bulk_g2s(smem_u32(st + (s * R + r) * row_bytes), W + size_t(epi.row(tile * G + s, r)) * K,
                 row_bytes, bar);
  }
}

// ---- consumers: one GEMV phase ----------------------------------------------
// y rows of W [rows, K] . x, x chunk c (8 elements) from xfn(c, v[8]); with
// kNorm, x * norm_w scaled by rsqrt(mean(x^2) + eps) (applied to the sums:
// rstd is one scalar per phase). NC: chunks per thread (K <= NC * 8 * 256 / G). j: stages used so
// far; jd: tiles reduced so far (the `done` slots and the epilogue warp).
// W: the stage's element type, T, or uint8_t for FP8 rows: then the tile's
// G x R <= 8 rows are taken by every warp on the tensor cores
// (ring_tile_mma_fp8: NC is then the 256-byte chunks of a row per warp, K <=
// NC * 2048), x (after the norm, rstd included) is quantized to e4m3 codes
// in registers with the scale in_scale, or max |x| / 448 (a block
// reduction), and each row's sum is scaled by x's scale and the row's
// w_scale (the batched path's rmsnorm_fp8 / quantize_rows_fp8 then the FP8
// GEMM, in one pass).
// kWide: persist_produce's wide rows (one per tile, over stages j and j + 1;
// 16-bit weights, no norm, NC = 8: the first stage's 2048 chunks in
// registers, the rest of x in shared memory, as 10 chunks per thread in
// registers made ptxas spill at the kernel's 168 registers).
template <typename T, typename W, int R, int G, int NC, bool kNorm, typename Epi, typename XFn,
          bool kWide = false>
__device__ __forceinline__ void persist_consume(const PersistRing& rg, int K, int groups,
                                                const T* __restrict__ norm_w, float eps, XFn xfn,
                                                const Epi& epi, int& j, int& jd,
                                                const float* __restrict__ w_scale = nullptr,
                                                float in_scale = 0.0f) {
  constexpr bool kFp8 = std::is_same_v<W, uint8_t>;
  constexpr int kGroupThreads = kPersistConsumers / G;
  constexpr int kWarpsPerGroup = kGroupThreads / 32;
  static_assert(kPersistConsumers % (32 * G) == 0 && G <= 32 && R <= 2);
  static_assert(!kFp8 || (G * R <= kPersistPartRows && !kWide));
  static_assert(!kWide || (R == 1 && G == 1 && !kFp8 && !kNorm &&
                           NC * kPersistConsumers * 16 == kPersistStageBytes / sizeof(W) * 2));
  const int tid = threadIdx.x, t = tid % kGroupThreads, slot = tid / kGroupThreads;
  const int warp = tid / 32, lane = tid % 32;
  const int nchunks = K / 8;
  const uint32_t row_bytes = uint32_t(K) * sizeof(W);

  float xr[NC][8];
  const float(*xtail)[8] = nullptr;  // kWide
  float ss = 0.0f;
#pragma unroll
  for (int jj = 0; jj < NC; ++jj) {
    // FP8: lane `lane` of warp `warp` takes k = 256 (warp + 8 jj) + 8 lane
    // (ring_tile_mma_fp8), so the block holds x once.
    const int c = kFp8 ? (warp + 8 * jj) * 32 + lane : t + jj * kGroupThreads;
    if (c < nchunks) {
      float v[8];
      xfn(c, v);
      float n[8] = {1, 1, 1, 1, 1, 1, 1, 1};
      if constexpr (kNorm) {
        unpack8<T>(__ldg(reinterpret_cast<const uint4*>(norm_w) + c), n);
        if (kFp8 || slot == 0)  // every group holds the whole x: count it once
#pragma unroll
          for (int e = 0; e < 8; ++e) ss += v[e] * v[e];
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) xr[jj][e] = v[e] * n[e];
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) xr[jj][e] = 0.0f;
    }
  }
  if constexpr (kWide) {  // x's chunks past the first stage
    __shared__ float xt[kPersistWideTail][8];
    for (int c = NC * kPersistConsumers + tid; c < nchunks; c += kPersistConsumers) {
      float v[8];
      xfn(c, v);
#pragma unroll
      for (int e = 0; e < 8; ++e) xt[c - NC * kPersistConsumers][e] = v[e];
    }
    consumer_sync();  // xt (rewritten only after the next grid barrier)
    xtail = xt;
  }
  float rstd = 1.0f;
  if constexpr (kNorm) {
    __shared__ float red[kPersistWarps];
    ss = warp_sum(ss);
    if (lane == 0) red[warp] = ss;
    consumer_sync();  // red complete (rewritten only after the next grid barrier)
    ss = 0.0f;
#pragma unroll
    for (int i = 0; i < kPersistWarps; ++i) ss += red[i];
    rstd = rsqrtf(ss / float(K) + eps);
  }
  uint4 xh[kFp8 ? NC : 1];  // FP8: x's codes as f16 pairs (ring_tile_mma_fp8)
  if constexpr (kFp8) {     // x -> e4m3 codes; rstd becomes x's scale
    __shared__ float red_max[kPersistWarps];
    float amax = 0.0f;
#pragma unroll
    for (int jj = 0; jj < NC; ++jj)
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        xr[jj][e] *= rstd;
        amax = fmaxf(amax, fabsf(xr[jj][e]));
      }
    float s = in_scale;
    if (s == 0.0f) {
      amax = warp_max(amax);
      if (lane == 0) red_max[warp] = amax;
      consumer_sync();  // red_max complete (rewritten only after the next grid barrier)
      amax = 0.0f;
#pragma unroll
      for (int i = 0; i < kPersistWarps; ++i) amax = fmaxf(amax, red_max[i]);
      s = fp8_scale_for_dev(amax);
    }
#pragma unroll
    for (int jj = 0; jj < NC; ++jj) {  // zeros past K quantize to code 0
      uint32_t c[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) c[e] = fp8_quantize_dev(xr[jj][e], s);
      xh[jj] = e4m3x8_to_h8(make_uint2(c[0] | c[1] << 8 | c[2] << 16 | c[3] << 24,
                                       c[4] | c[5] << 8 | c[6] << 16 | c[7] << 24));
    }
    rstd = s;
  }

  for (;; ++j) {
    const int buf = j % kPersistStages;
    mbar_wait(smem_u32(&rg.full[buf]), uint32_t(j / kPersistStages) & 1u);
    const int tile = *static_cast<volatile int*>(&rg.tile[buf]);
    if (tile < 0) {  // end of the phase: release the stage and leave
      __syncwarp();
      if (lane == 0) mbar_arrive(smem_u32(&rg.empty[buf]));
      ++j;
      return;
    }
    const int p = jd % kPersistParts;
    const bool epi_warp = warp == jd % kPersistWarps;
    // In a phase's last tile, groups past the phase's rows read stale stage bytes
    // and make sums nobody stores (the epilogue checks g < groups).
    typename Epi::Pre pre{};      // the epilogue's global reads, under the dot products:
    float ws[kFp8 ? R : 1] = {};  // FP8, the rows' weight scales too
    if (epi_warp && lane < G && tile * G + lane < groups) {
      pre = epi.prepare(tile * G + lane);
      if constexpr (kFp8)
#pragma unroll
        for (int r = 0; r < R; ++r) ws[r] = __ldg(w_scale + epi.row(tile * G + lane, r));
    }
    const unsigned char* st =
        rg.stages + size_t(buf) * kPersistStageBytes + (kFp8 ? 0 : slot * R * row_bytes);
    float acc[R];
    int buf2 = buf;  // kWide: the row's second stage
    if constexpr (kWide) {
      buf2 = (j + 1) % kPersistStages;
      mbar_wait(smem_u32(&rg.full[buf2]), uint32_t((j + 1) / kPersistStages) & 1u);
      ring_tile_dot2<T, NC, (kPersistWideTail + kPersistConsumers - 1) / kPersistConsumers>(
          st, rg.stages + size_t(buf2) * kPersistStageBytes, t, kGroupThreads, nchunks, xr, xtail,
          acc[0]);
      ++j;
    } else if constexpr (kFp8) {
      acc[0] = ring_tile_mma_fp8<G * R, NC>(st, row_bytes, K, warp, lane, xh);
    } else {
      ring_tile_dot<T, R, NC>(st, row_bytes, t, kGroupThreads, nchunks, xr, acc);
    }
    __syncwarp();          // every lane is done reading the stage
    if constexpr (kFp8) {  // lane l holds row ring_row_of_lane(l)'s sum
      if (lane % (32 / (G * R)) == 0) rg.part[p][warp][ring_row_of_lane<G * R>(lane)] = acc[0];
      __syncwarp();  // the part writes, before lane 0's release below
    }
    if (lane == 0) {
      if constexpr (!kFp8)
#pragma unroll
        for (int r = 0; r < R; ++r) rg.part[p][warp][r] = acc[r];
      mbar_arrive(smem_u32(&rg.empty[buf]));
      if (kWide) mbar_arrive(smem_u32(&rg.empty[buf2]));
      mbar_arrive(smem_u32(&rg.done[p]));  // release: part is visible to the waiter
    }
    if (epi_warp) {  // this tile's epilogue
      mbar_wait(smem_u32(&rg.done[p]), uint32_t(jd / kPersistParts) & 1u);
      const int g = tile * G + lane;
      if (lane < G && g < groups) {
        float sum[R];
        if constexpr (kFp8) {  // every warp took every row
#pragma unroll
          for (int r = 0; r < R; ++r) {
            sum[r] = 0.0f;
#pragma unroll
            for (int w = 0; w < kPersistWarps; ++w) sum[r] += rg.part[p][w][lane * R + r];
            sum[r] *= rstd;
            sum[r] *= ws[r];
          }
        } else {
          ring_group_sums<R, kWarpsPerGroup>(rg.part[p], lane, rstd, sum);
        }
        epi.store(g, sum, pre);
      }
    }
    ++jd;
  }
}

// ---- consumers: decode attention over [0, keys) ------------------------------
// An attention unit is a kv head's query heads, or, with more than
// kPersistMaxGroup of them (Qwen2.5-7B: 7), a near-equal share of them
// (4 + 3): persistent_attn_units (ops.h) counts them; every unit of a kv head
// reads its K and V (twice the K/V reads for Qwen2.5, against registers and
// shared memory sized for 4 query heads). Splits of the key range per unit
// (persist_splits), items (unit, split) spread over the blocks (after the
// grid barrier that ends QKV); each item walks its keys in tiles of 64 with
// an online softmax (256 threads) and, with one split, writes the attention
// output attn [n_heads * HD] of its query heads; with several, its
// unnormalised output and (max, sum) per query head to part_o [split,
// n_heads, HD] and part_ml [split, n_heads, 2], and the last split of the
// unit to finish (split_done[unit]) combines them into attn. Either way
// attn_done counts the unit once it is final.
// nsplit <= ceil(keys / 64) and <= 16 make every split non-empty:
// (nsplit - 1) * ceil(keys / nsplit) < keys. The code still handles an empty
// one (max -FLT_MAX, sum 0), for safety if these caps change.
__device__ __forceinline__ int persist_splits(int keys, int units) {
  const int by_blocks = max(1, min(kPersistMaxSplits, int(gridDim.x) / units));
  return min(by_blocks, (keys + kPersistTile - 1) / kPersistTile);
}

// The attention item's unit and key split: item (unit item % units, split
// item / units) covers query heads [q0, q0 + nq) of kv head kvh's group
// (heads kvh * group ...) and keys [start, end) of [0, keys).
struct PersistItem {
  int unit, kvh, q0, nq, start, end;
  __device__ PersistItem(int item, int keys, int n_heads, int n_kv_heads) {
    const int group = n_heads / n_kv_heads;
    const int nsub = persistent_attn_units(n_heads, n_kv_heads) / n_kv_heads;
    const int units = n_kv_heads * nsub, per_unit = (group + nsub - 1) / nsub;
    const int nsplit = persist_splits(keys, units), per = (keys + nsplit - 1) / nsplit;
    unit = item % units;
    kvh = unit / nsub;
    q0 = unit % nsub * per_unit;
    nq = min(per_unit, group - q0);
    start = item / units * per;
    end = min(keys, start + per);
  }
};

// A tile of K and V rows in registers: thread (chunk c, key lane kj) holds
// chunk c of rows t0 + p * KP + kj, p < kPasses.
template <int HD>
struct PersistKvTile {
  static constexpr int TPK = HD / 8;                  // threads per key row, 16 bytes each
  static constexpr int KP = kPersistConsumers / TPK;  // keys side by side
  static constexpr int kPasses = (kPersistTile + KP - 1) / KP;
  uint4 k[kPasses], v[kPasses];

  // Rows [t0, min(t0 + 64, end)) of kv head kvh; only_last: only row keys - 1
  // (this step's row, which QKV writes), the others left as they are.
  template <typename T>
  __device__ void load(const PersistCache<T>& cache, int kv_dim, int kvh, int t0, int end, int keys,
                       bool only_last) {
    const int nt = min(kPersistTile, end - t0), c = threadIdx.x % TPK, kj = threadIdx.x / TPK;
    const size_t col = size_t(kvh) * HD + c * 8;
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      const int jk = p * KP + kj, row = t0 + jk;
      if (jk < nt && (!only_last || row == keys - 1)) {
        const size_t off = cache.row(row) * kv_dim + col;
        k[p] = __ldcg(reinterpret_cast<const uint4*>(cache.k + off));
        v[p] = __ldcg(reinterpret_cast<const uint4*>(cache.v + off));
      } else if (!only_last) {
        k[p] = v[p] = make_uint4(0, 0, 0, 0);
      }
    }
  }

  // K of row `row` from kn [HD] (shared memory), if this tile (rows [t0,
  // min(t0 + 64, end))) holds it.
  template <typename T>
  __device__ void set_k_row(const T* kn, int t0, int end, int row) {
    const int nt = min(kPersistTile, end - t0), c = threadIdx.x % TPK, kj = threadIdx.x / TPK;
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      const int jk = p * KP + kj;
      if (jk < nt && t0 + jk == row) k[p] = *reinterpret_cast<const uint4*>(kn + c * 8);
    }
  }
};

// The first tile of this block's first attention item of a layer,
// loaded before the layer's QKV phase. Under the weight stream a K/V load
// waits behind ~25 MB of bulk copies in flight (~5 us); issued here, it lands
// during QKV. Row keys - 1 is QKV's output: persist_attend loads it again.
// false: this block has no attention item.
template <typename T, int HD>
__device__ __forceinline__ bool persist_attend_prefetch(const PersistCache<T>& cache, int n_heads,
                                                        int n_kv_heads, int keys,
                                                        PersistKvTile<HD>& pre) {
  const int units = persistent_attn_units(n_heads, n_kv_heads);
  if (int(blockIdx.x) >= units * persist_splits(keys, units)) return false;
  const PersistItem it(blockIdx.x, keys, n_heads, n_kv_heads);
  if (it.start >= it.end) return false;
  pre.template load<T>(cache, n_kv_heads * HD, it.kvh, it.start, it.end, keys, false);
  return true;
}

// The same tile asked of L2 instead of registers (FP8 kernels, whose QKV
// tiles leave no room for 32 more registers: holding the tile made ptxas
// spill 124 bytes there): its K and V rows, HD elements each, one bulk
// prefetch a row (no registers, no completion to wait for); persist_attend
// then loads the tile after the barrier from L2.
template <typename T, int HD>
__device__ __forceinline__ void persist_attend_prefetch_l2(const PersistCache<T>& cache,
                                                           int n_heads, int n_kv_heads, int keys) {
  const int units = persistent_attn_units(n_heads, n_kv_heads);
  if (int(blockIdx.x) >= units * persist_splits(keys, units)) return;
  const PersistItem it(blockIdx.x, keys, n_heads, n_kv_heads);
  const int nt = min(kPersistTile, it.end - it.start), kv_dim = n_kv_heads * HD;
  if (nt <= 0 || int(threadIdx.x) >= 2 * nt) return;  // thread 2 r (+ 1): row start + r of K (V)
  const int row = it.start + int(threadIdx.x) / 2;
  const T* src = (threadIdx.x % 2 ? cache.v : cache.k) + cache.row(row) * kv_dim + it.kvh * HD;
  bulk_prefetch_l2(src, uint32_t(HD * sizeof(T)));
}

// Qwen3's per-head norms (kQkNorm), after QKV wrote q and k raw: each
// item's q heads RMS-normalised, scaled by q_norm and turned by cs (the
// step's cos, sin [2][HD / 2]), a warp per head in registers, into shared
// memory; in the one item whose keys hold row keys - 1, k_raw's head
// likewise (k_norm), appended there and patched into the item's first tile
// (its loads were issued with the others', before the norms): no barrier or
// memory round trip of their own beyond q's load.
template <typename T>
struct PersistQkNorm {
  const T *q_norm, *k_norm;  // [HD]
  const float* k_raw;        // [n_kv_heads HD]
  const float* cs;
  float eps;
};

// pre: persist_attend_prefetch's tile, when it returned true (prefetched).
template <typename T, int HD, bool kQkNorm>
__device__ __forceinline__ void persist_attend(const float* q, const PersistCache<T>& cache,
                                               int n_heads, int n_kv_heads, int keys, float* part_o,
                                               float* part_ml, int* split_done, float* attn,
                                               int* attn_done, const PersistKvTile<HD>& pre,
                                               bool prefetched, const PersistQkNorm<T>& qk) {
  using Tile = PersistKvTile<HD>;
  constexpr int TPK = Tile::TPK, KP = Tile::KP, kPasses = Tile::kPasses;
  constexpr int GM = kPersistMaxGroup;
  static_assert(TPK <= 32 && 32 % TPK == 0);
  __shared__ float qs[GM][HD];
  __shared__ float sc[GM][kPersistTile];
  __shared__ float alpha_s[GM], m_s[GM], l_s[GM];
  __shared__ float red[kPersistWarps][GM][HD];
  __shared__ bool last_split;
  __shared__ __align__(16) T kn[kQkNorm ? HD : 8];  // kQkNorm: the step's k row, normalised
  const int kv_dim = n_kv_heads * HD, units = persistent_attn_units(n_heads, n_kv_heads);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int c = tid % TPK, kj = tid / TPK;
  const int nsplit = persist_splits(keys, units);
  const float scale = rsqrtf(float(HD));

  for (int item = blockIdx.x; item < units * nsplit; item += gridDim.x) {
    const PersistItem it(item, keys, n_heads, n_kv_heads);
    // G: this unit's query heads, heads h0 ... (all of the kv head's, but
    // for Qwen2.5's 7 per kv head)
    const int kvh = it.kvh, G = it.nq, h0 = kvh * (n_heads / n_kv_heads) + it.q0;
    const int split = item / units, start = it.start, end = it.end;
    // K and V rows of a tile, loaded together (they do not depend on q): the
    // first tile's loads are in flight with q's, so a short context costs one
    // memory round trip, not three (none but this step's row when prefetched).
    // With q/k norms that row's k is not in the pool yet: the item holding
    // it (end == keys) normalises it below and takes it into its tile from
    // shared memory, so its loads too start before the norms.
    const bool first_pre = item == int(blockIdx.x) && prefetched;
    Tile kv;
    if (first_pre) {
      kv = pre;
      kv.template load<T>(cache, kv_dim, kvh, start, end, keys, true);
    } else if (start < end) {
      kv.template load<T>(cache, kv_dim, kvh, start, end, keys, false);
    }
    if constexpr (kQkNorm) {
      // Warp g < G: query head h0 + g; warp G, in the item holding row keys
      // - 1: k_raw's head kvh, appended to the pool (for later tiles) and
      // kept in kn (for this one). Lane l holds elements l + 32 u, so RoPE's
      // pairs (u, u + U / 2) are its own.
      constexpr int U = HD / 32;
      static_assert(HD % 64 == 0);
      const bool has_k = end == keys;
      if (warp < G || (has_k && warp == G)) {
        const bool is_q = warp < G;
        const float* src = is_q ? q + (h0 + warp) * HD : qk.k_raw + kvh * HD;
        const T* w = is_q ? qk.q_norm : qk.k_norm;
        float x[U], ss = 0.0f;
#pragma unroll
        for (int u = 0; u < U; ++u) {
          x[u] = __ldcg(src + lane + 32 * u);
          ss += x[u] * x[u];
        }
        const float r = rsqrtf(warp_sum(ss) / float(HD) + qk.eps);
#pragma unroll
        for (int u = 0; u < U; ++u) x[u] = x[u] * r * to_f32(w[lane + 32 * u]);
#pragma unroll
        for (int u = 0; u < U / 2; ++u)
          rope_turn(x[u], x[u + U / 2], qk.cs[lane + 32 * u], qk.cs[HD / 2 + lane + 32 * u]);
        if (is_q) {
#pragma unroll
          for (int u = 0; u < U; ++u) qs[warp][lane + 32 * u] = x[u] * scale;
        } else {
          T* const k_row = cache.k + cache.row(keys - 1) * kv_dim + kvh * HD;
#pragma unroll
          for (int u = 0; u < U; ++u) {
            const T v = from_f32<T>(x[u]);
            k_row[lane + 32 * u] = v;
            kn[lane + 32 * u] = v;
          }
          __threadfence_block();  // the pool's row, before this block's later loads of it
        }
      }
    } else {
      for (int i = tid; i < G * HD; i += kPersistConsumers)
        qs[i / HD][i % HD] = __ldcg(q + h0 * HD + i) * scale;
    }
    if (tid < GM) {
      m_s[tid] = -FLT_MAX;
      l_s[tid] = 0.0f;
    }
    consumer_sync();  // qs, m_s, l_s (and kn, the k row)
    if (kQkNorm && end == keys && start < end) kv.set_k_row(kn, start, end, keys - 1);
    float acc[GM][8] = {};
    for (int t0 = start; t0 < end; t0 += kPersistTile) {
      const int nt = min(kPersistTile, end - t0);
#pragma unroll
      for (int p = 0; p < kPasses; ++p) {
        const int jk = p * KP + kj;
        float f[8];
        unpack8<T>(kv.k[p], f);
#pragma unroll
        for (int g = 0; g < GM; ++g) {
          if (g >= G) break;
          float s = 0.0f;
#pragma unroll
          for (int e = 0; e < 8; ++e) s += f[e] * qs[g][c * 8 + e];
#pragma unroll
          for (int o = TPK / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
          if (c == 0 && jk < nt) sc[g][jk] = s;
        }
      }
      consumer_sync();  // scores of the tile
      // The online-softmax step written out: as a shared helper called here
      // it made ptxas spill 80 bytes at this kernel's 168 registers (decode
      // +0.05 ms/token).
      for (int g = warp; g < G; g += kPersistWarps) {
        const float v0 = lane < nt ? sc[g][lane] : -FLT_MAX;
        const float v1 = lane + 32 < nt ? sc[g][lane + 32] : -FLT_MAX;
        const float m_old = m_s[g];
        const float m_new = fmaxf(m_old, warp_max(fmaxf(v0, v1)));
        const float p0 = lane < nt ? __expf(v0 - m_new) : 0.0f;
        const float p1 = lane + 32 < nt ? __expf(v1 - m_new) : 0.0f;
        sc[g][lane] = p0;
        sc[g][lane + 32] = p1;
        const float sum = warp_sum(p0 + p1);
        if (lane == 0) {
          const float alpha = __expf(m_old - m_new);
          alpha_s[g] = alpha;
          l_s[g] = l_s[g] * alpha + sum;
          m_s[g] = m_new;
        }
      }
      consumer_sync();  // probabilities and alpha
#pragma unroll
      for (int g = 0; g < GM; ++g) {
        if (g >= G) break;
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[g][e] *= alpha_s[g];
      }
#pragma unroll
      for (int p = 0; p < kPasses; ++p) {
        const int jk = p * KP + kj;
        if (jk >= nt) break;
        float f[8];
        unpack8<T>(kv.v[p], f);
#pragma unroll
        for (int g = 0; g < GM; ++g) {
          if (g >= G) break;
          const float pr = sc[g][jk];
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[g][e] += pr * f[e];
        }
      }
      if (t0 + kPersistTile < end)
        kv.template load<T>(cache, kv_dim, kvh, t0 + kPersistTile, end, keys, false);
      consumer_sync();  // sc and alpha_s are rewritten by the next tile
    }
    // Sum the key lanes: those of a warp by shuffles, then the 8 warps.
#pragma unroll
    for (int g = 0; g < GM; ++g) {
      if (g >= G) break;
#pragma unroll
      for (int o = TPK; o < 32; o <<= 1)
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[g][e] += __shfl_xor_sync(0xffffffffu, acc[g][e], o);
      if (lane < TPK)
#pragma unroll
        for (int e = 0; e < 8; ++e) red[warp][g][c * 8 + e] = acc[g][e];
    }
    consumer_sync();  // every warp's partial outputs
    for (int i = tid; i < G * HD; i += kPersistConsumers) {
      const int g = i / HD, d = i % HD, head = h0 + g;
      float o = 0.0f;
#pragma unroll
      for (int w = 0; w < kPersistWarps; ++w) o += red[w][g][d];
      if (nsplit == 1) {
        attn[head * HD + d] = o / l_s[g];
        continue;
      }
      part_o[(size_t(split) * n_heads + head) * HD + d] = o;
      if (d == 0) {
        part_ml[(size_t(split) * n_heads + head) * 2] = m_s[g];  // -FLT_MAX for an empty split
        part_ml[(size_t(split) * n_heads + head) * 2 + 1] = l_s[g];
      }
    }
    consumer_sync();  // the block's writes, before thread 0 counts them
    if (nsplit > 1) {
      if (tid == 0) {
        __threadfence();  // our partials, before the count that may make another block combine
        last_split = atomicAdd(split_done + it.unit, 1) == nsplit - 1;
      }
      consumer_sync();   // last_split
      if (last_split) {  // combine: sum_s e^(m_s - M) o_s / sum_s e^(m_s - M) l_s, online in s
        __threadfence();
        for (int i = tid; i < G * HD; i += kPersistConsumers) {
          const int head = h0 + i / HD, d = i % HD;
          float m = -FLT_MAX, num = 0.0f, den = 0.0f;
#pragma unroll 4
          for (int sp = 0; sp < nsplit; ++sp) {
            const float ms = __ldcg(part_ml + (size_t(sp) * n_heads + head) * 2);
            const float ls = __ldcg(part_ml + (size_t(sp) * n_heads + head) * 2 + 1);
            const float os = __ldcg(part_o + (size_t(sp) * n_heads + head) * HD + d);
            if (ms == -FLT_MAX) continue;  // an empty split
            const float mn = fmaxf(m, ms), ea = __expf(m - mn), eb = __expf(ms - mn);
            num = num * ea + os * eb;
            den = den * ea + ls * eb;
            m = mn;
          }
          attn[head * HD + d] = num / den;
        }
        consumer_sync();
        if (tid == 0) persist_signal(attn_done);
      }
    } else if (tid == 0) {
      persist_signal(attn_done);
    }
    consumer_sync();  // red, m_s, l_s, last_split are reused by the next item
  }
}

}  // namespace hayate::cuda
