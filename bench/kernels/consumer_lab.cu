// Consumer lab: how fast a persistent-kernel block's 8 consumer warps take a
// 32 KB ring stage with the weights already in shared memory (no HBM, no
// producer, no epilogue), the product's own tile functions (ring.cuh):
//   fp8   ring_tile_mma_fp8<8, 2>: 8 e4m3 rows of K = 4096 (the FP8 tiles:
//         codes widened to f16 pairs, two f16 mma per 256 bytes, no branch),
//         and (variant 6) the same with a guard per chunk (always true at this
//         K, still 2.5x slower)
//   f16   ring_tile_dot<half, 2, 4> in 2 groups: 4 rows of K = 4096 (16-bit)
//   down  ring_tile_mma_fp8<2, 8>: the FP8 down tile, 2 rows of K = 14,336
//         (28 KB; one row's chunks in flight at a time, each warp's eighth
//         chunk past K), and the same with 7 chunks (none past K)
//   and variants of the FP8 step (tile_variant below).
// One block per SM, every block over `iters` stages (6 rotating stages filled
// with random bytes); CUDA events, 3 warm-ups, median of 9. The figure:
// stage bytes x blocks / time, "GB/s of weights a consumer could take", to
// set beside the read probe (NOTES.md, "The FP8 consumer alone"). A best
// case: no register cap of the product's kernel (its spills), no producer
// warp; cycles at the maximum clock.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include <cuda_fp8.h>

#include "cuda/kernels/ring.cuh"

using namespace hayate::cuda;

namespace {

constexpr int kStages = 6, kStageBytes = 32 * 1024, kK = 4096, kKDown = 14336;

__global__ void __launch_bounds__(256, 1) fill(unsigned char* p, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u;
    h ^= h >> 13;
    unsigned char c = (h & 0x7f) ? uint8_t(h & 0x77) : 0;  // finite e4m3, small f16 too
    p[i] = c;
  }
}

