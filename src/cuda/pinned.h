// Page-locked host memory for the backend's per-step metadata and results.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "cuda/launch.h"

namespace hayate::cuda {

// Page-locked host memory: cudaMemcpyAsync to or from it is a real
// asynchronous DMA, where a copy from pageable memory blocks the host while
// the driver stages it. A launched step's staging is written again only
// after that step has finished.
template <typename E>
class Pinned {
 public:
  Pinned() = default;
  explicit Pinned(size_t n) {
    HAYATE_CUDA_CHECK(cudaMallocHost(&p_, std::max<size_t>(n, 1) * sizeof(E)));
    std::fill_n(p_, n, E{});
  }
  Pinned(Pinned&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Pinned& operator=(Pinned&& o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~Pinned() {
    if (p_) cudaFreeHost(p_);
  }
  E& operator[](size_t i) { return p_[i]; }
  E* data() { return p_; }

 private:
  E* p_ = nullptr;
};
using PinnedInts = Pinned<int32_t>;

}  // namespace hayate::cuda
