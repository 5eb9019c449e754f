// Scheduler tests with no model: a fake step appends a made-up id to every
// sequence the scheduler asked to sample, and a model of the KV pool (what
// each row holds) checks that every sequence attends over its own prefix.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <random>

#include "core/check.h"
#include "core/rng.h"

namespace hayate {
namespace {

// The id a sequence has (or will have) at position p: its prompt, then the
// fake sampler's g + 100 for the g-th generated id.
int32_t real_token(const Sequence& s, int p) {
  return p < s.num_prompt_tokens ? s.tokens[size_t(p)] : p - s.num_prompt_tokens + 100;
}

// What the K/V row of position p of `s` depends on: every id up to p.
uint64_t row_content(const Sequence& s, int p) {
  uint64_t h = 1;
  for (int q = 0; q <= p; ++q) h = mix64(h ^ uint64_t(uint32_t(real_token(s, q))));
  return h;
}

// The pool as the device sees it: block copies first, then each scheduled
// chunk reads positions [0, start_pos) and writes [start_pos, +n) through its
// table. A read of a row that does not hold the sequence's own prefix, or a
// write into a block another table holds, fails the test.
struct KvModel {
  int bs;
  std::vector<uint64_t> rows;  // [num_blocks, bs]; 0 = never written

  KvModel(int num_blocks, int block_size)
      : bs(block_size), rows(size_t(num_blocks) * size_t(block_size), 0) {}

  uint64_t& row(const Sequence& s, int p) {
    return rows[size_t(s.block_table[size_t(p / bs)]) * size_t(bs) + size_t(p % bs)];
  }

  void run(const SchedulerOutput& out, const BlockManager& blocks) {
    for (const BlockCopy& c : out.copies)
      std::copy_n(rows.begin() + ptrdiff_t(c.src) * bs, bs, rows.begin() + ptrdiff_t(c.dst) * bs);
    for (const ScheduledSeq& x : out.seqs)
      for (int p = 0; p < x.start_pos; ++p)
        ASSERT_EQ(row(*x.seq, p), row_content(*x.seq, p))
            << "sequence " << x.seq->id << " reads a foreign row at position " << p;
    for (const ScheduledSeq& x : out.seqs) {
      for (int p = x.start_pos; p < x.start_pos + x.num_tokens; ++p) {
        ASSERT_EQ(blocks.ref_count(x.seq->block_table[size_t(p / bs)]), 1)
            << "sequence " << x.seq->id << " writes a shared block at position " << p;
        row(*x.seq, p) = row_content(*x.seq, p);
      }
    }
  }
};

struct Sim {
  BlockManager blocks;
  Scheduler sched;
  KvModel kv;
  std::vector<std::unique_ptr<Sequence>> seqs;
  uint64_t next_arrival = 0;
  std::vector<uint64_t> finish_order;

  Sim(int num_blocks, int block_size, int max_seqs, int max_tokens, bool prefix_caching = false)
      : blocks(num_blocks, block_size, prefix_caching),
        sched(blocks, {max_seqs, max_tokens}),
        kv(num_blocks, block_size) {}

  Sequence* add(int prompt_len, int max_new) {
    return add(std::vector<int32_t>(size_t(prompt_len), 1), max_new);
  }
  Sequence* add(std::vector<int32_t> prompt, int max_new) {
    auto s = std::make_unique<Sequence>();
    s->id = s->arrival = next_arrival++;
    s->num_prompt_tokens = int(prompt.size());
    s->tokens = std::move(prompt);
    s->stop.max_tokens = max_new;
    sched.add(s.get());
    seqs.push_back(std::move(s));
    return seqs.back().get();
  }
  // `child` will share `parent`'s prompt blocks (the n choices of a request).
  static void link(Sequence* parent, Sequence* child) {
    child->fork_parent = parent;
    parent->fork_children.push_back(child);
  }

  // Each block's reference count is the number of running tables naming it.
  void check_ref_counts() const {
    std::map<int32_t, int> holders;
    for (Sequence* r : sched.running())
      for (int32_t b : r->block_table) ++holders[b];
    int used = 0;
    for (int32_t b = 0; b < blocks.num_blocks(); ++b) {
      EXPECT_EQ(blocks.ref_count(b), holders.count(b) ? holders.at(b) : 0) << "block " << b;
      used += holders.count(b) ? 1 : 0;
    }
    EXPECT_EQ(used, blocks.num_used()) << "blocks held outside running sequences";
  }

