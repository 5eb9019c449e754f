// The batching engine on the CPU paged backend against one sequence stepped
// by hand: identical greedy (and seeded) ids whatever else is in the batch,
// across chunked prefill, forced preemption and steps launched before the
// previous one's ids were read; aborts in every state (a step in flight
// included) return every block; a sequence that stops while its next step
// is in flight wastes that one step; bad requests are rejected at submission.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "core/check.h"
#include "engine/block_manager.h"
#include "engine_fixture.h"

namespace hayate::testing_engine {
namespace {

struct Case {
  std::vector<int32_t> prompt;
  int max_tokens;
  RequestId id = 0;
};

// Submits all cases, runs to completion and checks every request against the
// single-sequence oracle. Returns the engine's final stats.
EngineStats run_and_compare(Engine& engine, std::vector<Case>& cases,
                            const SamplingParams& p = {}) {
  Sink sink;
  for (Case& c : cases) {
    EngineRequest r = EngineTest::request(c.prompt, c.max_tokens, sink);
    r.sampling = p;
    c.id = engine.submit(std::move(r));
  }
  engine.run_until_idle();
  for (const Case& c : cases) {
    Collected got = sink.get(c.id);
    EXPECT_EQ(got.finals, 1);
    EXPECT_FALSE(got.event_after_final);
    EXPECT_EQ(got.finish, FinishReason::kLength);
    EXPECT_EQ(got.error, "");
    EXPECT_EQ(got.prompt_tokens, int(c.prompt.size()));
    EXPECT_EQ(got.completion_tokens, c.max_tokens);
    EXPECT_EQ(got.ids, EngineTest::reference(c.prompt, c.max_tokens, p))
        << "request " << c.id << " (prompt " << c.prompt.size() << " tokens)";
  }
  EngineStats s = engine.stats();
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.num_running, 0);
  EXPECT_EQ(s.num_waiting, 0);
  return s;
}

std::vector<Case> mixed_cases(uint32_t seed, int count) {
  std::mt19937 rng(seed);
  std::vector<Case> cases;
  for (int i = 0; i < count; ++i) {
    Case c;
    c.prompt.resize(size_t(1 + rng() % 40));
    for (int32_t& id : c.prompt) id = int32_t(rng() % 512);
    c.max_tokens = 1 + int(rng() % 12);
    cases.push_back(std::move(c));
  }
  return cases;
}

// Counts what the backend ran per request and how many steps were launched
// before the previous one was finished.
class CountingBackend final : public BatchBackend {
 public:
  explicit CountingBackend(BatchBackend& inner) : inner_(inner) {}
  std::string name() const override { return "counting"; }
  const ModelConfig& config() const override { return inner_.config(); }
  int num_blocks() const override { return inner_.num_blocks(); }
  int block_size() const override { return inner_.block_size(); }
  int max_model_len() const override { return inner_.max_model_len(); }
  int max_logit_rows() const override { return inner_.max_logit_rows(); }
  double weight_bytes_per_token() const override { return 0.0; }
  void launch(const Batch& batch) override {
    for (const BatchSeq& s : batch.seqs) {
      tokens_run[s.seq_id] += int(s.tokens.size());
      from_device += s.prev_slot >= 0 ? 1 : 0;
    }
    overlapped += unfinished > 0 ? 1 : 0;
    ++unfinished;
    inner_.launch(batch);
  }
  void finish(std::span<int32_t> sampled) override {
    --unfinished;
    inner_.finish(sampled);
  }
  void last_logits_row(int j, std::span<float> out) override { inner_.last_logits_row(j, out); }
  void last_chunk_logits(int i, std::span<float> out) override {
    inner_.last_chunk_logits(i, out);
  }
  std::map<uint64_t, int> tokens_run;
  int overlapped = 0, from_device = 0, unfinished = 0;

