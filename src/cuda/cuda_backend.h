// The CUDA backend's factory. Plain C++: no CUDA headers, so host code and
// the CLI include it freely.
#pragma once

#include <memory>

#include "engine/backend.h"

namespace hayate {

std::unique_ptr<Backend> make_cuda_backend(const Model& model, const BackendOptions& options);

// Number of visible CUDA devices (0 when there is no driver or no GPU).
int cuda_device_count();

// Knobs for the kernel lab and the gpu tests, not for users (bench/kernels/NOTES.md):
// - pdl: programmatic dependent launch in the decode graph (run 4-7: neutral
//   to 0.4 ms slower with full-occupancy GEMV grids);
// - gemv_blocks_per_sm: cap on the decode GEMVs' one-wave grid (0 = as many as
//   fit), so the next kernel's blocks can be resident early under PDL (run 8:
//   +0.21 / +0.72 ms at 3 / 2 blocks per SM with PDL);
// - gemv_two_rounds: GEMVs with K <= 4096 keep two rounds of weight loads in
//   flight per thread (gemv2_kernel) instead of one (run 8: -0.09 ms);
// - short_attention: contexts that fit one block per query head take the
//   one-pass attention kernel (a second pair of graphs; run 8: -0.25 ms).
struct CudaTuning {
  bool pdl = false;
  int gemv_blocks_per_sm = 0;
  bool short_attention = true;
  bool gemv_two_rounds = true;
  // Run 10: decode GEMVs stream W through shared memory (gemv_tma.cuh) and
  // are launched with PDL (whatever `pdl` says for the other kernels).
  // Values as GemvLaunch::tma (src/cuda/ops.h): 0 off, 1-3 ring variants.
  // Run 10: faster in the lab's same-kernel chain (qkv, o_proj), but decode
  // +0.28 ms/token at best (3 = 32 KB stages), so off.
  int gemv_tma = 0;
  // Run 11: every kernel prefers the largest shared-memory carveout
  // (cudaDeviceSetCacheConfig, device-wide). Kernels launched with a different
  // preference than the last one may get a device-side synchronisation point,
  // which would stop a ring GEMV (97 KB of shared memory) from overlapping the
  // kernels around it under PDL. false: the default preference (none).
  bool prefer_shared = false;
  // Run 12: the decode step's layers and LM head as one persistent kernel
  // (decode_persistent.cu): no kernel boundaries, weights streamed across
  // phases. H200: 3.968 vs 3.989 ms/token at context 11..128, 4.571 vs 4.831
  // at 4000 (run 12f). Shapes it has no configuration for, and false, run the
  // per-kernel decode graph (the knobs above apply to that graph only).
  bool persistent = true;
  // Lab: with persistent, time the kernel's phases (block 0) and print the
  // average per layer to stderr when the backend is destroyed.
  bool persistent_trace = false;
  // Tests: the persistent kernel's start-up trial launch asks for a grid that
  // cannot be resident, so the runtime refuses it as it would under MPS SM
  // limits, and decode falls back to the per-kernel graph.
  bool persistent_refuse_trial = false;
};
std::unique_ptr<Backend> make_cuda_backend(const Model& model, const BackendOptions& options,
                                           const CudaTuning& tuning);

}  // namespace hayate
