// The persistent decode step: every layer of one decode step and the LM head
// in one cooperative kernel, one block per SM, weights streamed through each
// block's ring (persistent.cuh says why). Phases meet at grid barriers, where
// every block needs every other block's output (the RMSNorm of h, x of a
// GEMV), except o_proj, which waits through a counter for the kv heads'
// attention outputs, computed by a few blocks. Reads top to bottom like the
// batched backend's forward pass: per layer QKV (+RMSNorm, RoPE, KV append
// into the paged pool) -> attention -> o_proj (+residual) -> gate/up
// (+RMSNorm, SiLU*mul) -> down (+residual); then the LM head (+final RMSNorm).
// Embedding and sampling stay separate kernels around it.
#include <algorithm>
#include <cstdio>
#include <type_traits>

#include "core/check.h"
#include "cuda/kernels/persistent.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"

namespace hayate::cuda {

namespace {

// kTrace: a.trace is set (`hayate profile`); the untraced kernel has no trace code at all.
// kFp8: the layers' linears are e4m3 (a.fp8); W their stage element type.
// kQkNorm: per-head q/k norms (a.qk_norm): QKV writes q and k raw, the
// attention items normalise and turn them (persistent.cuh: persist_attend).
// kWide: 16-bit down rows longer than a stage (Qwen2.5-7B's 18944), each
// over two stages (persist_produce); an instantiation of its own, as the
// second form of the down phase made ptxas spill at the kernel's 168
// registers (92 bytes) where it has none.
// DNC: a warp's 256-byte chunks of an FP8 down row (K <= DNC * 2048): 7 for
// K <= 14,336 (Llama 3.1 8B's exactly), where the eighth slot of 8 would be
// all zeros (its loads, conversions and mma: 1/8 of the tile's work); 16-bit
// kernels take 8 (persist_consume's NC for them is x's chunks per thread).
template <typename T, int HD, bool kTrace, bool kFp8, bool kQkNorm, bool kWide, int DNC>
__global__ void __launch_bounds__(kPersistThreads, 1) decode_persistent_kernel(PersistentDecode<T> a) {
  using W = std::conditional_t<kFp8, uint8_t, T>;
  extern __shared__ __align__(128) unsigned char stages[];  // [S][32 KB]
  __shared__ __align__(8) uint64_t full[kPersistStages], empty[kPersistStages], done[kPersistParts];
  __shared__ float part[kPersistParts][kPersistWarps][kPersistPartRows];
  __shared__ int tile[kPersistStages];
  __shared__ float rope_cs[HD];  // cos, sin of pos * inv_freq[i], i < HD / 2
  const PersistRing rg{stages, tile, full, empty, done, part};
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int D = a.hidden, I = a.inter, qd = a.n_heads * HD, L_ = a.n_layers, nkv = a.n_kv_heads;
  const int qkv_groups = (a.n_heads + 2 * nkv) * (HD / 2);  // RoPE pairs
  const int units = persistent_attn_units(a.n_heads, nkv);  // attention units (persistent.cuh)
  static_assert(!kWide || !kFp8);
  // Tile geometry: G row groups of R rows per stage (R = 2: the row pairs of
  // RoPE and of gate/up; NC: x's chunks per thread, persist_consume). 16-bit
  // rows of K = 4096 fill a 32 KB stage with 4 rows, e4m3 ones with 8 (on
  // the tensor cores); down rows of K <= 16384 take a stage alone (16-bit)
  // or in pairs (e4m3).
  constexpr int G4 = kFp8 ? 4 : 2, NC4 = kFp8 ? 2 : 4;  // K <= 4096
  constexpr int GD = kFp8 ? 2 : 1;                      // down, K <= 16384: NC 8
  const PersistentCounterLayout cl = persistent_counter_layout(L_, units);
  int* const claims = a.counters + cl.claims;
  int* const split_done = a.counters + cl.split_done;
  int* const attn_done = a.counters + cl.attn_done;
  auto cache = [&](const PersistentLayer<T>& L) {
    return PersistCache<T>{L.k_cache, L.v_cache, a.block_table, a.block_size};
  };
  auto qkv_epi = [&](const PersistentLayer<T>& L) {
    return QkvRopeTableEpi<T>{a.q,    cache(L), a.pos,  rope_cs,
                              HD / 2, a.n_heads, nkv,   L.bqkv,
                              kQkNorm ? a.k_raw : nullptr};
  };
  if (threadIdx.x == kPersistConsumers) persist_ring_init(full, empty, done);
  __syncthreads();  // barriers initialised; the last block-wide barrier
  int j = 0;        // stages used: the ring's stage and parity

  if (warp >= kPersistWarps) {  // producer: the weight tiles of every phase, in order
    setmaxnreg_dec<kPersistProducerRegs>();  // the whole warpgroup, before warps 9-11 leave
    if (warp == kPersistWarps && lane == 0) {
      int* claim = claims;
      for (int l = 0; l < L_; ++l) {
        const PersistentLayer<T> L = a.layers[l];
        const W* wqkv = kFp8 ? reinterpret_cast<const W*>(L.wqkv8) : reinterpret_cast<const W*>(L.wqkv);
        const W* wo = kFp8 ? reinterpret_cast<const W*>(L.wo8) : reinterpret_cast<const W*>(L.wo);
        const W* wgu = kFp8 ? reinterpret_cast<const W*>(L.w_gate_up8)
                            : reinterpret_cast<const W*>(L.w_gate_up);
        const W* wd = kFp8 ? reinterpret_cast<const W*>(L.w_down8) : reinterpret_cast<const W*>(L.w_down);
        persist_produce<W, 2, G4>(rg, wqkv, D, qkv_groups, qkv_epi(L), claim++, j);
        persist_produce<W, 2, G4>(rg, wo, qd, D / 2, ResidualCgEpi<2>{a.h, a.h2}, claim++, j);
        persist_produce<W, 2, G4>(rg, wgu, D, I, SiluMulEpi{a.act, I}, claim++, j);
        persist_produce<W, 1, GD, ResidualCgEpi<1>, kWide>(rg, wd, I, D,
                                                           ResidualCgEpi<1>{a.h2, a.h}, claim++, j);
      }
      persist_produce<T, 2, 2>(rg, a.lm_head, D, a.vocab / 2, StoreEpi<2>{a.logits}, claim, j);
    }
    // Leaving with copies in flight is safe: the consumers wait for every
    // stage, the phases' end stages included, before the block exits.
    return;
  }

  setmaxnreg_inc<kPersistConsumerRegs>();  // both consumer warpgroups, all their threads
  int jd = 0;                   // tiles reduced: the `done` slots
  unsigned k = 0;               // grid barriers passed (thread 0)
  const int keys = *a.pos + 1;  // causal: positions [0, pos]
  if (threadIdx.x < HD / 2)
    rope_cos_sin(keys - 1, a.inv_freq[threadIdx.x], rope_cs[threadIdx.x],
                 rope_cs[HD / 2 + threadIdx.x]);
  consumer_sync();  // rope_cs
  unsigned long long* const trace =  // `hayate profile` only: this block's timestamps
      kTrace && threadIdx.x == 0 ? a.trace + size_t(blockIdx.x) * persistent_trace_slots(L_)
                                 : nullptr;
  int ts = 0;
  const auto stamp = [&] {
    if (trace) trace[ts++] = globaltimer_ns();
  };
  stamp();
  auto from = [](const float* v) {
    return [v](int c, float (&x)[8]) { load8_cg(v + size_t(c) * 8, x); };
  };
  for (int l = 0; l < L_; ++l) {
    const PersistentLayer<T> L = a.layers[l];
    // This block's first attention tile (rows before pos), in flight during
    // QKV: into registers, or (FP8) into L2.
    PersistKvTile<HD> pre;
    bool prefetched = false;
    if constexpr (kFp8)
      persist_attend_prefetch_l2<T, HD>(cache(L), a.n_heads, nkv, keys);
    else
      prefetched = persist_attend_prefetch<T, HD>(cache(L), a.n_heads, nkv, keys, pre);
    // q [Hq d] roped; k, v -> cache[pos]
    persist_consume<T, W, 2, G4, NC4, true>(rg, D, qkv_groups, L.attn_norm, a.eps, from(a.h),
                                            qkv_epi(L), j, jd, L.s_qkv, L.in_qkv);
    stamp();
    grid_sync(a.barrier, k);
    stamp();
    // attn [Hq d] over [0, pos]
    persist_attend<T, HD, kQkNorm>(a.q, cache(L), a.n_heads, nkv, keys, a.part_o, a.part_ml,
                                   split_done + l * units, a.attn, attn_done + l, pre, prefetched,
                                   PersistQkNorm<T>{L.q_norm, L.k_norm, a.k_raw, rope_cs, a.eps});
    persist_wait(attn_done + l, units);  // every unit's output
    stamp();
    // h2 = h + Wo attn
    persist_consume<T, W, 2, G4, NC4, false>(rg, qd, D / 2, nullptr, 0.0f, from(a.attn),
                                             ResidualCgEpi<2>{a.h, a.h2}, j, jd, L.s_o, L.in_o);
    stamp();
    grid_sync(a.barrier, k);
    stamp();
    // act [I] = silu(g) u of rmsnorm(h2)
    persist_consume<T, W, 2, G4, NC4, true>(rg, D, I, L.ffn_norm, a.eps, from(a.h2),
                                            SiluMulEpi{a.act, I}, j, jd, L.s_gate_up,
                                            L.in_gate_up);
    stamp();
    grid_sync(a.barrier, k);
    stamp();
    // h = h2 + Wdown act
    // (kWide: K <= 16384 + 8 * kPersistWideTail, persistent_decode_supported)
    persist_consume<T, W, 1, GD, kFp8 ? DNC : 8, false, ResidualCgEpi<1>, decltype(from(a.act)),
                    kWide>(
        rg, I, D, nullptr, 0.0f, from(a.act), ResidualCgEpi<1>{a.h2, a.h}, j, jd, L.s_down,
        L.in_down);
    stamp();
    grid_sync(a.barrier, k);
    stamp();
  }
  // logits [V] = lm_head rmsnorm(h)
  persist_consume<T, T, 2, 2, 4, true>(rg, D, a.vocab / 2, a.final_norm, a.eps, from(a.h),
                                       StoreEpi<2>{a.logits}, j, jd);
  stamp();
  persist_exit(a.barrier, a.counters, cl.total);
}

// One cooperative block per SM; the launch's error is returned (a grid that
// cannot be resident at once is refused there).
// refuse (tests): ask for per_sm + 1 blocks per SM, which the runtime must refuse.
template <typename T, int HD, bool kTrace, bool kFp8, bool kQkNorm = false, bool kWide = false,
          int DNC = 8>
cudaError_t launch_persistent(const PersistentDecode<T>& a, cudaStream_t s, bool refuse) {
  static_assert(kFp8 || DNC == 8);
  auto kernel = decode_persistent_kernel<T, HD, kTrace, kFp8, kQkNorm, kWide, DNC>;
  const size_t smem = size_t(kPersistStages) * kPersistStageBytes;
  HAYATE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  int device = 0, sms = 0, per_sm = 0;
  HAYATE_CUDA_CHECK(cudaGetDevice(&device));
  HAYATE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  HAYATE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kPersistThreads, smem));
  if (per_sm < 1) return cudaErrorCooperativeLaunchTooLarge;  // a block does not fit on an SM
  const unsigned grid = unsigned(sms) * (refuse ? unsigned(per_sm) + 1 : 1u);
  return try_launch({grid, kPersistThreads, smem, s, false, true}, kernel, a);
}

