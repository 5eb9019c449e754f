// FP8 (e4m3fn) on the device: the same quantization as core/fp8.h, in the
// same fp32 order (x / scale rounded as an IEEE division rounds it, the
// clamp, round to nearest even with saturation), so codes match the host's
// bit for bit; and the unpacking of 16 codes of a 16-byte load.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "cuda/kernels/common.cuh"

namespace hayate::cuda {

constexpr float kFp8MaxDev = 448.0f;
constexpr float kFp8MinScaleDev = 1.0f / (448.0f * 512.0f);

__device__ __forceinline__ float fp8_scale_for_dev(float amax) {
  return fmaxf(amax / kFp8MaxDev, kFp8MinScaleDev);
}

__device__ __forceinline__ uint8_t fp8_code_dev(float q) {  // q = x / s: clamp, round
  const float v = fminf(fmaxf(q, -kFp8MaxDev), kFp8MaxDev);
  return uint8_t(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}
__device__ __forceinline__ uint8_t fp8_quantize_dev(float x, float s) {
  return fp8_code_dev(x / s);
}

// fp8_quantize_dev for a row of x under one scale s, without a division an
// element: x / s rounded as the division rounds it, from s's correctly
// rounded reciprocal y (once) and two fma corrections an element (q + (x - s
// q) y: Markstein's step, exact once q is within an ulp of x / s, and the
// first brings x y's RN there), so the codes are fp8_quantize_dev's bit for
// bit. Quotients below fp32's normal range give code 0 either way; a
// non-finite one (x inf, or x / s past fp32's range under a static scale)
// keeps x y and saturates as the division's does.
struct Fp8RowQuantizer {
  float s, y;
  __device__ explicit Fp8RowQuantizer(float scale) : s(scale), y(1.0f / scale) {}
  __device__ __forceinline__ uint8_t operator()(float x) const {
    const float q0 = x * y;
    float q = fmaf(fmaf(-s, q0, x), y, q0);
    q = fmaf(fmaf(-s, q, x), y, q);
    return fp8_code_dev(isfinite(q) ? q : q0);
  }
};

// Two codes (low byte first) to two floats: cvt.rn.f16x2.e4m3x2, exact.
__device__ __forceinline__ float2 fp8x2_to_float2(uint16_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(two), __NV_E4M3);
  return __half22float2(*reinterpret_cast<const __half2*>(&h));
}

// Two e4m3 codes (low byte first) as an f16x2 word, exact (one F2FP; on
// sm_90 these conversions and the f16 mma each take about as long as a
// stage of FP8 weights: bench/kernels/NOTES.md "The FP8 consumer alone").
__device__ __forceinline__ uint32_t e4m3x2_to_h2(uint32_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(two & 0xffffu), __NV_E4M3);
  return uint32_t(h.x) | uint32_t(h.y) << 16;
}
// 8 codes as 4 f16x2 words: the layout of 8 T elements of a 16-byte load.
__device__ __forceinline__ uint4 e4m3x8_to_h8(const uint2& c) {
  return make_uint4(e4m3x2_to_h2(c.x), e4m3x2_to_h2(c.x >> 16), e4m3x2_to_h2(c.y),
                    e4m3x2_to_h2(c.y >> 16));
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

// ---- K/V pool elements (paged_attention.cuh): T or e4m3 (KvFp8) -------------
// The attention kernels read 8 consecutive elements of a K or V row at once:
// one 16-byte load of T, or one 8-byte load of e4m3 codes.
template <typename KV>
inline constexpr bool kKvFp8 = std::is_same_v<KV, __nv_fp8_e4m3>;
template <typename KV>
using KvVec = std::conditional_t<kKvFp8<KV>, uint2, uint4>;

template <typename KV>
__device__ __forceinline__ KvVec<KV> kv_load8(const KV* p) {
  return *reinterpret_cast<const KvVec<KV>*>(p);
}
template <typename KV>
__device__ __forceinline__ KvVec<KV> kv_load8_cg(const KV* p) {  // through L2 only
  return __ldcg(reinterpret_cast<const KvVec<KV>*>(p));
}
// The 8 elements as floats: T's values, or e4m3 code values (unscaled).
template <typename KV>
__device__ __forceinline__ void kv_unpack8(const KvVec<KV>& u, float (&f)[8]) {
  if constexpr (kKvFp8<KV>)
    unpack8_fp8(u, f);
  else
    unpack8<KV>(u, f);
}

// V consecutive values stored into a pool row: T (rounded), or e4m3 codes of
// value / scale (core/fp8.h's rounding and clamp); one 8-byte (T) or 4-byte
// (e4m3) store when V == 4 (the caller keeps them 4-aligned).
template <int V, typename KV>
__device__ __forceinline__ void kv_store_run(KV* p, const float (&f)[V], float scale) {
  if constexpr (kKvFp8<KV>) {
    uint8_t c[V];
#pragma unroll
    for (int k = 0; k < V; ++k) c[k] = fp8_quantize_dev(f[k], scale);
    if constexpr (V == 4) {
      *reinterpret_cast<uint32_t*>(p) =
          uint32_t(c[0]) | uint32_t(c[1]) << 8 | uint32_t(c[2]) << 16 | uint32_t(c[3]) << 24;
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) reinterpret_cast<uint8_t*>(p)[k] = c[k];
    }
  } else {
    store_run<V>(p, f);
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
