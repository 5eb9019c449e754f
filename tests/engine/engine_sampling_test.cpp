// Host-side sampling inside the engine (penalties, logprobs) against one
// sequence through the CPU backend stepped by hand: logprobs equal the log_softmax (by hand, in
// double) of the oracle's logits; penalised greedy ids follow the penalty
// formula applied here to the oracle's logits; seeded draws keep the random
// stream of the plain path. Host and device-path requests share batches, so
// the logits row of each sampling sequence must be the right one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "engine_fixture.h"
#include "log_softmax.h"

namespace hayate::testing_engine {
namespace {

// The oracle's logits before each of `ids` (teacher-forced): row k is the
// distribution that produced ids[k].
std::vector<std::vector<float>> oracle_rows(const std::vector<int32_t>& prompt,
                                            const std::vector<int32_t>& ids) {
  std::vector<std::vector<float>> rows;
  std::vector<float> row(static_cast<size_t>(EngineTest::kVocab));
  EngineTest::oracle_logits(prompt, 0, row);
  int pos = int(prompt.size());
  for (size_t k = 0; k < ids.size(); ++k) {
    rows.push_back(row);
    if (k + 1 == ids.size()) break;
    const int32_t one[1] = {ids[k]};
    EngineTest::oracle_logits(one, pos++, row);
  }
  return rows;
}

// Greedy with OpenAI's presence/frequency and HF's repetition penalty, written
// out per token on the oracle's logits.
std::vector<int32_t> penalised_greedy(const std::vector<int32_t>& prompt, int n,
                                      const SamplingParams& p) {
  std::vector<int32_t> out;
  std::vector<float> row(static_cast<size_t>(EngineTest::kVocab));
  EngineTest::oracle_logits(prompt, 0, row);
  int pos = int(prompt.size());
  for (int i = 0; i < n; ++i) {
    std::map<int32_t, int> count;
    for (int32_t t : out) ++count[t];
    std::set<int32_t> seen(prompt.begin(), prompt.end());
    seen.insert(out.begin(), out.end());
    int32_t best = 0;
    double best_l = -INFINITY;
    for (int32_t t = 0; t < EngineTest::kVocab; ++t) {
      double l = row[size_t(t)];
      if (seen.count(t)) l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
      const int c = count.count(t) ? count[t] : 0;
      l -= double(p.frequency_penalty) * c + double(p.presence_penalty) * (c > 0);
      if (l > best_l) best_l = l, best = t;
    }
    out.push_back(best);
    const int32_t one[1] = {best};
    if (i + 1 < n) EngineTest::oracle_logits(one, pos++, row);
  }
  return out;
}

TEST_F(EngineTest, GreedyLogprobsAreTheLogSoftmaxOfTheOracleLogits) {
  auto backend = paged(256);
  // A small token budget splits prefills into chunks, so sampling and
  // non-sampling sequences mix in one step.
  Engine engine(*backend, nullptr, {8, 24});
  std::mt19937 rng(3);
  Sink sink;
  struct Req {
    std::vector<int32_t> prompt;
    int n;
    int logprobs;
    RequestId id;
  };
  std::vector<Req> reqs;
  for (int i = 0; i < 6; ++i) {
    Req r{random_prompt(rng, 3 + int(rng() % 30)), 4 + int(rng() % 6), i % 2 ? -1 : i, 0};
    EngineRequest er = request(r.prompt, r.n, sink);
    er.sampling.logprobs = r.logprobs;
    r.id = engine.submit(std::move(er));
    reqs.push_back(std::move(r));
  }
  engine.run_until_idle();
  for (const Req& r : reqs) {
    Collected got = sink.get(r.id);
    ASSERT_EQ(got.ids, reference(r.prompt, r.n)) << "request " << r.id;
    if (r.logprobs < 0) {
      EXPECT_TRUE(got.logprobs.empty());
      continue;
    }
    ASSERT_EQ(got.logprobs.size(), got.ids.size());
    std::vector<std::vector<float>> rows = oracle_rows(r.prompt, got.ids);
    for (size_t k = 0; k < got.ids.size(); ++k) {
      std::vector<double> ls = log_softmax(rows[k]);
      const SampleResult& lp = got.logprobs[k];
      EXPECT_EQ(lp.id, got.ids[k]);
      EXPECT_NEAR(lp.logprob, ls[size_t(got.ids[k])], 1e-3) << "request " << r.id << " k " << k;
      std::vector<double> sorted = ls;
      std::sort(sorted.rbegin(), sorted.rend());
      ASSERT_EQ(lp.top.size(), size_t(r.logprobs));
      for (size_t t = 0; t < lp.top.size(); ++t) {
        EXPECT_NEAR(lp.top[t].logprob, sorted[t], 1e-3);                 // the t-th largest
        EXPECT_NEAR(lp.top[t].logprob, ls[size_t(lp.top[t].id)], 1e-3);  // of that id
      }
      if (!lp.top.empty()) {
        EXPECT_EQ(lp.top[0].id, got.ids[k]);  // greedy picks the top
      }
    }
  }
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
}

TEST_F(EngineTest, PenalisedGreedyFollowsTheFormulaOnTheOracleLogits) {
  auto backend = paged(256);
  Engine engine(*backend, nullptr, {8, 32});
  std::mt19937 rng(8);
  Sink sink;
  const int n = 16;
  SamplingParams pens[3];
  pens[0].frequency_penalty = 2.0f;
  pens[1].presence_penalty = 1.5f;
  pens[1].repetition_penalty = 1.3f;
  pens[2].repetition_penalty = 0.8f;  // < 1 favours repeats
  pens[2].frequency_penalty = -0.5f;
  std::vector<std::pair<std::vector<int32_t>, RequestId>> reqs;
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> prompt = random_prompt(rng, 4 + int(rng() % 20));
    EngineRequest er = request(prompt, n, sink);
    if (i % 2 == 0) er.sampling = pens[i / 2];  // odd ones: plain greedy in the same batches
    RequestId id = engine.submit(std::move(er));
    reqs.emplace_back(prompt, id);
  }
  engine.run_until_idle();
  int changed = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const auto& [prompt, id] = reqs[i];
    Collected got = sink.get(id);
    EXPECT_EQ(got.finish, FinishReason::kLength);
    if (i % 2 == 1) {
      EXPECT_EQ(got.ids, reference(prompt, n));
      continue;
    }
    EXPECT_EQ(got.ids, penalised_greedy(prompt, n, pens[i / 2])) << "request " << id;
    EXPECT_TRUE(got.logprobs.empty());  // penalties alone do not ask for logprobs
    changed += got.ids != reference(prompt, n);
  }
  // The penalties must matter on this model, or the comparison above proves little.
  EXPECT_GE(changed, 2);
  // frequency_penalty 2: the dummy model's logits span a few units, so no id
  // should come back more than a few times in 16.
  std::map<int32_t, int> count;
  for (int32_t t : sink.get(reqs[0].second).ids) ++count[t];
  for (auto [t, c] : count) EXPECT_LE(c, 4) << "id " << t;
}

