// CUDA-event timing on a stream, for start-up choices (GEMM algorithms,
// decode graphs, samplers) and the bandwidth probe.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "cuda/launch.h"

namespace hayate::cuda {

// Median ms over `reps` calls of body(), each timed on its own, after
// `warmups` untimed calls.
inline float median_ms_on_stream(cudaStream_t s, int warmups, int reps,
                                 const std::function<void()>& body) {
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  HAYATE_CUDA_CHECK(cudaEventCreate(&e0));
  HAYATE_CUDA_CHECK(cudaEventCreate(&e1));
  for (int i = 0; i < warmups; ++i) body();
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) {
    HAYATE_CUDA_CHECK(cudaEventRecord(e0, s));
    body();
    HAYATE_CUDA_CHECK(cudaEventRecord(e1, s));
    HAYATE_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0.0f;
    HAYATE_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms);
  }
  HAYATE_CUDA_CHECK(cudaEventDestroy(e0));
  HAYATE_CUDA_CHECK(cudaEventDestroy(e1));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Mean ms of `reps` calls of f() on stream s, timed together, after one warm call.
inline float time_on_stream(cudaStream_t s, const std::function<void()>& f, int reps) {
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  HAYATE_CUDA_CHECK(cudaEventCreate(&e0));
  HAYATE_CUDA_CHECK(cudaEventCreate(&e1));
  f();
  HAYATE_CUDA_CHECK(cudaEventRecord(e0, s));
  for (int i = 0; i < reps; ++i) f();
  HAYATE_CUDA_CHECK(cudaEventRecord(e1, s));
  HAYATE_CUDA_CHECK(cudaEventSynchronize(e1));
  float ms = 0.0f;
  HAYATE_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  HAYATE_CUDA_CHECK(cudaEventDestroy(e0));
  HAYATE_CUDA_CHECK(cudaEventDestroy(e1));
  return ms / float(reps);
}

}  // namespace hayate::cuda
