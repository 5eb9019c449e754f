// RoPE as transformers' Llama applies it (rotate_half): within a head of
// dimension d, element i pairs with i + d/2 and both turn by pos * inv_freq[i].
// inv_freq comes from rope_inv_freq() (llama3 scaling applied on the host).
#pragma once

#include <cuda_runtime.h>

namespace hayate::cuda {

// The cosine and sine of position p's angle for a pair of frequency
// inv_freq: precise sincosf, since angles reach max_context radians, where the
// fast intrinsics lose all accuracy.
__device__ __forceinline__ void rope_cos_sin(int p, float inv_freq, float& c, float& s) {
  sincosf(float(p) * inv_freq, &s, &c);
}

// The pair (a, b) turned by the angle whose cosine and sine are c and s.
__device__ __forceinline__ void rope_turn(float& a, float& b, float c, float s) {
  const float a2 = a * c - b * s;
  b = b * c + a * s;
  a = a2;
}

}  // namespace hayate::cuda
