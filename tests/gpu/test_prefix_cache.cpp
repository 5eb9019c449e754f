// The prefix cache and shared prompt blocks through the Engine over the CUDA
// backend: greedy ids with the cache on equal those with it off (and follow
// the fp32 CPU backend up to near-ties), whatever shares the blocks: later
// requests, a writer aborted while others read its blocks, a pool small
// enough to preempt, the choices of one request (copy on write on the
// device); logprobs sampled on the host agree within fp16 rounding.
#include <gtest/gtest.h>

#include <random>

#include "gpu/batch_fixture.h"

namespace hayate::batch_test {
namespace {

struct Got {
  std::vector<int32_t> ids;
  std::vector<SampleResult> logprobs;
  int cached = 0;
};

// Waves of prompts, each submitted when the previous is done; `abort_first`
// aborts the first request of the last wave after a few steps.
std::vector<Got> run_waves(BatchBackend& backend,
                           const std::vector<std::vector<std::vector<int32_t>>>& waves,
                           int max_tokens, bool cache, int logprobs, EngineStats* stats,
                           bool abort_first = false) {
  EngineOptions eo;
  eo.max_num_seqs = 4;
  eo.max_num_batched_tokens = 64;
  eo.enable_prefix_caching = cache;
  Engine engine(backend, nullptr, eo);
  std::map<RequestId, Got> out;
  std::vector<RequestId> ids;
  for (size_t w = 0; w < waves.size(); ++w) {
    std::vector<RequestId> wave;
    for (const auto& p : waves[w]) {
      EngineRequest r;
      r.prompt = p;
      r.max_tokens = max_tokens;
      r.ignore_eos = true;
      r.sampling.logprobs = logprobs;
      r.on_event = [&out](const EngineEvent& e) {
        Got& g = out[e.id];
        g.ids.insert(g.ids.end(), e.token_ids.begin(), e.token_ids.end());
        g.logprobs.insert(g.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
        g.cached = e.cached_tokens;
      };
      wave.push_back(engine.submit(std::move(r)));
    }
    if (abort_first && w + 1 == waves.size()) {
      for (int s = 0; s < 6; ++s) engine.step();
      engine.abort(wave[0]);
    }
    engine.run_until_idle();
    ids.insert(ids.end(), wave.begin(), wave.end());
  }
  *stats = engine.stats();
  EXPECT_EQ(stats->kv_blocks_used, 0);
  std::vector<Got> v;
  for (RequestId id : ids) v.push_back(out[id]);
  return v;
}

std::vector<std::vector<int32_t>> shared_prompts(int n, uint32_t seed, int prefix_len) {
  std::mt19937 rng(seed);
  std::vector<int32_t> prefix;
  for (int t = 0; t < prefix_len; ++t) prefix.push_back(int32_t(rng() % kVocab));
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> p = prefix;
    for (int t = 0; t < 3 + 5 * i; ++t) p.push_back(int32_t(rng() % kVocab));
    out.push_back(p);
  }
  return out;
}

TEST_F(BatchBackendTest, PrefixCacheOnEqualsOff) {
  const auto prompts = shared_prompts(6, 17, 70);  // 4 full blocks of 16 shared
  const std::vector<std::vector<std::vector<int32_t>>> waves = {
      {prompts[0]}, {prompts.begin() + 1, prompts.end()}};
  const int kTokens = 20;
  EngineStats on_stats, off_stats;
  auto b1 = make_cuda_batch_backend(*model_, options(64, 4));
  const auto on = run_waves(*b1, waves, kTokens, true, 2, &on_stats);
  auto b2 = make_cuda_batch_backend(*model_, options(64, 4));
  const auto off = run_waves(*b2, waves, kTokens, false, 2, &off_stats);
  EXPECT_GT(on_stats.prefix_cache_hits_total, 0u);
  EXPECT_EQ(off_stats.prefix_cache_hits_total, 0u);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(on[i].ids, off[i].ids) << "request " << i;
    EXPECT_EQ(on[i].cached, i == 0 ? 0 : 64) << "request " << i;
    ASSERT_EQ(on[i].logprobs.size(), off[i].logprobs.size());
    for (size_t t = 0; t < on[i].logprobs.size(); ++t)
      EXPECT_NEAR(on[i].logprobs[t].logprob, off[i].logprobs[t].logprob, 2e-2)
          << "request " << i << " token " << t;
    hayate::test::OwnedSeq oracle = single_cpu();
    std::vector<float> ref(kVocab);
    oracle->forward(prompts[i], 0, ref);
    for (int t = 0; t < kTokens; ++t) {
      check_pick(on[i].ids[size_t(t)], ref,
                 "request " + std::to_string(i) + " id " + std::to_string(t));
      const int32_t id = on[i].ids[size_t(t)];
      oracle->forward(std::span(&id, 1), int(prompts[i].size()) + t, ref);
    }
  }
}

TEST_F(BatchBackendTest, PrefixCacheSurvivesAnAbortedWriterAndPreemption) {
  // The first request of the wave writes the shared blocks and is aborted
  // while the others read them; 12 blocks of 16 force preemption.
  const auto prompts = shared_prompts(5, 23, 40);
  const std::vector<std::vector<std::vector<int32_t>>> waves = {prompts};
  const int kTokens = 30;
  EngineStats on_stats, off_stats;
  auto b1 = make_cuda_batch_backend(*model_, options(12, 4, 12 * 16));
  const auto on = run_waves(*b1, waves, kTokens, true, -1, &on_stats, true);
  auto b2 = make_cuda_batch_backend(*model_, options(12, 4, 12 * 16));
  const auto off = run_waves(*b2, waves, kTokens, false, -1, &off_stats, true);
  EXPECT_GT(on_stats.preemptions_total + off_stats.preemptions_total, 0u);
  EXPECT_GT(on_stats.prefix_cache_hits_total, 0u);
  for (size_t i = 1; i < prompts.size(); ++i) EXPECT_EQ(on[i].ids, off[i].ids) << "request " << i;
}

TEST_F(BatchBackendTest, ChoicesCopyTheSharedBlockOnTheDevice) {
  std::mt19937 rng(31);
  std::vector<int32_t> prompt;
  for (int t = 0; t < 37; ++t) prompt.push_back(int32_t(rng() % kVocab));  // last block partial
  auto backend = make_cuda_batch_backend(*model_, options(64, 8));
  EngineOptions eo;
  eo.max_num_seqs = 8;
  eo.max_num_batched_tokens = 64;
  Engine engine(*backend, nullptr, eo);
  std::map<RequestId, std::vector<int32_t>> out;
  std::vector<EngineRequest> group;
  for (int i = 0; i < 3; ++i) {
    EngineRequest r;
    r.prompt = prompt;
    r.max_tokens = 24;
    r.ignore_eos = true;
    r.on_event = [&out](const EngineEvent& e) {
      out[e.id].insert(out[e.id].end(), e.token_ids.begin(), e.token_ids.end());
    };
    group.push_back(std::move(r));
  }
  const auto ids = engine.submit(std::move(group));
  engine.run_until_idle();
  EXPECT_EQ(engine.stats().kv_block_copies_total, 2u);
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
  const auto alone = run_engine(*backend, {prompt}, 24, 4, nullptr);
  for (RequestId id : ids) EXPECT_EQ(out[id], alone.at(0)) << "choice " << id;
}

}  // namespace
}  // namespace hayate::batch_test
