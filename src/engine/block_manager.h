// KV-cache block manager: the pool is `num_blocks` blocks of `block_size`
// token slots each; a sequence owns the blocks listed in its block table, in
// position order (position p sits in table[p / block_size]). Blocks carry
// reference counts so that a table can be shared (fork) and a block returns
// to the free list only when its last holder lets go. Host only.
//
// Prefix cache (vLLM's automatic prefix caching): a full block whose K/V are
// computed can be registered under the hash of its tokens chained over the
// blocks before it (block_hash). A new sequence takes the longest run of
// registered blocks matching its own hashes (match), sharing them by
// reference count. A registered block whose count drops to zero stays
// registered on an LRU list and is evicted (unregistered, reused) only when
// the pool has no unregistered free block left. A table that must write into
// a block it shares copies it first (make_writable: copy on write).
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>
#include <vector>

namespace hayate {

using BlockTable = std::vector<int32_t>;

// One block's K/V rows (every layer) copied from block src to block dst.
struct BlockCopy {
  int32_t src = 0;
  int32_t dst = 0;
};

// The hash of a full block: its tokens chained over the previous block's hash
// (0 for the first block), so equal hashes mean equal prefixes (up to 64-bit
// collisions, and match() also compares the block's own tokens).
uint64_t block_hash(uint64_t prev, std::span<const int32_t> tokens);

class BlockManager {
 public:
  // Throws Error unless num_blocks >= 1 and block_size >= 1.
  BlockManager(int num_blocks, int block_size, bool prefix_caching = false);

  int num_blocks() const { return int(ref_counts_.size()); }
  int block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  // Blocks that can be handed out: unregistered free ones plus registered
  // ones no table holds (evictable).
  int num_free() const { return int(free_.size()) + lru_size_; }
  int num_used() const { return num_blocks() - num_free(); }
  int num_cached() const { return int(by_hash_.size()); }  // registered, held or not
  int num_evictable() const { return lru_size_; }          // registered, held by no table
  uint64_t num_evictions() const { return evictions_; }
  int ref_count(int32_t block) const;   // throws Error for a block outside the pool
  bool is_cached(int32_t block) const;  // registered in the prefix cache

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
  // has too few free blocks. Unregistered free blocks go first (oldest freed
  // first), then registered ones, least recently used first (evicted).
  bool grow(BlockTable& table, int num_tokens);

  // Drops one reference to every block of `table` and clears it. Throws Error
  // (before changing anything) on a block that is free or outside the pool,
  // so a double free cannot corrupt the pool. Registered blocks that reach
  // zero join the LRU list, the table's last block first (evicted sooner
  // than the prefix blocks other prompts are likelier to share).
  void release(BlockTable& table);

  // Another table sharing the same blocks (each reference count + 1).
  BlockTable fork(const BlockTable& table);

  // Prefix cache lookup for an empty `table`: appends the blocks registered
  // under hashes[0], hashes[1], ... as long as each is found and holds
  // tokens[i * block_size, (i + 1) * block_size); takes a reference to each.
  // Returns the number of blocks matched (0 with the cache off).
  // hashes.size() * block_size <= tokens.size().
  int match(std::span<const uint64_t> hashes, std::span<const int32_t> tokens, BlockTable& table);

  // Registers table[i] under hashes[i] for i in [from, hashes.size()): blocks
  // whose K/V for tokens[i * block_size, (i + 1) * block_size) are computed.
  // A block already registered, or a hash some other block holds, is left
  // as it is (that content stays cached once). No-op with the cache off.
  void cache(const BlockTable& table, std::span<const uint64_t> hashes,
             std::span<const int32_t> tokens, int from);

  // Unregisters the blocks of `table` no other table holds (their K/V may be
  // garbage: a failed step).
  void uncache(const BlockTable& table);

  // Before a write into table[index]: a block shared with another table is
  // replaced by a fresh copy (appended to `copies`, reference moved); a block
  // held by this table alone but registered is unregistered (its content is
  // about to change). Returns false, changing nothing, when a copy is needed
  // and the pool has no free block.
  bool make_writable(BlockTable& table, int index, std::vector<BlockCopy>& copies);

 private:
  void check_block(int32_t block) const;
  int32_t take_free();  // one free block (num_free() > 0), reference count 1
  void unregister(int32_t block);
  void lru_push_back(int32_t block);
  void lru_unlink(int32_t block);

  int block_size_;
  bool prefix_caching_;
  std::vector<int32_t> ref_counts_;  // [num_blocks]; 0 = free (on free_ or the LRU list)
  std::deque<int32_t> free_;         // unregistered free blocks, FIFO: recently freed reused last

  // The prefix cache: the registered blocks, by hash.
  std::unordered_map<uint64_t, int32_t> by_hash_;
  std::vector<uint64_t> hash_;       // [num_blocks] valid where registered_
  std::vector<uint8_t> registered_;  // [num_blocks]
  std::vector<int32_t> tokens_;      // [num_blocks, block_size] a registered block's tokens
  // Registered blocks with no holder, least recently released first: an
  // intrusive doubly linked list (-1 ends it).
  std::vector<int32_t> lru_prev_, lru_next_;
  int32_t lru_head_ = -1, lru_tail_ = -1;
  int lru_size_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace hayate