  // Nothing held; every block free (cached ones evictable).
  void expect_idle() const {
    EXPECT_EQ(blocks.num_used(), 0);
    EXPECT_EQ(blocks.num_free(), blocks.num_blocks());
    for (int32_t b = 0; b < blocks.num_blocks(); ++b) EXPECT_EQ(blocks.ref_count(b), 0);
  }

  // One step: schedule, check the invariants, commit, "sample", finish.
  SchedulerOutput step() {
    SchedulerOutput out = sched.schedule();
    EXPECT_LE(out.num_tokens, sched.options().max_num_batched_tokens);
    EXPECT_LE(int(out.seqs.size()), sched.options().max_num_seqs);
    check_ref_counts();
    kv.run(out, blocks);
    for (size_t i = 1; i < sched.running().size(); ++i)
      EXPECT_LT(sched.running()[i - 1]->arrival, sched.running()[i]->arrival);
    for (const ScheduledSeq& s : out.seqs) {
      EXPECT_GE(int(s.seq->block_table.size()) * blocks.block_size(), s.start_pos + s.num_tokens);
      EXPECT_GT(s.num_tokens, 0);
    }
    for (Sequence* w : sched.waiting()) EXPECT_TRUE(w->block_table.empty());
    sched.commit(out);
    for (const ScheduledSeq& s : out.seqs) {
      if (!s.sample) continue;
      s.seq->tokens.push_back(int32_t(s.seq->num_generated() + 100));
      if (s.seq->num_generated() >= s.seq->stop.max_tokens) {
        sched.remove(s.seq);
        finish_order.push_back(s.seq->id);
      }
    }
    return out;
  }

  int run(int max_steps = 10000) {
    int steps = 0;
    while (!sched.empty() && steps < max_steps) {
      step();
      ++steps;
    }
    return steps;
  }
};

// The engine's overlapped loop: a step's ids reach the host only after the
// next step was scheduled and committed; until then each sampling sequence
// holds a stand-in (-1) at its end.
struct LaggedSim : Sim {
  using Sim::Sim;
  std::vector<Sequence*> in_flight;  // sampled by the last step, not yet read

  SchedulerOutput step() {
    SchedulerOutput out = sched.schedule();
    check_ref_counts();
    kv.run(out, blocks);
    for (const ScheduledSeq& s : out.seqs) {
      const Sequence& q = *s.seq;
      // Only a decode of the stand-in itself may run before it is read, and
      // never the sequence's last id.
      EXPECT_EQ(s.from_device, q.num_pending == 1) << q.id;
      if (s.from_device) {
        EXPECT_EQ(s.num_tokens, 1);
        EXPECT_EQ(s.start_pos, q.num_tokens() - 1);
        EXPECT_LT(q.num_generated(), q.stop.max_tokens);
      }
      for (int t = s.start_pos; t < s.start_pos + s.num_tokens && !s.from_device; ++t) {
        EXPECT_GE(q.tokens[size_t(t)], 0) << "a stand-in runs as input";
      }
    }
    for (Sequence* w : sched.waiting()) EXPECT_TRUE(w->block_table.empty());
    sched.commit(out);
    std::vector<Sequence*> now;
    for (const ScheduledSeq& s : out.seqs) {
      if (!s.sample) continue;
      s.seq->tokens.push_back(-1);
      ++s.seq->num_pending;
      now.push_back(s.seq);
    }
    for (Sequence* q : in_flight) {  // the previous step's ids arrive
      if (q->status == SeqStatus::kFinished) continue;
      const int at = q->num_tokens() - q->num_pending;
      q->tokens[size_t(at)] = int32_t(at - q->num_prompt_tokens + 100);
      --q->num_pending;
      if (q->num_generated() - q->num_pending >= q->stop.max_tokens) {
        sched.remove(q);
        finish_order.push_back(q->id);
      }
    }
    in_flight = std::move(now);
    return out;
  }

