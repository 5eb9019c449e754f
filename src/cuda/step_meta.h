// A step's metadata in one upload: the host packs every array the step needs
// (token ids, positions, sequence slots, decode rows, prefill tiles, LM-head
// rows, the block-table entries that changed) into one pinned buffer, and one
// kernel (unpack_step_meta) reads it over the bus and scatters it into the
// fixed device arrays the kernels and the captured graphs read: no copy to
// queue on the copy engine, one launch per step. A
// token id of -1 - j stands for "the id this step's predecessor sampled into
// out[j]", read on the device, so a step can be launched before the host has
// seen the ids of the one before it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace hayate::cuda {

// Word offsets of the packed buffer: a header, then the arrays in this order.
struct StepMetaHeader {
  int32_t rows = 0;     // tokens, positions, sequence slots: one each per row
  int32_t n_dec = 0;    // decode rows
  int32_t n_tiles = 0;  // prefill tiles (2 words each)
  int32_t n_head = 0;   // LM-head rows
  int32_t n_table = 0;  // changed block-table entries (flat index, value: 2 words each)
  int32_t pad[3] = {};
};
inline constexpr int kStepMetaHeaderWords = int(sizeof(StepMetaHeader) / sizeof(int32_t));

// Device destinations of unpack_step_meta.
struct StepMetaDst {
  int32_t* tokens;
  int32_t* pos;
  int32_t* seq;
  int32_t* dec;
  int32_t* tiles;
  int32_t* head;
  int32_t* tables;
};

// Host side: appends the arrays of one step; words() is the packed buffer.
class StepMetaPacker {
 public:
  void clear();
  void row(int32_t token, int32_t pos, int32_t seq);  // in row order
  void dec(int32_t row) { dec_.push_back(row); }
  void tile(int32_t row, int32_t n) { tiles_.insert(tiles_.end(), {row, n}); }
  void head(int32_t row) { head_.push_back(row); }
  void table(int32_t flat_index, int32_t block) { table_.insert(table_.end(), {flat_index, block}); }
  // Writes header + arrays to dst (at least words() ints); returns the count.
  size_t pack(int32_t* dst) const;
  size_t words() const;

 private:
  std::vector<int32_t> tokens_, pos_, seq_, dec_, tiles_, head_, table_;
};

// Scatters the packed buffer `src` (device-addressable: mapped pinned memory)
// into dst; token ids < 0 are read from prev_out[-1 - id].
void unpack_step_meta(const int32_t* src, size_t words, const StepMetaDst& dst,
                      const int32_t* prev_out, cudaStream_t s);

}  // namespace hayate::cuda
