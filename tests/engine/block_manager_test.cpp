#include "engine/block_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/check.h"

namespace hayate {
namespace {

TEST(BlockManager, RejectsBadSizes) {
  EXPECT_THROW(BlockManager(0, 16), Error);
  EXPECT_THROW(BlockManager(4, 0), Error);
}

TEST(BlockManager, GrowAllocatesOnBlockBoundaries) {
  BlockManager bm(8, 4);
  BlockTable t;
  EXPECT_TRUE(bm.grow(t, 1));
  EXPECT_EQ(t.size(), 1u);
  EXPECT_TRUE(bm.grow(t, 4));  // still inside the first block
  EXPECT_EQ(t.size(), 1u);
  EXPECT_TRUE(bm.grow(t, 5));  // crosses into a second block
  EXPECT_EQ(t.size(), 2u);
  EXPECT_TRUE(bm.grow(t, 3));  // shrinking requests are no-ops
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(bm.num_used(), 2);
  EXPECT_EQ(bm.num_free(), 6);
  EXPECT_EQ(bm.blocks_for(0), 0);
  EXPECT_EQ(bm.blocks_for(9), 3);
}

TEST(BlockManager, GrowIsAllOrNothing) {
  BlockManager bm(3, 4);
  BlockTable a, b;
  ASSERT_TRUE(bm.grow(a, 8));  // 2 blocks
  EXPECT_FALSE(bm.can_grow(b, 8));
  EXPECT_FALSE(bm.grow(b, 8));  // needs 2, only 1 free
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(bm.num_free(), 1);
  EXPECT_TRUE(bm.grow(b, 4));
  EXPECT_EQ(bm.num_free(), 0);
}

TEST(BlockManager, DistinctBlocksAndReleaseReturnsAll) {
  BlockManager bm(16, 2);
  std::vector<BlockTable> tables(4);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(bm.grow(tables[size_t(i)], 2 * (i + 1)));
  std::set<int32_t> seen;
  for (auto& t : tables)
    for (int32_t b : t) EXPECT_TRUE(seen.insert(b).second) << "block " << b << " handed out twice";
  EXPECT_EQ(bm.num_used(), 1 + 2 + 3 + 4);
  for (auto& t : tables) bm.release(t);
  EXPECT_EQ(bm.num_used(), 0);
  EXPECT_EQ(bm.num_free(), 16);
  for (auto& t : tables) EXPECT_TRUE(t.empty());
}

TEST(BlockManager, ReferenceCountsWithFork) {
  BlockManager bm(4, 4);
  BlockTable a;
  ASSERT_TRUE(bm.grow(a, 8));
  BlockTable b = bm.fork(a);
  EXPECT_EQ(b, a);
  EXPECT_EQ(bm.ref_count(a[0]), 2);
  bm.release(a);
  EXPECT_EQ(bm.num_used(), 2);  // b still holds them
  EXPECT_EQ(bm.ref_count(b[0]), 1);
  bm.release(b);
  EXPECT_EQ(bm.num_used(), 0);
}

TEST(BlockManager, DoubleFreeIsAnErrorAndLeavesPoolIntact) {
  BlockManager bm(4, 4);
  BlockTable a;
  ASSERT_TRUE(bm.grow(a, 4));
  BlockTable copy = a;
  bm.release(a);
  EXPECT_THROW(bm.release(copy), Error);
  EXPECT_EQ(bm.num_free(), 4);
  BlockTable bad{7};
  EXPECT_THROW(bm.release(bad), Error);
  EXPECT_THROW(bm.ref_count(-1), Error);
}

TEST(BlockManager, FreedBlocksAreReusable) {
  BlockManager bm(2, 1);
  for (int round = 0; round < 5; ++round) {
    BlockTable t;
    ASSERT_TRUE(bm.grow(t, 2));
    EXPECT_FALSE(bm.grow(t, 3));
    bm.release(t);
  }
  EXPECT_EQ(bm.num_free(), 2);
}

// ---- prefix cache --------------------------------------------------------------

// The chained hashes of the full blocks of `tokens`.
std::vector<uint64_t> hashes_of(const std::vector<int32_t>& tokens, int bs) {
  std::vector<uint64_t> h;
  for (size_t i = 0; (i + 1) * size_t(bs) <= tokens.size(); ++i)
    h.push_back(block_hash(h.empty() ? 0 : h.back(),
                           std::span<const int32_t>(tokens).subspan(i * size_t(bs), size_t(bs))));
  return h;
}

std::vector<int32_t> iota_tokens(int n, int first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = first + i;
  return t;
}

// Every block free and no reference left: the pool is idle.
void expect_idle(const BlockManager& bm) {
  EXPECT_EQ(bm.num_used(), 0);
  EXPECT_EQ(bm.num_free(), bm.num_blocks());
  for (int32_t b = 0; b < bm.num_blocks(); ++b) EXPECT_EQ(bm.ref_count(b), 0) << "block " << b;
}

TEST(BlockHash, ChainsOverTokensOrderAndPrefix) {
  const std::vector<int32_t> a{1, 2, 3, 4}, b{1, 2, 3, 5}, c{2, 1, 3, 4};
  EXPECT_EQ(block_hash(0, a), block_hash(0, a));
  EXPECT_NE(block_hash(0, a), block_hash(0, b));
  EXPECT_NE(block_hash(0, a), block_hash(0, c));  // order matters
  EXPECT_NE(block_hash(0, a), block_hash(block_hash(0, a), a));  // so does the prefix
  // Equal second blocks after different first blocks hash differently.
  const std::vector<int32_t> x{9, 9, 9, 9, 1, 2, 3, 4}, y{8, 8, 8, 8, 1, 2, 3, 4};
  EXPECT_NE(hashes_of(x, 4)[1], hashes_of(y, 4)[1]);
  EXPECT_EQ(hashes_of(x, 4).size(), 2u);
  EXPECT_EQ(hashes_of(iota_tokens(7, 0), 4).size(), 1u);  // a partial block has no hash
}

TEST(PrefixCache, OffMatchesNothingAndCachesNothing) {
  BlockManager bm(8, 4);
  const auto tok = iota_tokens(8, 0);
  const auto h = hashes_of(tok, 4);
  BlockTable a;
  ASSERT_TRUE(bm.grow(a, 8));
  bm.cache(a, h, tok, 0);
  EXPECT_EQ(bm.num_cached(), 0);
  bm.release(a);
  BlockTable b;
  EXPECT_EQ(bm.match(h, tok, b), 0);
  EXPECT_TRUE(b.empty());
  expect_idle(bm);
}

TEST(PrefixCache, ReleasedBlocksStayCachedAndAreShared) {
  BlockManager bm(8, 4, true);
  const auto tok = iota_tokens(10, 100);  // 2 full blocks + 2 tokens
  const auto h = hashes_of(tok, 4);
  BlockTable a;
  ASSERT_TRUE(bm.grow(a, 10));
  bm.cache(a, h, tok, 0);
  EXPECT_EQ(bm.num_cached(), 2);
  EXPECT_TRUE(bm.is_cached(a[0]) && bm.is_cached(a[1]) && !bm.is_cached(a[2]));

  // A second table shares the two full blocks while the first holds them.
  BlockTable b;
  EXPECT_EQ(bm.match(h, tok, b), 2);
  EXPECT_EQ(b, BlockTable(a.begin(), a.begin() + 2));
  EXPECT_EQ(bm.ref_count(a[0]), 2);
  EXPECT_EQ(bm.num_used(), 3);

  // Both let go: the full blocks stay cached (evictable), the partial one is free.
  const BlockTable old = a;
  bm.release(a);
  bm.release(b);
  EXPECT_EQ(bm.num_cached(), 2);
  EXPECT_EQ(bm.num_evictable(), 2);
  expect_idle(bm);

  // A later table finds them with no holder: taken off the LRU list.
  BlockTable c;
  EXPECT_EQ(bm.match(h, tok, c), 2);
  EXPECT_EQ(c, BlockTable(old.begin(), old.begin() + 2));
  EXPECT_EQ(bm.num_evictable(), 0);
  EXPECT_EQ(bm.num_used(), 2);
  bm.release(c);
  expect_idle(bm);
}

TEST(PrefixCache, MatchStopsAtTheFirstMissAndChecksTokens) {
  BlockManager bm(8, 4, true);
  const auto tok = iota_tokens(12, 0);
  const auto h = hashes_of(tok, 4);
  BlockTable a;
  ASSERT_TRUE(bm.grow(a, 12));
  bm.cache(a, std::span<const uint64_t>(h).first(1), tok, 0);  // block 0 only
  BlockTable b;
  EXPECT_EQ(bm.match(h, tok, b), 1);
  bm.release(b);
  // A hash that names a block holding other tokens (a collision) is a miss.
  auto other = tok;
  other[1] = 77;
  BlockTable c;
  EXPECT_EQ(bm.match(h, other, c), 0);
  // A different first block: nothing, although block 1's tokens are equal.
  other = tok;
  other[0] = 55;
  EXPECT_EQ(bm.match(hashes_of(other, 4), other, c), 0);
  bm.release(a);
  expect_idle(bm);
}

TEST(PrefixCache, AHashIsRegisteredOnce) {
  BlockManager bm(8, 4, true);
  const auto tok = iota_tokens(4, 0);
  const auto h = hashes_of(tok, 4);
  BlockTable a, b;
  ASSERT_TRUE(bm.grow(a, 4));
  ASSERT_TRUE(bm.grow(b, 4));  // the same content computed twice (same step)
  bm.cache(a, h, tok, 0);
  bm.cache(b, h, tok, 0);
  EXPECT_TRUE(bm.is_cached(a[0]));
  EXPECT_FALSE(bm.is_cached(b[0]));
  EXPECT_EQ(bm.num_cached(), 1);
  bm.release(b);  // unregistered: plain free
  EXPECT_EQ(bm.num_evictable(), 0);
  bm.release(a);
  EXPECT_EQ(bm.num_evictable(), 1);
  expect_idle(bm);
}

TEST(PrefixCache, EvictsOnlyWhenNoPlainFreeBlockIsLeftAndLeastRecentFirst) {
  // 6 blocks of 2: three tables of 2 cached blocks each, released A, B, C.
  BlockManager bm(6, 2, true);
  std::vector<std::vector<int32_t>> tok = {iota_tokens(4, 0), iota_tokens(4, 10),
                                           iota_tokens(4, 20)};
  std::vector<BlockTable> t(3);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(bm.grow(t[size_t(i)], 4));
    bm.cache(t[size_t(i)], hashes_of(tok[size_t(i)], 2), tok[size_t(i)], 0);
  }
  const std::vector<BlockTable> held = t;
  for (auto& x : t) bm.release(x);
  EXPECT_EQ(bm.num_cached(), 6);
  EXPECT_EQ(bm.num_evictable(), 6);

