// The FP8 product (W8A8) at few rows: y [m, N] = x_scale[i] w_scale[n] .
// sum_k xq[i, k] W[n, k] (+ y), e4m3 codes, m <= 64. At these row counts the
// product is a stream of the weights (N K bytes, read once for all m rows);
// cuBLASLt's FP8 kernels move them at a quarter of the read bandwidth there
// (bench/kernels/NOTES.md, "FP8 on the H200").
//
// Each warp owns 16 MT weight rows and a K slice: it streams them straight
// into registers (16-byte loads, no L1 allocation, a ring of 64-k chunks in
// flight) and multiplies them, widened to f16 (exact), with mma.sync
// m16n8k16: A = 16 weight rows x 16 k, B = 16 k x 8 tokens, so the tokens
// are padded to 8 and a weight byte is loaded and widened once for all
// tokens. A block is k groups (each a K slice) of 1, 2 or 4 warps side by
// side over the rows; the activations (m K bytes, the same for every block)
// come from L2, into each warp's registers (one warp per group) or staged
// once per group in shared memory. The groups' partial sums meet in shared
// memory; the epilogue scales, rounds to E once (fp32 arithmetic, as
// cuBLASLt's epilogue), and adds into y where asked.
//
// Fragments (PTX ISA, mma.m16n8k16; lane = 4 g + t): A regs 0 and 2 are row
// g, regs 1 and 3 row g + 8; reg 0/1 hold k 2t, 2t+1, reg 2/3 k 8+2t..; B
// reg 0 holds k 2t.. and reg 1 k 8+2t.. of column g; C rows g (c0, c1) and
// g + 8 (c2, c3), columns 2t, 2t + 1. A dot product does not change when
// A's and B's k are permuted alike, so lane t loads 16 contiguous bytes (k
// 16t..16t+15 of a 64-k chunk) of its rows and of its token, and each of the
// chunk's four mma takes 4 of those bytes from every lane (compute() says
// which): every load is 16 bytes and contiguous. The f16 products are exact
// and the mma accumulates in fp32 (gpu_fp8_tests bounds the error against a
// double sum of the codes).
#include "core/check.h"
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/fp8.cuh"
#include "cuda/kernels/gemm_fp8_wgmma.cuh"
#include "cuda/kernels/mma.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"

