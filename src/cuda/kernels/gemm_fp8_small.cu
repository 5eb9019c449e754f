// The FP8 product (W8A8) at few rows: y [m, N] = x_scale[i] w_scale[n] .
// sum_k xq[i, k] W[n, k] (+ y), e4m3 codes, m <= 64. At these row counts the
// product is a stream of the weights (N K bytes, read once for all m rows);
// cuBLASLt's FP8 kernels move them at a quarter of the read bandwidth there
// (bench/kernels/NOTES.md, "FP8 on the H200").
//
// A block owns R = 16 MT weight rows; its nwk warps split K, each streaming
// its K slice of the R rows straight into registers (16-byte loads, no L1
// allocation, `D` chunks of 64 k in flight) and multiplying them with
// mma.sync m16n8k32 e4m3: A = 16 weight rows x 32 k, B = 32 k x 8 tokens, so
// the tokens are padded to 8 and a weight byte is loaded once for every
// token. The activations (m K bytes, shared by every block) come through
// L1/L2. The partial sums of the warps meet in shared memory; the epilogue
// scales, rounds to E once (fp32 arithmetic, as cuBLASLt's epilogue), and
// adds into y where asked.
//
// Fragments (PTX ISA, mma.m16n8k32 with 8-bit types; lane = 4 g + t): A regs
// 0 and 2 are row g, regs 1 and 3 row g + 8; reg 0/1 hold k 4t..4t+3, reg 2/3
// k 16+4t..; B reg 0 holds k 4t.. and reg 1 k 16+4t.. of column g; C rows g
// (c0, c1) and g + 8 (c2, c3), columns 2t, 2t + 1. A dot product does not
// change when A's and B's k are permuted alike, so lane t loads 16
// contiguous bytes (k 16t..16t+15 of a 64-k chunk) of its rows and of its
// token, and feeds bytes 0-3 / 4-7 as (reg 0, reg 2) of the first mma and
// bytes 8-11 / 12-15 of the second: every load is 16 bytes and contiguous.
//
// Accumulation: Hopper's FP8 tensor cores add the products in an
// accumulator narrower than fp32, so each pair of mmas (64 k) starts from a
// zero C and is added into fp32 registers (gpu_fp8_tests bounds the error).
#include "core/check.h"
#include "cuda/kernels/common.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"

namespace hayate::cuda {

// ---- kernels -------------------------------------------------------------------

constexpr int kFp8SmallMaxWarps = 8;
constexpr int kFp8SmallChunk = 64;  // k per chunk: one 16-byte load per row and lane

__device__ __forceinline__ void mma_e4m3(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// y [m, N] (E) from W [N, K], ws [N], x [m, K], xs [m]; grid ceil(N / 16 MT),
// block 32 nwk (nwk warps split K: K % (64 nwk) == 0), dynamic shared memory
// nwk * 16 MT * (8 MG + 1) floats. MT: 16-row weight tiles per block; MG:
// 8-token groups (m <= 8 MG).
template <int MT, int MG, typename E>
__global__ void __launch_bounds__(32 * kFp8SmallMaxWarps)
gemm_fp8_small_kernel(const uint8_t* __restrict__ W, const float* __restrict__ ws,
                      const uint8_t* __restrict__ x, const float* __restrict__ xs, int m, int N,
                      int K, E* __restrict__ y, int accumulate) {
  constexpr int R = 16 * MT, LD = 8 * MG + 1;  // LD: padded row of the partial sums
  // Weight chunks in flight per warp (a ring of DW; 8 MT registers each), and
  // the activations' one chunk ahead (4 MG registers each; they come from L2):
  // ptxas keeps MT 2 x MG 8 at ~220 registers, one 8-warp block per SM with
  // 64 KB of weight loads in flight.
  constexpr int DW = MT == 4 ? 2 : 4;
  extern __shared__ float part[];  // [nwk][R][LD]
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nwk = blockDim.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * R;
  const int kw = K / nwk, nch = kw / kFp8SmallChunk;
  const int groups = (m + 7) / 8;  // token groups holding real rows
  const size_t k0 = size_t(w) * kw + 16 * t;

  const uint8_t* wrow[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h)  // rows past N read row N - 1; never stored
      wrow[mt][h] = W + size_t(min(n0 + 16 * mt + 8 * h + g, N - 1)) * K + k0;
  const uint8_t* xrow[MG];
#pragma unroll
  for (int j = 0; j < MG; ++j) xrow[j] = x + size_t(min(8 * j + g, m - 1)) * K + k0;

  uint4 a[DW][MT][2];  // rows g, g + 8 of each 16-row tile, per chunk of the ring
  uint4 b[2][MG];      // token 8 j + g
  const auto load_w = [&](uint4 (&f)[MT][2], int c) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) f[mt][h] = load_stream(wrow[mt][h] + c * kFp8SmallChunk);
  };
  const auto load_x = [&](uint4 (&f)[MG], int c) {
#pragma unroll
    for (int j = 0; j < MG; ++j)
      if (j < groups) f[j] = __ldg(reinterpret_cast<const uint4*>(xrow[j] + c * kFp8SmallChunk));
  };