  int run(int max_steps = 10000) {
    int steps = 0;
    while ((!sched.empty() || !in_flight.empty()) && steps < max_steps) {
      step();
      ++steps;
    }
    return steps;
  }
};

TEST(Scheduler, RejectsBadOptions) {
  BlockManager bm(4, 4);
  EXPECT_THROW(Scheduler(bm, {0, 16}), Error);
  EXPECT_THROW(Scheduler(bm, {8, 4}), Error);
}

TEST(Scheduler, ChunkedPrefillThenDecode) {
  Sim sim(64, 4, 4, 4);
  Sequence* s = sim.add(10, 3);
  auto o1 = sim.step();
  ASSERT_EQ(o1.seqs.size(), 1u);
  EXPECT_EQ(o1.seqs[0].start_pos, 0);
  EXPECT_EQ(o1.seqs[0].num_tokens, 4);
  EXPECT_FALSE(o1.seqs[0].sample);
  auto o2 = sim.step();
  EXPECT_EQ(o2.seqs[0].start_pos, 4);
  EXPECT_EQ(o2.seqs[0].num_tokens, 4);
  auto o3 = sim.step();
  EXPECT_EQ(o3.seqs[0].start_pos, 8);
  EXPECT_EQ(o3.seqs[0].num_tokens, 2);
  EXPECT_TRUE(o3.seqs[0].sample);
  EXPECT_EQ(s->num_generated(), 1);
  auto o4 = sim.step();  // decode of the first generated id
  EXPECT_EQ(o4.seqs[0].start_pos, 10);
  EXPECT_EQ(o4.seqs[0].num_tokens, 1);
  EXPECT_TRUE(o4.seqs[0].sample);
  sim.step();
  EXPECT_EQ(s->status, SeqStatus::kFinished);
  EXPECT_EQ(s->num_generated(), 3);
  EXPECT_EQ(sim.blocks.num_used(), 0);
}

TEST(Scheduler, DecodesMixWithPrefillChunkUnderBudget) {
  Sim sim(64, 4, 4, 6);
  Sequence* a = sim.add(3, 50);
  Sequence* b = sim.add(3, 50);
  sim.step();  // both prefill (3 + 3 = 6 tokens), both sample
  ASSERT_EQ(a->num_generated(), 1);
  ASSERT_EQ(b->num_generated(), 1);
  Sequence* c = sim.add(20, 5);
  auto o = sim.step();
  // Two decode ids first, then a 4-token chunk of the newcomer's prompt.
  ASSERT_EQ(o.seqs.size(), 3u);
  EXPECT_EQ(o.seqs[0].seq, a);
  EXPECT_EQ(o.seqs[0].num_tokens, 1);
  EXPECT_EQ(o.seqs[1].seq, b);
  EXPECT_EQ(o.seqs[2].seq, c);
  EXPECT_EQ(o.seqs[2].num_tokens, 4);
  EXPECT_FALSE(o.seqs[2].sample);
  EXPECT_EQ(o.num_tokens, 6);
  // The decodes keep streaming while the long prompt is chunked in.
  for (int i = 0; i < 4; ++i) {
    int before = a->num_generated();
    sim.step();
    EXPECT_EQ(a->num_generated(), before + 1);
  }
  EXPECT_EQ(c->num_computed_tokens, 20);
  EXPECT_EQ(c->num_generated(), 1);
}

TEST(Scheduler, MaxNumSeqsLimitsRunning) {
  Sim sim(64, 4, 2, 64);
  for (int i = 0; i < 5; ++i) sim.add(2, 3);
  auto o = sim.step();
  EXPECT_EQ(o.seqs.size(), 2u);
  EXPECT_EQ(sim.sched.num_running(), 2);
  EXPECT_EQ(sim.sched.num_waiting(), 3);
  sim.run();
  EXPECT_EQ(sim.finish_order.size(), 5u);
}

TEST(Scheduler, FirstComeFirstServedNeverSkipsAhead) {
  // Pool of 4 blocks of 4: the big second request cannot fit while the first
  // runs, and the small third one must not overtake it.
  Sim sim(4, 4, 8, 64);
  sim.add(8, 4);                   // 2 blocks, grows into a 3rd
  Sequence* big = sim.add(12, 2);  // 3 blocks + 1
  Sequence* small = sim.add(1, 1);
  sim.step();
  EXPECT_EQ(big->status, SeqStatus::kWaiting);
  EXPECT_EQ(small->status, SeqStatus::kWaiting);
  while (!sim.sched.empty()) {
    sim.step();
    if (small->status != SeqStatus::kWaiting) {
      EXPECT_NE(big->status, SeqStatus::kWaiting);
    }
  }
  EXPECT_EQ(big->num_generated(), 2);
  EXPECT_EQ(small->num_generated(), 1);
}

TEST(Scheduler, FinishOrderFollowsArrivalForEqualRequests) {
  Sim sim(256, 4, 3, 16);
  for (int i = 0; i < 9; ++i) sim.add(5, 4);
  sim.run();
  std::vector<uint64_t> want(9);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(sim.finish_order, want);
}

TEST(Scheduler, PreemptsNewestAndRecomputes) {
  // 6 blocks of 2 tokens: three sequences of 2 prompt tokens and 4 new ids
  // each want 3 blocks by position 4, so someone must be preempted.
  Sim sim(6, 2, 4, 16);
  Sequence* a = sim.add(2, 4);
  Sequence* b = sim.add(2, 4);
  Sequence* c = sim.add(2, 4);
  sim.step();  // all admitted: 3 blocks
  sim.step();  // each decode (position 2) needs a 2nd block: 6 blocks
  EXPECT_EQ(sim.blocks.num_free(), 0);
  sim.step();           // position 3 still fits
  auto o = sim.step();  // position 4: a's 3rd block evicts c, the newest
  ASSERT_EQ(o.preempted.size(), 1u);
  EXPECT_EQ(o.preempted[0], c);
  EXPECT_EQ(c->status, SeqStatus::kPreempted);
  EXPECT_EQ(c->num_computed_tokens, 0);
  EXPECT_TRUE(c->block_table.empty());
  EXPECT_EQ(sim.sched.waiting().front(), c);
  int c_generated = c->num_generated();
  sim.run();
  EXPECT_EQ(a->num_generated(), 4);
  EXPECT_EQ(b->num_generated(), 4);
  EXPECT_EQ(c->num_generated(), 4);
  EXPECT_GE(c->num_preemptions, 1);
  EXPECT_GE(c_generated, 1);  // it keeps what it generated before preemption
  EXPECT_EQ(sim.blocks.num_used(), 0);
  EXPECT_EQ(sim.finish_order.front(), a->id);
}

TEST(Scheduler, SequencePreemptsItselfWhenItIsTheNewest) {
  // a and b each want 2 blocks of 2 at the end; the pool has 3.
  Sim sim(3, 2, 4, 16);
  Sequence* a = sim.add(2, 2);
  Sequence* b = sim.add(2, 2);
  sim.step();           // 2 blocks
  auto o = sim.step();  // a takes the last block, b has none: b preempts itself
  ASSERT_EQ(o.preempted.size(), 1u);
  EXPECT_EQ(o.preempted[0], b);
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(o.seqs[0].seq, a);
  sim.run();
  EXPECT_EQ(a->num_generated(), 2);
  EXPECT_EQ(b->num_generated(), 2);
  EXPECT_EQ(sim.blocks.num_used(), 0);
}

TEST(Scheduler, RemoveInEveryStateFreesBlocks) {
  Sim sim(6, 2, 3, 3);
  Sequence* a = sim.add(4, 8);  // prefills in chunks of 3
  Sequence* b = sim.add(2, 8);
  Sequence* q = sim.add(2, 8);  // never admitted before removal
  sim.step();                   // a: 3 of 4 prompt tokens (prefilling)
  EXPECT_EQ(a->status, SeqStatus::kRunning);
  EXPECT_LT(a->num_computed_tokens, a->num_prompt_tokens);
  sim.sched.remove(q);  // queued
  EXPECT_EQ(q->status, SeqStatus::kFinished);
  sim.sched.remove(a);  // prefilling
  EXPECT_EQ(sim.blocks.num_used(), 0);
  sim.step();
  sim.step();  // b decoding
  EXPECT_GE(b->num_generated(), 1);
  sim.sched.remove(b);
  EXPECT_EQ(sim.blocks.num_used(), 0);
  EXPECT_TRUE(sim.sched.empty());
}

TEST(Scheduler, RandomWorkloadsCompleteWithoutLeaks) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 20; ++trial) {
    int block_size = 1 + int(rng() % 8);
    int max_seqs = 1 + int(rng() % 6);
    int budget = max_seqs + int(rng() % 20);
    int max_len = 40;
    int num_blocks = (max_len + block_size - 1) / block_size + int(rng() % 20);
    Sim sim(num_blocks, block_size, max_seqs, budget);
    std::vector<Sequence*> all;
    for (int i = 0; i < 12; ++i) {
      int prompt = 1 + int(rng() % 30);
      int out = 1 + int(rng() % (max_len - prompt));
      all.push_back(sim.add(prompt, out));
    }
    int steps = sim.run();
    ASSERT_LT(steps, 10000) << "trial " << trial << " did not finish";
    for (Sequence* s : all) {
      EXPECT_EQ(s->status, SeqStatus::kFinished);
      EXPECT_EQ(s->num_generated(), s->stop.max_tokens);
      for (int g = 0; g < s->num_generated(); ++g) EXPECT_EQ(s->generated()[size_t(g)], g + 100);
    }
    EXPECT_EQ(sim.blocks.num_used(), 0);
  }
}

