// The weight ring's pieces (sm_90), shared by the persistent decode kernel
// (persistent.cuh) and the lab's ring GEMV (bench/kernels/gemv_ring.cuh): the
// mbarriers and bulk async copies that fill a block's shared-memory stages
// with rows of W [rows, K], a warp's dot products of a stage with its slice of
// x, the sums of a tile's row groups, and the epilogues that map a row group
// to its rows and store its sums.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels/common.cuh"
#include "cuda/kernels/fp8.cuh"

namespace hayate::cuda {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Warp-specialised register budgets (sm_90a): every thread of a warpgroup
// (4 warps) lowers or raises its register count to N (a multiple of 8 in
// [24, 256]); an increase waits for registers the others gave back. Without
// sm_90a's features a no-op: the kernel then keeps its compiled budget.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N) : "memory");
#endif
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N) : "memory");
#endif
}

// mbarrier + bulk copy (sm_90). Other architectures trap: the build targets
// sm_90a only (CMakeLists.txt), the guard keeps the header compilable.
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
#else
  __trap();
#endif
}
// Makes the initialised barriers visible to the async proxy (the bulk copies).
__device__ __forceinline__ void mbar_init_fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
// One arrival that also expects `bytes` of transactions this phase.
__device__ __forceinline__ void mbar_expect(uint32_t bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
#else
  __trap();
#endif
}
// One arrival (release at CTA scope: the arriving thread's writes are seen by
// threads that then wait on the phase).
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
#else
  __trap();
#endif
}
// bytes (multiple of 16, both addresses 16-byte aligned) from global to shared,
// completing on bar.
__device__ __forceinline__ void bulk_g2s(uint32_t dst, const void* src, uint32_t bytes,
                                         uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
#else
  __trap();
#endif
}

// bytes (multiple of 16, 16-byte aligned) from global memory into L2, nothing waited for.
__device__ __forceinline__ void bulk_prefetch_l2(const void* src, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
#else
  __trap();
#endif
}

// A warp's share of a stage's dot products, reduced over the warp: acc[r] =
// sum over this thread's chunks c = t + jj * step (c < nchunks) of row r of the
// stage (R rows of row_bytes at st) . xr[jj].
template <typename T, int R, int NC>
__device__ __forceinline__ void ring_tile_dot(const unsigned char* st, uint32_t row_bytes, int t,
                                              int step, int nchunks, const float (&xr)[NC][8],
                                              float (&acc)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
#pragma unroll
  for (int jj = 0; jj < NC; ++jj) {
    const int c = t + jj * step;
    if (c < nchunks) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const uint4 w = *reinterpret_cast<const uint4*>(st + r * row_bytes + size_t(c) * 16);
        float f[8];
        unpack8<T>(w, f);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r] += f[e] * xr[jj][e];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = warp_sum(acc[r]);
}

// One row over two stages (persist_produce's wide rows): chunks c < NC * step
// in stage a against xr, the rest in stage b against xt [c - NC * step] (shared
// memory: x's tail, which the registers do not hold); acc as ring_tile_dot's (R = 1).
template <typename T, int NC, int NB>
__device__ __forceinline__ void ring_tile_dot2(const unsigned char* a, const unsigned char* b,
                                               int t, int step, int nchunks,
                                               const float (&xr)[NC][8],
                                               const float (*xt)[8], float& acc) {
  acc = 0.0f;
#pragma unroll
  for (int jj = 0; jj < NC; ++jj) {
    const int c = t + jj * step;
    if (c < nchunks) {  // always, but unguarded loads made ptxas hoist them all and spill
      float f[8];
      unpack8<T>(*reinterpret_cast<const uint4*>(a + size_t(c) * 16), f);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc += f[e] * xr[jj][e];
    }
  }
#pragma unroll
  for (int jj = 0; jj < NB; ++jj) {
    const int c = t + jj * step;
    if (c < nchunks - NC * step) {
      float f[8];
      unpack8<T>(*reinterpret_cast<const uint4*>(b + size_t(c) * 16), f);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc += f[e] * xt[c][e];
    }
  }
  acc = warp_sum(acc);
}

// NR rows' partial sums v[r] summed over the warp's lanes, halving the rows
// each step (lanes with bit o of their index keep the upper half): NR - 1 + 5
// - log2(NR) shuffles, not 5 per row. Lane l gets row ring_row_of_lane<NR>(l).
template <int NR>
__device__ __forceinline__ float ring_rows_sum(float (&v)[NR], int lane) {
  int o = 16;
#pragma unroll
  for (int h = NR / 2; h >= 1; h /= 2, o /= 2) {
    const bool up = lane & o;
#pragma unroll
    for (int i = 0; i < h; ++i) {
      const float send = up ? v[i] : v[i + h], keep = up ? v[i + h] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
    }
  }
  for (; o >= 1; o /= 2) v[0] += __shfl_xor_sync(0xffffffffu, v[0], o);
  return v[0];
}