template <typename T>
cudaError_t persistent_launch(const PersistentDecode<T>& a, cudaStream_t s, bool refuse) {
  HAYATE_CHECK(persistent_decode_supported(a.hidden, a.inter, a.vocab, a.n_heads, a.n_kv_heads,
                                           a.head_dim, a.qk_norm),
               "persistent decode: unsupported shape");
  const bool trace = a.trace != nullptr;
  if (a.inter * int(sizeof(T)) > kPersistStageBytes) {  // Qwen2.5-7B: head_dim 128, 16-bit
    HAYATE_CHECK(a.head_dim == 128 && !a.fp8 && !a.qk_norm,
                 "persistent decode: down rows over two stages need head_dim 128, 16-bit "
                 "weights and no q/k norms");
    return trace ? launch_persistent<T, 128, true, false, false, true>(a, s, refuse)
                 : launch_persistent<T, 128, false, false, false, true>(a, s, refuse);
  }
  if (a.qk_norm) {  // Qwen3: head_dim 128, 16-bit weights
    HAYATE_CHECK(a.head_dim == 128 && !a.fp8 && a.k_raw,
                 "persistent decode: q/k norms need head_dim 128, 16-bit weights and k_raw");
    return trace ? launch_persistent<T, 128, true, false, true>(a, s, refuse)
                 : launch_persistent<T, 128, false, false, true>(a, s, refuse);
  }
  if (a.fp8) {  // FP8 weights: the 8B shapes' head size (and dummy:tiny's, the tests'), traced or not
    switch (a.head_dim) {
      case 32: return trace ? launch_persistent<T, 32, true, true>(a, s, refuse)
                            : launch_persistent<T, 32, false, true>(a, s, refuse);
      case 64: return trace ? launch_persistent<T, 64, true, true>(a, s, refuse)
                            : launch_persistent<T, 64, false, true>(a, s, refuse);
      default:  // the 8B shapes: down rows of 14,336 in 7 chunks a warp
        if (a.inter <= 7 * 2048)
          return trace ? launch_persistent<T, 128, true, true, false, false, 7>(a, s, refuse)
                       : launch_persistent<T, 128, false, true, false, false, 7>(a, s, refuse);
        return trace ? launch_persistent<T, 128, true, true>(a, s, refuse)
                     : launch_persistent<T, 128, false, true>(a, s, refuse);
    }
  }
  switch (a.head_dim) {
    case 32: return trace ? launch_persistent<T, 32, true, false>(a, s, refuse)
                          : launch_persistent<T, 32, false, false>(a, s, refuse);
    case 64: return trace ? launch_persistent<T, 64, true, false>(a, s, refuse)
                          : launch_persistent<T, 64, false, false>(a, s, refuse);
    default: return trace ? launch_persistent<T, 128, true, false>(a, s, refuse)
                          : launch_persistent<T, 128, false, false>(a, s, refuse);
  }
}

}  // namespace