TEST_F(EngineTest, SeededDrawWithLogprobsKeepsTheRandomStream) {
  auto backend = paged(256);
  Engine engine(*backend, nullptr, {8, 64});
  std::mt19937 rng(21);
  Sink sink;
  SamplingParams p;
  p.temperature = 1.1f;
  p.top_p = 0.95f;
  p.seed = 77;
  std::vector<std::pair<std::vector<int32_t>, RequestId>> reqs;
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> prompt = random_prompt(rng, 5 + i);
    EngineRequest er = request(prompt, 10, sink);
    er.sampling = p;
    er.sampling.logprobs = i % 2 ? 2 : -1;
    reqs.emplace_back(prompt, engine.submit(std::move(er)));
  }
  engine.run_until_idle();
  for (const auto& [prompt, id] : reqs) {
    Collected got = sink.get(id);
    EXPECT_EQ(got.ids, reference(prompt, 10, p)) << "request " << id;
    if (id % 2 == 0) {
      ASSERT_EQ(got.logprobs.size(), got.ids.size());
      std::vector<std::vector<float>> rows = oracle_rows(prompt, got.ids);
      for (size_t k = 0; k < got.ids.size(); ++k)
        EXPECT_NEAR(got.logprobs[k].logprob, log_softmax(rows[k])[size_t(got.ids[k])], 1e-3);
    }
  }
}

}  // namespace
}  // namespace hayate::testing_engine
