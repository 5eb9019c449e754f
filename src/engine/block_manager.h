// KV-cache block manager: the pool is `num_blocks` blocks of `block_size`
// token slots each; a sequence owns the blocks listed in its block table, in
// position order (position p sits in table[p / block_size]). Blocks carry
// reference counts so that a table can be shared (fork) and a block returns
// to the free list only when its last holder lets go. Host only.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace hayate {

using BlockTable = std::vector<int32_t>;

class BlockManager {
 public:
  // Throws Error unless num_blocks >= 1 and block_size >= 1.
  BlockManager(int num_blocks, int block_size);

  int num_blocks() const { return int(ref_counts_.size()); }
  int block_size() const { return block_size_; }
  int num_free() const { return int(free_.size()); }
  int num_used() const { return num_blocks() - num_free(); }
  int ref_count(int32_t block) const;  // throws Error for a block outside the pool

  // Blocks needed to hold `num_tokens` positions.
  int blocks_for(int num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }

  // Blocks `table` must gain to cover `num_tokens` positions (0 if it already does).
  int blocks_needed(const BlockTable& table, int num_tokens) const;
  bool can_grow(const BlockTable& table, int num_tokens) const {
    return blocks_needed(table, num_tokens) <= num_free();
  }

  // Grows `table` so it covers positions [0, num_tokens): a new sequence's
  // first chunk, a prefill chunk, or one decode slot that crosses a block
  // boundary. All or nothing: returns false and changes nothing when the pool
  // has too few free blocks.
  bool grow(BlockTable& table, int num_tokens);

  // Drops one reference to every block of `table` and clears it. Throws Error
  // (before changing anything) on a block that is free or outside the pool,
  // so a double free cannot corrupt the pool.
  void release(BlockTable& table);

  // Another table sharing the same blocks (each reference count + 1).
  BlockTable fork(const BlockTable& table);

 private:
  void check_block(int32_t block) const;

  int block_size_;
  std::vector<int32_t> ref_counts_;  // [num_blocks]; 0 = on the free list
  std::deque<int32_t> free_;         // FIFO: recently freed blocks are reused last
};

}  // namespace hayate
