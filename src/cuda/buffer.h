// RAII owner of device memory. Allocation failure is an Error (out of memory
// is a user-facing condition: a model too large for the card), not an abort.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "core/check.h"

namespace hayate::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) {
    if (bytes == 0) return;
    cudaError_t e = cudaMalloc(&ptr_, bytes);
    if (e != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free allocation error
      ptr_ = nullptr;
      fail(cat("cannot allocate ", double(bytes) / 1e9, " GB on the GPU: ", cudaGetErrorString(e)));
    }
    bytes_ = bytes;
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      if (ptr_) cudaFree(ptr_);
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  template <typename T = void>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace hayate::cuda