  float acc[MT][MG][4] = {};
  const auto compute = [&](const uint4 (&fa)[MT][2], const uint4 (&fb)[MG]) {
#pragma unroll
    for (int j = 0; j < MG; ++j) {
      if (j >= groups) continue;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        const uint4 &lo = fa[mt][0], &hi = fa[mt][1], &bb = fb[j];
        mma_e4m3(c, lo.x, hi.x, lo.y, hi.y, bb.x, bb.y);
        mma_e4m3(c, lo.z, hi.z, lo.w, hi.w, bb.z, bb.w);
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[mt][j][r] += c[r];
      }
    }
  };

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

  float* mine = part + size_t(w) * R * LD;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int j = 0; j < MG; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r)
        mine[(16 * mt + g + 8 * (r >> 1)) * LD + 8 * j + 2 * t + (r & 1)] = acc[mt][j][r];
  __syncthreads();  // every warp's partial sums are in shared memory
  // Consecutive threads take consecutive n of one token: coalesced y rows.
  for (int idx = threadIdx.x; idx < R * m; idx += blockDim.x) {
    const int i = idx / R, r = idx % R, n = n0 + r;
    if (n >= N) continue;
    float v = 0.0f;
    for (int ww = 0; ww < nwk; ++ww) v += part[(ww * R + r) * LD + i];
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

template <int MT, int MG, typename E>
void launch_fp8_small(const uint8_t* W, const float* ws, const uint8_t* x, const float* xs, int m,
                      int N, int K, E* y, bool accumulate, int nwk, cudaStream_t s) {
  const auto kernel = gemm_fp8_small_kernel<MT, MG, E>;
  const size_t smem = size_t(nwk) * 16 * MT * (8 * MG + 1) * sizeof(float);
  // Up to 8 warps' partial sums (~68 KB): above the default 48 KB, allowed once
  // (before any graph capture: BatchGemm's start-up timing launches every tile).
  static const bool opted_in = [&] {
    HAYATE_CUDA_CHECK(cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
        int(size_t(kFp8SmallMaxWarps) * 16 * MT * (8 * MG + 1) * sizeof(float))));
    return true;
  }();
  (void)opted_in;
  launch({dim3(ceil_div(size_t(N), size_t(16 * MT))), dim3(32 * nwk), smem, s}, kernel, W, ws, x,
         xs, m, N, K, y, int(accumulate));
}

}  // namespace

bool gemm_fp8_small_supported(int m, int N, int K, Fp8SmallTile tile) {
  const int mt = tile.rows / 16, mg = m >= 1 ? fp8_small_groups(m) : 0;
  const bool rows_ok = tile.rows == 16 || tile.rows == 32 || tile.rows == 64;
  const bool warps_ok = tile.k_warps == 1 || tile.k_warps == 2 || tile.k_warps == 4 ||
                        tile.k_warps == 8;
  return rows_ok && warps_ok && m >= 1 && m <= kFp8SmallMaxRows && mt * mg <= 16 && N >= 1 &&
         K >= 1 && K % (kFp8SmallChunk * tile.k_warps) == 0;
}

template <typename E>
void gemm_fp8_small(const uint8_t* W, const float* w_scale, const uint8_t* xq,
                    const float* x_scale, int m, int N, int K, E* y, bool accumulate,
                    Fp8SmallTile tile, cudaStream_t s) {
  HAYATE_CHECK(gemm_fp8_small_supported(m, N, K, tile), "gemm_fp8_small: ", m, " rows, N ", N,
               ", K ", K, " with ", tile.rows, " weight rows x ", tile.k_warps,
               " K warps per block: needs m <= ", kFp8SmallMaxRows,
               ", rows 16/32/64 (64: m <= 32; 32: m <= 64), K a multiple of 64 per warp");
  HAYATE_CHECK(aligned_to(16, W, xq), "gemm_fp8_small: W and xq must be 16-byte aligned");
  const int mg = fp8_small_groups(m), nwk = tile.k_warps;
#define HAYATE_FP8_SMALL(MT, MG)                                                      \
  if (tile.rows == 16 * (MT) && mg == (MG))                                           \
    return launch_fp8_small<MT, MG, E>(W, w_scale, xq, x_scale, m, N, K, y, accumulate, \
                                       nwk, s);
  HAYATE_FP8_SMALL(1, 1)
  HAYATE_FP8_SMALL(1, 2)
  HAYATE_FP8_SMALL(1, 4)
  HAYATE_FP8_SMALL(1, 8)
  HAYATE_FP8_SMALL(2, 1)
  HAYATE_FP8_SMALL(2, 2)
  HAYATE_FP8_SMALL(2, 4)
  HAYATE_FP8_SMALL(2, 8)
  HAYATE_FP8_SMALL(4, 1)
  HAYATE_FP8_SMALL(4, 2)
  HAYATE_FP8_SMALL(4, 4)
#undef HAYATE_FP8_SMALL
}

template void gemm_fp8_small(const uint8_t*, const float*, const uint8_t*, const float*, int, int,
                             int, float*, bool, Fp8SmallTile, cudaStream_t);
template void gemm_fp8_small(const uint8_t*, const float*, const uint8_t*, const float*, int, int,
                             int, half*, bool, Fp8SmallTile, cudaStream_t);
template void gemm_fp8_small(const uint8_t*, const float*, const uint8_t*, const float*, int, int,
                             int, __nv_bfloat16*, bool, Fp8SmallTile, cudaStream_t);

}  // namespace hayate::cuda
