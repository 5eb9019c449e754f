// Decode GEMV: y = W x for one token, W [rows, K] row-major in T (half or
// bf16), x fp32. The kernel streams W once with 16-byte loads; everything else
// (the RMSNorm of x, RoPE, SiLU*mul, residual add, KV append) is fused into a
// prologue or an epilogue so a decode step is a handful of weight streams.
//
// Work split: the block's threads form groups of 32*KSPLIT threads; each group
// computes R rows ("a row group", e.g. the gate row and the up row of one
// output) over the whole K, with U 16-byte loads per row in flight per thread.
// KSPLIT > 1 splits K over warps, for shapes with few rows (more blocks).
// The lab's register-GEMV variants (gemv_lab.cu); the decode step streams its
// weights through the persistent kernel's ring instead (NOTES.md).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/kernels/common.cuh"
#include "cuda/kernels/ring.cuh"

namespace hayate::cuda {

constexpr int kGemvThreads = 256;

// The input vector: x (fp32, K), optionally RMS-normalised with weight norm_w
// (the norm is fused: each block computes rsqrt(mean(x^2) + eps) itself).
template <typename T>
struct GemvInput {
  const float* x = nullptr;
  const T* norm_w = nullptr;  // nullptr: use x as is
  float eps = 0.0f;
};

// ---- pieces shared by gemv_kernel and gemv2_kernel ---------------------------

// The fused RMSNorm's prologue: stages x * norm_w in xs [K] and returns this
// thread's share of sum(x^2). 16-byte loads of x and 8-byte loads of norm_w,
// unrolled so a thread's loads are in flight together (K = 4096: 4 of each per
// thread, one L2 round trip instead of one per element).
template <typename T>
__device__ __forceinline__ float stage_normed_x(const GemvInput<T>& in, int K, float* xs) {
  float ss = 0.0f;
#pragma unroll 4
  for (int k4 = threadIdx.x; k4 < K / 4; k4 += kGemvThreads) {
    const float4 v = reinterpret_cast<const float4*>(in.x)[k4];
    float n[4];
    unpack4<T>(reinterpret_cast<const uint2*>(in.norm_w)[k4], n);
    ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    reinterpret_cast<float4*>(xs)[k4] = make_float4(v.x * n[0], v.y * n[1], v.z * n[2], v.w * n[3]);
  }
  __syncthreads();  // xs complete
  return ss;
}

// rsqrt(mean(x^2) + eps) from every thread's share of sum(x^2) (block-wide).
__device__ __forceinline__ float block_rstd(float ss, int K, float eps) {
  __shared__ float red[kGemvThreads / 32];
  ss = warp_sum(ss);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = ss;
  __syncthreads();  // red complete
  ss = 0.0f;
#pragma unroll
  for (int i = 0; i < kGemvThreads / 32; ++i) ss += red[i];
  return rsqrtf(ss / float(K) + eps);
}

// acc[r] += the dot products of the U chunks c0 + u * step (8 elements each)
// of row r's loads w[r][u] with x.
template <typename T, int R, int U>
__device__ __forceinline__ void dot_chunks(const uint4 (&w)[R][U], const float* x, int c0, int step,
                                           int nchunks, float (&acc)[R]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int c = c0 + u * step;
    if (c < nchunks) {
      const float4 xa = *reinterpret_cast<const float4*>(x + size_t(c) * 8);
      const float4 xb = *reinterpret_cast<const float4*>(x + size_t(c) * 8 + 4);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float f[8];
        unpack8<T>(w[r][u], f);
        acc[r] += f[0] * xa.x + f[1] * xa.y + f[2] * xa.z + f[3] * xa.w + f[4] * xb.x +
                  f[5] * xb.y + f[6] * xb.z + f[7] * xb.w;
      }
    }
  }
}

// Reduces each thread's partial sums to the group's R sums (warp, then the
// KSPLIT warps of the group), scales them by rstd and lets the group's first
// thread store them. With KSPLIT > 1 the partial sums are double-buffered by
// round parity: the barrier of round k+1 already orders round k's reads
// before round k+2's writes, so no barrier after the epilogue holds the block
// while one thread writes the results.
template <int R, int KSPLIT, typename Epi>
__device__ __forceinline__ void reduce_store(float (&acc)[R], float rstd, int g, bool active, int t,
                                             int& parity, const Epi& epi,
                                             const typename Epi::Pre& pre) {
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = warp_sum(acc[r]) * rstd;
  if constexpr (KSPLIT > 1) {
    __shared__ float part[2][kGemvThreads / 32][R];
    const int warp = threadIdx.x / 32;
    if (threadIdx.x % 32 == 0)
#pragma unroll
      for (int r = 0; r < R; ++r) part[parity][warp][r] = acc[r];
    __syncthreads();  // partial sums of all warps of the group
    if (t == 0 && active) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        acc[r] = 0.0f;
        for (int i = 0; i < KSPLIT; ++i) acc[r] += part[parity][warp + i][r];
      }
      epi.store(g, acc, pre);
    }
    parity ^= 1;
  } else if (t == 0 && active) {
    epi.store(g, acc, pre);
  }
}

