// Device helpers shared by the paged attention kernels (paged_attention.cu,
// paged_prefill.cu, paged_decode_mma.cu, paged_decode_short.cu). Position p of sequence slot `seq`
// sits in block table_of(...)[p / block_size] at row p % block_size.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/paged_attention.cuh"

namespace hayate::cuda {

__device__ __forceinline__ const int32_t* table_of(const PagedMeta& m, int seq, int max_blocks) {
  return m.block_tables + size_t(seq) * max_blocks;
}

// The query's scale in every attention kernel: 1 / sqrt(head_dim) in log2
// units (softmax via exp2) times an e4m3 pool's K scale (1 for T pools).
__device__ __forceinline__ float q_scale(int head_dim, const PagedShape& sh) {
  return rsqrtf(float(head_dim)) * 1.4426950408889634f * sh.k_scale;
}

}  // namespace hayate::cuda