// A stage of FP8 rows (e4m3 codes) on the tensor cores: NR rows of row_bytes
// = K at st, every warp over all of them, warp w taking the 256-byte chunks c
// = w + 8 jj (jj < NC) of each row; lane l holds x's codes at k = 256 c + 8 l
// as f16 pairs (xh[jj]: e4m3x8_to_h8 of the 8 codes, exact; zero past K).
// Each row's 8 codes of the chunk widen to f16 pairs the same way (exact),
// and two mma.m16n8k16 (f16, fp32 out) take the chunk's 256 bytes: B's column
// n is the row's 32 codes at 256 c + 32 n (lane (g, t) = 4 g + t gives column
// g's k = {2t, 2t + 1} and {2t + 8, 2t + 9} as its pairs 0 and 1 in the first
// mma, pairs 2 and 3 at the same k in the second), A's rows g and g + 8 the
// same pairs of x; a dot product does not care in which order k is taken, as
// long as A and B agree. C's diagonal
// (row g = column n) is the chunk's segment n . x: lane (g, t) holds C[g][2t]
// (c0) and C[g][2t + 1] (c1), the diagonal where g = 2t or 2t + 1. So two
// instructions take 256 weight bytes, 16x the work a row-times-vector needs,
// where SIMT tiles paid a conversion to f16x2, two to f32 and an FMA per byte.
// (sm_90 has no FP8 mma.sync: ptxas turns mma.m16n8k32.e4m3 into these two
// f16 mma after widening both operands; widening x once per phase here keeps
// that off the stage loop.) Each chunk's first mma starts from zero C, the
// second adds to it, and the diagonal is added in fp32.
// No guard per chunk (with the load and the mma guarded the stage took 2.5x
// as long in the consumer lab, whose variant 6 keeps that form): past K the
// codes are zeroed and the mma runs anyway. It needs the NR rows inside the
// stage (stale bytes are fine: a row's codes only meet its own sum) and x's
// codes past K zero (persist_consume's).
// out: the rows' sums, warp-reduced: lane l holds row ring_row_of_lane<NR>(l).
template <int NR, int NC>
__device__ __forceinline__ float ring_tile_mma_fp8(const unsigned char* st, uint32_t row_bytes,
                                                   int K, int warp, int lane,
                                                   const uint4 (&xh)[NC]) {
  static_assert(NR >= 1 && NR <= 32 && (NR & (NR - 1)) == 0);
  const int g = lane / 4, t = lane % 4;
  const float m0 = g == 2 * t ? 1.0f : 0.0f, m1 = g == 2 * t + 1 ? 1.0f : 0.0f;
  // Row n's dot products over this warp's chunks.
  const auto row_dot = [&](int n) {
    float acc = 0.0f;
#pragma unroll
    for (int jj = 0; jj < NC; ++jj) {
      const int k = (warp + 8 * jj) * 256 + 8 * lane;
      const bool in = k < K;  // past K: a load in the row, its codes zeroed
      uint2 w = *reinterpret_cast<const uint2*>(st + n * row_bytes + (in ? k : 0));
      w.x = in ? w.x : 0u;
      w.y = in ? w.y : 0u;
      {  // (scope: h and C per chunk)
        const uint4 h = e4m3x8_to_h8(w);
        float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
            "{%4,%4,%5,%5}, {%6,%7}, {%0,%1,%2,%3};\n"
            : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
            : "r"(xh[jj].x), "r"(xh[jj].y), "r"(h.x), "r"(h.y));
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
            "{%4,%4,%5,%5}, {%6,%7}, {%0,%1,%2,%3};\n"
            : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
            : "r"(xh[jj].z), "r"(xh[jj].w), "r"(h.z), "r"(h.w));
        acc += d0 * m0 + d1 * m1;
      }
    }
    return acc;
  };
  float v[NR];
  if constexpr (NC <= 2) {
#pragma unroll
    for (int n = 0; n < NR; ++n) v[n] = row_dot(n);
  } else {  // long rows (down): one row's chunks in flight at a time
#pragma unroll
    for (int n = 0; n < NR; ++n) v[n] = 0.0f;
#pragma unroll 1
    for (int n = 0; n < NR; ++n) {
      const float a = row_dot(n);
#pragma unroll
      for (int i = 0; i < NR; ++i) v[i] = i == n ? a : v[i];
    }
  }
  return ring_rows_sum<NR>(v, lane);
}

// The row whose sum lane l holds after ring_tile_mma_fp8<NR>: the top
// log2(NR) bits of l, the first step's bit the highest.
template <int NR>
__device__ __forceinline__ int ring_row_of_lane(int lane) {
  int r = 0;
#pragma unroll
  for (int h = NR / 2, o = 16; h >= 1; h /= 2, o /= 2) r += lane & o ? h : 0;
  return r;
}

// A tile's epilogue, lane `group` of its warp: sum[r] = rstd * the partial sums
// part[w][r] of the group's WPG warps (w = group * WPG ...).
template <int R, int WPG, int PR>
__device__ __forceinline__ void ring_group_sums(const float (*part)[PR], int group, float rstd,
                                                float (&sum)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    sum[r] = 0.0f;
#pragma unroll
    for (int i = 0; i < WPG; ++i) sum[r] += part[group * WPG + i][r];
    sum[r] *= rstd;
  }
}

// ---- epilogues: row mapping of a row group, and where its sums go ----------

// Each epilogue maps a row group to its rows (row), reads what it needs from
// global memory before the tile's dot products (prepare, into Pre), and writes the
// group's sums (store).
struct NoPre {};

// y[row] = sum (R consecutive rows per group).
template <int R>
struct StoreEpi {
  float* y;
  using Pre = NoPre;
  __device__ int row(int g, int r) const { return g * R + r; }
  __device__ Pre prepare(int) const { return {}; }
  __device__ void store(int g, const float (&acc)[R], Pre) const {
#pragma unroll
    for (int r = 0; r < R; ++r) y[g * R + r] = acc[r];
  }
};

// Fused gate/up: rows g (gate) and inter + g (up); act[g] = silu(gate) * up.
struct SiluMulEpi {
  float* act;
  int inter;
  using Pre = NoPre;
  __device__ int row(int g, int r) const { return g + r * inter; }
  __device__ Pre prepare(int) const { return {}; }
  __device__ void store(int g, const float (&acc)[2], Pre) const {
    const float gate = acc[0];
    act[g] = gate / (1.0f + __expf(-gate)) * acc[1];
  }
};

}  // namespace hayate::cuda
