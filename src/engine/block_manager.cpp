#include "engine/block_manager.h"

#include <algorithm>

#include "core/check.h"
#include "core/rng.h"

namespace hayate {

uint64_t block_hash(uint64_t prev, std::span<const int32_t> tokens) {
  // mix64 (core/rng.h, splitmix64's finalizer) over the chain value and each
  // token in turn: order-sensitive, and every bit of each token reaches the result.
  uint64_t h = mix64(prev ^ 0x9e3779b97f4a7c15ull);
  for (int32_t t : tokens) h = mix64(h ^ uint64_t(uint32_t(t)));
  return h;
}

BlockManager::BlockManager(int num_blocks, int block_size, bool prefix_caching)
    : block_size_(block_size), prefix_caching_(prefix_caching) {
  HAYATE_CHECK(num_blocks >= 1, "KV pool: num_blocks must be >= 1, got ", num_blocks);
  HAYATE_CHECK(block_size >= 1, "KV pool: block_size must be >= 1, got ", block_size);
  ref_counts_.assign(size_t(num_blocks), 0);
  for (int32_t b = 0; b < num_blocks; ++b) free_.push_back(b);
  if (prefix_caching_) {
    hash_.assign(size_t(num_blocks), 0);
    registered_.assign(size_t(num_blocks), 0);
    tokens_.assign(size_t(num_blocks) * size_t(block_size), 0);
    lru_prev_.assign(size_t(num_blocks), -1);
    lru_next_.assign(size_t(num_blocks), -1);
  }
}

void BlockManager::check_block(int32_t block) const {
  HAYATE_CHECK(block >= 0 && block < num_blocks(), "KV block ", block, " is outside the pool of ",
               num_blocks());
}

int BlockManager::ref_count(int32_t block) const {
  check_block(block);
  return ref_counts_[size_t(block)];
}

bool BlockManager::is_cached(int32_t block) const {
  check_block(block);
  return prefix_caching_ && registered_[size_t(block)] != 0;
}

int BlockManager::blocks_needed(const BlockTable& table, int num_tokens) const {
  int need = blocks_for(num_tokens) - int(table.size());
  return need > 0 ? need : 0;
}

void BlockManager::lru_push_back(int32_t b) {
  lru_prev_[size_t(b)] = lru_tail_;
  lru_next_[size_t(b)] = -1;
  if (lru_tail_ >= 0)
    lru_next_[size_t(lru_tail_)] = b;
  else
    lru_head_ = b;
  lru_tail_ = b;
  ++lru_size_;
}

void BlockManager::lru_unlink(int32_t b) {
  const int32_t p = lru_prev_[size_t(b)], n = lru_next_[size_t(b)];
  if (p >= 0)
    lru_next_[size_t(p)] = n;
  else
    lru_head_ = n;
  if (n >= 0)
    lru_prev_[size_t(n)] = p;
  else
    lru_tail_ = p;
  lru_prev_[size_t(b)] = lru_next_[size_t(b)] = -1;
  --lru_size_;
}

void BlockManager::unregister(int32_t b) {
  by_hash_.erase(hash_[size_t(b)]);
  registered_[size_t(b)] = 0;
}

int32_t BlockManager::take_free() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.front();
    free_.pop_front();
  } else {  // evict the least recently used registered block
    b = lru_head_;
    lru_unlink(b);
    unregister(b);
    ++evictions_;
  }
  ref_counts_[size_t(b)] = 1;
  return b;
}

bool BlockManager::grow(BlockTable& table, int num_tokens) {
  int need = blocks_needed(table, num_tokens);
  if (need > num_free()) return false;
  for (int i = 0; i < need; ++i) table.push_back(take_free());
  return true;
}

void BlockManager::release(BlockTable& table) {
  // Validate first: a table naming a free block means a double free, and
  // releasing half of it would leave the pool inconsistent.
  for (int32_t b : table) {
    check_block(b);
    HAYATE_CHECK(ref_counts_[size_t(b)] > 0, "KV block ", b, " released while free");
  }
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    const int32_t b = *it;
    if (--ref_counts_[size_t(b)] > 0) continue;
    if (prefix_caching_ && registered_[size_t(b)])
      lru_push_back(b);
    else
      free_.push_back(b);
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

int BlockManager::match(std::span<const uint64_t> hashes, std::span<const int32_t> tokens,
                        BlockTable& table) {
  HAYATE_CHECK(table.empty(), "prefix cache: match() into a table that holds blocks");
  HAYATE_CHECK(hashes.size() * size_t(block_size_) <= tokens.size(),
               "prefix cache: ", hashes.size(), " block hashes for ", tokens.size(), " tokens");
  if (!prefix_caching_) return 0;
  const size_t bs = size_t(block_size_);
  for (size_t i = 0; i < hashes.size(); ++i) {
    auto it = by_hash_.find(hashes[i]);
    if (it == by_hash_.end()) break;
    const int32_t b = it->second;
    const auto want = tokens.subspan(i * bs, bs);
    if (!std::equal(want.begin(), want.end(), tokens_.begin() + ptrdiff_t(size_t(b) * bs))) break;
    if (ref_counts_[size_t(b)]++ == 0) lru_unlink(b);
    table.push_back(b);
  }
  return int(table.size());
}

void BlockManager::cache(const BlockTable& table, std::span<const uint64_t> hashes,
                         std::span<const int32_t> tokens, int from) {
  if (!prefix_caching_) return;
  HAYATE_CHECK(
      hashes.size() <= table.size() && hashes.size() * size_t(block_size_) <= tokens.size(),
      "prefix cache: ", hashes.size(), " hashes for a table of ", table.size(), " blocks and ",
      tokens.size(), " tokens");
  const size_t bs = size_t(block_size_);
  for (size_t i = size_t(std::max(from, 0)); i < hashes.size(); ++i) {
    const int32_t b = table[i];
    check_block(b);
    HAYATE_CHECK(ref_counts_[size_t(b)] > 0, "prefix cache: KV block ", b, " cached while free");
    if (registered_[size_t(b)] || by_hash_.count(hashes[i]) != 0) continue;
    by_hash_.emplace(hashes[i], b);
    hash_[size_t(b)] = hashes[i];
    registered_[size_t(b)] = 1;
    std::copy_n(tokens.begin() + ptrdiff_t(i * bs), bs,
                tokens_.begin() + ptrdiff_t(size_t(b) * bs));
  }
}

void BlockManager::uncache(const BlockTable& table) {
  if (!prefix_caching_) return;
  for (int32_t b : table) {
    check_block(b);
    if (registered_[size_t(b)] && ref_counts_[size_t(b)] == 1) unregister(b);
  }
}

bool BlockManager::make_writable(BlockTable& table, int index, std::vector<BlockCopy>& copies) {
  HAYATE_CHECK(index >= 0 && size_t(index) < table.size(), "make_writable: block index ", index,
               " outside a table of ", table.size());
  const int32_t b = table[size_t(index)];
  check_block(b);
  HAYATE_CHECK(ref_counts_[size_t(b)] > 0, "KV block ", b, " written while free");
  if (ref_counts_[size_t(b)] == 1) {
    if (prefix_caching_ && registered_[size_t(b)]) unregister(b);
    return true;
  }
  if (num_free() == 0) return false;
  const int32_t d = take_free();
  --ref_counts_[size_t(b)];
  table[size_t(index)] = d;
  copies.push_back({b, d});
  return true;
}

}  // namespace hayate
