// Counter-based random numbers: the value for (seed, stream, index) is a pure
// function, so the CPU and CUDA backends make identical dummy weights without
// sharing state, and the GPU fills 8B of weights in parallel.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define HAYATE_HD __host__ __device__
#else
#define HAYATE_HD
#endif

namespace hayate {

// SplitMix64 finalizer: a bijective 64-bit mix with good avalanche.
HAYATE_HD inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform float in [-1, 1) for element `index` of stream `stream`.
HAYATE_HD inline float uniform_pm1(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t h = mix64(seed ^ mix64(stream ^ mix64(index)));
  return float(int64_t(h >> 40) - (int64_t(1) << 23)) * (1.0f / float(1 << 23));
}

// Uniform float in [0, 1).
HAYATE_HD inline float uniform01(uint64_t seed, uint64_t stream, uint64_t index) {
  return float(mix64(seed ^ mix64(stream ^ mix64(index))) >> 40) * (1.0f / float(1 << 24));
}

}  // namespace hayate