namespace hayate::cuda {

// ---- kernels -------------------------------------------------------------------

constexpr int kFp8SmallMaxWarps = 8;
constexpr int kFp8SmallChunk = 64;  // k per chunk: one 16-byte load per row and lane
constexpr int kFp8SmallStages = 4;  // staged activation chunks per k group (NR > 1)

// y [m, N] (E) from W [N, K], ws [N], x [m, K], xs [m]. MT: 16-row weight
// tiles per warp; MG: 8-token groups (m <= 8 MG); NR: warps side by side over
// the rows (a block's rows RB = 16 MT NR; grid ceil(N / RB)). The block's
// 32 nwk threads are nk = nwk / NR groups of NR warps, each group one
// K / nk slice (K % (64 nk) == 0). NR 1: each warp loads its activations
// from L2 into registers; NR > 1: a group stages its slice of the
// activations in shared memory once for its NR warps (cp.async, S chunks in
// flight), which divides the activations' L2 traffic (m / 16 MT bytes per
// weight byte at NR 1) by NR. Dynamic shared memory: fp8_small_smem().
template <int MT, int MG, int NR, typename E>
__global__ void __launch_bounds__(32 * kFp8SmallMaxWarps)
    gemm_fp8_small_kernel(const uint8_t* __restrict__ W, const float* __restrict__ ws,
                          const uint8_t* __restrict__ x, const float* __restrict__ xs, int m, int N,
                          int K, E* __restrict__ y, int accumulate) {
  constexpr int RW = 16 * MT, RB = RW * NR, LD = 8 * MG + 1;  // LD: padded row of the sums
  constexpr int XS = 8 * MG * kFp8SmallChunk;                 // bytes of one staged x chunk
  // Weight chunks in flight per warp (a ring of DW; 8 MT registers each), and
  // the activations' one chunk ahead (4 MG registers each; they come from L2):
  // ptxas keeps MT 2 x MG 8 at ~250 registers, one 8-warp block per SM with
  // 64 KB of weight loads in flight.
  constexpr int DW = MT == 4 ? 2 : 4;
  extern __shared__ float part[];  // [nk][RB][LD], then (NR > 1) [nk][kFp8SmallStages][XS bytes]
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nk = (blockDim.x >> 5) / NR;
  const int q = w / NR, rw = w % NR;  // k group, row warp
  const int g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * RB + rw * RW;
  const int kw = K / nk, nch = kw / kFp8SmallChunk;
  const int groups = (m + 7) / 8;  // token groups holding real rows
  const size_t k0 = size_t(q) * kw + 16 * t;

  const uint8_t* wrow[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h)  // rows past N read row N - 1; never stored
      wrow[mt][h] = W + size_t(min(n0 + 16 * mt + 8 * h + g, N - 1)) * K + k0;
  const uint8_t* xrow[MG];
#pragma unroll
  for (int j = 0; j < MG; ++j) xrow[j] = x + size_t(min(8 * j + g, m - 1)) * K + k0;
  uint8_t* ring =
      reinterpret_cast<uint8_t*>(part + size_t(nk) * RB * LD) + size_t(q) * kFp8SmallStages * XS;
  // NR > 1: chunk c of the group's activations into its ring slot, 16 bytes
  // per piece, pieces spread over the group's 32 NR lanes; tokens past m as zeros.
  const auto stage_x = [&](int c) {
    uint8_t* dst = ring + (c % kFp8SmallStages) * XS;
    for (int p = rw * 32 + lane; p < 32 * groups; p += 32 * NR) {
      const int tok = p >> 2, piece = p & 3;
      cp_async16(dst + tok * kFp8SmallChunk + piece * 16,
                 x + size_t(min(tok, m - 1)) * K + size_t(q) * kw + c * kFp8SmallChunk + piece * 16,
                 tok < m);
    }
  };

  uint4 a[DW][MT][2];  // rows g, g + 8 of each 16-row tile, per chunk of the ring
  uint4 b[2][MG];      // token 8 j + g
  const auto load_w = [&](uint4(&f)[MT][2], int c) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) f[mt][h] = load_stream(wrow[mt][h] + c * kFp8SmallChunk);
  };
  const auto load_x = [&](uint4(&f)[MG], int c) {
#pragma unroll
    for (int j = 0; j < MG; ++j)
      if (j < groups) f[j] = __ldg(reinterpret_cast<const uint4*>(xrow[j] + c * kFp8SmallChunk));
  };

  float acc[MT][MG][4] = {};
  // sm_90 has no FP8 mma.sync: ptxas turns mma.m16n8k32.e4m3 into
  // conversions of both operands and two f16 mma (bench/kernels/NOTES.md,
  // "The FP8 consumer alone"), so with MG token groups it widened every weight
  // fragment MG times. Here the codes are widened once (exactly: every e4m3
  // value is an f16), the weights once per chunk and the tokens once per
  // weight tile, into f16 pairs (h[i]: bytes 2i, 2i + 1 of the lane's 16),
  // and four f16 mma per chunk take them; mma i's k pairs are bytes 4i, 4i
  // + 1 (a0, a1, b0) and 4i + 2, 4i + 3 (a2, a3, b1) on both sides.
  const auto widen16 = [](const uint4& u, uint32_t(&h)[8]) {
    const uint4 lo = e4m3x8_to_h8(make_uint2(u.x, u.y)), hi = e4m3x8_to_h8(make_uint2(u.z, u.w));
    h[0] = lo.x, h[1] = lo.y, h[2] = lo.z, h[3] = lo.w, h[4] = hi.x, h[5] = hi.y, h[6] = hi.z,
    h[7] = hi.w;
  };
  const auto compute = [&](const uint4(&fa)[MT][2], const uint4(&fb)[MG]) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      uint32_t wl[8], wh[8];  // rows g, g + 8
      widen16(fa[mt][0], wl);
      widen16(fa[mt][1], wh);
