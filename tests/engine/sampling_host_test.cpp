// The host sampler's penalties and logprobs against direct computations in
// this file (penalties written out per token, log-softmax by hand in double),
// and its draw against sample_token's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "core/check.h"
#include "engine/sampling.h"
#include "log_softmax.h"

namespace hayate {
namespace {

using testing_engine::log_softmax;

std::vector<float> random_logits(std::mt19937& rng, size_t V) {
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> l(V);
  for (float& x : l) x = d(rng);
  return l;
}

std::vector<int32_t> random_ids(std::mt19937& rng, size_t n, size_t V) {
  std::vector<int32_t> ids(n);
  for (int32_t& t : ids) t = int32_t(rng() % V);
  return ids;
}

// OpenAI / HF semantics, one token at a time.
std::vector<double> penalised(const std::vector<float>& raw, const SamplingParams& p,
                              const std::vector<int32_t>& prompt, const std::vector<int32_t>& gen) {
  std::map<int32_t, int> count;
  for (int32_t t : gen) ++count[t];
  std::set<int32_t> seen(prompt.begin(), prompt.end());
  seen.insert(gen.begin(), gen.end());
  std::vector<double> out(raw.size());
  for (size_t t = 0; t < raw.size(); ++t) {
    double l = raw[t];
    if (seen.count(int32_t(t))) l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    const int c = count.count(int32_t(t)) ? count[int32_t(t)] : 0;
    l -= double(p.frequency_penalty) * c + double(p.presence_penalty) * (c > 0 ? 1 : 0);
    out[t] = l;
  }
  return out;
}

TEST(HostSampling, PenaltiesMatchTheDirectFormula) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 50; ++trial) {
    const size_t V = 64;
    std::vector<float> raw = random_logits(rng, V);
    raw[3] = 0.0f;  // zero stays zero under the repetition penalty
    std::vector<int32_t> prompt = random_ids(rng, 1 + rng() % 20, V);
    std::vector<int32_t> gen = random_ids(rng, rng() % 30, V);
    if (trial % 5 == 0) gen.insert(gen.end(), 6, 3);
    SamplingParams p;
    p.presence_penalty = float(int(rng() % 9) - 4) * 0.5f;
    p.frequency_penalty = float(int(rng() % 9) - 4) * 0.5f;
    p.repetition_penalty = trial % 3 == 0 ? 1.0f : 0.5f + float(rng() % 20) * 0.1f;
    std::vector<float> got = raw;
    std::vector<uint8_t> seen;
    apply_penalties(got, p, prompt, gen, seen);
    std::vector<double> want = penalised(raw, p, prompt, gen);
    for (size_t t = 0; t < V; ++t)
      EXPECT_NEAR(got[t], want[t], 1e-5 * (1 + std::fabs(want[t])))
          << "trial " << trial << " token " << t;
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 0), ptrdiff_t(V)) << "scratch left dirty";
  }
}

TEST(HostSampling, PenaltiesAreNotAppliedTwiceToARepeatedPromptId) {
  // Guards the dedup: id 5 three times in the prompt is divided once.
  std::vector<float> l(8, 1.0f);
  l[5] = 4.0f;
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  std::vector<uint8_t> seen;
  const std::vector<int32_t> prompt = {5, 5, 5};
  apply_penalties(l, p, prompt, {}, seen);
  EXPECT_FLOAT_EQ(l[5], 2.0f);
  EXPECT_FLOAT_EQ(l[0], 1.0f);
}

TEST(HostSampling, LogprobsAreTheRawLogSoftmax) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 30; ++trial) {
    const size_t V = 200;
    std::vector<float> raw = random_logits(rng, V);
    raw[17] = raw[42];  // a tie: the lower id comes first
    SamplingParams p;
    p.logprobs = int(rng() % 8);
    p.temperature = trial % 2 ? 0.0f : 0.7f;
    p.seed = uint64_t(trial);
    if (trial % 3 == 0) p.frequency_penalty = 1.5f;  // must not change the logprobs
    std::vector<int32_t> prompt = random_ids(rng, 5, V), gen = random_ids(rng, 7, V);
    std::vector<float> work;
    std::vector<uint8_t> seen;
    SampleResult r = sample_with_logprobs(raw, p, 3, prompt, gen, work, seen);
    std::vector<double> ls = log_softmax(raw);
    EXPECT_NEAR(r.logprob, ls[size_t(r.id)], 1e-5);
    // The top list: the p.logprobs largest, descending, ties by id.
    std::vector<int32_t> order(V);
    for (size_t i = 0; i < V; ++i) order[i] = int32_t(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return raw[size_t(a)] > raw[size_t(b)]; });
    ASSERT_EQ(r.top.size(), size_t(p.logprobs));
    for (size_t k = 0; k < r.top.size(); ++k) {
      EXPECT_EQ(r.top[k].id, order[k]) << "trial " << trial << " rank " << k;
      EXPECT_NEAR(r.top[k].logprob, ls[size_t(order[k])], 1e-5);
    }
  }
}