bool persistent_decode_supported(int hidden, int inter, int vocab, int n_heads, int n_kv_heads,
                                 int head_dim, bool qk_norm) {
  const int q_dim = n_heads * head_dim;
  return (head_dim == 32 || head_dim == 64 || head_dim == 128) && n_kv_heads > 0 &&
         n_heads % n_kv_heads == 0 &&
         // Attention units of at most kPersistMaxGroup query heads: up to 2 per kv head.
         n_heads / n_kv_heads <= 2 * kPersistMaxGroup &&
         // Qwen3's one head size (one more instantiation); the item that
         // appends the normalised k row must be its kv head's only one.
         (!qk_norm || (head_dim == 128 && n_heads / n_kv_heads <= kPersistMaxGroup)) &&
         // The ring's stages hold 4 rows of K <= 4096 (QKV, o_proj, gate/up,
         // LM head: row pairs) or one row of K <= 16384 (down), 32 KB; a down
         // row of K <= 19456 spans two stages (x's tail in shared memory).
         hidden % 8 == 0 && hidden <= 4096 && q_dim <= 4096 && inter % 8 == 0 &&
         (inter <= 16384 || (inter <= 16384 + 8 * kPersistWideTail && head_dim == 128 &&
                             !qk_norm)) &&
         vocab % 2 == 0;
}