#pragma unroll
      for (int j = 0; j < MG; ++j) {
        if (j >= groups) continue;
        uint32_t xb[8];  // token 8 j + g
        widen16(fb[j], xb);
#pragma unroll
        for (int i = 0; i < 4; ++i)
          mma16816<half>(acc[mt][j], wl[2 * i], wh[2 * i], wl[2 * i + 1], wh[2 * i + 1], xb[2 * i],
                         xb[2 * i + 1]);
      }
    }
  };

  if constexpr (NR == 1) {
    // Chunk c + DW - 1 of the weights and c + 1 of the activations are loaded
    // while chunk c is multiplied (DW is even, so c's activation slot is d % 2).
#pragma unroll
    for (int d = 0; d < DW - 1; ++d)
      if (d < nch) load_w(a[d], d);
    if (nch > 0) load_x(b[0], 0);
    for (int c0 = 0; c0 < nch; c0 += DW) {
#pragma unroll
      for (int d = 0; d < DW; ++d) {
        const int c = c0 + d;
        if (c + DW - 1 < nch) load_w(a[(d + DW - 1) % DW], c + DW - 1);
        if (c + 1 < nch) load_x(b[(d + 1) % 2], c + 1);
        if (c < nch) compute(a[d], b[d % 2]);
      }
    }
  } else {
    // Weights as above; the activations of chunk c + S - 1 are staged once
    // every warp of the group is past chunk c - 1 (the group's barrier), whose
    // slot they take.
#pragma unroll
    for (int d = 0; d < kFp8SmallStages - 1; ++d) {
      if (d < nch) stage_x(d);
      cp_async_commit();
    }
#pragma unroll
    for (int d = 0; d < DW - 1; ++d)
      if (d < nch) load_w(a[d], d);
    for (int c0 = 0; c0 < nch; c0 += DW) {
#pragma unroll
      for (int d = 0; d < DW; ++d) {
        const int c = c0 + d;
        if (c + DW - 1 < nch) load_w(a[(d + DW - 1) % DW], c + DW - 1);
        if (c < nch) {
          cp_async_wait<kFp8SmallStages - 2>();  // this lane's pieces of chunk c
          // Every piece of chunk c is in, and every warp is done with c - 1.
          asm volatile("bar.sync %0, %1;\n" ::"r"(1 + q), "r"(32 * NR) : "memory");
          if (c + kFp8SmallStages - 1 < nch) stage_x(c + kFp8SmallStages - 1);
          cp_async_commit();
          const uint8_t* slot = ring + (c % kFp8SmallStages) * XS + 16 * t;
#pragma unroll
          for (int j = 0; j < MG; ++j)
            if (j < groups)
              b[0][j] = *reinterpret_cast<const uint4*>(slot + (8 * j + g) * kFp8SmallChunk);
          compute(a[d], b[0]);
        }
      }
    }
  }

  float* mine = part + (size_t(q) * RB + size_t(rw) * RW) * LD;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int j = 0; j < MG; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r)
        mine[(16 * mt + g + 8 * (r >> 1)) * LD + 8 * j + 2 * t + (r & 1)] = acc[mt][j][r];
  __syncthreads();  // every warp's partial sums are in shared memory
  // Consecutive threads take consecutive n of one token: coalesced y rows.
  const int nb = blockIdx.x * RB;
  for (int idx = threadIdx.x; idx < RB * m; idx += blockDim.x) {
    const int i = idx / RB, r = idx % RB, n = nb + r;
    if (n >= N) continue;
    float v = 0.0f;
    for (int qq = 0; qq < nk; ++qq) v += part[(qq * RB + r) * LD + i];
    v = v * ws[n] * xs[i];
    E* o = y + size_t(i) * N + n;
    if (accumulate) v += to_f32(*o);
    *o = from_f32<E>(v);
  }
}

// ---- launchers -----------------------------------------------------------------

namespace {

int fp8_small_groups(int m) {  // MG: 8-token groups, a power of two
  int mg = 1;
  while (8 * mg < m) mg *= 2;
  return mg;
}

// Partial sums of nk k groups, and the staged activations where NR > 1.
size_t fp8_small_smem(int mt, int mg, int nr, int nk) {
  const size_t sums = size_t(nk) * 16 * mt * nr * (8 * mg + 1) * sizeof(float);
  return sums + (nr > 1 ? size_t(nk) * kFp8SmallStages * 8 * mg * kFp8SmallChunk : 0);
}

template <int MT, int MG, int NR, typename E>
void launch_fp8_small(const uint8_t* W, const float* ws, const uint8_t* x, const float* xs, int m,
                      int N, int K, E* y, bool accumulate, int nk, cudaStream_t s) {
  const auto kernel = gemm_fp8_small_kernel<MT, MG, NR, E>;
  // Up to ~100 KB: above the default 48 KB, allowed once for the largest
  // block (before any graph capture: BatchGemm's start-up timing launches
  // every tile it may pick).
  static const bool opted_in = [&] {
    HAYATE_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(fp8_small_smem(MT, MG, NR, kFp8SmallMaxWarps / NR))));
    return true;
  }();
  (void)opted_in;
  launch({dim3(ceil_div(size_t(N), size_t(16 * MT * NR))), dim3(32 * NR * nk),
          fp8_small_smem(MT, MG, NR, nk), s},
         kernel, W, ws, x, xs, m, N, K, y, int(accumulate));
}

}  // namespace

