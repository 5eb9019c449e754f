// The KV block copy's launcher (kernels/kv_copy.cu): copy on write in the
// paged pools, the mirror of cpu::copy_blocks.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace hayate::cuda {

// For each pair c in order and each layer l, pool[l, pairs[c][1], :] =
// pool[l, pairs[c][0], :]. pool: [layers, blocks, block_elems] on the device;
// pairs: [n, 2] (src, dst) in host memory (they travel as kernel arguments),
// validated by the caller. T: half, __nv_bfloat16, float or __nv_fp8_e4m3 (an e4m3 pool).
template <typename T>
void copy_blocks(T* pool, int layers, int blocks, int64_t block_elems, const int32_t* pairs, int n,
                 cudaStream_t s);

}  // namespace hayate::cuda