// MINB: minimum blocks per SM for ptxas, i.e. a cap of 64 registers at 4, so
// 4 blocks of 256 threads fit per SM (uncapped, the fused variants take 67-80
// registers and 3 blocks). The lab also times MINB 1.
template <typename T, int R, int U, int KSPLIT, bool kNorm, typename Epi, int MINB = 4>
__global__ void __launch_bounds__(kGemvThreads, MINB)
    gemv_kernel(const T* __restrict__ W,  // [rows, K]
                int K, int groups, GemvInput<T> in, Epi epi) {
  static_assert(kGemvThreads % (32 * KSPLIT) == 0);
  constexpr int kGroupThreads = 32 * KSPLIT;
  constexpr int kGroupsPerBlock = kGemvThreads / kGroupThreads;
  extern __shared__ float xs[];  // [K] normalised x, when kNorm

  const int t = threadIdx.x % kGroupThreads, slot = threadIdx.x / kGroupThreads;
  const int nchunks = K / 8;  // 8 elements per 16-byte chunk
  // The grid is sized to the SMs (one wave) and walks the row groups in
  // rounds, so the prologue (the fused RMSNorm) runs once per block, not once
  // per group. Every thread runs every round (barriers inside).
  const int stride = gridDim.x * kGroupsPerBlock;

  uint4 w[R][U];
  const T* rows[R];
  auto start_round = [&](int base) {
    const int g = base + slot;
    const bool active = g < groups;
#pragma unroll
    for (int r = 0; r < R; ++r) rows[r] = W + size_t(active ? epi.row(g, r) : 0) * K;
    return active;
  };
  auto load = [&](bool active, int c0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + u * kGroupThreads;
#pragma unroll
      for (int r = 0; r < R; ++r)
        w[r][u] =
            (active && c < nchunks) ? load_stream(rows[r] + size_t(c) * 8) : make_uint4(0, 0, 0, 0);
    }
  };

  // The first loads need nothing from the previous kernel: issue them before
  // waiting on it, so the weight stream starts while that kernel drains.
  int base = blockIdx.x * kGroupsPerBlock;
  bool active = start_round(base);
  load(active, t);
  griddep_wait();

  // RMSNorm, fused: W (n * x) * rstd with rstd = rsqrt(mean(x^2) + eps), a
  // scalar that only the epilogue needs. So the prologue is one pass that
  // stages x * norm_w in shared memory and keeps each thread's sum of squares;
  // the block reduces them after the first round's dot products.
  const float* x = in.x;
  float rstd = 1.0f, ss = 0.0f;
  if constexpr (kNorm) {
    ss = stage_normed_x(in, K, xs);
    x = xs;
  }
  bool first_round = true;
  int parity = 0;

  for (;;) {
    const int g = base + slot;
    // In its last round the block lets the next kernel launch: its blocks
    // take the slots ours free and start their own weight loads.
    if (base + stride >= groups) griddep_launch();
    // The epilogue's own global reads (RoPE position and frequency, the
    // residual) start now, under the weight loads, not after the reduction.
    typename Epi::Pre pre{};
    if (t == 0 && active) pre = epi.prepare(g);
    float acc[R] = {};
    for (int c0 = t; c0 < nchunks; c0 += U * kGroupThreads) {
      dot_chunks<T, R, U>(w, x, c0, kGroupThreads, nchunks, acc);
      if (c0 + U * kGroupThreads < nchunks) load(active, c0 + U * kGroupThreads);
    }
    // Start the next round's loads before reducing this one.
    const int next = base + stride;
    const bool next_active = next < groups ? start_round(next) : false;
    if (next < groups) load(next_active, t);

    if constexpr (kNorm) {
      if (first_round) {
        rstd = block_rstd(ss, K, in.eps);
        first_round = false;
      }
    }
    reduce_store<R, KSPLIT>(acc, rstd, g, active, t, parity, epi, pre);
    if (next >= groups) break;
    base = next;
    active = next_active;
  }
}

