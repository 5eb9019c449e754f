// Where the wgmma FP8 kernel's time goes at 16 and 64 rows: copies of
// gemm_fp8_wgmma_kernel (src/cuda/kernels/gemm_fp8_wgmma.cu, as of 29d6b62)
// with one part left out, timed as a step runs them (8 products over 8
// weight copies back to back, between two events; us a product):
//   P0 the kernel as it is           P1 no wgmma (the ring only)
//   P2 no epilogue (sums not stored) P3 the tensor core's accumulator over
//                                       all K, wgmma overlapping the next wait
//   P4 no token tile (weights only)
// Lab only (P1, P2, P4 compute nothing usable; P3 is checked against P0).
// NOTES.md, "Where the wgmma kernel's time goes at 16-64 rows".
#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/buffer.h"
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/mma.cuh"
#include "cuda/kernels/ring.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"
#include "cuda/stream_timing.h"

namespace hayate::cuda {
namespace {

constexpr int kWgRows = 128;   // weight rows per block: two 64-row wgmma tiles
constexpr int kWgChunk = 128;  // k per stage: one 128-byte swizzle row per weight row and token
constexpr int kWgStages = 4;   // ring stages; kWgStages - 1 chunks in flight

// Shared memory: the ring (stages of [128 weight rows][128 B] then [NT
// tokens][128 B], each 1,024-byte aligned), reused after the loop for the
// block's partial sums ([NT][128] fp32, smaller); 1 KB of slack to align the base.
constexpr size_t wgmma_stage_bytes(int nt) { return size_t(kWgRows + nt) * kWgChunk; }
constexpr size_t wgmma_smem(int nt) { return kWgStages * wgmma_stage_bytes(nt) + 1024; }

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
// blocks (a cluster, S = its size) per 128 weight rows, block rank r of the
// cluster taking k in [r K / S, (r + 1) K / S); K % (128 S) == 0.
template <int NT, int PART, typename E>
__global__ void __launch_bounds__(128)
    parts_kernel(const uint8_t* __restrict__ W, const float* __restrict__ ws,
                          const uint8_t* __restrict__ x, const float* __restrict__ xs, int m, int N,
                          int K, E* __restrict__ y, int accumulate) {
  constexpr int kPieces = (kWgRows + NT) * (kWgChunk / 16);  // 16-byte copies per stage
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int S = cluster_blocks(), rank = cluster_rank();
  const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int n0 = int(blockIdx.x / unsigned(S)) * kWgRows;
  const int kw = K / S, nch = kw / kWgChunk;
  const size_t k0 = size_t(rank) * kw;

  // Chunk c into stage `slot`: weight rows past N read row N - 1 (never
  // stored), tokens past m are zeros.
  const auto load = [&](int c, int slot) {
    uint8_t* st = smem + size_t(slot) * wgmma_stage_bytes(NT);
    const size_t kc = k0 + size_t(c) * kWgChunk;
#pragma unroll
    for (int i = 0; i < kPieces / 128; ++i) {
      const int p = tid + 128 * i, row = p >> 3, piece = p & 7;
      if (PART == 4 && row >= kWgRows) continue;
      const bool weight = row < kWgRows;
      const int tok = row - kWgRows;
      const uint8_t* src = weight ? W + size_t(min(n0 + row, N - 1)) * K + kc + 16 * piece
                                  : x + size_t(min(tok, m - 1)) * K + kc + 16 * piece;
      cp_async16(st + row * kWgChunk + ((piece ^ (row & 7)) << 4), src, weight || tok < m);
    }
  };

  float acc[2][NT / 2] = {};
  float d[2][NT / 2] = {};
#pragma unroll
  for (int c = 0; c < kWgStages - 1; ++c) {
    if (c < nch) load(c, c);
    cp_async_commit();
  }
  for (int c = 0; c < nch; ++c) {
    cp_async_wait<kWgStages - 2>();  // this thread's copies of chunk c
    if (PART == 3) wgmma_wait_all();  // chunk c - 1's products, before its slot is reused
    fence_proxy_async();
    // Every copy of chunk c has landed, and every warp's wgmma of chunk c - 1
    // (waited for below) is done with the slot the next load takes.
    __syncthreads();
    if (c + kWgStages - 1 < nch) load(c + kWgStages - 1, (c + kWgStages - 1) % kWgStages);
    cp_async_commit();
    const uint32_t st = smem_u32(smem + size_t(c % kWgStages) * wgmma_stage_bytes(NT));
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int r = 0; r < NT / 2; ++r) reg_fence(d[mt][r]);  // no moves into d past the fence
    if (PART == 1) continue;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kWgChunk / 32; ++kk) {
      const uint64_t b = wgmma_desc(st + kWgRows * kWgChunk + 32 * kk);
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
        wgmma_e4m3<NT>(d[mt], wgmma_desc(st + mt * 64 * kWgChunk + 32 * kk), b,
                       PART == 3 ? (c > 0 || kk > 0) : kk);
    }
    wgmma_commit();
    if (PART == 3) continue;  // waited for at the next chunk, after its copies landed
    wgmma_wait_all();
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int r = 0; r < NT / 2; ++r) {
        reg_fence(d[mt][r]);
        acc[mt][r] += d[mt][r];
      }
  }
  if (PART == 3) {
    wgmma_wait_all();
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int r = 0; r < NT / 2; ++r) {
        reg_fence(d[mt][r]);
        acc[mt][r] = d[mt][r];
      }
  }
  if (PART == 2) {  // no epilogue: one value a thread, so the sums stay live
    float t0 = 0;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int r = 0; r < NT / 2; ++r) t0 += acc[mt][r];
    if (t0 == 12345.0f) y[tid] = from_f32<E>(t0);
    return;
  }
  cp_async_wait<0>();

  // Register f of a thread's fragment (f = mt NT / 2 + r, over both tiles):
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
    float v[NT];
