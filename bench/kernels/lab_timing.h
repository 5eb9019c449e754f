// Timing shared by the kernel labs: CUDA events around each launch, median.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "cuda/launch.h"

namespace hayate::cuda {

// Three untimed calls, then `reps` calls of body(i) between two events each;
// the median in ms.
inline double median_ms(cudaStream_t s, int reps, const std::function<void(int)>& body) {
  cudaEvent_t a, b;
  HAYATE_CUDA_CHECK(cudaEventCreate(&a));
  HAYATE_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) body(i);
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    HAYATE_CUDA_CHECK(cudaEventRecord(a, s));
    body(i);
    HAYATE_CUDA_CHECK(cudaEventRecord(b, s));
    HAYATE_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    HAYATE_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace hayate::cuda