TEST(Scheduler, AnIdStillOnTheDeviceDecodesFromThereOrWaits) {
  LaggedSim sim(16, 4, 4, 32);
  Sequence* a = sim.add(3, 3);
  sim.step();  // a's prompt; its first id is in flight
  EXPECT_EQ(a->num_pending, 1);
  auto o = sim.step();  // a decodes that id from the device; the first id arrives
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_TRUE(o.seqs[0].from_device);
  EXPECT_EQ(a->num_generated(), 2);
  EXPECT_EQ(a->num_pending, 1);
  o = sim.step();  // a decodes its second id, sampling its third (its last); the second arrives
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(a->num_generated(), 3);
  o = sim.step();  // a's last id is not run: nothing is scheduled; the last arrives
  EXPECT_TRUE(o.seqs.empty());
  EXPECT_EQ(a->status, SeqStatus::kFinished);
  EXPECT_EQ(sim.blocks.num_used(), 0);
  EXPECT_EQ((std::vector<int32_t>(a->generated().begin(), a->generated().end())),
            (std::vector<int32_t>{100, 101, 102}));
}

TEST(Scheduler, APreemptedSequenceWaitsForItsIdInFlight) {
  // 3 blocks of 2: b preempts itself at its 2nd decode while its id is in flight.
  LaggedSim sim(3, 2, 4, 16);
  Sequence* a = sim.add(2, 3);
  Sequence* b = sim.add(2, 3);
  sim.step();
  auto o = sim.step();  // a takes the last block; b (stand-in in flight) is preempted
  ASSERT_EQ(o.preempted.size(), 1u);
  EXPECT_EQ(o.preempted[0], b);
  EXPECT_EQ(b->num_pending, 0);  // its id arrived at the end of that step
  sim.run();
  EXPECT_EQ(a->num_generated(), 3);
  EXPECT_EQ(b->num_generated(), 3);
  for (Sequence* s : {a, b})
    for (int g = 0; g < 3; ++g) EXPECT_EQ(s->generated()[size_t(g)], g + 100);
  EXPECT_EQ(sim.blocks.num_used(), 0);
}