#pragma unroll
    for (int f = 0; f < NT; ++f) v[f] = acc[f / (NT / 2)][f % (NT / 2)];
    finish(std::integral_constant<int, NT>{}, 0, v);
    return;
  }
  // Each block's partial sums to its shared memory in fragment order
  // (register f of thread tid at f 128 + tid); block `rank` of the cluster
  // then finishes registers rank NT / S .. of every thread, adding the S
  // blocks' sums in rank order (coalesced reads of distributed shared memory).
  __syncthreads();  // every warp is done with the ring before the sums overwrite it
  float* part = reinterpret_cast<float*>(smem);  // [NT][128]
#pragma unroll
  for (int f = 0; f < NT; ++f) part[f * 128 + tid] = acc[f / (NT / 2)][f % (NT / 2)];
  cluster_sync();  // every block's sums are in place
  const auto reduce = [&](auto splits) {
    constexpr int SC = decltype(splits)::value, F = NT / SC;
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


template <int NT, int PART, typename E>
void launch_parts(const uint8_t* W, const float* ws, const uint8_t* x, const float* xs, int m,
                  int N, int K, E* y, int S, cudaStream_t s) {
  const auto kernel = parts_kernel<NT, PART, E>;
  static const bool opted_in = [&] {
    HAYATE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(wgmma_smem(NT))));
    return true;
  }();
  (void)opted_in;
  LaunchConfig cfg{dim3(ceil_div(size_t(N), kWgRows) * unsigned(S)), dim3(128), wgmma_smem(NT),
                   s};
  cfg.cluster = unsigned(S);
  launch(cfg, kernel, W, ws, x, xs, m, N, K, y, int(std::is_same_v<E, float>));
}

template <int NT, typename E>
void launch_part(int part, const uint8_t* W, const float* ws, const uint8_t* x, const float* xs,
                 int m, int N, int K, E* y, int S, cudaStream_t s) {
  switch (part) {
    case 0: return launch_parts<NT, 0>(W, ws, x, xs, m, N, K, y, S, s);
    case 1: return launch_parts<NT, 1>(W, ws, x, xs, m, N, K, y, S, s);
    case 2: return launch_parts<NT, 2>(W, ws, x, xs, m, N, K, y, S, s);
    case 3: return launch_parts<NT, 3>(W, ws, x, xs, m, N, K, y, S, s);
    default: return launch_parts<NT, 4>(W, ws, x, xs, m, N, K, y, S, s);
  }
}

constexpr int kLayers = 8, kReps = 15;

