// Batched decode GEMV (gemv_batched.h). One warp owns R consecutive output
// rows n and walks their whole K: each lane issues R*U 16-byte weight loads
// (streamed, no L1 allocation), converts them once, then for each of the m
// input rows loads the matching 8 x values (from L1: x [m, K] is small and read
// by every warp) and accumulates in fp32. The weights are read once for all m
// rows; x is re-read from L1 once per R rows, so R grows with m to keep the
// L1 traffic (M/R x loads per weight load) under the L1's bandwidth.
// No shared memory and no barriers: a warp past N just returns.
#include "core/check.h"
#include "cuda/gemv_batched.h"
#include "cuda/kernels/common.cuh"
#include "cuda/launch.h"

namespace hayate::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

template <typename T, int M, int R, int U>
__global__ void __launch_bounds__(kThreads)
    gemv_batched_kernel(const T* __restrict__ W,  // [N, K]
                        const T* __restrict__ x,  // [m, K], m <= M
                        int m, int N, int K,
                        float* __restrict__ y,  // [m, N]
                        bool accumulate) {
  const int lane = threadIdx.x % 32;
  const int row0 = (blockIdx.x * kWarps + threadIdx.x / 32) * R;
  if (row0 >= N) return;      // warp-uniform
  const int nchunks = K / 8;  // 8 elements per 16-byte chunk
  const T* wr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) wr[r] = W + size_t(min(row0 + r, N - 1)) * K;

  float acc[R][M] = {};
  for (int c0 = lane; c0 < nchunks; c0 += 32 * U) {
    uint4 w[R][U];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int c = c0 + u * 32;
        w[r][u] = c < nchunks ? load_stream(wr[r] + size_t(c) * 8) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + u * 32;
      if (c >= nchunks) break;
      float wf[R][8];
#pragma unroll
      for (int r = 0; r < R; ++r) unpack8<T>(w[r][u], wf[r]);
#pragma unroll
      for (int i = 0; i < M; ++i) {
        if (i >= m) break;  // uniform: m is a kernel argument
        float xf[8];
        unpack8<T>(__ldg(reinterpret_cast<const uint4*>(x + size_t(i) * K + size_t(c) * 8)), xf);
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[r][i] += wf[r][e] * xf[e];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < M; ++i) acc[r][i] = warp_sum(acc[r][i]);
  if (lane != 0) return;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (row0 + r >= N) break;
#pragma unroll
    for (int i = 0; i < M; ++i) {
      if (i >= m) break;
      float* dst = y + size_t(i) * N + row0 + r;
      *dst = accumulate ? *dst + acc[r][i] : acc[r][i];
    }
  }
}

template <typename T, int M, int R, int U>
void run(const T* W, const T* x, int m, int N, int K, float* y, bool accumulate, cudaStream_t s) {
  const unsigned warps = ceil_div(size_t(N), R);
  launch({ceil_div(warps, kWarps), kThreads, 0, s, false}, gemv_batched_kernel<T, M, R, U>, W, x, m,
         N, K, y, accumulate);
}

}  // namespace

template <typename T>
void gemv_batched(const T* W, const T* x, int m, int N, int K, float* y, float beta,
                  cudaStream_t s) {
  HAYATE_CHECK(m >= 1 && m <= kGemvBatchedMaxRows, "gemv_batched: ", m, " rows, at most ",
               kGemvBatchedMaxRows);
  HAYATE_CHECK(K % 8 == 0 && N >= 1, "gemv_batched: K = ", K, " must be a multiple of 8");
  HAYATE_CHECK(beta == 0.0f || beta == 1.0f, "gemv_batched: beta must be 0 or 1");
  const bool acc = beta == 1.0f;
  // (rows per warp R, loads in flight U) per row tile M: see the file comment.
  if (m == 1)
    run<T, 1, 2, 4>(W, x, m, N, K, y, acc, s);
  else if (m == 2)
    run<T, 2, 2, 4>(W, x, m, N, K, y, acc, s);
  else if (m <= 4)
    run<T, 4, 2, 4>(W, x, m, N, K, y, acc, s);
  else if (m <= 8)
    run<T, 8, 4, 2>(W, x, m, N, K, y, acc, s);
  else
    run<T, 16, 4, 2>(W, x, m, N, K, y, acc, s);
}

template void gemv_batched<half>(const half*, const half*, int, int, int, float*, float,
                                 cudaStream_t);
template void gemv_batched<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*, int, int, int,
                                          float*, float, cudaStream_t);

}  // namespace hayate::cuda
