// The one way hayate launches a kernel, and the check for device faults.
//
// HAYATE_CUDA_CHECK(expr) aborts with file:line when a CUDA call fails: a
// device fault leaves the context unusable, so there is nothing to recover
// (bad input and config are hayate::Error, thrown before we reach the GPU).
// launch() checks the launch itself; in debug builds it also synchronises
// (outside graph capture) so a fault is reported at the kernel that caused it;
// release builds see faults at the next synchronisation, which is checked.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace hayate::cuda {

[[noreturn]] inline void cuda_abort(cudaError_t e, const char* what, const char* file, int line) {
  std::fprintf(stderr, "hayate: CUDA error %s (%s) at %s:%d in %s\n", cudaGetErrorName(e),
               cudaGetErrorString(e), file, line, what);
  std::abort();
}

}  // namespace hayate::cuda

#define HAYATE_CUDA_CHECK(expr)                                                    \
  do {                                                                             \
    cudaError_t hayate_err_ = (expr);                                              \
    if (hayate_err_ != cudaSuccess) [[unlikely]]                                   \
      ::hayate::cuda::cuda_abort(hayate_err_, #expr, __FILE__, __LINE__);          \
  } while (0)

// The same for cuBLAS and cuBLASLt calls (cublasStatus_t; the including file
// has the cuBLAS header).
#define HAYATE_CUBLAS_CHECK(expr)                                                       \
  do {                                                                                  \
    cublasStatus_t hayate_st_ = (expr);                                                 \
    if (hayate_st_ != CUBLAS_STATUS_SUCCESS) [[unlikely]] {                             \
      std::fprintf(stderr, "hayate: cuBLAS error %d at %s:%d in %s\n", int(hayate_st_), \
                   __FILE__, __LINE__, #expr);                                          \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)

namespace hayate::cuda {

struct LaunchConfig {
  dim3 grid;
  dim3 block;
  size_t smem = 0;
  cudaStream_t stream = nullptr;
  // Programmatic dependent launch: the kernel may start while the previous
  // kernel on the stream is finishing; it must call griddep_enter() before
  // reading that kernel's outputs (kernels/common.cuh).
  bool pdl = false;
  // Cooperative launch: every block resident at once (the grid barriers of
  // the persistent decode kernel need it); the runtime refuses a grid that
  // cannot be.
  bool cooperative = false;
  // Thread-block clusters of this many blocks along x (sm_90; 1: none): the
  // grid's x a multiple of it.
  unsigned cluster = 1;
};

// try_launch(cfg, kernel, args...): the only place with a kernel launch.
// Returns the launch's own error (a configuration the runtime refuses, e.g. a
// cooperative grid larger than what can be resident) for callers with a
// fallback; everything else calls launch(), which aborts on it.
template <typename... Params, typename... Args>
cudaError_t try_launch(const LaunchConfig& cfg, void (*kernel)(Params...), Args&&... args) {
  if (cfg.grid.x == 0 || cfg.grid.y == 0 || cfg.grid.z == 0) return cudaSuccess;  // nothing to do
  cudaLaunchConfig_t c{};
  c.gridDim = cfg.grid;
  c.blockDim = cfg.block;
  c.dynamicSmemBytes = cfg.smem;
  c.stream = cfg.stream;
  cudaLaunchAttribute attr[3];
  unsigned n = 0;
  if (cfg.pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cfg.cooperative) {
    attr[n].id = cudaLaunchAttributeCooperative;
    attr[n++].val.cooperative = 1;
  }
  if (cfg.cluster > 1) {  // not with a cooperative grid; x a multiple of it
    if (cfg.cooperative || cfg.grid.x % cfg.cluster != 0) return cudaErrorInvalidValue;
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n++].val.clusterDim = {cfg.cluster, 1, 1};
  }
  c.attrs = n > 0 ? attr : nullptr;
  c.numAttrs = n;
  return cudaLaunchKernelEx(&c, kernel, std::forward<Args>(args)...);
}

template <typename... Params, typename... Args>
void launch(const LaunchConfig& cfg, void (*kernel)(Params...), Args&&... args) {
  HAYATE_CUDA_CHECK(try_launch(cfg, kernel, std::forward<Args>(args)...));
#ifndef NDEBUG
  HAYATE_CUDA_CHECK(cudaGetLastError());
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  HAYATE_CUDA_CHECK(cudaStreamIsCapturing(cfg.stream, &capturing));
  if (capturing == cudaStreamCaptureStatusNone) HAYATE_CUDA_CHECK(cudaStreamSynchronize(cfg.stream));
#endif
}

inline unsigned ceil_div(size_t a, size_t b) { return unsigned((a + b - 1) / b); }

// Whether every pointer is a multiple of `bytes` (vector-access kernels check
// before taking their wide path).
template <typename... P>
bool aligned_to(size_t bytes, const P*... p) {
  return ((reinterpret_cast<uintptr_t>(p) % bytes == 0) && ...);
}

}  // namespace hayate::cuda
