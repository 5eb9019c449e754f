// Element types of weights and activations, with host conversions.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace hayate {

// F8E4M3: OCP FP8 e4m3fn (safetensors F8_E4M3), only as stored weights with
// scales (model.h); core/fp8.h has its conversions.
enum class DType : uint8_t { F32, F16, BF16, F8E4M3 };

constexpr size_t dtype_size(DType t) {
  return t == DType::F32 ? 4 : t == DType::F8E4M3 ? 1 : 2;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    case DType::F8E4M3: return "float8_e4m3fn";
  }
  return "?";
}

// Host-side conversions (round to nearest even), used by the loader and the
// CPU backend. The CUDA side uses the cuda_fp16 / cuda_bf16 intrinsics.
inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

inline float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return std::bit_cast<float>(sign);
    // Subnormal: value = mant * 2^-24.
    float v = float(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t f32_to_f16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);            // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);           // overflow -> inf
  if (a < 0x38800000u) {                                          // subnormal or zero
    float v = std::bit_cast<float>(a) * 16777216.0f;                 // scale by 2^24
    uint32_t m = uint32_t(v);
    float rem = v - float(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
    return uint16_t(sign | m);
  }
  uint32_t h = (((a >> 23) - 112u) << 10) | ((a >> 13) & 0x3ffu);  // rebias 127 -> 15
  uint32_t rest = a & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // nearest even; carry is fine
  return uint16_t(sign | h);
}

// OCP FP8 e4m3fn (1 sign, 4 exponent bits of bias 7, 3 mantissa bits; no
// infinities, 0x7f/0xff NaN, largest finite 448): the value of a code.
inline float e4m3_to_f32(uint8_t b) {
  const int exp = (b >> 3) & 0xf, mant = b & 7;
  float v;
  if (exp == 0) v = float(mant) * 0.001953125f;  // subnormal: mant * 2^-9
  else if (exp == 15 && mant == 7) v = std::bit_cast<float>(0x7fc00000u);
  else v = std::ldexp(1.0f + float(mant) * 0.125f, exp - 7);
  return (b & 0x80) ? -v : v;
}

// The nearest e4m3fn code (ties to even); magnitudes past 448 saturate to
// 448 (CUDA's __NV_SATFINITE), NaN gives 0x7f.
inline uint8_t f32_to_e4m3(float f) {
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  if (std::isnan(f)) return 0x7f;
  const float a = std::fabs(f);
  if (a >= 464.0f) return sign | 0x7e;  // 448 and up to the midpoint to 512, then saturation
  int code;
  if (a < 0.015625f) {  // below 2^-6: subnormal steps of 2^-9 (code 8 is 2^-6 itself)
    code = int(std::nearbyint(a * 512.0f));
  } else {  // a = q * 2^(e-3), q in [8, 16]; q == 16 carries into the next exponent
    const int e = std::ilogb(a);
    code = ((e + 7) << 3) + int(std::nearbyint(std::ldexp(a, 3 - e))) - 8;
  }
  return uint8_t(sign | std::min(code, 0x7e));
}

// Reads element i of a buffer of type t as float (F8E4M3: the code's value,
// unscaled).
inline float load_as_f32(const void* data, DType t, size_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(data)[i];
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::F8E4M3: return e4m3_to_f32(static_cast<const uint8_t*>(data)[i]);
  }
  return 0.0f;
}

}  // namespace hayate
