// FP8 (e4m3fn) on the device: the same quantization as core/fp8.h, in the
// same fp32 order (an IEEE division by the scale, the clamp, round to
// nearest even with saturation), so codes match the host's bit for bit; and
// the unpacking of 16 codes of a 16-byte load.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "cuda/kernels/common.cuh"

namespace hayate::cuda {

constexpr float kFp8MaxDev = 448.0f;
constexpr float kFp8MinScaleDev = 1.0f / (448.0f * 512.0f);

__device__ __forceinline__ float fp8_scale_for_dev(float amax) {
  return fmaxf(amax / kFp8MaxDev, kFp8MinScaleDev);
}

__device__ __forceinline__ uint8_t fp8_quantize_dev(float x, float s) {
  const float v = fminf(fmaxf(x / s, -kFp8MaxDev), kFp8MaxDev);
  return uint8_t(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

// The value of x's code under scale s, unscaled (the code's value as a float).
__device__ __forceinline__ float fp8_code_value_dev(float x, float s) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(fp8_quantize_dev(x, s)), __NV_E4M3);
  return __half2float(*reinterpret_cast<const __half*>(&h));
}

// Two codes (low byte first) to two floats: cvt.rn.f16x2.e4m3x2, exact.
__device__ __forceinline__ float2 fp8x2_to_float2(uint16_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(two), __NV_E4M3);
  return __half22float2(*reinterpret_cast<const __half2*>(&h));
}

// 16 codes of one 16-byte load to 16 floats (code values, unscaled).
__device__ __forceinline__ void unpack16_fp8(const uint4& u, float (&f)[16]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 a = fp8x2_to_float2(uint16_t(w[i] & 0xffffu));
    const float2 b = fp8x2_to_float2(uint16_t(w[i] >> 16));
    f[4 * i] = a.x, f[4 * i + 1] = a.y, f[4 * i + 2] = b.x, f[4 * i + 3] = b.y;
  }
}

// 8 codes of one 8-byte load to 8 floats.
__device__ __forceinline__ void unpack8_fp8(const uint2& u, float (&f)[8]) {
  const uint32_t w[2] = {u.x, u.y};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float2 a = fp8x2_to_float2(uint16_t(w[i] & 0xffffu));
    const float2 b = fp8x2_to_float2(uint16_t(w[i] >> 16));
    f[4 * i] = a.x, f[4 * i + 1] = a.y, f[4 * i + 2] = b.x, f[4 * i + 3] = b.y;
  }
}

// Block-wide max of v over blockDim.x threads (a multiple of 32, <= 1024);
// red: 32 floats of shared memory. Every thread gets the result.
__device__ __forceinline__ float block_max(float v, float* red) {
  v = warp_max(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // red may still be read by a previous call's threads
  if (lane == 0) red[warp] = v;
  __syncthreads();  // every warp's max
  v = lane < warps ? red[lane] : 0.0f;
  return warp_max(v);
}

}  // namespace hayate::cuda
