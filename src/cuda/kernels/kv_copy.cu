// Copy on write of paged KV blocks: a block of every layer per copy.
#include <cuda_fp8.h>

#include <algorithm>

#include "cuda/kernels/common.cuh"
#include "cuda/kv_copy.h"
#include "cuda/launch.h"

namespace hayate::cuda {

namespace {

// Pairs per launch: they ride in the kernel's arguments (512 bytes), so the
// copy needs no device buffer and no upload of its own.
constexpr int kPairsPerLaunch = 64;
struct BlockPairs {
  int32_t v[2 * kPairsPerLaunch];  // [n, 2] (src, dst)
};

// ---- kernels -------------------------------------------------------------------

// grid (pairs, layers): CTA (c, l) copies block src -> dst of layer l in units of U.
template <typename U>
__global__ void copy_blocks_kernel(U* __restrict__ pool,  // [layers, layer_units]
                                   int64_t layer_units, int64_t block_units, BlockPairs pairs) {
  U* layer = pool + int64_t(blockIdx.y) * layer_units;
  const U* src = layer + int64_t(pairs.v[2 * blockIdx.x]) * block_units;
  U* dst = layer + int64_t(pairs.v[2 * blockIdx.x + 1]) * block_units;
  for (int64_t i = threadIdx.x; i < block_units; i += blockDim.x) dst[i] = src[i];
}

// Pairs of one launch run at once; a pair that touches a block an earlier
// pair of the launch writes, or writes one it reads, starts the next launch
// (stream order keeps the pairs' order).
template <typename U>
void copy_units(U* pool, int layers, int64_t layer_units, int64_t block_units, const int32_t* pairs,
                int n, cudaStream_t s) {
  BlockPairs p{};
  int m = 0;
  auto flush = [&] {
    if (m > 0)
      launch({dim3(unsigned(m), unsigned(layers)), 256, 0, s}, copy_blocks_kernel<U>, pool,
             layer_units, block_units, p);
    m = 0;
  };
  for (int c = 0; c < n; ++c) {
    const int32_t src = pairs[2 * c], dst = pairs[2 * c + 1];
    bool conflict = m == kPairsPerLaunch;
    for (int k = 0; k < m && !conflict; ++k)
      conflict = p.v[2 * k + 1] == src || p.v[2 * k + 1] == dst || p.v[2 * k] == dst;
    if (conflict) flush();
    p.v[2 * m] = src;
    p.v[2 * m + 1] = dst;
    ++m;
  }
  flush();
}

}  // namespace

// ---- launchers -------------------------------------------------------------------

template <typename T>
void copy_blocks(T* pool, int layers, int blocks, int64_t block_elems, const int32_t* pairs, int n,
                 cudaStream_t s) {
  const int64_t block_bytes = block_elems * int64_t(sizeof(T));
  if (block_bytes % 16 == 0 && aligned_to(16, pool))  // 16-byte accesses
    copy_units(reinterpret_cast<int4*>(pool), layers, int64_t(blocks) * block_bytes / 16,
               block_bytes / 16, pairs, n, s);
  else
    copy_units(pool, layers, int64_t(blocks) * block_elems, block_elems, pairs, n, s);
}

template void copy_blocks<float>(float*, int, int, int64_t, const int32_t*, int, cudaStream_t);
template void copy_blocks<half>(half*, int, int, int64_t, const int32_t*, int, cudaStream_t);
template void copy_blocks<__nv_bfloat16>(__nv_bfloat16*, int, int, int64_t, const int32_t*, int,
                                         cudaStream_t);
template void copy_blocks<__nv_fp8_e4m3>(__nv_fp8_e4m3*, int, int, int64_t, const int32_t*, int,
                                         cudaStream_t);

}  // namespace hayate::cuda