TEST(Scheduler, RandomWorkloadsCompleteWithoutLeaksWhenIdsLag) {
  std::mt19937 rng(4321);
  for (int trial = 0; trial < 20; ++trial) {
    int block_size = 1 + int(rng() % 8);
    int max_seqs = 1 + int(rng() % 6);
    int budget = max_seqs + int(rng() % 20);
    int max_len = 40;
    int num_blocks = (max_len + block_size - 1) / block_size + int(rng() % 20);
    LaggedSim sim(num_blocks, block_size, max_seqs, budget);
    std::vector<Sequence*> all;
    for (int i = 0; i < 12; ++i) {
      int prompt = 1 + int(rng() % 30);
      int out = 1 + int(rng() % (max_len - prompt));
      all.push_back(sim.add(prompt, out));
    }
    int steps = sim.run();
    ASSERT_LT(steps, 10000) << "trial " << trial << " did not finish";
    for (Sequence* s : all) {
      EXPECT_EQ(s->status, SeqStatus::kFinished);
      EXPECT_EQ(s->num_pending, 0);
      EXPECT_EQ(s->num_generated(), s->stop.max_tokens);
      for (int g = 0; g < s->num_generated(); ++g) EXPECT_EQ(s->generated()[size_t(g)], g + 100);
    }
    EXPECT_EQ(sim.blocks.num_used(), 0);
  }
}

