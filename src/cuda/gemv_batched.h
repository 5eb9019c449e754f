// Batched decode GEMV: y [m, N] (+)= x [m, K] . W [N, K]^T for a few rows m
// (small decode buckets, the LM head of a few sampling rows). W is streamed
// once for all m rows, where cuBLAS at m = 1..16 reads it at a fraction of the
// bandwidth. Same contract as the batched backend's cuBLAS gemm: T inputs,
// fp32 output, beta 0 (store) or 1 (residual add).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace hayate::cuda {

// Most rows one launch handles (the register tile of the kernel).
inline constexpr int kGemvBatchedMaxRows = 16;

// W [N, K] row-major, x [m, K] row-major (row stride K), y [m, N] fp32
// (row stride N); 1 <= m <= kGemvBatchedMaxRows, K % 8 == 0, 16-byte aligned
// rows. beta is 0 (y = x W^T) or 1 (y += x W^T).
template <typename T>
void gemv_batched(const T* W, const T* x, int m, int N, int K, float* y, float beta,
                  cudaStream_t s);

}  // namespace hayate::cuda