  // Touch B again (match, release): it becomes the most recently used.
  BlockTable b;
  ASSERT_EQ(bm.match(hashes_of(tok[1], 2), tok[1], b), 2);
  bm.release(b);

  // New blocks evict A first (its last block before its first), then C, then B.
  BlockTable n;
  ASSERT_TRUE(bm.grow(n, 2));
  EXPECT_EQ(n.back(), held[0][1]);
  ASSERT_TRUE(bm.grow(n, 4));
  EXPECT_EQ(n.back(), held[0][0]);
  ASSERT_TRUE(bm.grow(n, 6));
  EXPECT_EQ(n.back(), held[2][1]);
  EXPECT_EQ(bm.num_evictions(), 3u);
  BlockTable miss;
  EXPECT_EQ(bm.match(hashes_of(tok[0], 2), tok[0], miss), 0);  // A is gone
  EXPECT_EQ(bm.match(hashes_of(tok[1], 2), tok[1], miss), 2);  // B is not
  bm.release(miss);
  bm.release(n);
  expect_idle(bm);

  // Plain free blocks go before any cached one.
  BlockManager bm2(4, 2, true);
  BlockTable c1, p1;
  const auto t1 = iota_tokens(2, 5);
  ASSERT_TRUE(bm2.grow(c1, 2));
  bm2.cache(c1, hashes_of(t1, 2), t1, 0);
  bm2.release(c1);  // cached, evictable
  ASSERT_TRUE(bm2.grow(p1, 6));  // the three plain ones
  EXPECT_EQ(bm2.num_evictions(), 0u);
  EXPECT_EQ(bm2.num_cached(), 1);
  ASSERT_TRUE(bm2.grow(p1, 8));  // now the cached one
  EXPECT_EQ(bm2.num_evictions(), 1u);
  EXPECT_EQ(bm2.num_cached(), 0);
  bm2.release(p1);
  expect_idle(bm2);
}

TEST(PrefixCache, CopyOnWriteOfASharedBlock) {
  BlockManager bm(6, 4, true);
  BlockTable a;
  ASSERT_TRUE(bm.grow(a, 6));  // 2 blocks, the second partial
  BlockTable b = bm.fork(a);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(bm.make_writable(b, 1, copies));  // shared: b gets a copy
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, a[1]);
  EXPECT_EQ(copies[0].dst, b[1]);
  EXPECT_NE(a[1], b[1]);
  EXPECT_EQ(b[0], a[0]);
  EXPECT_EQ(bm.ref_count(a[1]), 1);
  EXPECT_EQ(bm.ref_count(b[1]), 1);
  EXPECT_EQ(bm.ref_count(a[0]), 2);
  ASSERT_TRUE(bm.make_writable(a, 1, copies));  // a holds its block alone now: no copy
  EXPECT_EQ(copies.size(), 1u);
  bm.release(a);
  bm.release(b);
  expect_idle(bm);
}