TEST(Scheduler, PromptLogitsChunksFitTheStepsLogitsRows) {
  BlockManager blocks(64, 4);
  Scheduler sched(blocks, {2, 64, 8});  // 8 logits rows per step
  Sequence a, b;
  for (Sequence* s : {&a, &b}) {
    s->tokens.assign(20, 1);
    s->num_prompt_tokens = 20;
    s->stop.max_tokens = 0;
    s->prompt_logits = true;
  }
  a.id = a.arrival = 0;
  b.id = b.arrival = 1;
  sched.add(&a);
  sched.add(&b);
  SchedulerOutput o = sched.schedule();  // a takes all 8 rows; b waits (FCFS)
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(o.seqs[0].num_tokens, 8);
  EXPECT_TRUE(o.seqs[0].all_logits);
  sched.commit(o);
  int steps = 1;
  while (a.num_computed_tokens < 20 || b.num_computed_tokens < 20) {
    o = sched.schedule();
    int rows = 0;
    for (const ScheduledSeq& s : o.seqs) rows += s.all_logits ? s.num_tokens : s.sample ? 1 : 0;
    EXPECT_LE(rows, 8);
    EXPECT_GT(rows, 0);
    sched.commit(o);
    ASSERT_LT(++steps, 20);
  }
  EXPECT_EQ(steps, 5);  // 40 rows, 8 a step
  EXPECT_THROW(Scheduler(blocks, {4, 64, 2}), Error);  // fewer rows than sequences
}

// ---- prefix cache and shared blocks ---------------------------------------------