// Two rounds in flight (run 8). When a row group's whole row is one batch of
// loads per thread (K <= U * 8 * 32 * KSPLIT: K = 4096 with U = 2, KSPLIT = 8),
// each thread holds the loads of the current round and of the next in the
// same registers that gemv_kernel's U = 4 spends (half idle at K = 4096), so
// an SM keeps twice the bytes in flight at the same occupancy. A buffer is
// refilled with the round after next as soon as its dot products are done.
template <int B>
using Buf = std::integral_constant<int, B>;

template <typename T, int R, int U, int KSPLIT, bool kNorm, typename Epi>
__global__ void __launch_bounds__(kGemvThreads, 4)
    gemv2_kernel(const T* __restrict__ W,  // [rows, K], K <= U * 8 * 32 * KSPLIT
                 int K, int groups, GemvInput<T> in, Epi epi) {
  static_assert(kGemvThreads % (32 * KSPLIT) == 0);
  constexpr int kGroupThreads = 32 * KSPLIT;
  constexpr int kGroupsPerBlock = kGemvThreads / kGroupThreads;
  extern __shared__ float xs[];  // [K] normalised x, when kNorm
  const int t = threadIdx.x % kGroupThreads, slot = threadIdx.x / kGroupThreads;
  const int nchunks = K / 8;
  const int stride = gridDim.x * kGroupsPerBlock;

  uint4 w[2][R][U];
  auto issue = [&](auto buf, int base) {
    constexpr int b = decltype(buf)::value;
    const int g = base + slot;
    const bool active = g < groups;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const T* row = W + size_t(active ? epi.row(g, r) : 0) * K;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = t + u * kGroupThreads;
        w[b][r][u] =
            (active && c < nchunks) ? load_stream(row + size_t(c) * 8) : make_uint4(0, 0, 0, 0);
      }
    }
  };

  // Two rounds of weight loads before waiting on the previous kernel.
  int base = blockIdx.x * kGroupsPerBlock;
  issue(Buf<0>{}, base);
  issue(Buf<1>{}, base + stride);
  griddep_wait();

  const float* x = in.x;
  float rstd = 1.0f, ss = 0.0f;
  if constexpr (kNorm) {
    ss = stage_normed_x(in, K, xs);
    x = xs;
  }
  bool first_round = true;
  int parity = 0;

  // One round on buffer b; returns true after the block's last round.
  auto round = [&](auto buf) {
    constexpr int b = decltype(buf)::value;
    const int g = base + slot;
    const bool active = g < groups;
    if (base + stride >= groups) griddep_launch();
    float acc[R] = {};
    dot_chunks<T, R, U>(w[b], x, t, kGroupThreads, nchunks, acc);
    // This buffer is free: refill it with the round after next.
    if (base + 2 * stride < groups) issue(buf, base + 2 * stride);
    if constexpr (kNorm) {
      if (first_round) {
        rstd = block_rstd(ss, K, in.eps);
        first_round = false;
      }
    }
    // The epilogue's reads happen at store time (run 8: reading them early
    // was ~1 us slower per launch).
    typename Epi::Pre pre{};
    if (t == 0 && active) pre = epi.prepare(g);
    reduce_store<R, KSPLIT>(acc, rstd, g, active, t, parity, epi, pre);
    const bool last = base + stride >= groups;
    base += stride;
    return last;
  };
  for (;;) {
    if (round(Buf<0>{})) break;
    if (round(Buf<1>{})) break;
  }
}

// ---- epilogues (NoPre, StoreEpi, SiluMulEpi: cuda/kernels/ring.cuh) ------

// h[row] += sum: the residual add after o_proj and down_proj. kEarly reads h
// in prepare (after griddep_wait: the previous kernel may have written it);
// run 8 measured that ~1 us slower per launch than reading it in store.
template <int R, bool kEarly = false>
struct ResidualEpi {
  float* h;
  struct Early {
    float v[R];
  };
  using Pre = std::conditional_t<kEarly, Early, NoPre>;
  __device__ int row(int g, int r) const { return g * R + r; }
  __device__ Pre prepare(int g) const {
    Pre p{};
    if constexpr (kEarly)
#pragma unroll
      for (int r = 0; r < R; ++r) p.v[r] = h[g * R + r];
    return p;
  }
  __device__ void store(int g, const float (&acc)[R], const Pre& p) const {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if constexpr (kEarly)
        h[g * R + r] = p.v[r] + acc[r];
      else
        h[g * R + r] += acc[r];
    }
  }
};

}  // namespace hayate::cuda