TEST(PrefixCache, CopyOnWriteNeedsAFreeBlockAndUnregistersALoneBlock) {
  BlockManager bm(2, 4, true);
  BlockTable a;
  ASSERT_TRUE(bm.grow(a, 8));
  BlockTable b = bm.fork(a);
  std::vector<BlockCopy> copies;
  const BlockTable before = b;
  EXPECT_FALSE(bm.make_writable(b, 0, copies));  // no free block: nothing changes
  EXPECT_EQ(b, before);
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(bm.ref_count(a[0]), 2);
  bm.release(b);

  const auto tok = iota_tokens(8, 0);
  bm.cache(a, hashes_of(tok, 4), tok, 0);
  ASSERT_TRUE(bm.make_writable(a, 1, copies));  // alone: written in place, no longer cached
  EXPECT_TRUE(copies.empty());
  EXPECT_FALSE(bm.is_cached(a[1]));
  EXPECT_TRUE(bm.is_cached(a[0]));
  EXPECT_EQ(bm.num_cached(), 1);
  bm.release(a);
  expect_idle(bm);
}

TEST(PrefixCache, UncacheLeavesSharedBlocks) {
  BlockManager bm(4, 2, true);
  const auto tok = iota_tokens(4, 0);
  BlockTable a;
  ASSERT_TRUE(bm.grow(a, 4));
  bm.cache(a, hashes_of(tok, 2), tok, 0);
  BlockTable b;
  ASSERT_EQ(bm.match(std::span<const uint64_t>(hashes_of(tok, 2)).first(1), tok, b), 1);
  bm.uncache(a);  // a failed: block 1 is its alone, block 0 is b's too
  EXPECT_TRUE(bm.is_cached(a[0]));
  EXPECT_FALSE(bm.is_cached(a[1]));
  bm.release(a);
  bm.release(b);
  EXPECT_EQ(bm.num_cached(), 1);
  expect_idle(bm);
}

}  // namespace
}  // namespace hayate
