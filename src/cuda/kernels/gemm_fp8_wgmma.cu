// The FP8 product (W8A8) at few rows on Hopper's warpgroup tensor cores:
// y [m, N] = x_scale[i] w_scale[n] . sum_k xq[i, k] W[n, k] (+ y), e4m3
// codes, m <= 64. gemm_fp8_small's second kernel (ops.h: a tile with
// k_blocks > 0); the backend times both against cuBLASLt at start-up.
//
// sm_90 has no FP8 mma.sync (gemm_fp8_small.cu widens the codes to f16),
// only wgmma: D (64 x n, fp32) += A (64 x 32) . B (32 x n) from shared
// memory. With the weights as A and the tokens as B (both K-major, as
// e4m3 wgmma requires), a 64-row tile of the weights meets up to 64 tokens
// in one instruction, and every weight byte is read once for all m rows.
//
// A block (one warpgroup) owns 64 MT weight rows (MT 64-row tiles: 1 or 2)
// and a K / S slice; the S blocks of a cluster split K and meet in distributed
// shared memory, so a product of few output rows (o, down: 4,096) still
// spreads over every SM. Per 128-k chunk the block's threads copy its
// weight rows and NT tokens (NT = m padded to 16, 32 or 64; tokens past m
// as zeros) into a ring stage with cp.async (wgmma_stages), in wgmma's 128-byte swizzle
// (16-byte piece c of row r at piece c ^ (r % 8)); the chunk's 4 MT wgmma
// (MT tiles x 4 k32) start from zero and the result is added into fp32
// registers, so the tensor core's accumulator (narrower than fp32) sums
// 128 products at a time. With one block per row tile (S = 1), each thread
// then scales and stores its fragment's sums (loading all the y values it
// adds to first, so their latencies overlap). With S > 1 each block puts its
// sums in its shared memory in fragment order, and block r of the cluster
// adds the S blocks' registers r MT NT / 2S .. of every thread in rank order
// (deterministic) and stores them.
//
// D fragments (PTX ISA, wgmma .m64nNk32 f32): warp w of the warpgroup holds
// rows 16 w + g and 16 w + g + 8 (lane = 4 g + t); register 4 j + e holds
// row 16 w + g + 8 (e >> 1), column 8 j + 2 t + (e & 1).
#include <cooperative_groups.h>

#include <type_traits>

#include "core/check.h"
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/gemm_fp8_wgmma.cuh"
#include "cuda/kernels/mma.cuh"
#include "cuda/kernels/ring.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"

namespace hayate::cuda {

namespace {

constexpr int kWgChunk = 128;  // k per stage: one 128-byte swizzle row per weight row and token
// Ring stages (stages - 1 chunks in flight) of a block of 64 mt weight rows.
// 64 rows on 3 stages take 49 KB at 64 tokens: four blocks an SM (on 4 stages,
// three), and more blocks an SM beat deeper rings (H100, 64 rows: gate/up
// 51.8 against 70.6 us, down 32.6 against 34.9; NOTES.md). 128 rows on 3
// stages (three blocks an SM) are untimed.
constexpr int wgmma_stages(int mt) { return mt == 1 ? 3 : 4; }

// Shared memory: the ring (stages of [64 MT weight rows][128 B] then [NT
// tokens][128 B], each 1,024-byte aligned), reused after the loop for the
// block's partial sums ([MT NT / 2][128] fp32, smaller); 1 KB of slack to align the base.
constexpr size_t wgmma_stage_bytes(int mt, int nt) { return size_t(64 * mt + nt) * kWgChunk; }
constexpr size_t wgmma_smem(int mt, int nt) {
  return wgmma_stages(mt) * wgmma_stage_bytes(mt, nt) + 1024;
}

// A K-major operand in shared memory, 128-byte swizzle: rows of 128 bytes,
// 8-row groups 1,024 bytes apart (the stride byte offset; the leading one is
// unused with this swizzle), layout type 1 in bits 62-63.
__device__ __forceinline__ uint64_t wgmma_desc(uint32_t addr) {
  return uint64_t((addr & 0x3ffff) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) |
         (uint64_t(1) << 62);
}

__device__ __forceinline__ void wgmma_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_wait_all() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
}
// cp.async's writes (generic proxy) made visible to wgmma's reads (async proxy).
__device__ __forceinline__ void fence_proxy_async() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// The block's cluster (sm_90; other targets, e.g. HAYATE_SM80's, trap as the
// wgmma helpers do): its size, this block's rank in it, a barrier of all its
// threads, and where another block's copy of a shared variable lives.
__device__ __forceinline__ int cluster_blocks() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return int(cooperative_groups::this_cluster().num_blocks());
#else
  __trap();
  return 1;
#endif
}
__device__ __forceinline__ int cluster_rank() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return int(cooperative_groups::this_cluster().block_rank());
#else
  return 0;