 private:
  BatchBackend& inner_;
};

TEST_F(EngineTest, StepsRunAheadOfTheirIdsAndAStopWastesOneStep) {
  auto inner = paged(32);
  CountingBackend backend(*inner);
  Engine engine(backend, nullptr, {4, 16});
  std::mt19937 rng(31);
  const std::vector<int32_t> p1 = random_prompt(rng, 6), p2 = random_prompt(rng, 9);
  const std::vector<int32_t> ref = reference(p1, 12);
  // p1 stops at its 5th id (a stop id, unknown to the scheduler), p2 by length.
  Sink sink;
  EngineRequest a = request(p1, 12, sink);
  a.stop_token_ids = {ref[4]};
  const size_t stop_at = size_t(std::find(ref.begin(), ref.end(), ref[4]) - ref.begin());
  RequestId ia = engine.submit(std::move(a));
  RequestId ib = engine.submit(request(p2, 7, sink));
  engine.run_until_idle();
  EXPECT_EQ(sink.get(ia).ids, std::vector<int32_t>(ref.begin(), ref.begin() + ptrdiff_t(stop_at) + 1));
  EXPECT_EQ(sink.get(ia).finish, FinishReason::kStop);
  EXPECT_EQ(sink.get(ib).ids, reference(p2, 7));
  // a ran its prompt and its ids up to the stop, plus the one step that was
  // already in flight when the stop id was read; b ran no step past its last id.
  EXPECT_EQ(backend.tokens_run[ia], int(p1.size() + stop_at) + 1);
  EXPECT_EQ(backend.tokens_run[ib], int(p2.size()) + 7 - 1);
  EXPECT_GT(backend.overlapped, 0);
  EXPECT_GT(backend.from_device, 0);
  EXPECT_EQ(backend.unfinished, 0);  // b's last id was not run: nothing is left in flight
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
  engine.submit(request(p2, 2, sink));
  engine.run_until_idle();
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
}

TEST_F(EngineTest, AbortWithAStepInFlightFreesEveryBlock) {
  auto inner = paged(32);
  CountingBackend backend(*inner);
  Engine engine(backend, nullptr, {4, 16});
  std::mt19937 rng(32);
  Sink sink;
  const std::vector<int32_t> p = random_prompt(rng, 5), q = random_prompt(rng, 4);
  RequestId a = engine.submit(request(p, 20, sink));
  RequestId b = engine.submit(request(q, 6, sink));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(engine.step());
  ASSERT_EQ(backend.unfinished, 1);  // a step is in flight with a's next id
  engine.abort(a);
  engine.run_until_idle();
  EXPECT_EQ(sink.get(a).finish, FinishReason::kAbort);
  EXPECT_EQ(sink.get(a).finals, 1);
  EXPECT_FALSE(sink.get(a).event_after_final);
  EXPECT_EQ(sink.get(b).ids, reference(q, 6));
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
  EXPECT_EQ(engine.stats().requests_aborted_total, 1u);
}

TEST_F(EngineTest, BatchedGreedyEqualsSingleSequence) {
  auto backend = paged(256);
  Engine engine(*backend, nullptr, {4, 32});
  auto cases = mixed_cases(11, 7);
  EngineStats s = run_and_compare(engine, cases);
  EXPECT_EQ(s.preemptions_total, 0u);
  EXPECT_EQ(s.requests_finished_total, cases.size());
}

TEST_F(EngineTest, OneSequenceAloneEqualsTheSameInABatch) {
  // The engine with a single request is the other oracle: same ids with and
  // without company, bit for bit.
  auto cases = mixed_cases(5, 5);
  auto b1 = paged(256);
  Engine alone(*b1, nullptr, {1, 64});
  run_and_compare(alone, cases);
  auto b2 = paged(256);
  Engine crowd(*b2, nullptr, {8, 64});
  run_and_compare(crowd, cases);
}

TEST_F(EngineTest, GreedyIdsSurviveForcedPreemption) {
  // 12 blocks of 4 = 48 slots for 6 requests of up to 40 + 12 tokens.
  auto backend = paged(13);
  Engine engine(*backend, nullptr, {6, 64});
  auto cases = mixed_cases(3, 6);
  EngineStats s = run_and_compare(engine, cases);
  EXPECT_GT(s.preemptions_total, 0u) << "the pool was meant to be too small";
  EXPECT_GT(s.computed_tokens_total, 0u);
}

TEST_F(EngineTest, SeededSamplingMatchesSingleSequence) {
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 50;
  p.top_p = 0.95f;
  p.seed = 1234;
  auto backend = paged(13);
  Engine engine(*backend, nullptr, {6, 16});
  auto cases = mixed_cases(9, 5);
  run_and_compare(engine, cases, p);
}

TEST_F(EngineTest, ChunkedPrefillKeepsDecodesStreaming) {
  // Budget of 6 tokens per step: two decoders take 2, a 40-token prompt is
  // fed 4 tokens at a time, and the decoders gain an id every step.
  auto backend = paged(256);
  Engine engine(*backend, nullptr, {4, 6});
  Sink sink;
  std::mt19937 rng(1);
  auto pa = random_prompt(rng, 3), pb = random_prompt(rng, 3), pc = random_prompt(rng, 40);
  RequestId a = engine.submit(request(pa, 30, sink));
  RequestId b = engine.submit(request(pb, 30, sink));
  // A step's ids are read at the end of the next step (launched before them).
  ASSERT_TRUE(engine.step());
  ASSERT_EQ(sink.get(a).ids.size(), 0u);
  ASSERT_TRUE(engine.step());
  ASSERT_EQ(sink.get(a).ids.size(), 1u);
  RequestId c = engine.submit(request(pc, 5, sink));
  for (int step = 0; step < 11; ++step) {
    size_t before_a = sink.get(a).ids.size(), before_b = sink.get(b).ids.size();
    ASSERT_TRUE(engine.step());
    EXPECT_EQ(sink.get(a).ids.size(), before_a + 1) << "step " << step;
    EXPECT_EQ(sink.get(b).ids.size(), before_b + 1) << "step " << step;
    // 40 prompt tokens at 4 a step: the last chunk runs in the 10th step, and
    // its id is read in the 11th.
    EXPECT_EQ(sink.get(c).ids.size(), step == 10 ? 1u : 0u) << "step " << step;
  }
  engine.run_until_idle();
  EXPECT_EQ(sink.get(a).ids, reference(pa, 30));
  EXPECT_EQ(sink.get(b).ids, reference(pb, 30));
  EXPECT_EQ(sink.get(c).ids, reference(pc, 5));
}

TEST_F(EngineTest, FirstComeFirstServed) {
  auto backend = paged(256);
  Engine engine(*backend, nullptr, {1, 16});
  Sink sink;
  std::mt19937 rng(2);
  std::vector<RequestId> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(engine.submit(request(random_prompt(rng, 5), 3, sink)));
  engine.run_until_idle();
  EXPECT_EQ(sink.finish_order(), ids);
}

TEST_F(EngineTest, AbortInEveryStateFreesEveryBlock) {
  // 14 blocks of 4; budget 8 so a 30-token prompt takes 4 steps to prefill.
  auto backend = paged(14);
  Engine engine(*backend, nullptr, {4, 8});
  Sink sink;
  std::mt19937 rng(4);
  RequestId decoding = engine.submit(request(random_prompt(rng, 2), 20, sink));
  RequestId prefilling = engine.submit(request(random_prompt(rng, 30), 4, sink));
  ASSERT_TRUE(engine.step());
  ASSERT_TRUE(engine.step());
  RequestId queued = engine.submit(request(random_prompt(rng, 3), 4, sink));
  EXPECT_EQ(sink.get(decoding).ids.size(), 1u);  // the second is in flight
  EXPECT_EQ(sink.get(prefilling).ids.size(), 0u);
  EXPECT_GT(engine.stats().kv_blocks_used, 0);

  engine.abort(queued);      // still in the inbox
  engine.abort(prefilling);  // mid-prompt
  ASSERT_TRUE(engine.step());
  engine.abort(decoding);
  engine.step();
  for (RequestId id : {queued, prefilling, decoding}) {
    Collected c = sink.get(id);
    EXPECT_EQ(c.finals, 1) << id;
    EXPECT_EQ(c.finish, FinishReason::kAbort) << id;
    EXPECT_EQ(c.error, "") << id;
  }
  EngineStats s = engine.stats();
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.requests_aborted_total, 3u);
  EXPECT_FALSE(engine.has_work());
  engine.abort(decoding);  // already finished: ignored
  engine.abort(999);       // unknown: ignored
  EXPECT_FALSE(engine.step());
}

