// Decode GEMV launchers: which variant (rows per group R, loads in flight U,
// K split) runs for each use. The choices come from bench/kernels (NOTES.md).
#include <algorithm>
#include <cstdint>

#include "core/check.h"
#include "cuda/gemv.cuh"
#include "cuda/gemv_tma.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"

namespace hayate::cuda {

namespace {

// One wave: as many blocks as fit on the SMs at once (or l.blocks_per_sm, to
// leave room for the next kernel under PDL), or fewer if the rows run out.
template <typename T, typename Kernel, typename Epi>
void launch_wave(Kernel kernel, int groups_per_block, const T* W, int groups, int K, GemvInput<T> in,
                 Epi epi, const GemvLaunch& l) {
  const size_t smem = in.norm_w ? size_t(K) * sizeof(float) : 0;
  if (smem > 48 * 1024)
    HAYATE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  int device = 0, sms = 0, per_sm = 0;
  HAYATE_CUDA_CHECK(cudaGetDevice(&device));
  HAYATE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  HAYATE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kGemvThreads, smem));
  if (l.blocks_per_sm > 0) per_sm = std::min(per_sm, l.blocks_per_sm);
  const unsigned blocks = std::min<unsigned>(ceil_div(groups, groups_per_block), unsigned(std::max(per_sm, 1) * sms));
  launch({blocks, kGemvThreads, smem, l.s, l.pdl}, kernel, W, K, groups, in, epi);
}

// The shared-memory ring kernel (run 10) where a configuration fits; false
// if none does. K <= 4096: 8 KB rows, stages of R rows, 96 KB (R = 2) or
// 64 KB (R = 1) of ring; K <= 16384 (down_proj): R = 1, 3 stages of one row.
// Both leave room for a second kernel's block on the SM (PDL).
template <typename T, int R, bool kNorm, typename Epi>
bool run_tma(const T* W, int groups, int K, GemvInput<T> in, Epi epi, const GemvLaunch& l) {
  if (l.tma == 0) return false;
  HAYATE_CHECK(K % 8 == 0, "gemv: K = ", K, " is not a multiple of 8");
  HAYATE_CHECK(reinterpret_cast<uintptr_t>(in.x) % 16 == 0 &&
                   (!kNorm || reinterpret_cast<uintptr_t>(in.norm_w) % 16 == 0) &&
                   reinterpret_cast<uintptr_t>(W) % 16 == 0,
               "gemv (tma): W, x or norm weight not 16-byte aligned");
  const bool entry = l.tma != 1;  // run 10a: entry was the better trigger
  if constexpr (R == 2) {
    if (l.tma == 3 && K <= 4 * 8 * kGemvThreads / 2) {  // 32 KB stages: 2 groups of 2 rows
      launch_gemv_tma<T, 2, 2, 3, 4, kNorm>(W, groups, K, in, epi, l.s, l.pdl, entry);
      return true;
    }
  }
  if (K <= 2 * 8 * kGemvThreads) {
    launch_gemv_tma<T, R, 1, (R == 2 ? 6 : 8), 2, kNorm>(W, groups, K, in, epi, l.s, l.pdl, entry);
    return true;
  }
  if constexpr (R == 1) {
    if (K <= 8 * 8 * kGemvThreads) {
      launch_gemv_tma<T, 1, 1, 3, 8, kNorm>(W, groups, K, in, epi, l.s, l.pdl, entry);
      return true;
    }
  }
  return false;
}