bool gemm_fp8_small_supported(int m, int N, int K, Fp8SmallTile tile) {
  if (tile.k_blocks > 0) return gemm_fp8_wgmma_supported(m, N, K, tile.rows, tile.k_blocks);
  if (m < 1 || m > kFp8SmallMaxRows || N < 1 || K < 1) return false;
  const int mt = tile.rows / 16, mg = fp8_small_groups(m), nr = tile.row_warps;
  const bool rows_ok = tile.rows == 16 || tile.rows == 32 || (tile.rows == 64 && nr == 1);
  const bool k_ok =
      tile.k_warps == 1 || tile.k_warps == 2 || tile.k_warps == 4 || tile.k_warps == 8;
  const bool nr_ok = nr == 1 || ((nr == 2 || nr == 4) && mg >= 2);  // staging pays from 9 rows
  return rows_ok && k_ok && nr_ok && tile.k_warps * nr <= kFp8SmallMaxWarps && mt * mg <= 16 &&
         K % (kFp8SmallChunk * tile.k_warps) == 0;
}

template <typename E>
void gemm_fp8_small(const uint8_t* W, const float* w_scale, const uint8_t* xq, const float* x_scale,
                    int m, int N, int K, E* y, bool accumulate, Fp8SmallTile tile, cudaStream_t s) {
  if (tile.k_blocks > 0)
    return gemm_fp8_wgmma(W, w_scale, xq, x_scale, m, N, K, y, accumulate, tile.rows,
                          tile.k_blocks, s);
  HAYATE_CHECK(
      gemm_fp8_small_supported(m, N, K, tile), "gemm_fp8_small: ", m, " rows, N ", N, ", K ", K,
      " with ", tile.rows, " weight rows x ", tile.k_warps, " K groups x ", tile.row_warps,
      " row warps per block: needs m <= ", kFp8SmallMaxRows,
      ", rows 16/32/64 per warp (64: m <= 32, one row warp; 32: m <= 64),",
      " row warps 1, 2 or 4 (2, 4: m > 8), at most 8 warps, K a multiple of 64 per K group");
  HAYATE_CHECK(aligned_to(16, W, xq), "gemm_fp8_small: W and xq must be 16-byte aligned");
  const int mg = fp8_small_groups(m), nk = tile.k_warps, nr = tile.row_warps;
#define HAYATE_FP8_SMALL(MT, MG, NR)                      \
  if (tile.rows == 16 * (MT) && mg == (MG) && nr == (NR)) \
    return launch_fp8_small<MT, MG, NR, E>(W, w_scale, xq, x_scale, m, N, K, y, accumulate, nk, s);
  HAYATE_FP8_SMALL(1, 1, 1)
  HAYATE_FP8_SMALL(1, 2, 1)
  HAYATE_FP8_SMALL(1, 4, 1)
  HAYATE_FP8_SMALL(1, 8, 1)
  HAYATE_FP8_SMALL(2, 1, 1)
  HAYATE_FP8_SMALL(2, 2, 1)
  HAYATE_FP8_SMALL(2, 4, 1)
  HAYATE_FP8_SMALL(2, 8, 1)
  HAYATE_FP8_SMALL(4, 1, 1)
  HAYATE_FP8_SMALL(4, 2, 1)
  HAYATE_FP8_SMALL(4, 4, 1)
  HAYATE_FP8_SMALL(1, 2, 2)
  HAYATE_FP8_SMALL(1, 4, 2)
  HAYATE_FP8_SMALL(1, 8, 2)
  HAYATE_FP8_SMALL(2, 2, 2)
  HAYATE_FP8_SMALL(2, 4, 2)
  HAYATE_FP8_SMALL(2, 8, 2)
  HAYATE_FP8_SMALL(1, 2, 4)
  HAYATE_FP8_SMALL(1, 4, 4)
  HAYATE_FP8_SMALL(1, 8, 4)
  HAYATE_FP8_SMALL(2, 2, 4)
  HAYATE_FP8_SMALL(2, 4, 4)
  HAYATE_FP8_SMALL(2, 8, 4)
#undef HAYATE_FP8_SMALL
}

template void gemm_fp8_small(const uint8_t*, const float*, const uint8_t*, const float*, int, int,
                             int, float*, bool, Fp8SmallTile, cudaStream_t);
template void gemm_fp8_small(const uint8_t*, const float*, const uint8_t*, const float*, int, int,
                             int, half*, bool, Fp8SmallTile, cudaStream_t);
template void gemm_fp8_small(const uint8_t*, const float*, const uint8_t*, const float*, int, int,
                             int, __nv_bfloat16*, bool, Fp8SmallTile, cudaStream_t);

}  // namespace hayate::cuda