TEST(HostSampling, DrawMatchesSampleTokenOnThePenalisedLogits) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t V = 100;
    std::vector<float> raw = random_logits(rng, V);
    SamplingParams p;
    p.temperature = trial % 4 == 0 ? 0.0f : 0.3f + float(rng() % 10) * 0.2f;
    p.top_k = int(rng() % 3) * 10;
    p.top_p = trial % 2 ? 1.0f : 0.9f;
    p.min_p = trial % 5 == 0 ? 0.05f : 0.0f;
    p.seed = rng();
    p.logprobs = trial % 3 == 0 ? -1 : 2;
    const bool penal = trial % 2 == 1;
    if (penal) {
      p.presence_penalty = 0.5f;
      p.frequency_penalty = 1.0f;
      p.repetition_penalty = 1.3f;
    }
    std::vector<int32_t> prompt = random_ids(rng, 6, V), gen = random_ids(rng, 9, V);
    std::vector<float> work;
    std::vector<uint8_t> seen;
    const uint64_t step = uint64_t(trial);
    SampleResult r = sample_with_logprobs(raw, p, step, prompt, gen, work, seen);
    std::vector<float> direct(V);
    std::vector<double> pen = penalised(raw, p, prompt, gen);
    for (size_t t = 0; t < V; ++t) direct[t] = float(pen[t]);
    EXPECT_EQ(r.id, sample_token(direct, p, step)) << "trial " << trial;
    if (!penal) {
      EXPECT_EQ(r.id, sample_token(raw, p, step)) << "trial " << trial;
    }
  }
}

TEST(HostSampling, GreedyFrequencyPenaltyMovesOffARepeatedArgmax) {
  std::vector<float> l = {0.0f, 5.0f, 4.0f, 1.0f};
  SamplingParams p;
  p.frequency_penalty = 2.0f;
  std::vector<float> work;
  std::vector<uint8_t> seen;
  const std::vector<int32_t> prompt = {0};
  EXPECT_EQ(sample_with_logprobs(l, p, 0, prompt, {}, work, seen).id, 1);
  const std::vector<int32_t> once = {1};
  EXPECT_EQ(sample_with_logprobs(l, p, 1, prompt, once, work, seen).id, 2);
}

TEST(HostSampling, BadParamsAndIdsAreErrors) {
  std::vector<float> l(10, 0.0f);
  std::vector<float> work;
  std::vector<uint8_t> seen;
  auto bad = [&](auto set) {
    SamplingParams p;
    set(p);
    EXPECT_THROW(p.validate(), Error);
  };
  bad([](SamplingParams& p) { p.presence_penalty = 2.5f; });
  bad([](SamplingParams& p) { p.frequency_penalty = -2.01f; });
  bad([](SamplingParams& p) { p.frequency_penalty = NAN; });
  bad([](SamplingParams& p) { p.repetition_penalty = 0.0f; });
  bad([](SamplingParams& p) { p.repetition_penalty = INFINITY; });
  bad([](SamplingParams& p) { p.logprobs = -2; });
  SamplingParams p;
  p.presence_penalty = 1.0f;
  const std::vector<int32_t> outside = {10};
  EXPECT_THROW(sample_with_logprobs(l, p, 0, outside, {}, work, seen), Error);
  EXPECT_THROW(sample_with_logprobs(l, p, 0, {}, outside, work, seen), Error);
}

TEST(HostSampling, NeedsHostOnlyForPenaltiesOrLogprobs) {
  SamplingParams p;
  EXPECT_FALSE(p.needs_host());
  p.temperature = 0.8f;
  p.top_k = 5;
  EXPECT_FALSE(p.needs_host());
  p.logprobs = 0;
  EXPECT_TRUE(p.needs_host());
  p.logprobs = -1;
  p.repetition_penalty = 1.1f;
  EXPECT_TRUE(p.needs_host());
}

}  // namespace
}  // namespace hayate
