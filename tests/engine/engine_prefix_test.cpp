// The prefix cache and shared prompt blocks through the engine on the CPU
// oracle: ids and logprobs with the cache on equal those with it off (and
// the single-sequence oracle's), bit for bit, whatever shares or writes the
// blocks: requests that arrive later, choices of one request (copy on write),
// a writer aborted or preempted while others read its blocks.
#include <gtest/gtest.h>

#include <random>

#include "core/check.h"
#include "engine_fixture.h"

namespace hayate::testing_engine {
namespace {

EngineOptions options(int seqs, int tokens, bool cache) {
  EngineOptions o;
  o.max_num_seqs = seqs;
  o.max_num_batched_tokens = tokens;
  o.enable_prefix_caching = cache;
  return o;
}

std::vector<int32_t> join(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct Outcome {
  std::vector<Collected> got;
  EngineStats stats;
};

class EnginePrefixTest : public EngineTest {
 public:
  // A shared 37-token prefix (9 full blocks of 4 and one partial) and tails.
  static std::vector<std::vector<int32_t>> shared_prompts(int n, uint32_t seed) {
    std::mt19937 rng(seed);
    const auto prefix = random_prompt(rng, 37);
    std::vector<std::vector<int32_t>> out;
    for (int i = 0; i < n; ++i) out.push_back(join(prefix, random_prompt(rng, 1 + i % 6)));
    return out;
  }

  // `waves` of prompts: each wave is submitted once the previous is done, so
  // later waves find what earlier ones computed.
  static Outcome run(const std::vector<std::vector<std::vector<int32_t>>>& waves, int max_tokens,
                     bool cache, const SamplingParams& p = {}, int num_blocks = 256, int seqs = 4,
                     int tokens = 32) {
    auto backend = paged(num_blocks);
    Engine engine(*backend, nullptr, options(seqs, tokens, cache));
    Sink sink;
    std::vector<RequestId> ids;
    for (const auto& wave : waves) {
      for (const auto& prompt : wave) {
        EngineRequest r = request(prompt, max_tokens, sink);
        r.sampling = p;
        ids.push_back(engine.submit(std::move(r)));
      }
      engine.run_until_idle();
    }
    Outcome out;
    for (RequestId id : ids) out.got.push_back(sink.get(id));
    out.stats = engine.stats();
    EXPECT_EQ(out.stats.kv_blocks_used, 0);
    return out;
  }

  static void expect_same(const Outcome& on, const Outcome& off) {
    ASSERT_EQ(on.got.size(), off.got.size());
    for (size_t i = 0; i < on.got.size(); ++i) {
      EXPECT_EQ(on.got[i].ids, off.got[i].ids) << "request " << i;
      ASSERT_EQ(on.got[i].logprobs.size(), off.got[i].logprobs.size());
      for (size_t t = 0; t < on.got[i].logprobs.size(); ++t) {
        const SampleResult &a = on.got[i].logprobs[t], &b = off.got[i].logprobs[t];
        EXPECT_EQ(a.id, b.id);
        EXPECT_EQ(a.logprob, b.logprob) << "request " << i << " token " << t;
        ASSERT_EQ(a.top.size(), b.top.size());
        for (size_t k = 0; k < a.top.size(); ++k) {
          EXPECT_EQ(a.top[k].id, b.top[k].id);
          EXPECT_EQ(a.top[k].logprob, b.top[k].logprob);
        }
      }
    }
  }
};

TEST_F(EnginePrefixTest, GreedyIdsAndLogprobsEqualWithAndWithoutTheCache) {
  const auto prompts = shared_prompts(7, 11);
  const std::vector<std::vector<std::vector<int32_t>>> waves = {
      {prompts[0]},
      {prompts.begin() + 1, prompts.begin() + 4},
      {prompts.begin() + 4, prompts.end()}};
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = 3;  // sampled on the host from the logits: compared exactly
  const Outcome on = run(waves, 9, true, p), off = run(waves, 9, false, p);
  expect_same(on, off);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(on.got[i].ids, reference(prompts[i], 9));
  EXPECT_GT(on.stats.prefix_cache_hits_total, 0u);
  EXPECT_GT(on.stats.prefix_cache_queries_total, on.stats.prefix_cache_hits_total);
  EXPECT_EQ(off.stats.prefix_cache_hits_total, 0u);
  EXPECT_EQ(off.stats.prefix_cache_queries_total, 0u);
  // Every later request found the 9 full prefix blocks; the first none.
  EXPECT_EQ(on.got[0].cached_tokens, 0);
  for (size_t i = 1; i < prompts.size(); ++i) EXPECT_EQ(on.got[i].cached_tokens, 36) << i;
  for (const Collected& c : off.got) EXPECT_EQ(c.cached_tokens, 0);
  EXPECT_LT(on.stats.computed_tokens_total, off.stats.computed_tokens_total);
}

TEST_F(EnginePrefixTest, SeededSamplingEqualsWithAndWithoutTheCache) {
  const auto prompts = shared_prompts(5, 12);
  const std::vector<std::vector<std::vector<int32_t>>> waves = {
      {prompts[0]}, {prompts.begin() + 1, prompts.end()}};
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.seed = 77;
  expect_same(run(waves, 8, true, p), run(waves, 8, false, p));
}

TEST_F(EnginePrefixTest, ANextTurnFindsTheAnswerItResends) {
  auto backend = paged(256);
  Engine engine(*backend, nullptr, options(4, 32, true));
  Sink sink;
  std::mt19937 rng(5);
  const auto turn1 = random_prompt(rng, 13);
  RequestId a = engine.submit(request(turn1, 12, sink));
  engine.run_until_idle();
  const auto turn2 = join(join(turn1, sink.get(a).ids), random_prompt(rng, 7));
  RequestId b = engine.submit(request(turn2, 6, sink));
  engine.run_until_idle();
  EXPECT_EQ(sink.get(b).ids, reference(turn2, 6));
  // 13 + 12 ids, the last never run: 24 computed, 6 full blocks.
  EXPECT_EQ(sink.get(b).cached_tokens, 24);
}

TEST_F(EnginePrefixTest, ChoicesShareThePromptAndCopyItsPartialBlock) {
  std::mt19937 rng(9);
  const auto prompt = random_prompt(rng, 10);  // blocks of 4: the last one partial
  for (bool sampled : {false, true}) {
    auto backend = paged(256);
    Engine engine(*backend, nullptr, options(8, 64, true));
    Sink sink;
    std::vector<EngineRequest> choices;
    for (int i = 0; i < 3; ++i) {
      EngineRequest r = request(prompt, 8, sink);
      if (sampled) {
        r.sampling.temperature = 1.0f;
        r.sampling.seed = 500 + uint64_t(i);
      }
      choices.push_back(std::move(r));
    }
    const std::vector<RequestId> ids = engine.submit(std::move(choices));
    ASSERT_EQ(ids.size(), 3u);
    engine.run_until_idle();
    for (int i = 0; i < 3; ++i) {
      SamplingParams p;
      if (sampled) {
        p.temperature = 1.0f;
        p.seed = 500 + uint64_t(i);
      }
      EXPECT_EQ(sink.get(ids[size_t(i)]).ids, reference(prompt, 8, p)) << "choice " << i;
      EXPECT_EQ(sink.get(ids[size_t(i)]).cached_tokens, i == 0 ? 0 : 9);
    }
    const EngineStats s = engine.stats();
    EXPECT_EQ(s.kv_block_copies_total, 2u);  // each later choice copies block 2
    EXPECT_EQ(s.kv_blocks_used, 0);
    // The prompt ran once, then one token per later choice, then the decodes.
    EXPECT_EQ(s.computed_tokens_total, 10u + 2u + 3u * 7u);
  }
}

TEST_F(EnginePrefixTest, BlocksWrittenByAnAbortedOrPreemptedSequenceServeTheOthers) {
  const auto prompts = shared_prompts(6, 21);
  for (bool cache : {true, false}) {
    // 16 blocks of 4 = 64 slots for prompts of 38-43 + 14 ids: preemption.
    auto backend = paged(17);
    Engine engine(*backend, nullptr, options(6, 64, cache));
    Sink sink;
    RequestId writer = engine.submit(request(prompts[0], 14, sink));
    engine.step();  // the writer's prompt: the prefix blocks
    engine.step();
    std::vector<RequestId> readers;
    for (size_t i = 1; i < prompts.size(); ++i)
      readers.push_back(engine.submit(request(prompts[i], 14, sink)));
    engine.step();
    engine.step();
    engine.abort(writer);
    engine.run_until_idle();
    EXPECT_EQ(sink.get(writer).finish, FinishReason::kAbort);
    for (size_t i = 0; i < readers.size(); ++i)
      EXPECT_EQ(sink.get(readers[i]).ids, reference(prompts[i + 1], 14)) << "reader " << i;
    const EngineStats s = engine.stats();
    EXPECT_GT(s.preemptions_total, 0u) << "the pool was meant to be too small";
    if (cache) {
      EXPECT_GT(s.prefix_cache_hits_total, 0u);
    }
    EXPECT_EQ(s.kv_blocks_used, 0);
  }
}

TEST_F(EnginePrefixTest, PromptLogitsOfACachedPromptAreComputedAgain) {
  std::mt19937 rng(31);
  const auto prompt = random_prompt(rng, 23);
  const size_t V = kVocab;
  auto logits_of = [&](bool cache) {
    auto backend = paged(256);
    Engine engine(*backend, nullptr, options(4, 64, cache));
    Sink sink;
    engine.submit(request(prompt, 3, sink));  // computes (and caches) the prompt
    engine.run_until_idle();
    std::vector<float> rows(prompt.size() * V, -1.0f);
    int got = 0;
    EngineRequest r = request(prompt, 0, sink);
    r.prompt_logits = true;
    r.on_event = [&](const EngineEvent& e) {
      std::copy(e.prompt_logits.begin(), e.prompt_logits.end(),
                rows.begin() + ptrdiff_t(size_t(e.prompt_logits_pos) * V));
      got += int(e.prompt_logits.size() / V);
      EXPECT_EQ(e.cached_tokens, 0);
    };
    engine.submit(std::move(r));
    engine.run_until_idle();
    EXPECT_EQ(got, int(prompt.size()));
    return rows;
  };
  const std::vector<float> on = logits_of(true), off = logits_of(false);
  EXPECT_EQ(on, off);
  std::vector<float> last(V);
  oracle_logits(prompt, 0, last);
  EXPECT_EQ(std::vector<float>(on.end() - ptrdiff_t(V), on.end()), last);
}

TEST_F(EnginePrefixTest, AGroupIsAllOrNothing) {
  auto backend = paged(8, 4, 64);  // 32 slots
  Engine engine(*backend, nullptr, options(4, 16, true));
  Sink sink;
  std::vector<EngineRequest> group;
  group.push_back(request({1, 2, 3}, 4, sink));
  group.push_back(request({1, kVocab}, 4, sink));  // out of the vocabulary
  EXPECT_THROW(engine.submit(std::move(group)), Error);
  EXPECT_FALSE(engine.has_work());
  // Four choices of 9 + 12 tokens: 2 shared blocks + 4 x 3 of their own = 14 > 8.
  std::vector<EngineRequest> wide;
  for (int i = 0; i < 4; ++i) wide.push_back(request(std::vector<int32_t>(9, 5), 12, sink));
  try {
    engine.submit(std::move(wide));
    ADD_FAILURE() << "choices that cannot fit the pool at once were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at once"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(engine.has_work());
  // Two choices of 9 + 4 tokens: 2 shared + 2 x 1 of their own.
  std::vector<EngineRequest> two;
  for (int i = 0; i < 2; ++i) two.push_back(request(std::vector<int32_t>(9, 5), 4, sink));
  const auto ids = engine.submit(std::move(two));
  engine.run_until_idle();
  for (RequestId id : ids) EXPECT_EQ(sink.get(id).ids, reference(std::vector<int32_t>(9, 5), 4));
}

}  // namespace
}  // namespace hayate::testing_engine
