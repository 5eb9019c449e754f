// Decode GEMV launchers: which variant (rows per group R, loads in flight U,
// K split) runs for each use. The choices come from bench/kernels (NOTES.md).
#include <algorithm>
#include <cstdint>

#include "core/check.h"
#include "cuda/gemv.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"
#include "cuda/rope.cuh"

namespace hayate::cuda {

// ---- the QKV epilogue: RoPE and the KV-cache append ----------------------------
// Row group g holds rows i and i + d/2 of one head (the pair RoPE rotates
// together): heads [0, n_heads) are q, then n_kv_heads of k, then of v.
template <typename T>
struct QkvRopeEpi {
  float* q;                // [n_heads * d]
  T* k_cache;              // [max_ctx, kv_dim], this layer
  T* v_cache;
  const int32_t* pos;      // device: the step's position
  const float* inv_freq;   // [d / 2]
  int half_dim, n_heads, n_kv_heads;
  // The position and this pair's frequency, read at the start of the round.
  struct Pre {
    int pos;
    float inv_freq;
  };
  __device__ int row(int g, int r) const {
    const int head = g / half_dim, i = g % half_dim;
    return head * 2 * half_dim + i + r * half_dim;
  }
  __device__ Pre prepare(int g) const { return {*pos, inv_freq[g % half_dim]}; }
  __device__ void store(int g, const float (&acc)[2], const Pre& pre) const {
    const int head = g / half_dim, i = g % half_dim, d = 2 * half_dim;
    const int p = pre.pos;
    float a = acc[0], b = acc[1];
    if (head < n_heads + n_kv_heads) rope_rotate(a, b, p, pre.inv_freq);
    if (head < n_heads) {
      q[head * d + i] = a;
      q[head * d + i + half_dim] = b;
      return;
    }
    const int kv_dim = n_kv_heads * d;
    const bool is_k = head < n_heads + n_kv_heads;
    T* dst = (is_k ? k_cache : v_cache) + size_t(p) * kv_dim +
             (head - n_heads - (is_k ? 0 : n_kv_heads)) * d;
    dst[i] = from_f32<T>(a);
    dst[i + half_dim] = from_f32<T>(b);
  }
};

namespace {

template <typename T, int R, int U, int KSPLIT, bool kNorm, typename Epi>
void run_gemv(const T* W, int groups, int K, GemvInput<T> in, Epi epi, const GemvLaunch& l) {
  HAYATE_CHECK(K % 8 == 0, "gemv: K = ", K, " is not a multiple of 8");
  // The norm prologue reads x as float4 and norm_w as 4 x 16 bits.
  HAYATE_CHECK(!kNorm || (reinterpret_cast<uintptr_t>(in.x) % 16 == 0 &&
                          reinterpret_cast<uintptr_t>(in.norm_w) % 8 == 0),
               "gemv: x or norm weight not aligned for vector loads");
  constexpr int kGroupsPerBlock = kGemvThreads / (32 * KSPLIT);
  const size_t smem = kNorm ? size_t(K) * sizeof(float) : 0;
  auto kernel = gemv_kernel<T, R, U, KSPLIT, kNorm, Epi>;
  if (smem > 48 * 1024)
    HAYATE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  // One wave: as many blocks as fit on the SMs at once (or blocks_per_sm, to
  // leave room for the next kernel under PDL), or fewer if the rows run out.
  int device = 0, sms = 0, per_sm = 0;
  HAYATE_CUDA_CHECK(cudaGetDevice(&device));
  HAYATE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  HAYATE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kGemvThreads, smem));
  if (l.blocks_per_sm > 0) per_sm = std::min(per_sm, l.blocks_per_sm);
  const unsigned blocks = std::min<unsigned>(ceil_div(groups, kGroupsPerBlock), unsigned(std::max(per_sm, 1) * sms));
  launch({blocks, kGemvThreads, smem, l.s, l.pdl}, kernel, W, K, groups, in, epi);
}

}  // namespace

// ---- launchers ------------------------------------------------------------------

// Variants from bench/kernels (NOTES.md, run 3): two rows per group (for QKV
// the RoPE pair), 4 loads in flight per row and thread, K split over all 8
// warps of the block, one block per row pair.
template <typename T>
void gemv(const T* W, int rows, int K, const float* x, const T* norm_w, float eps, float* y,
          const GemvLaunch& l) {
  GemvInput<T> in{x, norm_w, eps};
  if (rows % 2 != 0) {
    if (norm_w) run_gemv<T, 1, 8, 1, true>(W, rows, K, in, StoreEpi<1>{y}, l);
    else run_gemv<T, 1, 8, 1, false>(W, rows, K, in, StoreEpi<1>{y}, l);
  } else {
    if (norm_w) run_gemv<T, 2, 4, 8, true>(W, rows / 2, K, in, StoreEpi<2>{y}, l);
    else run_gemv<T, 2, 4, 8, false>(W, rows / 2, K, in, StoreEpi<2>{y}, l);
  }
}

