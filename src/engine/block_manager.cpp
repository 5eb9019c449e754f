#include "engine/block_manager.h"

#include "core/check.h"

namespace hayate {

BlockManager::BlockManager(int num_blocks, int block_size) : block_size_(block_size) {
  HAYATE_CHECK(num_blocks >= 1, "KV pool: num_blocks must be >= 1, got ", num_blocks);
  HAYATE_CHECK(block_size >= 1, "KV pool: block_size must be >= 1, got ", block_size);
  ref_counts_.assign(size_t(num_blocks), 0);
  for (int32_t b = 0; b < num_blocks; ++b) free_.push_back(b);
}

void BlockManager::check_block(int32_t block) const {
  HAYATE_CHECK(block >= 0 && block < num_blocks(), "KV block ", block, " is outside the pool of ",
               num_blocks());
}

int BlockManager::ref_count(int32_t block) const {
  check_block(block);
  return ref_counts_[size_t(block)];
}

int BlockManager::blocks_needed(const BlockTable& table, int num_tokens) const {
  int need = blocks_for(num_tokens) - int(table.size());
  return need > 0 ? need : 0;
}

bool BlockManager::grow(BlockTable& table, int num_tokens) {
  int need = blocks_needed(table, num_tokens);
  if (need > num_free()) return false;
  for (int i = 0; i < need; ++i) {
    int32_t b = free_.front();
    free_.pop_front();
    ref_counts_[size_t(b)] = 1;
    table.push_back(b);
  }
  return true;
}

void BlockManager::release(BlockTable& table) {
  // Validate first: a table naming a free block means a double free, and
  // releasing half of it would leave the pool inconsistent.
  for (int32_t b : table) {
    check_block(b);
    HAYATE_CHECK(ref_counts_[size_t(b)] > 0, "KV block ", b, " released while free");
  }
  for (int32_t b : table) {
    if (--ref_counts_[size_t(b)] == 0) free_.push_back(b);
  }
  table.clear();
}

BlockTable BlockManager::fork(const BlockTable& table) {
  for (int32_t b : table) {
    check_block(b);
    HAYATE_CHECK(ref_counts_[size_t(b)] > 0, "KV block ", b, " forked while free");
  }
  for (int32_t b : table) ++ref_counts_[size_t(b)];
  return table;
}

}  // namespace hayate