// Variants of ring_tile_mma_fp8's inner step (kMode): 2 the e4m3 mma alone
// (mma.m16n8k32.e4m3, the weight words made in registers, no shared-memory
// loads); 3 the loads alone (no mma); 4 one mma.m16n8k32.e4m3 per 256 bytes on
// x's codes (the product before 2026-12-05's evening: sm_90 runs it as two f16
// mma after F2FP conversions of both operands); 5 the product's two f16 mma
// with the codes widened by bit moves (sign to bit 15, exponent and mantissa
// shifted into f16's: the value times 2^-8, exact, subnormals included)
// instead of the conversion unit's F2FP; 6 the product's tile with a guard
// per chunk around the load and the mma (its form until 8c7e27f).
template <int kMode, int NR, int NC>
__device__ __forceinline__ float tile_variant(const unsigned char* st, uint32_t row_bytes, int K,
                                              int warp, int lane, int it, const uint2 (&xq)[NC],
                                              const uint32_t (&xh)[NC][4]) {
  const int g = lane / 4, t = lane % 4;
  const float m0 = g == 2 * t ? 1.0f : 0.0f, m1 = g == 2 * t + 1 ? 1.0f : 0.0f;
  float v[NR];
#pragma unroll
  for (int n = 0; n < NR; ++n) {
    v[n] = 0.0f;
#pragma unroll
    for (int jj = 0; jj < NC; ++jj) {
      const int k = (warp + 8 * jj) * 256 + 8 * lane;
      float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
      if constexpr (kMode == 2) {
        const uint2 w = make_uint2(uint32_t(lane * it + n), uint32_t(it ^ (n + jj)));
        asm volatile(
            "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, "
            "{%4,%4,%5,%5}, {%6,%7}, {%0,%1,%2,%3};\n"
            : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
            : "r"(xq[jj].x), "r"(xq[jj].y), "r"(w.x), "r"(w.y));
      } else if constexpr (kMode == 3) {
        const uint2 w = *reinterpret_cast<const uint2*>(st + n * row_bytes + k);
        d0 = __uint_as_float(w.x & 0x3f3f3f3fu);
        d1 = __uint_as_float(w.y & 0x3f3f3f3fu);
      } else if constexpr (kMode == 4) {
        const uint2 w = *reinterpret_cast<const uint2*>(st + n * row_bytes + k);
        asm volatile(
            "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, "
            "{%4,%4,%5,%5}, {%6,%7}, {%0,%1,%2,%3};\n"
            : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
            : "r"(xq[jj].x), "r"(xq[jj].y), "r"(w.x), "r"(w.y));
      } else if constexpr (kMode == 5) {  // bit moves: codes (0, 2), (1, 3) of each word, x 2^-8
        const uint2 w = *reinterpret_cast<const uint2*>(st + n * row_bytes + k);
        uint32_t h[4];
        const uint32_t ww[2] = {w.x, w.y};
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          h[2 * i] = ((ww[i] << 8) & 0x80008000u) | ((ww[i] << 7) & 0x3f803f80u);
          h[2 * i + 1] = (ww[i] & 0x80008000u) | ((ww[i] >> 1) & 0x3f803f80u);
        }
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
            "{%4,%4,%5,%5}, {%6,%7}, {%0,%1,%2,%3};\n"
            : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
            : "r"(xh[jj][0]), "r"(xh[jj][1]), "r"(h[0]), "r"(h[1]));
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
            "{%4,%4,%5,%5}, {%6,%7}, {%0,%1,%2,%3};\n"
            : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
            : "r"(xh[jj][2]), "r"(xh[jj][3]), "r"(h[2]), "r"(h[3]));
      } else if ((warp + 8 * jj) * 256 < K) {  // 6: the product's tile, guarded per chunk
        const uint2 w =
            k < K ? *reinterpret_cast<const uint2*>(st + n * row_bytes + k) : make_uint2(0u, 0u);
        const uint4 h = e4m3x8_to_h8(w);
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
            "{%4,%4,%5,%5}, {%6,%7}, {%0,%1,%2,%3};\n"
            : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
            : "r"(xh[jj][0]), "r"(xh[jj][1]), "r"(h.x), "r"(h.y));
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
            "{%4,%4,%5,%5}, {%6,%7}, {%0,%1,%2,%3};\n"
            : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
            : "r"(xh[jj][2]), "r"(xh[jj][3]), "r"(h.z), "r"(h.w));
      }
      v[n] += d0 * m0 + d1 * m1;
    }
  }
  return ring_rows_sum<NR>(v, lane);
}

template <int kVariant>
__global__ void __launch_bounds__(256, 1)
    consume(const unsigned char* src, int iters, float* sink) {
  extern __shared__ __align__(128) unsigned char sm[];
  for (int i = threadIdx.x; i < kStages * kStageBytes / 16; i += blockDim.x)
    reinterpret_cast<uint4*>(sm)[i] = reinterpret_cast<const uint4*>(src)[i];
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float total = 0.0f;
  if constexpr (kVariant == 0) {
    uint4 xh[2];
    for (int jj = 0; jj < 2; ++jj)
      xh[jj] = e4m3x8_to_h8(make_uint2(0x30303030u + lane, 0x38383838u - warp));
    for (int it = 0; it < iters; ++it) {
      const unsigned char* st = sm + (it % kStages) * kStageBytes;
      total += ring_tile_mma_fp8<8, 2>(st, kK, kK, warp, lane, xh);
      __syncwarp();
    }
  } else if constexpr (kVariant == 7 || kVariant == 8) {  // down's rows: 2 of K = 14,336
    constexpr int NC = kVariant == 7 ? 8 : 7;
    uint4 xh[NC];
    for (int jj = 0; jj < NC; ++jj)
      xh[jj] = e4m3x8_to_h8(make_uint2(0x30303030u + lane, 0x38383838u - warp));
    for (int it = 0; it < iters; ++it) {
      const unsigned char* st = sm + (it % kStages) * kStageBytes;
      total += ring_tile_mma_fp8<2, NC>(st, kKDown, kKDown, warp, lane, xh);
      __syncwarp();
    }
  } else if constexpr (kVariant >= 2) {
    uint2 xq[2];
    uint32_t xh[2][4];
    for (int jj = 0; jj < 2; ++jj) {
      xq[jj] = make_uint2(0x30303030u + lane, 0x38383838u - warp);
      for (int i = 0; i < 4; ++i) xh[jj][i] = 0x3c003c00u + lane + i;
    }
    for (int it = 0; it < iters; ++it) {
      const unsigned char* st = sm + (it % kStages) * kStageBytes;
      total += tile_variant<kVariant, 8, 2>(st, kK, kK, warp, lane, it, xq, xh);
      __syncwarp();
    }
  } else {
    constexpr int G = 2, R = 2, NC = 4, kGroupThreads = 256 / G;
    const int t = threadIdx.x % kGroupThreads, slot = threadIdx.x / kGroupThreads;
    float xr[NC][8];
    for (int jj = 0; jj < NC; ++jj)
      for (int e = 0; e < 8; ++e) xr[jj][e] = 0.001f * float(lane + e - jj);
    for (int it = 0; it < iters; ++it) {
      const unsigned char* st = sm + (it % kStages) * kStageBytes + slot * R * kK * sizeof(half);
      float acc[R];
      ring_tile_dot<half, R, NC>(st, kK * sizeof(half), t, kGroupThreads, kK / 8, xr, acc);
      total += acc[0] + acc[1];
      __syncwarp();
    }
  }
  if (total == 12345.678f) *sink = total;  // keep the work
}