TEST_F(EngineTest, AbortWhilePreemptedFreesEveryBlock) {
  // 6 blocks of 4: three requests grow until the newest is preempted.
  auto backend = paged(6);
  Engine engine(*backend, nullptr, {3, 16});
  Sink sink;
  std::mt19937 rng(6);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestId> ids;
  for (int i = 0; i < 3; ++i) {
    prompts.push_back(random_prompt(rng, 4));
    ids.push_back(engine.submit(request(prompts.back(), 16, sink)));
  }
  int steps = 0;
  while (engine.stats().preemptions_total == 0 && steps++ < 40) ASSERT_TRUE(engine.step());
  ASSERT_GT(engine.stats().preemptions_total, 0u);
  ASSERT_GT(engine.stats().num_waiting, 0);
  // The newest one is the victim; abort it while it waits to recompute.
  engine.abort(ids[2]);
  engine.step();
  EXPECT_EQ(sink.get(ids[2]).finish, FinishReason::kAbort);
  EXPECT_EQ(sink.get(ids[2]).finals, 1);
  engine.run_until_idle();
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
  EXPECT_EQ(sink.get(ids[0]).ids, reference(prompts[0], 16));
  EXPECT_EQ(sink.get(ids[1]).ids, reference(prompts[1], 16));
}

