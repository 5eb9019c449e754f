#include "cuda/step_meta.h"

#include <algorithm>
#include <cstring>

#include "cuda/launch.h"

namespace hayate::cuda {

void StepMetaPacker::clear() {
  for (auto* v : {&tokens_, &pos_, &seq_, &dec_, &tiles_, &head_, &table_}) v->clear();
}

void StepMetaPacker::row(int32_t token, int32_t pos, int32_t seq) {
  tokens_.push_back(token);
  pos_.push_back(pos);
  seq_.push_back(seq);
}

size_t StepMetaPacker::words() const {
  return size_t(kStepMetaHeaderWords) + 3 * tokens_.size() + dec_.size() + tiles_.size() +
         head_.size() + table_.size();
}

size_t StepMetaPacker::pack(int32_t* dst) const {
  StepMetaHeader h;
  h.rows = int32_t(tokens_.size());
  h.n_dec = int32_t(dec_.size());
  h.n_tiles = int32_t(tiles_.size() / 2);
  h.n_head = int32_t(head_.size());
  h.n_table = int32_t(table_.size() / 2);
  std::memcpy(dst, &h, sizeof h);
  int32_t* p = dst + kStepMetaHeaderWords;
  for (const auto* v : {&tokens_, &pos_, &seq_, &dec_, &tiles_, &head_, &table_})
    p = std::copy(v->begin(), v->end(), p);
  return size_t(p - dst);
}

namespace {

// Grid-stride over every word after the header: each goes to its array.
// src is host memory read over the bus: the header is read once per block.
__global__ void unpack_step_meta_kernel(const int32_t* __restrict__ src, StepMetaDst dst,
                                        const int32_t* __restrict__ prev_out) {
  __shared__ int32_t header[kStepMetaHeaderWords];
  if (threadIdx.x < kStepMetaHeaderWords) header[threadIdx.x] = src[threadIdx.x];
  __syncthreads();
  const StepMetaHeader h = *reinterpret_cast<const StepMetaHeader*>(header);
  const int32_t* a = src + kStepMetaHeaderWords;
  const int rows = h.rows, dec = h.n_dec, tiles = 2 * h.n_tiles, head = h.n_head;
  const int table = h.n_table;
  const int total = 3 * rows + dec + tiles + head + table;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    int k = i;
    if (k < rows) {
      const int32_t t = a[k];
      dst.tokens[k] = t >= 0 ? t : prev_out[-1 - t];
      continue;
    }
    if ((k -= rows) < rows) { dst.pos[k] = a[rows + k]; continue; }
    if ((k -= rows) < rows) { dst.seq[k] = a[2 * rows + k]; continue; }
    const int32_t* b = a + 3 * rows;
    if ((k -= rows) < dec) { dst.dec[k] = b[k]; continue; }
    if ((k -= dec) < tiles) { dst.tiles[k] = b[dec + k]; continue; }
    if ((k -= tiles) < head) { dst.head[k] = b[dec + tiles + k]; continue; }
    k -= head;  // table entries: (flat index, value) pairs, one thread per pair
    const int32_t* e = b + dec + tiles + head + 2 * k;
    dst.tables[e[0]] = e[1];
  }
}

}  // namespace

void unpack_step_meta(const int32_t* src, size_t words, const StepMetaDst& dst,
                      const int32_t* prev_out, cudaStream_t s) {
  constexpr unsigned kThreads = 256;
  const unsigned blocks =
      unsigned(std::clamp<size_t>((words + kThreads - 1) / kThreads, 1, 64));
  launch({blocks, kThreads, 0, s}, unpack_step_meta_kernel, src, dst, prev_out);
}

}  // namespace hayate::cuda
