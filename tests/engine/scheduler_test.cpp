// Scheduler tests with no model: a fake step appends a made-up id to every
// sequence the scheduler asked to sample.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>

#include "core/check.h"

namespace hayate {
namespace {

struct Sim {
  BlockManager blocks;
  Scheduler sched;
  std::vector<std::unique_ptr<Sequence>> seqs;
  uint64_t next_arrival = 0;
  std::vector<uint64_t> finish_order;

  Sim(int num_blocks, int block_size, int max_seqs, int max_tokens)
      : blocks(num_blocks, block_size), sched(blocks, {max_seqs, max_tokens}) {}

  Sequence* add(int prompt_len, int max_new) {
    auto s = std::make_unique<Sequence>();
    s->id = s->arrival = next_arrival++;
    s->tokens.assign(size_t(prompt_len), 1);
    s->num_prompt_tokens = prompt_len;
    s->stop.max_tokens = max_new;
    sched.add(s.get());
    seqs.push_back(std::move(s));
    return seqs.back().get();
  }

  // One step: schedule, check the invariants, commit, "sample", finish.
  SchedulerOutput step() {
    SchedulerOutput out = sched.schedule();
    EXPECT_LE(out.num_tokens, sched.options().max_num_batched_tokens);
    EXPECT_LE(int(out.seqs.size()), sched.options().max_num_seqs);
    int used = 0;
    for (Sequence* r : sched.running()) used += int(r->block_table.size());
    EXPECT_EQ(used, blocks.num_used()) << "blocks held outside running sequences";
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

}  // namespace
}  // namespace hayate
