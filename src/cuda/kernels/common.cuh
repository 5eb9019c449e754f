// Device helpers shared by the kernel files: element conversions for the two
// weight dtypes, 16-byte loads, warp reductions, programmatic dependent launch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>
#include <cstdint>
#include <type_traits>

namespace hayate::cuda {

// The device's global nanosecond clock (comparable across SMs).
__device__ __forceinline__ unsigned long long globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

template <typename T> __device__ __forceinline__ float to_f32(T v);
template <> __device__ __forceinline__ float to_f32(half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ float to_f32(float v) { return v; }

template <typename T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ half from_f32(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ float from_f32(float v) { return v; }

// 8 packed 16-bit values (one 16-byte load) to 8 floats.
template <typename T>
__device__ __forceinline__ void unpack8(const uint4& u, float (&f)[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (std::is_same_v<T, half>) {
      float2 p = __half22float2(*reinterpret_cast<const half2*>(&w[i]));
      f[2 * i] = p.x;
      f[2 * i + 1] = p.y;
    } else {
      // bf16 -> f32 is a shift: exact and cheaper than the intrinsic pair.
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  }
}

// 4 packed 16-bit values (one 8-byte load) to 4 floats.
template <typename T>
__device__ __forceinline__ void unpack4(const uint2& u, float (&f)[4]) {
  const uint32_t w[2] = {u.x, u.y};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if constexpr (std::is_same_v<T, half>) {
      float2 p = __half22float2(*reinterpret_cast<const half2*>(&w[i]));
      f[2 * i] = p.x;
      f[2 * i + 1] = p.y;
    } else {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  }
}

// V consecutive elements as floats, and back: one 16-byte (float) or 8-byte
// (16-bit) access when V == 4 (the caller keeps them 4-aligned).
template <int V, typename E>
__device__ __forceinline__ void load_run(const E* p, float (&f)[V]) {
  if constexpr (V == 4 && std::is_same_v<E, float>) {
    const float4 u = *reinterpret_cast<const float4*>(p);
    f[0] = u.x, f[1] = u.y, f[2] = u.z, f[3] = u.w;
  } else if constexpr (V == 4) {
    unpack4<E>(*reinterpret_cast<const uint2*>(p), f);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = to_f32(p[k]);
  }
}
template <int V, typename E>
__device__ __forceinline__ void store_run(E* p, const float (&f)[V]) {
  if constexpr (V == 4 && std::is_same_v<E, float>) {
    *reinterpret_cast<float4*>(p) = make_float4(f[0], f[1], f[2], f[3]);
  } else if constexpr (V == 4) {
    alignas(8) E e[4] = {from_f32<E>(f[0]), from_f32<E>(f[1]), from_f32<E>(f[2]),
                         from_f32<E>(f[3])};
    *reinterpret_cast<uint2*>(p) = *reinterpret_cast<const uint2*>(e);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) p[k] = from_f32<E>(f[k]);
  }
}

// Streaming 16-byte load of data read exactly once (weights): read-only path,
// no L1 allocation, so the small activation vectors stay in L1.
__device__ __forceinline__ uint4 load_stream(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// RMSNorm's rsqrt(mean of squares + eps) of a row from each thread's partial
// sum of squares ss, over a block of kThreads; red: kThreads / 32 floats of
// shared memory.
template <int kThreads>
__device__ __forceinline__ float block_rstd(float ss, int dim, float eps, float* red) {
  ss = warp_sum(ss);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = ss;
  __syncthreads();  // red complete
  ss = 0.0f;
#pragma unroll
  for (int i = 0; i < kThreads / 32; ++i) ss += red[i];
  return rsqrtf(ss / float(dim) + eps);
}

// Programmatic dependent launch (sm_90). griddep_wait(): block until the
// previous kernel in the stream has completed and its writes are visible; every
// block calls it before touching data another kernel wrote, and before it
// exits, so completion stays transitive along the chain. griddep_launch(): let
// the next kernel start its blocks once every block of ours has called it (or
// exited); the next kernel only loads weights until its own wait.
__device__ __forceinline__ void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void griddep_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// The entry of a batched-step kernel that may be launched with PDL
// (LaunchConfig::pdl): wait for the previous kernel first (nothing is read or
// written before), then let the next one place its blocks, which wait in turn.
// Every thread calls it before any early return. Without PDL both are no-ops.
__device__ __forceinline__ void griddep_enter() {
  griddep_wait();
  griddep_launch();
}

}  // namespace hayate::cuda
