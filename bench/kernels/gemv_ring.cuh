// Decode GEMV that streams W through shared memory with bulk async copies
// (run 10, issue 4). gemv_variants.cuh's kernels keep the weight loads in flight in
// registers: at 4 blocks of 256 threads and 16 KB per block in flight an SM
// holds 64 KB, and halving the grid to make room for the next kernel under
// PDL halved that (run 8). Here one block per SM keeps a ring of S stages in
// shared memory, each stage the R rows of one row group (G groups per stage),
// filled by a producer warp with one `cp.async.bulk` per row (a row of W [rows, K]
// is K * sizeof(T) contiguous bytes: 8 KB at K = 4096) that completes on the
// stage's mbarrier. All S stages are in flight while the block consumes one,
// without registers: K = 4096, R = 2, S = 6 is 96 KB per SM.
//
// Across kernel boundaries: the weights never depend on the previous kernel,
// so the first S stages are issued before griddepcontrol.wait; with 96 KB of
// shared memory two such blocks fit on an SM, so under PDL the next kernel's
// blocks become resident while ours stream, and fill their rings during our
// tail. Only x (and the epilogue's h, pos) wait for the previous kernel.
//
// Compute: thread t of a group handles chunks (8 elements, 16 bytes) c = t +
// j * (256 / G), j < NC, of every row; its slice of x (normed, when fused)
// sits in registers for the whole kernel (NC * 8 floats), so a stage costs
// per thread R * NC shared loads of 16 bytes, the FMAs and one warp reduction
// per row; warps synchronise through mbarriers only (see the loop), so the
// epilogue of one tile does not hold up the block.
// Epilogues are ring.cuh's and gemv_variants.cuh's (row mapping, prepare,
// store); the early-read ones (kEarly) have their reads issued a stage ahead.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/kernels/ring.cuh"
#include "cuda/launch.h"
#include "gemv_variants.cuh"

namespace hayate::cuda {

constexpr int kTmaMaxStages = 16;
// 8 consumer warps (kGemvThreads) and one producer warp that only issues the
// bulk copies (run 10b: with thread 0 of a consumer warp issuing, that warp
// waited for the slowest warp's release and paid the issue on every tile, and
// 16 KB tiles ran consumer-bound: lm_head 262 us against 236 at 32 KB).
constexpr int kTmaThreads = kGemvThreads + 32;

// R rows per group, G groups per stage, S stages, NC chunks per thread and row
// at most (K <= NC * 8 * 256 / G). trigger_at_entry: let the next kernel launch
// as soon as our first stages are issued (else: once the block has issued its
// last stage, i.e. when it only drains).
template <typename T, int R, int G, int S, int NC, bool kNorm, typename Epi>
__global__ void __launch_bounds__(kTmaThreads, 2)
    gemv_tma_kernel(const T* __restrict__ W,  // [rows, K]
                    int K, int groups, GemvInput<T> in, Epi epi, bool trigger_at_entry) {
  static_assert(S >= 2 && S <= kTmaMaxStages && kGemvThreads % (32 * G) == 0 && G <= 32);
  constexpr int kGroupThreads = kGemvThreads / G;
  constexpr int kWarpsPerGroup = kGroupThreads / 32;
  constexpr int kWarps = kGemvThreads / 32;
  // Partial sums of tile j live in part[j % P]. P = 2S: a warp writes tile j's
  // slot only after tile j was issued, i.e. after every warp released tile
  // j - S, and the warp that reads tile j - 2S's slot (its epilogue) does so
  // before it goes on to release tile j - S.
  constexpr int P = 2 * S;
  extern __shared__ __align__(128) unsigned char ring[];  // [S][G * R][K] of T
  __shared__ __align__(8) uint64_t full[S];               // stage landed (1 arrival + bytes)
  __shared__ __align__(8) uint64_t empty[S];              // stage read by every warp
  __shared__ __align__(8) uint64_t done[P];  // tile's partial sums written by every warp
  __shared__ float part[P][kWarps][R];

  const int tid = threadIdx.x, t = tid % kGroupThreads, slot = tid / kGroupThreads;
  const int warp = tid / 32, lane = tid % 32;
  const int nchunks = K / 8;
  const uint32_t row_bytes = uint32_t(K) * sizeof(T);
  const int ntiles = (groups + G - 1) / G;
  // Tiles (G consecutive row groups) of this block: blockIdx.x + j * gridDim.x.
  const int nloc = blockIdx.x < ntiles ? (ntiles - 1 - int(blockIdx.x)) / int(gridDim.x) + 1 : 0;

  auto issue = [&](int j) {  // producer lane 0 only
    const int tile = blockIdx.x + j * gridDim.x, buf = j % S;
    const uint32_t bar = smem_u32(&full[buf]);
    const int ng = min(G, groups - tile * G);
    mbar_expect(bar, uint32_t(ng) * R * row_bytes);
    for (int s = 0; s < ng; ++s)
#pragma unroll
      for (int r = 0; r < R; ++r)
        bulk_g2s(smem_u32(ring + (size_t(buf) * G * R + s * R + r) * row_bytes),
                 W + size_t(epi.row(tile * G + s, r)) * K, row_bytes, bar);
  };

  const bool producer = warp == kWarps;
  if (producer && lane == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(smem_u32(&full[s]), 1);
      mbar_init(smem_u32(&empty[s]), kWarps);
    }
    for (int p = 0; p < P; ++p) mbar_init(smem_u32(&done[p]), kWarps);
    mbar_init_fence();
    for (int j = 0; j < min(S, nloc); ++j) issue(j);
  }
  __syncthreads();  // barriers initialised before anyone waits on them
  if (trigger_at_entry || nloc <= S) griddep_launch();
  griddep_wait();