std::vector<int32_t> ids(int n, int first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

TEST(SchedulerPrefixCache, ALaterPromptStartsAfterItsCachedFullBlocks) {
  Sim sim(64, 4, 4, 64, /*prefix_caching=*/true);
  Sequence* a = sim.add(ids(10, 1000), 2);
  sim.run();
  EXPECT_EQ(a->num_cached_tokens, 0);
  EXPECT_EQ(sim.sched.prefix_cache_queries(), 10u);
  EXPECT_EQ(sim.sched.prefix_cache_hits(), 0u);
  sim.expect_idle();
  EXPECT_EQ(sim.blocks.num_cached(), 2);  // positions 0-7 (8-10 never fill a block)

  Sequence* b = sim.add(ids(10, 1000), 2);
  auto o = sim.step();
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(o.seqs[0].start_pos, 8);  // 2 full blocks cached
  EXPECT_EQ(o.seqs[0].num_tokens, 2);
  EXPECT_TRUE(o.seqs[0].sample);
  EXPECT_EQ(b->num_cached_tokens, 8);
  EXPECT_EQ(sim.sched.prefix_cache_queries(), 20u);
  EXPECT_EQ(sim.sched.prefix_cache_hits(), 8u);
  sim.run();
  EXPECT_EQ(b->num_generated(), 2);
  sim.expect_idle();
}

TEST(SchedulerPrefixCache, AFullyCachedPromptStillRunsItsLastBlock) {
  Sim sim(64, 4, 4, 64, true);
  sim.add(ids(8, 7), 1);
  sim.run();
  sim.add(ids(8, 7), 1);
  auto o = sim.step();
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(o.seqs[0].start_pos, 4);  // block 1 holds the last token: it runs again
  EXPECT_EQ(o.seqs[0].num_tokens, 4);
  EXPECT_TRUE(o.seqs[0].sample);
  sim.run();
  sim.expect_idle();
}

TEST(SchedulerPrefixCache, GeneratedBlocksAreCachedForTheNextTurn) {
  Sim sim(64, 4, 4, 64, true);
  Sequence* a = sim.add(ids(6, 50), 6);  // 6 + 6 ids; the last one is never run
  sim.run();
  // The next turn resends the conversation (prompt + answer) and a question.
  std::vector<int32_t> turn2(a->tokens.begin(), a->tokens.end());
  for (int32_t t : ids(5, 900)) turn2.push_back(t);
  Sequence* b = sim.add(turn2, 2);
  auto o = sim.step();
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(o.seqs[0].start_pos, 8);  // 11 of a's 12 ids computed: 2 full blocks
  EXPECT_EQ(b->num_cached_tokens, 8);
  sim.run();
  sim.expect_idle();
}

TEST(SchedulerPrefixCache, OffNeverMatches) {
  Sim sim(64, 4, 4, 64, false);
  sim.add(ids(10, 1), 2);
  sim.run();
  Sequence* b = sim.add(ids(10, 1), 2);
  auto o = sim.step();
  EXPECT_EQ(o.seqs[0].start_pos, 0);
  EXPECT_EQ(b->num_cached_tokens, 0);
  EXPECT_EQ(sim.sched.prefix_cache_queries(), 0u);
  sim.run();
  sim.expect_idle();
}

TEST(SchedulerPrefixCache, PromptsInOneStepComputeTheirOwnAndTheLaterOneShares) {
  Sim sim(64, 4, 4, 64, true);
  Sequence* a = sim.add(ids(9, 1), 10);
  Sequence* b = sim.add(ids(9, 1), 10);
  auto o = sim.step();  // both admitted before either is computed
  ASSERT_EQ(o.seqs.size(), 2u);
  EXPECT_EQ(o.seqs[1].start_pos, 0);
  sim.step();
  EXPECT_EQ(sim.blocks.num_cached(), 2);  // one copy of each hash (a's)
  EXPECT_TRUE(sim.blocks.is_cached(a->block_table[0]));
  EXPECT_FALSE(sim.blocks.is_cached(b->block_table[0]));
  Sequence* c = sim.add(ids(9, 1), 3);
  o = sim.step();
  EXPECT_EQ(c->block_table[0], a->block_table[0]);
  EXPECT_EQ(c->block_table[1], a->block_table[1]);
  EXPECT_EQ(sim.blocks.ref_count(a->block_table[0]), 2);
  sim.run();
  sim.expect_idle();
}

TEST(SchedulerPrefixCache, PromptLogitsSequencesSkipTheLookup) {
  Sim sim(64, 4, 4, 64, true);
  sim.add(ids(10, 1), 1);
  sim.run();
  Sequence* b = sim.add(ids(10, 1), 1);
  b->prompt_logits = true;
  auto o = sim.step();
  EXPECT_EQ(o.seqs[0].start_pos, 0);
  EXPECT_TRUE(o.seqs[0].all_logits);
  EXPECT_EQ(b->num_cached_tokens, 0);
  sim.run();
  sim.expect_idle();
}

TEST(SchedulerPrefixCache, ChoicesForkTheirParentsPromptAndCopyThePartialBlock) {
  Sim sim(64, 4, 8, 64, true);
  Sequence* p = sim.add(ids(10, 300), 4);
  Sequence* c1 = sim.add(ids(10, 300), 4);
  Sequence* c2 = sim.add(ids(10, 300), 4);
  Sim::link(p, c1);
  Sim::link(p, c2);
  auto o = sim.step();  // the parent's prompt; the choices wait for it
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(o.seqs[0].seq, p);
  EXPECT_EQ(sim.sched.num_waiting(), 2);
  o = sim.step();  // the parent decodes; each choice runs its last prompt token
  ASSERT_EQ(o.seqs.size(), 3u);
  for (int i : {1, 2}) {
    EXPECT_EQ(o.seqs[size_t(i)].start_pos, 9);
    EXPECT_EQ(o.seqs[size_t(i)].num_tokens, 1);
    EXPECT_TRUE(o.seqs[size_t(i)].sample);
  }
  // Blocks 0 and 1 (positions 0-7) shared by all three; block 2 copied for each choice.
  ASSERT_EQ(o.copies.size(), 2u);
  EXPECT_EQ(o.copies[0].src, p->block_table[2]);
  EXPECT_EQ(o.copies[1].src, p->block_table[2]);
  EXPECT_EQ(o.copies[0].dst, c1->block_table[2]);
  EXPECT_EQ(o.copies[1].dst, c2->block_table[2]);
  for (int b : {0, 1}) {
    EXPECT_EQ(c1->block_table[size_t(b)], p->block_table[size_t(b)]);
    EXPECT_EQ(sim.blocks.ref_count(p->block_table[size_t(b)]), 3);
  }
  EXPECT_EQ(c1->num_cached_tokens, 9);
  EXPECT_TRUE(p->fork_children.empty());
  EXPECT_EQ(c1->fork_parent, nullptr);
  sim.run();
  for (Sequence* s : {p, c1, c2}) EXPECT_EQ(s->num_generated(), 4);
  sim.expect_idle();
}

TEST(SchedulerPrefixCache, AChoiceWhoseParentEndedUsesTheCache) {
  Sim sim(64, 4, 8, 64, true);
  Sequence* p = sim.add(ids(10, 300), 4);
  Sequence* c = sim.add(ids(10, 300), 4);
  Sim::link(p, c);
  sim.step();
  sim.sched.remove(p);  // aborted before the choice forked
  EXPECT_EQ(c->fork_parent, nullptr);
  auto o = sim.step();
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(o.seqs[0].start_pos, 8);  // the parent's full blocks, from the cache
  EXPECT_TRUE(o.copies.empty());
  sim.run();
  sim.expect_idle();
}

TEST(SchedulerPrefixCache, AbortingOrPreemptingASharerKeepsTheOthersBlocks) {
  // a computes a prompt of 3 blocks; b shares 2 of them; a is aborted.
  Sim sim(64, 4, 4, 64, true);
  Sequence* a = sim.add(ids(12, 1), 20);
  sim.step();
  Sequence* b = sim.add(ids(12, 1), 20);
  sim.step();
  ASSERT_EQ(b->block_table[0], a->block_table[0]);
  const int32_t shared = b->block_table[0];
  sim.sched.remove(a);
  EXPECT_EQ(sim.blocks.ref_count(shared), 1);
  sim.run();  // b reads its prefix (the model of the pool checks it)
  EXPECT_EQ(b->num_generated(), 20);
  sim.expect_idle();

  // 7 blocks of 4: a and b share their prompt's first 2 blocks; growing
  // makes the scheduler preempt b (the newest), which must not free them.
  Sim small(7, 4, 4, 64, true);
  a = small.add(ids(9, 1), 12);
  small.step();
  b = small.add(ids(9, 1), 12);
  int preempted = 0;
  while (!small.sched.empty()) {
    auto o = small.step();
    preempted += int(o.preempted.size());
    ASSERT_LT(small.sched.num_preemptions(), 50u);
  }
  EXPECT_GT(preempted, 0);
  EXPECT_EQ(a->num_generated(), 12);
  EXPECT_EQ(b->num_generated(), 12);
  small.expect_idle();
}

// Random prompts from a few shared prefixes, some requests with choices,
// aborts, small pools (preemption), ids lagging a step: every sequence reads
// only its own prefix (KvModel), generates all its ids, and the pool is idle
// at the end.
TEST(SchedulerPrefixCache, RandomSharedWorkloadsWithLagAndAborts) {
  std::mt19937 rng(99);
  uint64_t hits = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int block_size = 1 + int(rng() % 6);
    const int max_seqs = 1 + int(rng() % 6);
    const int budget = max_seqs + int(rng() % 20);
    const int max_len = 40;
    const int num_blocks = (max_len + block_size - 1) / block_size + int(rng() % 24);
    LaggedSim sim(num_blocks, block_size, max_seqs, budget, true);
    std::vector<Sequence*> all, aborted;
    std::vector<std::vector<int32_t>> prefixes;
    for (int k = 0; k < 3; ++k) prefixes.push_back(ids(1 + int(rng() % 20), 1000 * (k + 1)));
    for (int i = 0; i < 14; ++i) {
      std::vector<int32_t> prompt = prefixes[rng() % 3];
      const int tail = int(rng() % 8);
      for (int t = 0; t < tail; ++t) prompt.push_back(int32_t(rng() % 4));
      const int out = 1 + int(rng() % (max_len - int(prompt.size())));
      Sequence* parent = sim.add(prompt, out);
      all.push_back(parent);
      if (rng() % 4 == 0) {  // a request with choices
        Sequence* c = sim.add(prompt, out);
        Sim::link(parent, c);
        all.push_back(c);
      }
    }
    int steps = 0;
    while ((!sim.sched.empty() || !sim.in_flight.empty()) && steps < 10000) {
      sim.step();
      ++steps;
      if (rng() % 16 == 0 && !sim.sched.running().empty()) {
        Sequence* victim = sim.sched.running()[rng() % sim.sched.running().size()];
        sim.sched.remove(victim);
        aborted.push_back(victim);
      }
    }
    ASSERT_LT(steps, 10000) << "trial " << trial << " did not finish";
    for (Sequence* s : all) {
      EXPECT_EQ(s->status, SeqStatus::kFinished);
      if (std::find(aborted.begin(), aborted.end(), s) != aborted.end()) continue;
      EXPECT_EQ(s->num_generated(), s->stop.max_tokens);
      for (int g = 0; g < s->num_generated(); ++g) EXPECT_EQ(s->generated()[size_t(g)], g + 100);
    }
    sim.expect_idle();
    hits += sim.sched.prefix_cache_hits();
  }
  EXPECT_GT(hits, 0u);
}

}  // namespace
}  // namespace hayate
