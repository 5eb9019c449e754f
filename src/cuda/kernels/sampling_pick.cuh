// The sampler's walk over one row of logits sorted in descending order (ties
// by ascending id, as the host's total order): temperature, top-k, top-p,
// min-p, then the draw u = uniform01(seed, step, 0) (engine/sampling.h
// semantics). Shared by the per-row sampler (sampling.cu, one row) and the
// batched one (sampling_batched.cu, one block per row).
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "core/rng.h"
#include "cuda/ops.h"

namespace hayate::cuda {

// Called by all kThreads threads of a block; every thread gets the chosen id.
// sorted [vocab] descending, ids [vocab] their token ids, st->temperature > 0.
// Weights are w_i = exp((l_i - l_0) / T), so w_0 = 1 and min-p is w_i >= min_p.
template <int kThreads>
__device__ int32_t pick_sorted(const float* __restrict__ sorted, const int32_t* __restrict__ ids,
                               int vocab, const StepState* __restrict__ st) {
  using Scan = cub::BlockScan<float, kThreads>;
  using Reduce = cub::BlockReduce<float, kThreads>;
  __shared__ union {
    typename Scan::TempStorage scan;
    typename Reduce::TempStorage reduce;
  } tmp;
  __shared__ float total_s;
  __shared__ int n_s;
  const float inv_t = 1.0f / st->temperature, l0 = sorted[0];
  const int k = st->top_k > 0 ? min(st->top_k, vocab) : vocab;
  auto weight = [&](int i) { return i < k ? __expf((sorted[i] - l0) * inv_t) : 0.0f; };

  // Total weight of the top-k (min-p needs no pass: w is sorted, so the kept
  // set is a prefix and the scan below stops at the first w_i < min_p).
  float part = 0.0f;
  for (int i = threadIdx.x; i < k; i += kThreads) part += weight(i);
  const float total = Reduce(tmp.reduce).Sum(part);
  if (threadIdx.x == 0) {
    total_s = total;
    n_s = k;
  }
  __syncthreads();  // total_s, n_s
  // Top-p / min-p: the kept prefix ends at the first i whose running sum
  // reaches top_p * total (that token is kept), or before the first w < min_p.
  // top_p = 1 keeps everything (no cut from rounding at the tail), as on the host.
  const float top_p_mass = st->top_p < 1.0f ? st->top_p * total_s : INFINITY;
  float running = 0.0f;
  for (int base = 0; base < k; base += kThreads) {
    const int i = base + threadIdx.x;
    const float w = i < k ? weight(i) : 0.0f;
    float incl, chunk;
    Scan(tmp.scan).InclusiveSum(w, incl, chunk);
    incl += running;
    if (i < k && (incl >= top_p_mass && incl - w < top_p_mass)) atomicMin(&n_s, i + 1);
    if (i < k && w < st->min_p) atomicMin(&n_s, max(i, 1));
    // Ids of no weight (-inf logits: a grammar's mask) end the kept prefix,
    // so the draw's fallback (the last kept id, when float sums fall short
    // of the target) is never one of them.
    if (i < k && w == 0.0f) atomicMin(&n_s, max(i, 1));
    running += chunk;
    __syncthreads();  // tmp reuse; all atomics on n_s done
    const bool done = n_s <= base + kThreads;
    __syncthreads();  // every thread read n_s before the next round may lower it
    if (done) break;
  }
  const int n = n_s;
  __syncthreads();  // tmp.reduce is reused below
  // Draw: the first kept i whose running weight exceeds u * (kept weight).
  part = 0.0f;
  for (int i = threadIdx.x; i < n; i += kThreads) part += weight(i);
  const float kept = Reduce(tmp.reduce).Sum(part);
  __shared__ float target_s;
  __shared__ int pick_s;
  if (threadIdx.x == 0) {
    target_s = uniform01(st->seed, st->step, 0) * kept;
    pick_s = n - 1;
  }
  __syncthreads();  // target_s, pick_s
  running = 0.0f;
  for (int base = 0; base < n; base += kThreads) {
    const int i = base + threadIdx.x;
    const float w = i < n ? weight(i) : 0.0f;
    float incl, chunk;
    Scan(tmp.scan).InclusiveSum(w, incl, chunk);
    incl += running;
    if (i < n && incl > target_s && incl - w <= target_s) atomicMin(&pick_s, i);
    running += chunk;
    __syncthreads();  // tmp reuse; all atomics on pick_s done
    const bool done = pick_s < base + kThreads;
    __syncthreads();  // every thread read pick_s first
    if (done) break;
  }
  return ids[pick_s];
}

}  // namespace hayate::cuda