  // This thread's slice of x (x * norm_w when the RMSNorm is fused; rstd is
  // applied to the sums in the epilogue, as in gemv.cuh).
  float xr[NC][8];
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < NC; ++j) {
    const int c = t + j * kGroupThreads;
    if (!producer && c < nchunks) {
      const float4 a = reinterpret_cast<const float4*>(in.x)[2 * c];
      const float4 b = reinterpret_cast<const float4*>(in.x)[2 * c + 1];
      float n[8] = {1, 1, 1, 1, 1, 1, 1, 1};
      if constexpr (kNorm) {
        unpack8<T>(*reinterpret_cast<const uint4*>(in.norm_w + size_t(c) * 8), n);
        // Every group holds the whole x; count it once (slot 0).
        if (slot == 0)
          ss += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w + b.x * b.x + b.y * b.y + b.z * b.z +
                b.w * b.w;
      }
      xr[j][0] = a.x * n[0], xr[j][1] = a.y * n[1], xr[j][2] = a.z * n[2], xr[j][3] = a.w * n[3];
      xr[j][4] = b.x * n[4], xr[j][5] = b.y * n[5], xr[j][6] = b.z * n[6], xr[j][7] = b.w * n[7];
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) xr[j][e] = 0.0f;
    }
  }
  float rstd = 1.0f;
  if constexpr (kNorm) {  // all 9 warps (the producer adds 0)
    __shared__ float red[kWarps + 1];
    ss = warp_sum(ss);
    if (lane == 0) red[warp] = ss;
    __syncthreads();
    ss = 0.0f;
#pragma unroll
    for (int i = 0; i <= kWarps; ++i) ss += red[i];
    rstd = rsqrtf(ss / float(K) + in.eps);
  }

  if (producer) {
    // Refill each stage as soon as every consumer warp has released it.
    if (lane == 0)
      for (int j = S; j < nloc; ++j) {
        mbar_wait(smem_u32(&empty[(j - S) % S]), uint32_t((j - S) / S) & 1u);
        issue(j);
      }
    __syncwarp();
    if (!trigger_at_entry && nloc > S) griddep_launch();  // our last stage is issued
    return;
  }

  // No block-wide barrier per tile (run 10a: with one, every tile waited on
  // the thread doing the epilogue: QKV's RoPE, the residual's h, SiLU, 3-10
  // us per launch). Warps release a stage through `empty` and publish their
  // partial sums through `done`; tile j's epilogue is done by warp j % 8 (its
  // lanes < G, one group each), so one warp lags at a time while the others
  // run ahead on stages already in the ring.
  using Pre = typename Epi::Pre;
  for (int j = 0; j < nloc; ++j) {
    const int buf = j % S, tile = blockIdx.x + j * gridDim.x;
    const bool epi_warp = warp == j % kWarps;
    if (!trigger_at_entry && nloc > S && j == nloc - S)
      griddep_launch();  // last stage issued by now
    // The epilogue's global reads (h, RoPE's position) start under the dot products.
    Pre pre{};
    if (epi_warp && lane < G && tile * G + lane < groups) pre = epi.prepare(tile * G + lane);
    mbar_wait(smem_u32(&full[buf]), uint32_t(j / S) & 1u);
    const unsigned char* st = ring + (size_t(buf) * G * R + slot * R) * row_bytes;
    float acc[R];
    ring_tile_dot<T, R, NC>(st, row_bytes, t, kGroupThreads, nchunks, xr, acc);
    __syncwarp();  // every lane is done reading the stage
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r) part[j % P][warp][r] = acc[r];
      mbar_arrive(smem_u32(&empty[buf]));
      mbar_arrive(smem_u32(&done[j % P]));  // release: part is visible to the waiter
    }
    if (epi_warp) {
      mbar_wait(smem_u32(&done[j % P]), uint32_t(j / P) & 1u);
      const int g = tile * G + lane;
      if (lane < G && g < groups) {
        float sum[R];
        ring_group_sums<R, kWarpsPerGroup>(part[j % P], lane, rstd, sum);
        epi.store(g, sum, pre);
      }
    }
  }
}

// Shared memory of one block: the ring.
template <typename T, int R, int G, int S>
size_t gemv_tma_smem(int K) {
  return size_t(S) * G * R * size_t(K) * sizeof(T);
}

// One block per SM (blocks_per_sm, if > 0, allows more), at most one per tile.
template <typename T, int R, int G, int S, int NC, bool kNorm, typename Epi>
void launch_gemv_tma(const T* W, int groups, int K, GemvInput<T> in, Epi epi, cudaStream_t s,
                     bool pdl, bool trigger_at_entry, int blocks_per_sm = 1) {
  auto kernel = gemv_tma_kernel<T, R, G, S, NC, kNorm, Epi>;
  const size_t smem = gemv_tma_smem<T, R, G, S>(K);
  if (smem > 48 * 1024)
    HAYATE_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  int device = 0, sms = 0;
  HAYATE_CUDA_CHECK(cudaGetDevice(&device));
  HAYATE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const unsigned tiles = ceil_div(groups, G);
  const unsigned blocks = std::min<unsigned>(tiles, unsigned(sms * std::max(blocks_per_sm, 1)));
  launch({blocks, kTmaThreads, smem, s, pdl}, kernel, W, K, groups, in, epi, trigger_at_entry);
}

}  // namespace hayate::cuda
