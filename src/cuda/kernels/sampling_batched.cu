// Non-greedy next-token choice for many rows in one pass (per-sequence
// sampling parameters in one sampling kernel). The per-row sampler
// (sampling.cu) sorts one row and walks it; here every sampled row is sorted
// at once and walked by its own block:
//   gather   logits rows[b] -> keys [n, vocab], ids [n, vocab] = 0..vocab-1
//   sort     one cub segmented radix sort over the n rows (descending, stable:
//            ties keep ascending ids, the host's total order)
//   pick     one launch, block b walks row b with states[b] (sampling_pick.cuh,
//            the same walk and draw as the per-row sampler) -> out[rows[b]]
// Not graph-captured: it runs after the decode graph on the same stream, eager,
// because n and the rows change every step (three launches plus the sort's passes).
#include <cub/device/device_segmented_radix_sort.cuh>

#include <algorithm>
#include <climits>

#include "core/check.h"
#include "cuda/kernels/sampling_pick.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"

namespace hayate::cuda {

namespace {

constexpr int kGatherThreads = 256;
constexpr int kPickThreads = 1024;

// ---- kernels -------------------------------------------------------------------

// grid (x blocks over vocab, n rows). keys/ids [n, vocab]: row b = logits row rows[b].
__global__ void __launch_bounds__(kGatherThreads)
    gather_rows_kernel(const float* __restrict__ logits, int vocab,
                       const int32_t* __restrict__ rows, float* __restrict__ keys,
                       int32_t* __restrict__ ids) {
  const size_t b = blockIdx.y;
  const float* src = logits + size_t(rows[b]) * vocab;
  for (int i = blockIdx.x * kGatherThreads + threadIdx.x; i < vocab;
       i += gridDim.x * kGatherThreads) {
    keys[b * vocab + i] = src[i];
    ids[b * vocab + i] = i;
  }
}

// One block per sampled row: sorted/ids [n, vocab], states [n] -> out[rows[b]].
__global__ void __launch_bounds__(kPickThreads)
    pick_rows_kernel(const float* __restrict__ sorted, const int32_t* __restrict__ ids, int vocab,
                     const int32_t* __restrict__ rows, const StepState* __restrict__ states,
                     int32_t* __restrict__ out) {
  const size_t b = blockIdx.x;
  const int32_t id =
      pick_sorted<kPickThreads>(sorted + b * vocab, ids + b * vocab, vocab, states + b);
  if (threadIdx.x == 0) out[rows[b]] = id;
}

__global__ void offsets_kernel(int32_t* offsets, int n, int vocab) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i <= n; i += gridDim.x * blockDim.x)
    offsets[i] = i * vocab;
}

// ---- workspace -----------------------------------------------------------------

// offsets [max_rows + 1] (row b = [b vocab, (b + 1) vocab)), keys and ids
// double buffers [max_rows, vocab] each (the sort ping-pongs between them in
// place, so it needs no scratch copies of its own), then cub's temp storage.
struct Workspace {
  int32_t* offsets;
  float* keys[2];
  int32_t* ids[2];
  void* cub_tmp;
  size_t cub_bytes;
};

size_t align256(size_t b) {
  return (b + 255) / 256 * 256;
}

size_t sort_bytes(int n_items, int n_rows) {
  cub::DoubleBuffer<float> k(nullptr, nullptr);
  cub::DoubleBuffer<int32_t> v(nullptr, nullptr);
  size_t bytes = 0;
  HAYATE_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
      nullptr, bytes, k, v, n_items, n_rows, static_cast<const int32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr)));
  return bytes;
}

void check_shape(int vocab, int max_rows) {
  HAYATE_CHECK(vocab >= 1 && max_rows >= 1, "batched sampling: vocab ", vocab, " and max rows ",
               max_rows, " must be >= 1");
  // cub's segmented sort counts items in int; grid.y holds the rows.
  HAYATE_CHECK(int64_t(vocab) * max_rows < INT_MAX && max_rows <= 65535,
               "batched sampling: ", max_rows, " rows of ", vocab,
               " logits exceed the sorter's int item count");
}

Workspace carve(void* base, int vocab, int max_rows) {
  char* p = static_cast<char*>(base);
  const size_t plane = align256(size_t(vocab) * max_rows * 4);
  Workspace w{};
  w.offsets = reinterpret_cast<int32_t*>(p);
  p += align256(sizeof(int32_t) * size_t(max_rows + 1));
  for (int i = 0; i < 2; ++i) {
    w.keys[i] = reinterpret_cast<float*>(p);
    p += plane;
    w.ids[i] = reinterpret_cast<int32_t*>(p);
    p += plane;
  }
  w.cub_tmp = p;
  w.cub_bytes = sort_bytes(vocab * max_rows, max_rows);
  return w;
}

}  // namespace

// ---- launchers -------------------------------------------------------------------

size_t batched_sampling_workspace_bytes(int vocab, int max_rows) {
  check_shape(vocab, max_rows);
  return align256(sizeof(int32_t) * size_t(max_rows + 1)) +
         4 * align256(size_t(vocab) * max_rows * 4) + sort_bytes(vocab * max_rows, max_rows);
}

void batched_sampling_init(void* workspace, int vocab, int max_rows, cudaStream_t s) {
  check_shape(vocab, max_rows);
  const Workspace w = carve(workspace, vocab, max_rows);
  launch({ceil_div(size_t(max_rows) + 1, 256), 256, 0, s}, offsets_kernel, w.offsets, max_rows,
         vocab);
}

void sample_batched(const float* logits, int vocab, const int32_t* rows, const StepState* states,
                    int n, int max_rows, void* workspace, int32_t* out, cudaStream_t s) {
  check_shape(vocab, max_rows);
  HAYATE_CHECK(n >= 0 && n <= max_rows, "batched sampling: ", n, " rows, workspace holds ",
               max_rows);
  if (n == 0) return;
  Workspace w = carve(workspace, vocab, max_rows);
  const unsigned gx = std::min(ceil_div(size_t(vocab), kGatherThreads), 64u);
  launch({dim3(gx, unsigned(n)), kGatherThreads, 0, s}, gather_rows_kernel, logits, vocab, rows,
         w.keys[0], w.ids[0]);
  cub::DoubleBuffer<float> keys(w.keys[0], w.keys[1]);
  cub::DoubleBuffer<int32_t> ids(w.ids[0], w.ids[1]);
  size_t bytes = w.cub_bytes;
  HAYATE_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
      w.cub_tmp, bytes, keys, ids, n * vocab, n, w.offsets, w.offsets + 1, 0, 32, s));
  // The sort leaves the result in whichever buffer its last pass wrote (selector, host side).
  launch({unsigned(n), kPickThreads, 0, s}, pick_rows_kernel, keys.Current(), ids.Current(), vocab,
         rows, states, out);
}

}  // namespace hayate::cuda