template <typename E>
void run_shape(const char* name, int N, int K, int S, cudaStream_t st) {
  const size_t wbytes = size_t(N) * K;
  DeviceBuffer wf(wbytes * sizeof(float)), wq(wbytes * kLayers), wsc(size_t(N) * sizeof(float));
  fill_dummy<float>(wf.as<float>(), wbytes, 3, 0, 0.05f, 0.0f, 0, st);
  quantize_weight_rows(wf.as<float>(), N, K, wq.as<uint8_t>(), wsc.as<float>(), st);
  for (int c = 1; c < kLayers; ++c)
    HAYATE_CUDA_CHECK(cudaMemcpyAsync(wq.as<uint8_t>() + c * wbytes, wq.as(), wbytes,
                                      cudaMemcpyDeviceToDevice, st));
  for (int m : {16, 64}) {
    DeviceBuffer xh(size_t(m) * K * sizeof(half)), xq(size_t(m) * K), xsd(size_t(m) * 4);
    fill_dummy<half>(xh.as<half>(), size_t(m) * K, 5, uint64_t(m), 1.0f, 0.0f, 0, st);
    quantize_rows_fp8(xh.as<half>(), m, K, 0.0f, xq.as<uint8_t>(), xsd.as<float>(), st);
    DeviceBuffer y(size_t(m) * N * sizeof(E));
    std::string line;
    std::vector<float> ref, got;
    for (int part = 0; part < 5; ++part) {
      const auto step = [&] {
        for (int l = 0; l < kLayers; ++l) {
          const uint8_t* W = wq.as<uint8_t>() + size_t(l) * wbytes;
          if (m <= 16)
            launch_part<16>(part, W, wsc.as<float>(), xq.as<uint8_t>(), xsd.as<float>(), m, N,
                            K, y.as<E>(), S, st);
          else
            launch_part<64>(part, W, wsc.as<float>(), xq.as<uint8_t>(), xsd.as<float>(), m, N,
                            K, y.as<E>(), S, st);
        }
      };
      const float us = median_ms_on_stream(st, 3, kReps, step) * 1000.0f / kLayers;
      char buf[64];
      if (part == 0 || part == 3) {  // P3's sums against P0's, one product from zero
        HAYATE_CUDA_CHECK(cudaMemsetAsync(y.as(), 0, y.bytes(), st));
        if (m <= 16)
          launch_part<16>(part, wq.as<uint8_t>(), wsc.as<float>(), xq.as<uint8_t>(),
                          xsd.as<float>(), m, N, K, y.as<E>(), S, st);
        else
          launch_part<64>(part, wq.as<uint8_t>(), wsc.as<float>(), xq.as<uint8_t>(),
                          xsd.as<float>(), m, N, K, y.as<E>(), S, st);
        std::vector<E> h(size_t(m) * N);
        HAYATE_CUDA_CHECK(cudaMemcpy(h.data(), y.as(), y.bytes(), cudaMemcpyDeviceToHost));
        std::vector<float>& v = part == 0 ? ref : got;
        v.resize(h.size());
        for (size_t i = 0; i < h.size(); ++i) {
          if constexpr (std::is_same_v<E, float>)
            v[i] = h[i];
          else
            v[i] = __half2float(h[i]);
        }
      }
      std::snprintf(buf, sizeof buf, "  P%d %6.1f", part, us);
      line += buf;
    }
    double worst = 0, scale = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      worst = std::max(worst, double(std::fabs(got[i] - ref[i])));
      scale = std::max(scale, double(std::fabs(ref[i])));
    }
    std::printf("%-8s S %d m %2d floor %5.1f us:%s  (P3 vs P0: %.1e of the largest)\n", name, S,
                m, double(wbytes) / 3.0e6, line.c_str(), worst / scale);
    std::fflush(stdout);
  }
}

}  // namespace
}  // namespace hayate::cuda

int main() {
  using namespace hayate::cuda;
  cudaStream_t s;
  HAYATE_CUDA_CHECK(cudaStreamCreate(&s));
  std::printf("floor: bytes over 3.0 TB/s\n");
  run_shape<float>("o", 4096, 4096, 4, s);
  run_shape<half>("qkv", 6144, 4096, 4, s);
  run_shape<float>("down", 4096, 14336, 4, s);
  run_shape<half>("gate_up", 28672, 4096, 1, s);
  run_shape<float>("o", 4096, 4096, 2, s);
  HAYATE_CUDA_CHECK(cudaStreamDestroy(s));
  return 0;
}
