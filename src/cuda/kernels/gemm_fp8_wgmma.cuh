// The wgmma form of the FP8 product at few rows (gemm_fp8_wgmma.cu), behind
// gemm_fp8_small (ops.h), which calls it for tiles with k_blocks > 0: the one
// place that picks between the two kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace hayate::cuda {

// rows: weight rows a block (64 or 128); k_blocks: blocks splitting K.
bool gemm_fp8_wgmma_supported(int m, int N, int K, int rows, int k_blocks);
template <typename E>
void gemm_fp8_wgmma(const uint8_t* W, const float* w_scale, const uint8_t* xq,
                    const float* x_scale, int m, int N, int K, E* y, bool accumulate, int rows,
                    int k_blocks, cudaStream_t s);

}  // namespace hayate::cuda
