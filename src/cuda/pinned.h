// Page-locked host memory for the batched backend's per-step metadata.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "cuda/launch.h"

namespace hayate::cuda {

// Page-locked host staging of the step metadata: cudaMemcpyAsync from it is
// a real asynchronous DMA, where a copy from pageable memory blocks the host
// while the driver stages it (several per step). Written only between steps:
// step() synchronises before it returns.
class PinnedInts {
 public:
  PinnedInts() = default;
  explicit PinnedInts(size_t n) {
    HAYATE_CUDA_CHECK(cudaMallocHost(&p_, std::max<size_t>(n, 1) * sizeof(int32_t)));
    std::fill_n(p_, n, 0);
  }
  PinnedInts(PinnedInts&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  PinnedInts& operator=(PinnedInts&& o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~PinnedInts() {
    if (p_) cudaFreeHost(p_);
  }
  int32_t& operator[](size_t i) { return p_[i]; }
  int32_t* data() { return p_; }

 private:
  int32_t* p_ = nullptr;
};

}  // namespace hayate::cuda