template <typename T, int R, int U, int KSPLIT, bool kNorm, typename Epi>
void run_gemv(const T* W, int groups, int K, GemvInput<T> in, Epi epi, const GemvLaunch& l) {
  HAYATE_CHECK(K % 8 == 0, "gemv: K = ", K, " is not a multiple of 8");
  // The norm prologue reads x as float4 and norm_w as 4 x 16 bits.
  HAYATE_CHECK(!kNorm || (reinterpret_cast<uintptr_t>(in.x) % 16 == 0 &&
                          reinterpret_cast<uintptr_t>(in.norm_w) % 8 == 0),
               "gemv: x or norm weight not aligned for vector loads");
  HAYATE_CHECK(kNorm == (in.norm_w != nullptr), "gemv: norm weight given to a kernel without norm");
  constexpr int kGroupsPerBlock = kGemvThreads / (32 * KSPLIT);
  // Rows that fit one batch of 2 loads per thread: two rounds in flight.
  if constexpr (KSPLIT == 8) {
    if (l.two_rounds && K <= 2 * 8 * 32 * KSPLIT)
      return launch_wave<T>(gemv2_kernel<T, R, 2, KSPLIT, kNorm, Epi>, kGroupsPerBlock, W, groups, K,
                            in, epi, l);
  }
  launch_wave<T>(gemv_kernel<T, R, U, KSPLIT, kNorm, Epi>, kGroupsPerBlock, W, groups, K, in, epi, l);
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
  if (rows % 2 != 0 || K > 2 * 8 * kGemvThreads) {
    if (norm_w ? run_tma<T, 1, true>(W, rows, K, in, StoreEpi<1>{y}, l)
               : run_tma<T, 1, false>(W, rows, K, in, StoreEpi<1>{y}, l))
      return;
  } else if (norm_w ? run_tma<T, 2, true>(W, rows / 2, K, in, StoreEpi<2>{y}, l)
                    : run_tma<T, 2, false>(W, rows / 2, K, in, StoreEpi<2>{y}, l)) {
    return;
  }
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
  // The ring kernel reads h a stage ahead (kEarly) and takes one row per
  // stage where a row is long (down_proj, K = 14336: 28 KB).
  if (rows % 2 == 0 && K <= 2 * 8 * kGemvThreads &&
      run_tma<T, 2, false>(W, rows / 2, K, in, ResidualEpi<2, true>{h}, l))
    return;
  if (run_tma<T, 1, false>(W, rows, K, in, ResidualEpi<1, true>{h}, l)) return;
  if (rows % 2 != 0) run_gemv<T, 1, 8, 1, false>(W, rows, K, in, ResidualEpi<1>{h}, l);
  else run_gemv<T, 2, 4, 8, false>(W, rows / 2, K, in, ResidualEpi<2>{h}, l);
}

template <typename T>
void gemv_gate_up(const T* W, int inter, int K, const float* h, const T* norm_w, float eps,
                  float* act, const GemvLaunch& l) {
  const GemvInput<T> in{h, norm_w, eps};
  if (run_tma<T, 2, true>(W, inter, K, in, SiluMulEpi{act, inter}, l)) return;
  run_gemv<T, 2, 4, 8, true>(W, inter, K, in, SiluMulEpi{act, inter}, l);
}

template <typename T>
void gemv_qkv_rope(const T* W, QkvShape shape, int K, const float* h, const T* norm_w, float eps,
                   const float* inv_freq, const int32_t* pos, float* q, T* k_cache, T* v_cache,
                   const GemvLaunch& l) {
  HAYATE_CHECK(shape.head_dim % 2 == 0, "head_dim must be even for RoPE");
  const int half = shape.head_dim / 2;
  const int groups = (shape.n_heads + 2 * shape.n_kv_heads) * half;
  const GemvInput<T> in{h, norm_w, eps};
  // The ring kernel reads pos and inv_freq a stage ahead (kEarly).
  QkvRopeEpi<T, true> early{q, k_cache, v_cache, pos, inv_freq, half, shape.n_heads, shape.n_kv_heads};
  if (run_tma<T, 2, true>(W, groups, K, in, early, l)) return;
  QkvRopeEpi<T> epi{q, k_cache, v_cache, pos, inv_freq, half, shape.n_heads, shape.n_kv_heads};
  run_gemv<T, 2, 4, 8, true>(W, groups, K, in, epi, l);
}

// The original signatures: one wave at full occupancy.
template <typename T>
void gemv(const T* W, int rows, int K, const float* x, const T* norm_w, float eps, float* y,
          cudaStream_t s, bool pdl) {
  gemv<T>(W, rows, K, x, norm_w, eps, y, GemvLaunch{s, pdl, 0, true});
}
template <typename T>
void gemv_residual(const T* W, int rows, int K, const float* x, float* h, cudaStream_t s, bool pdl) {
  gemv_residual<T>(W, rows, K, x, h, GemvLaunch{s, pdl, 0, true});
}
template <typename T>
void gemv_gate_up(const T* W, int inter, int K, const float* h, const T* norm_w, float eps,
                  float* act, cudaStream_t s, bool pdl) {
  gemv_gate_up<T>(W, inter, K, h, norm_w, eps, act, GemvLaunch{s, pdl, 0, true});
}
template <typename T>
void gemv_qkv_rope(const T* W, QkvShape shape, int K, const float* h, const T* norm_w, float eps,
                   const float* inv_freq, const int32_t* pos, float* q, T* k_cache, T* v_cache,
                   cudaStream_t s, bool pdl) {
  gemv_qkv_rope<T>(W, shape, K, h, norm_w, eps, inv_freq, pos, q, k_cache, v_cache, GemvLaunch{s, pdl, 0, true});
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