template <typename T>
void gemv_residual(const T* W, int rows, int K, const float* x, float* h, const GemvLaunch& l) {
  const GemvInput<T> in{x, nullptr, 0.0f};
  if (rows % 2 != 0) run_gemv<T, 1, 8, 1, false>(W, rows, K, in, ResidualEpi<1>{h}, l);
  else run_gemv<T, 2, 4, 8, false>(W, rows / 2, K, in, ResidualEpi<2>{h}, l);
}

template <typename T>
void gemv_gate_up(const T* W, int inter, int K, const float* h, const T* norm_w, float eps,
                  float* act, const GemvLaunch& l) {
  run_gemv<T, 2, 4, 8, true>(W, inter, K, GemvInput<T>{h, norm_w, eps}, SiluMulEpi{act, inter}, l);
}

template <typename T>
void gemv_qkv_rope(const T* W, QkvShape shape, int K, const float* h, const T* norm_w, float eps,
                   const float* inv_freq, const int32_t* pos, float* q, T* k_cache, T* v_cache,
                   const GemvLaunch& l) {
  HAYATE_CHECK(shape.head_dim % 2 == 0, "head_dim must be even for RoPE");
  const int half = shape.head_dim / 2;
  const int groups = (shape.n_heads + 2 * shape.n_kv_heads) * half;
  QkvRopeEpi<T> epi{q, k_cache, v_cache, pos, inv_freq, half, shape.n_heads, shape.n_kv_heads};
  run_gemv<T, 2, 4, 8, true>(W, groups, K, GemvInput<T>{h, norm_w, eps}, epi, l);
}

// The original signatures: one wave at full occupancy.
template <typename T>
void gemv(const T* W, int rows, int K, const float* x, const T* norm_w, float eps, float* y,
          cudaStream_t s, bool pdl) {
  gemv<T>(W, rows, K, x, norm_w, eps, y, GemvLaunch{s, pdl, 0});
}
template <typename T>
void gemv_residual(const T* W, int rows, int K, const float* x, float* h, cudaStream_t s, bool pdl) {
  gemv_residual<T>(W, rows, K, x, h, GemvLaunch{s, pdl, 0});
}
template <typename T>
void gemv_gate_up(const T* W, int inter, int K, const float* h, const T* norm_w, float eps,
                  float* act, cudaStream_t s, bool pdl) {
  gemv_gate_up<T>(W, inter, K, h, norm_w, eps, act, GemvLaunch{s, pdl, 0});
}
template <typename T>
void gemv_qkv_rope(const T* W, QkvShape shape, int K, const float* h, const T* norm_w, float eps,
                   const float* inv_freq, const int32_t* pos, float* q, T* k_cache, T* v_cache,
                   cudaStream_t s, bool pdl) {
  gemv_qkv_rope<T>(W, shape, K, h, norm_w, eps, inv_freq, pos, q, k_cache, v_cache, GemvLaunch{s, pdl, 0});
}

#define HAYATE_INSTANTIATE(T)                                                                   \
  template void gemv<T>(const T*, int, int, const float*, const T*, float, float*, cudaStream_t, \
                        bool);                                                                  \
  template void gemv_residual<T>(const T*, int, int, const float*, float*, cudaStream_t, bool);  \
  template void gemv_gate_up<T>(const T*, int, int, const float*, const T*, float, float*,       \
                                cudaStream_t, bool);                                            \
  template void gemv_qkv_rope<T>(const T*, QkvShape, int, const float*, const T*, float,         \
                                 const float*, const int32_t*, float*, T*, T*, cudaStream_t, bool); \
  template void gemv<T>(const T*, int, int, const float*, const T*, float, float*,                \
                        const GemvLaunch&);                                                       \
  template void gemv_residual<T>(const T*, int, int, const float*, float*, const GemvLaunch&);   \
  template void gemv_gate_up<T>(const T*, int, int, const float*, const T*, float, float*,        \
                                const GemvLaunch&);                                               \
  template void gemv_qkv_rope<T>(const T*, QkvShape, int, const float*, const T*, float,          \
                                 const float*, const int32_t*, float*, T*, T*, const GemvLaunch&);
HAYATE_INSTANTIATE(half)
HAYATE_INSTANTIATE(__nv_bfloat16)
#undef HAYATE_INSTANTIATE

}  // namespace hayate::cuda