template <int kVariant>
float time_variant(const unsigned char* src, int blocks, int iters, float* sink) {
  const int smem = kStages * kStageBytes;
  cudaFuncSetAttribute(consume<kVariant>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> ms;
  for (int r = 0; r < 12; ++r) {
    cudaEventRecord(a);
    consume<kVariant><<<blocks, 256, smem>>>(src, iters, sink);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    if (r >= 3) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main() {
  int dev = 0, sms = 0, clk = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, dev);
  unsigned char* src = nullptr;
  float* sink = nullptr;
  cudaMalloc(&src, kStages * kStageBytes);
  cudaMalloc(&sink, 4);
  fill<<<64, 256>>>(src, kStages * kStageBytes);
  const char* names[] = {"fp8 ring_tile_mma_fp8<8,2> (F2FP, f16 mma)",
                         "f16 ring_tile_dot<half,2,4> x2 groups",
                         "fp8 e4m3 mma alone (no loads)",
                         "fp8 loads alone (no mma)",
                         "fp8 e4m3 mma on codes (before)",
                         "fp8 -> f16 by bit moves, 2 f16 mma",
                         "fp8 ring_tile_mma_fp8<8,2> guarded",
                         "fp8 down ring_tile_mma_fp8<2,8> (product)",
                         "fp8 down ring_tile_mma_fp8<2,7> (no 8th chunk)"};
  constexpr int kVariants = 9;
  for (int iters : {2000, 8000}) {
    float ms[kVariants] = {
        time_variant<0>(src, sms, iters, sink), time_variant<1>(src, sms, iters, sink),
        time_variant<2>(src, sms, iters, sink), time_variant<3>(src, sms, iters, sink),
        time_variant<4>(src, sms, iters, sink), time_variant<5>(src, sms, iters, sink),
        time_variant<6>(src, sms, iters, sink), time_variant<7>(src, sms, iters, sink),
        time_variant<8>(src, sms, iters, sink)};
    for (int v = 0; v < kVariants; ++v) {
      // down's stages hold 2 rows of 14,336 codes (28 KB), the others 32 KB
      const double stage = v >= 7 ? 2.0 * kKDown : double(kStageBytes);
      const double bytes = stage * sms * iters;
      const double ns_stage = ms[v] * 1e6 / iters;
      std::printf(
          "%-46s blocks %d iters %5d: %8.3f ms, %6.0f ns/stage (%5.0f cycles at %d MHz), "
          "%7.0f GB/s of weights\n",
          names[v], sms, iters, ms[v], ns_stage, ns_stage * clk / 1e6, clk / 1000,
          bytes / (ms[v] * 1e6));
    }
  }
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::printf("error: %s\n", cudaGetErrorString(e));
    return 1;
  }
  return 0;
}