TEST_F(EngineTest, RejectsBadRequestsAtSubmission) {
  auto backend = paged(8, 4, 64);  // pool: 32 slots; max_model_len 64
  Engine engine(*backend, nullptr, {4, 16});
  Sink sink;
  std::vector<int32_t> p10(10, 1);
  EXPECT_THROW(engine.submit(request({}, 4, sink)), Error);           // empty prompt
  EXPECT_THROW(engine.submit(request(p10, 0, sink)), Error);          // max_tokens 0
  EXPECT_THROW(engine.submit(request({1, kVocab}, 4, sink)), Error);  // id out of range
  EXPECT_THROW(engine.submit(request(p10, 55, sink)), Error);         // > max_model_len
  try {
    engine.submit(request(p10, 30, sink));  // 39 KV slots > 32 in the pool
    ADD_FAILURE() << "an oversize request was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than the whole pool"), std::string::npos)
        << e.what();
  }
  EngineRequest bad_sampling = request(p10, 4, sink);
  bad_sampling.sampling.top_p = 0.0f;
  EXPECT_THROW(engine.submit(std::move(bad_sampling)), Error);
  EngineRequest stop_without_tokenizer = request(p10, 4, sink);
  stop_without_tokenizer.stop = {"x"};
  EXPECT_THROW(engine.submit(std::move(stop_without_tokenizer)), Error);
  EXPECT_FALSE(engine.has_work());
  // The largest request that fits is accepted: 10 + 23 - 1 = 32 slots.
  RequestId ok = engine.submit(request(p10, 23, sink));
  engine.run_until_idle();
  EXPECT_EQ(sink.get(ok).ids, reference(p10, 23));
}

}  // namespace
}  // namespace hayate::testing_engine