#endif
}
__device__ __forceinline__ void cluster_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cooperative_groups::this_cluster().sync();
#endif
}
__device__ __forceinline__ const float* cluster_map(const float* p, int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return cooperative_groups::this_cluster().map_shared_rank(p, unsigned(rank));
#else
  return p;
#endif
}

// Pins an accumulator register where it stands: no read of it moves above a
// wait, no write of it below a fence.
__device__ __forceinline__ void reg_fence(float& r) { asm volatile("" : "+f"(r)::"memory"); }

// d (64 x NT fragments) = (add ? d : 0) + A . B, k 32, e4m3 in, fp32 out.
template <int NT>
__device__ __forceinline__ void wgmma_e4m3(float (&d)[NT / 2], uint64_t a, uint64_t b, int add);

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define HAYATE_WGMMA_HEAD(N) \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %" #N ", 0;\nwgmma.mma_async.sync.aligned."
#endif

template <>
__device__ __forceinline__ void wgmma_e4m3<16>(float (&d)[8], uint64_t a, uint64_t b, int add) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(HAYATE_WGMMA_HEAD(10) "m64n16k32.f32.e4m3.e4m3 "
               "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                 "+f"(d[6]), "+f"(d[7])
               : "l"(a), "l"(b), "r"(add));
#else
  __trap();
#endif
}

template <>
__device__ __forceinline__ void wgmma_e4m3<32>(float (&d)[16], uint64_t a, uint64_t b, int add) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(HAYATE_WGMMA_HEAD(18) "m64n32k32.f32.e4m3.e4m3 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, "
               "%17, p, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                 "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                 "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
               : "l"(a), "l"(b), "r"(add));
#else
  __trap();
#endif
}

template <>
__device__ __forceinline__ void wgmma_e4m3<64>(float (&d)[32], uint64_t a, uint64_t b, int add) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(HAYATE_WGMMA_HEAD(34) "m64n64k32.f32.e4m3.e4m3 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, "
               "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
               "%32, %33, p, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                 "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                 "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                 "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                 "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                 "+f"(d[30]), "+f"(d[31])
               : "l"(a), "l"(b), "r"(add));
#else
  __trap();
#endif
}
#undef HAYATE_WGMMA_HEAD

