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

}  // namespace
}  // namespace hayate