int persistent_max_splits() { return kPersistMaxSplits; }

bool persistent_decode_fp8_supported() { return true; }

template <typename T>
void decode_persistent(const PersistentDecode<T>& a, cudaStream_t s) {
  HAYATE_CUDA_CHECK(persistent_launch(a, s, false));
}

template <typename T>
bool decode_persistent_trial(const PersistentDecode<T>& a, cudaStream_t s, bool refuse) {
  const cudaError_t e = persistent_launch(a, s, refuse);
  if (e != cudaSuccess) {
    cudaGetLastError();  // a refused launch is not sticky: clear it and fall back
    std::fprintf(stderr,
                 "hayate: the persistent decode kernel cannot run here (%s: fewer SMs than the "
                 "device reports, e.g. under MPS limits); bucket 1 runs the batched GEMVs or "
                 "GEMMs\n",
                 cudaGetErrorString(e));
    return false;
  }
  HAYATE_CUDA_CHECK(cudaStreamSynchronize(s));
  return true;
}

template void decode_persistent<half>(const PersistentDecode<half>&, cudaStream_t);
template void decode_persistent<__nv_bfloat16>(const PersistentDecode<__nv_bfloat16>&, cudaStream_t);
template bool decode_persistent_trial<half>(const PersistentDecode<half>&, cudaStream_t, bool);
template bool decode_persistent_trial<__nv_bfloat16>(const PersistentDecode<__nv_bfloat16>&,
                                                     cudaStream_t, bool);

}  // namespace hayate::cuda