// y [m, N] (E) from W [N, K], ws [N], x [m, K], xs [m]; m <= NT. Grid: S
// blocks (a cluster, S = its size) per 64 MT weight rows, block rank r of the
// cluster taking k in [r K / S, (r + 1) K / S); K % (128 S) == 0.
template <int MT, int NT, typename E>
__global__ void __launch_bounds__(128)
    gemm_fp8_wgmma_kernel(const uint8_t* __restrict__ W, const float* __restrict__ ws,
                          const uint8_t* __restrict__ x, const float* __restrict__ xs, int m, int N,
                          int K, E* __restrict__ y, int accumulate) {
  constexpr int kRows = 64 * MT, kRegs = MT * NT / 2;      // weight rows; a thread's sums
  constexpr int kWgStages = wgmma_stages(MT);
  constexpr int kPieces = (kRows + NT) * (kWgChunk / 16);  // 16-byte copies per stage
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int S = cluster_blocks(), rank = cluster_rank();
  const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int n0 = int(blockIdx.x / unsigned(S)) * kRows;
  const int kw = K / S, nch = kw / kWgChunk;
  const size_t k0 = size_t(rank) * kw;

  // Chunk c into stage `slot`: weight rows past N read row N - 1 (never
  // stored), tokens past m are zeros.
  const auto load = [&](int c, int slot) {
    uint8_t* st = smem + size_t(slot) * wgmma_stage_bytes(MT, NT);
    const size_t kc = k0 + size_t(c) * kWgChunk;
#pragma unroll
    for (int i = 0; i < kPieces / 128; ++i) {
      const int p = tid + 128 * i, row = p >> 3, piece = p & 7;
      const bool weight = row < kRows;
      const int tok = row - kRows;
      const uint8_t* src = weight ? W + size_t(min(n0 + row, N - 1)) * K + kc + 16 * piece
                                  : x + size_t(min(tok, m - 1)) * K + kc + 16 * piece;
      cp_async16(st + row * kWgChunk + ((piece ^ (row & 7)) << 4), src, weight || tok < m);
    }
  };

  float acc[MT][NT / 2] = {};
  float d[MT][NT / 2] = {};
#pragma unroll
  for (int c = 0; c < kWgStages - 1; ++c) {
    if (c < nch) load(c, c);
    cp_async_commit();
  }
  for (int c = 0; c < nch; ++c) {
    cp_async_wait<kWgStages - 2>();  // this thread's copies of chunk c
    fence_proxy_async();
    // Every copy of chunk c has landed, and every warp's wgmma of chunk c - 1
    // (waited for below) is done with the slot the next load takes.
    __syncthreads();
    if (c + kWgStages - 1 < nch) load(c + kWgStages - 1, (c + kWgStages - 1) % kWgStages);
    cp_async_commit();
    const uint32_t st = smem_u32(smem + size_t(c % kWgStages) * wgmma_stage_bytes(MT, NT));
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int r = 0; r < NT / 2; ++r) reg_fence(d[mt][r]);  // no moves into d past the fence
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kWgChunk / 32; ++kk) {
      const uint64_t b = wgmma_desc(st + kRows * kWgChunk + 32 * kk);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        wgmma_e4m3<NT>(d[mt], wgmma_desc(st + mt * 64 * kWgChunk + 32 * kk), b, kk);
    }
    wgmma_commit();
    wgmma_wait_all();
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int r = 0; r < NT / 2; ++r) {
        reg_fence(d[mt][r]);
        acc[mt][r] += d[mt][r];
      }
  }
  cp_async_wait<0>();

  // Register f of a thread's fragment (f = mt NT / 2 + r, over the MT tiles):
  // its weight row and token.
  const auto row_of = [&](int f) {
    const int r = f % (NT / 2);
    return n0 + 64 * (f / (NT / 2)) + 16 * w + g + 8 * ((r & 3) >> 1);
  };
  const auto tok_of = [&](int f) {
    const int r = f % (NT / 2);
    return 8 * (r >> 2) + 2 * t + (r & 1);
  };
  // Scales and stores the sums v of registers f0 .. f0 + F - 1: y's old
  // values are all loaded first (the stores could alias them as far as the
  // compiler knows), so their latencies overlap.
  const auto finish = [&](auto count, int f0, float(&v)[decltype(count)::value]) {
    constexpr int F = decltype(count)::value;
    float old[F];
#pragma unroll
    for (int u = 0; u < F; ++u) {
      const int n = row_of(f0 + u), i = tok_of(f0 + u);
      old[u] = accumulate && n < N && i < m ? to_f32(y[size_t(i) * N + n]) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < F; ++u) {
      const int n = row_of(f0 + u), i = tok_of(f0 + u);
      if (n < N && i < m) y[size_t(i) * N + n] = from_f32<E>(v[u] * ws[n] * xs[i] + old[u]);
    }
  };
  if (S == 1) {  // the sums are complete in registers
    float v[kRegs];
#pragma unroll
    for (int f = 0; f < kRegs; ++f) v[f] = acc[f / (NT / 2)][f % (NT / 2)];
    finish(std::integral_constant<int, kRegs>{}, 0, v);
    return;
  }
  // Each block's partial sums to its shared memory in fragment order
  // (register f of thread tid at f 128 + tid); block `rank` of the cluster
  // then finishes registers rank kRegs / S .. of every thread, adding the S
  // blocks' sums in rank order (coalesced reads of distributed shared memory).
  __syncthreads();  // every warp is done with the ring before the sums overwrite it
  float* part = reinterpret_cast<float*>(smem);  // [kRegs][128]
