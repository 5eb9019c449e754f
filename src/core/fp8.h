// FP8 (e4m3fn) quantization as hayate runs it, on the host: the CPU oracle's
// weights and activations, and the reference the CUDA kernels are tested
// against. The CUDA kernels compute the same things in the same fp32 order
// (cuda/kernels/fp8.cuh), so weights quantized at load match bit for bit.
//
// Scales follow vLLM's dynamic FP8: a row's scale is max(amax / 448,
// 1 / (448 * 512)) (the floor keeps an all-zero row finite), and a value x
// is stored as e4m3(clamp(x / scale, -448, 448)); it reads back as code *
// scale. Weights are quantized per output row (channel), activations per
// token (row) or with a static per-tensor scale from the checkpoint.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace hayate {

inline constexpr float kFp8Max = 448.0f;
inline constexpr float kFp8MinScale = 1.0f / (448.0f * 512.0f);

// The dynamic scale of values whose largest magnitude is amax.
inline float fp8_scale_for(float amax) { return std::fmax(amax / kFp8Max, kFp8MinScale); }

// The e4m3 code of x under scale s.
inline uint8_t fp8_quantize(float x, float s) {
  return f32_to_e4m3(std::fmin(std::fmax(x / s, -kFp8Max), kFp8Max));
}

// Quantizes row[0..n) with its own dynamic scale (static_scale == 0) or with
// static_scale, writing codes (may be null) and returning the scale used.
inline float fp8_quantize_row(const float* row, size_t n, float static_scale, uint8_t* codes) {
  float s = static_scale;
  if (s == 0.0f) {
    float amax = 0.0f;
    for (size_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(row[i]));
    s = fp8_scale_for(amax);
  }
  if (codes)
    for (size_t i = 0; i < n; ++i) codes[i] = fp8_quantize(row[i], s);
  return s;
}

// row[i] = value of row[i] after quantization (fake quantization, in place);
// returns the scale.
inline float fp8_fake_quantize_row(float* row, size_t n, float static_scale) {
  const float s = fp8_quantize_row(row, n, static_scale, nullptr);
  for (size_t i = 0; i < n; ++i) row[i] = e4m3_to_f32(fp8_quantize(row[i], s)) * s;
  return s;
}

}  // namespace hayate
