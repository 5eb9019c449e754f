// Next-token choice on the device; only the chosen id goes back to the host.
// Greedy: a grid-wide argmax through one 64-bit atomicMax of (ordered logit,
// ~id), so ties go to the lowest id as on the host. Sampling: a radix sort of
// the logits (cub), then one block walks the sorted list: temperature, top-k,
// top-p, min-p, and the draw u = uniform01(seed, step, 0).
#include <cub/block/block_reduce.cuh>
#include <cub/device/device_radix_sort.cuh>

#include "cuda/kernels/common.cuh"
#include "cuda/kernels/sampling_pick.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"

namespace hayate::cuda {

namespace {

constexpr int kArgmaxThreads = 512;
constexpr int kArgmaxBlocks = 132;
constexpr int kPickThreads = 1024;

// Total order of floats as unsigned integers (larger float, larger key).
__device__ __forceinline__ uint32_t ordered(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// ---- kernels -------------------------------------------------------------------

__global__ void __launch_bounds__(kArgmaxThreads)
argmax_kernel(const float* __restrict__ logits, int vocab, unsigned long long* best) {
  griddep_launch();
  griddep_wait();
  unsigned long long key = 0;
  for (int i = blockIdx.x * kArgmaxThreads + threadIdx.x; i < vocab; i += gridDim.x * kArgmaxThreads) {
    const unsigned long long k = (uint64_t(ordered(logits[i])) << 32) | uint32_t(~uint32_t(i));
    key = k > key ? k : key;
  }
  using Reduce = cub::BlockReduce<unsigned long long, kArgmaxThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  key = Reduce(tmp).Reduce(key, [](auto a, auto b) { return a > b ? a : b; });
  if (threadIdx.x == 0) atomicMax(best, key);
}

// Reads the argmax and resets it for the next step (so no memset node is needed).
__global__ void argmax_finish_kernel(unsigned long long* best, int32_t* token_out) {
  griddep_launch();
  griddep_wait();
  *token_out = int32_t(~uint32_t(*best & 0xffffffffu));
  *best = 0;
}

__global__ void iota_kernel(int32_t* ids, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) ids[i] = i;
}

// One block over the logits sorted in descending order (sampling_pick.cuh).
__global__ void __launch_bounds__(kPickThreads)
pick_kernel(const float* __restrict__ sorted, const int32_t* __restrict__ ids, int vocab,
            const StepState* __restrict__ st, int32_t* token_out) {
  const int32_t id = pick_sorted<kPickThreads>(sorted, ids, vocab, st);
  if (threadIdx.x == 0) *token_out = id;
}

struct Workspace {
  unsigned long long* best;
  float* sorted;
  int32_t* ids_in;
  int32_t* ids_out;
  void* cub_tmp;
  size_t cub_bytes;
};

size_t cub_bytes(int vocab) {
  size_t bytes = 0;
  HAYATE_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(
      nullptr, bytes, static_cast<const float*>(nullptr), static_cast<float*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), vocab));
  return bytes;
}

Workspace carve(void* base, int vocab) {
  auto align = [](size_t b) { return (b + 255) / 256 * 256; };
  char* p = static_cast<char*>(base);
  Workspace w{};
  w.best = reinterpret_cast<unsigned long long*>(p);
  p += 256;
  w.sorted = reinterpret_cast<float*>(p);
  p += align(sizeof(float) * vocab);
  w.ids_in = reinterpret_cast<int32_t*>(p);
  p += align(sizeof(int32_t) * vocab);
  w.ids_out = reinterpret_cast<int32_t*>(p);
  p += align(sizeof(int32_t) * vocab);
  w.cub_tmp = p;
  w.cub_bytes = cub_bytes(vocab);
  return w;
}

}  // namespace

// ---- launchers -------------------------------------------------------------------

size_t sampling_workspace_bytes(int vocab) {
  return 256 + 3 * ((size_t(vocab) * 4 + 255) / 256 * 256) + cub_bytes(vocab);
}

// The workspace must start zeroed (the argmax slot is reset after each use).
void sample(const float* logits, int vocab, const StepState* state, bool greedy, void* workspace,
            int32_t* token_out, cudaStream_t s, bool pdl) {
  Workspace w = carve(workspace, vocab);
  if (greedy) {
    launch({kArgmaxBlocks, kArgmaxThreads, 0, s, pdl}, argmax_kernel, logits, vocab, w.best);
    launch({1, 1, 0, s, pdl}, argmax_finish_kernel, w.best, token_out);
    return;
  }
  launch({ceil_div(vocab, 256), 256, 0, s}, iota_kernel, w.ids_in, vocab);
  HAYATE_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(
      w.cub_tmp, w.cub_bytes, logits, w.sorted, w.ids_in, w.ids_out, vocab, 0, 32, s));
  launch({1, kPickThreads, 0, s}, pick_kernel, w.sorted, w.ids_out, vocab, state, token_out);
}

}  // namespace hayate::cuda
