// Device helpers shared by the paged attention kernels (paged_attention.cu,
// paged_prefill.cu). Position p of sequence slot `seq` sits in block
// table_of(...)[p / block_size] at row p % block_size.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/paged_attention.cuh"

namespace hayate::cuda {

__device__ __forceinline__ const int32_t* table_of(const PagedMeta& m, int seq, int max_blocks) {
  return m.block_tables + size_t(seq) * max_blocks;
}

}  // namespace hayate::cuda