#pragma unroll
  for (int f = 0; f < kRegs; ++f) part[f * 128 + tid] = acc[f / (NT / 2)][f % (NT / 2)];
  cluster_sync();  // every block's sums are in place
  const auto reduce = [&](auto splits) {
    constexpr int SC = decltype(splits)::value, F = kRegs / SC;
    const int f0 = rank * F;
    float v[F] = {};
#pragma unroll
    for (int q = 0; q < SC; ++q) {
      const float* src = cluster_map(part, q) + f0 * 128 + tid;
#pragma unroll
      for (int u = 0; u < F; ++u) v[u] += src[u * 128];
    }
    finish(std::integral_constant<int, F>{}, f0, v);
  };
  if (S == 2) reduce(std::integral_constant<int, 2>{});
  else if (S == 4) reduce(std::integral_constant<int, 4>{});
  else reduce(std::integral_constant<int, 8>{});
  cluster_sync();  // no block leaves while another reads its sums
}

template <int MT, int NT, typename E>
void launch_fp8_wgmma(const uint8_t* W, const float* ws, const uint8_t* x, const float* xs, int m,
                      int N, int K, E* y, bool accumulate, int k_blocks, cudaStream_t s) {
  const auto kernel = gemm_fp8_wgmma_kernel<MT, NT, E>;
  static const bool opted_in = [&] {  // above the default 48 KB; before any graph capture
    HAYATE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(wgmma_smem(MT, NT))));
    return true;
  }();
  (void)opted_in;
  LaunchConfig cfg{dim3(ceil_div(size_t(N), 64 * MT) * unsigned(k_blocks)), dim3(128),
                   wgmma_smem(MT, NT), s};
  cfg.cluster = unsigned(k_blocks);
  launch(cfg, kernel, W, ws, x, xs, m, N, K, y, int(accumulate));
}

}  // namespace

bool gemm_fp8_wgmma_supported(int m, int N, int K, int rows, int k_blocks) {
  const bool s_ok = k_blocks == 1 || k_blocks == 2 || k_blocks == 4 || k_blocks == 8;
  return m >= 1 && m <= kFp8SmallMaxRows && N >= 1 && K >= 1 && (rows == 64 || rows == 128) &&
         s_ok && K % (kWgChunk * k_blocks) == 0;
}

template <typename E>
void gemm_fp8_wgmma(const uint8_t* W, const float* w_scale, const uint8_t* xq,
                    const float* x_scale, int m, int N, int K, E* y, bool accumulate, int rows,
                    int k_blocks, cudaStream_t s) {
  HAYATE_CHECK(gemm_fp8_wgmma_supported(m, N, K, rows, k_blocks), "gemm_fp8_wgmma: ", m,
               " rows, N ", N, ", K ", K, ", ", rows, " weight rows a block over ", k_blocks,
               " blocks: needs m <= ", kFp8SmallMaxRows,
               ", 64 or 128 weight rows, 1, 2, 4 or 8 blocks, K a multiple of 128 per block");
  HAYATE_CHECK(aligned_to(16, W, xq), "gemm_fp8_wgmma: W and xq must be 16-byte aligned");
  const auto go = [&](auto mt) {  // MT 64-row tiles a block; NT tokens
    constexpr int MT = decltype(mt)::value;
    if (m <= 16)
      return launch_fp8_wgmma<MT, 16>(W, w_scale, xq, x_scale, m, N, K, y, accumulate, k_blocks, s);
    if (m <= 32)
      return launch_fp8_wgmma<MT, 32>(W, w_scale, xq, x_scale, m, N, K, y, accumulate, k_blocks, s);
    launch_fp8_wgmma<MT, 64>(W, w_scale, xq, x_scale, m, N, K, y, accumulate, k_blocks, s);
  };
  if (rows == 64)
    go(std::integral_constant<int, 1>{});
  else
    go(std::integral_constant<int, 2>{});
}

template void gemm_fp8_wgmma(const uint8_t*, const float*, const uint8_t*, const float*, int, int,
                             int, float*, bool, int, int, cudaStream_t);
template void gemm_fp8_wgmma(const uint8_t*, const float*, const uint8_t*, const float*, int, int,
                             int, half*, bool, int, int, cudaStream_t);
template void gemm_fp8_wgmma(const uint8_t*, const float*, const uint8_t*, const float*, int, int,
                             int, __nv_bfloat16*, bool, int, int, cudaStream_t);

}  // namespace hayate::cuda
