// Properties of the host sampler: filters that reduce to greedy, seeded
// reproducibility, the support each filter allows, and that draws follow the
// softmax distribution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "engine/sampling.h"

namespace hayate {
namespace {

std::vector<float> random_logits(int vocab, uint64_t seed, float scale) {
  std::vector<float> v(static_cast<size_t>(vocab));
  for (int i = 0; i < vocab; ++i) v[size_t(i)] = scale * uniform_pm1(seed, 7, uint64_t(i));
  return v;
}

int argmax(const std::vector<float>& v) {
  return int(std::max_element(v.begin(), v.end()) - v.begin());
}

TEST(Sampling, ValidateRejectsBadValues) {
  auto bad = [](SamplingParams p) { EXPECT_THROW(p.validate(), Error); };
  SamplingParams p;
  p.temperature = -0.1f;
  bad(p);
  p = {};
  p.temperature = NAN;
  bad(p);
  p = {};
  p.top_p = 0.0f;
  bad(p);
  p = {};
  p.top_p = 1.5f;
  bad(p);
  p = {};
  p.top_k = -1;
  bad(p);
  p = {};
  p.min_p = 1.01f;
  bad(p);
  p = {};
  p.min_p = -0.5f;
  bad(p);
  SamplingParams ok;
  ok.temperature = 0.7f;
  ok.top_p = 1.0f;
  ok.top_k = 5;
  ok.min_p = 1.0f;
  EXPECT_NO_THROW(ok.validate());
  // The sampler validates too, so a bad request can never draw.
  std::vector<float> logits{1, 2, 3};
  p = {};
  p.top_p = 2.0f;
  EXPECT_THROW(sample_token(logits, p, 0), Error);
}

TEST(Sampling, GreedyIsArgmaxFirstOnTies) {
  std::vector<float> v = random_logits(1000, 1, 5.0f);
  EXPECT_EQ(sample_token(v, {}, 0), argmax(v));
  std::vector<float> ties{0.0f, 3.0f, 1.0f, 3.0f};
  EXPECT_EQ(sample_token(ties, {}, 0), 1);
}

TEST(Sampling, FiltersThatKeepOneTokenAreGreedy) {
  for (uint64_t s = 0; s < 20; ++s) {
    std::vector<float> v = random_logits(5000, s, 4.0f);
    const int best = argmax(v);
    SamplingParams k1;
    k1.temperature = 1.5f;
    k1.top_k = 1;
    k1.seed = s;
    SamplingParams p_tiny;
    p_tiny.temperature = 1.5f;
    p_tiny.top_p = 1e-6f;
    p_tiny.seed = s;
    SamplingParams m1;
    m1.temperature = 1.5f;
    m1.min_p = 1.0f;
    m1.seed = s;
    for (uint64_t step = 0; step < 5; ++step) {
      EXPECT_EQ(sample_token(v, k1, step), best);
      EXPECT_EQ(sample_token(v, p_tiny, step), best);
      EXPECT_EQ(sample_token(v, m1, step), best);
    }
  }
}

TEST(Sampling, SeedAndStepMakeTheDraw) {
  std::vector<float> v = random_logits(2000, 3, 1.0f);
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 42;
  std::vector<int32_t> a, b, c;
  for (uint64_t step = 0; step < 64; ++step) {
    a.push_back(sample_token(v, p, step));
    b.push_back(sample_token(v, p, step));
  }
  p.seed = 43;
  for (uint64_t step = 0; step < 64; ++step) c.push_back(sample_token(v, p, step));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // Different steps draw different numbers: a flat distribution over 2000
  // tokens gives many distinct ids in 64 steps.
  EXPECT_GT(std::set<int32_t>(a.begin(), a.end()).size(), 40u);
}

// Probabilities of softmax(v / t) in double, the independent reference.
std::vector<double> softmax(const std::vector<float>& v, double t) {
  double mx = *std::max_element(v.begin(), v.end());
  std::vector<double> p(v.size());
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += p[i] = std::exp((v[i] - mx) / t);
  for (double& x : p) x /= s;
  return p;
}

TEST(Sampling, DrawsFollowTheDistribution) {
  // 8 tokens, 40000 draws: each frequency within 5 standard errors.
  std::vector<float> v{0.1f, 1.2f, -0.7f, 0.9f, 2.0f, -1.5f, 0.0f, 1.4f};
  for (float t : {0.5f, 1.0f, 2.0f}) {
    std::vector<double> p = softmax(v, t);
    SamplingParams sp;
    sp.temperature = t;
    sp.seed = 9;
    const int draws = 40000;
    std::vector<int> count(v.size());
    for (int i = 0; i < draws; ++i) ++count[size_t(sample_token(v, sp, uint64_t(i)))];
    for (size_t i = 0; i < v.size(); ++i) {
      double se = std::sqrt(p[i] * (1 - p[i]) / draws);
      EXPECT_NEAR(double(count[i]) / draws, p[i], 5 * se + 1e-4) << "t=" << t << " token " << i;
    }
  }
}

TEST(Sampling, FiltersLimitTheSupport) {
  std::vector<float> v{3.0f, 2.5f, 2.0f, 1.0f, 0.0f, -1.0f};
  std::vector<double> p = softmax(v, 1.0);
  auto support = [&](SamplingParams sp) {
    std::set<int32_t> seen;
    for (uint64_t i = 0; i < 4000; ++i) seen.insert(sample_token(v, sp, i));
    return seen;
  };
  SamplingParams k;
  k.temperature = 1.0f;
  k.top_k = 3;
  EXPECT_EQ(support(k), (std::set<int32_t>{0, 1, 2}));
  // top-p: the smallest prefix with mass >= top_p. Just above p0 + p1 needs
  // a third token; just below needs two.
  SamplingParams tp;
  tp.temperature = 1.0f;
  tp.top_p = float(p[0] + p[1]) - 1e-4f;
  EXPECT_EQ(support(tp), (std::set<int32_t>{0, 1}));
  tp.top_p = float(p[0] + p[1]) + 1e-4f;
  EXPECT_EQ(support(tp), (std::set<int32_t>{0, 1, 2}));
  // min-p: tokens with p >= min_p * p_max.
  SamplingParams mp;
  mp.temperature = 1.0f;
  mp.min_p = float(p[3] / p[0]) - 1e-4f;
  EXPECT_EQ(support(mp), (std::set<int32_t>{0, 1, 2, 3}));
}

// Temperatures below kSamplingEps are greedy: 1e-44 made logits / T infinite
// and the softmax NaN, which picked reserved ids from the end of the vocabulary.
TEST(Sampling, TinyTemperaturesAreGreedy) {
  std::vector<float> v = random_logits(128256, 3, 4.0f);
  for (float t : {1e-44f, 1e-38f, 1e-30f, 1e-6f, 9.9e-6f}) {
    SamplingParams sp;
    sp.temperature = t;
    sp.seed = 11;
    EXPECT_TRUE(sp.greedy()) << t;
    for (uint64_t step = 0; step < 4; ++step) EXPECT_EQ(sample_token(v, sp, step), argmax(v)) << t;
    sp.top_k = 5;
    sp.min_p = 0.5f;
    EXPECT_EQ(sample_token(v, sp, 0), argmax(v)) << t;
  }
  SamplingParams sp;
  sp.temperature = 1e-5f;
  EXPECT_FALSE(sp.greedy());
}

// The sorted walk the sampler is defined by: every candidate sorted, then the
// filters and the draw over the sorted list. The sampler must pick the same ids
// without sorting the vocabulary.
int32_t reference_sample(const std::vector<float>& logits, const SamplingParams& p, uint64_t step) {
  struct C {
    float l;
    int32_t id;
  };
  std::vector<C> c;
  for (size_t i = 0; i < logits.size(); ++i) c.push_back({logits[i] / p.temperature, int32_t(i)});
  std::sort(c.begin(), c.end(),
            [](const C& a, const C& b) { return a.l > b.l || (a.l == b.l && a.id < b.id); });
  size_t keep = c.size();
  if (p.top_k > 0 && size_t(p.top_k) < keep) keep = size_t(p.top_k);
  std::vector<double> prob(keep);
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) total += prob[i] = std::exp(double(c[i].l) - double(c[0].l));
  for (double& q : prob) q /= total;
  if (p.top_p < 1.0f) {
    double before = 0.0;
    size_t n = 0;
    while (n < keep && before < double(p.top_p)) before += prob[n++];
    keep = std::max<size_t>(n, 1);
  }
  if (p.min_p > 0.0f) {
    size_t n = 1;
    while (n < keep && prob[n] >= double(p.min_p) * prob[0]) ++n;
    keep = n;
  }
  double mass = 0.0;
  for (size_t i = 0; i < keep; ++i) mass += prob[i];
  const double target = double(uniform01(p.seed, step, 0)) * mass;
  double acc = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    acc += prob[i];
    if (target < acc) return c[i].id;
  }
  return c[keep - 1].id;
}

TEST(Sampling, PartialSelectionPicksWhatTheSortedWalkPicks) {
  struct Case {
    float scale, temperature, top_p, min_p;
    int top_k;
  } cases[] = {
      {4.0f, 1.0f, 1.0f, 0.0f, 0},    {1.0f, 1.0f, 1.0f, 0.0f, 0},  // peaked, flat
      {0.01f, 1.0f, 1.0f, 0.0f, 0},   {4.0f, 0.7f, 0.9f, 0.0f, 0},
      {4.0f, 1.3f, 1.0f, 0.05f, 0},   {2.0f, 1.0f, 0.95f, 0.02f, 40},
      {8.0f, 0.5f, 0.5f, 0.0f, 1000}, {1.0f, 1.0f, 1.0f, 0.0f, 5000},
  };
  int n = 0;
  for (const auto& c : cases)
    for (uint64_t seed : {1u, 2u}) {
      std::vector<float> v = random_logits(8192, seed * 31 + uint64_t(c.top_k), c.scale);
      // Ties: the order breaks them by id.
      for (size_t i = 0; i < v.size(); i += 97) v[i] = v[0];
      SamplingParams sp;
      sp.temperature = c.temperature;
      sp.top_p = c.top_p;
      sp.min_p = c.min_p;
      sp.top_k = c.top_k;
      sp.seed = seed;
      for (uint64_t step = 0; step < 25; ++step, ++n)
        ASSERT_EQ(sample_token(v, sp, step), reference_sample(v, sp, step))
            << "case " << n << " step " << step;
    }
}

TEST(Sampling, TopKRenormalises) {
  // With top_k = 2 the two kept tokens share the mass in their own ratio.
  std::vector<float> v{1.0f, 0.0f, 0.5f, -3.0f};
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 2;
  sp.seed = 5;
  const int draws = 30000;
  int zero = 0;
  for (int i = 0; i < draws; ++i) {
    int32_t id = sample_token(v, sp, uint64_t(i));
    ASSERT_TRUE(id == 0 || id == 2);
    zero += id == 0;
  }
  double p0 = 1.0 / (1.0 + std::exp(-0.5));
  EXPECT_NEAR(double(zero) / draws, p0, 5 * std::sqrt(p0 * (1 - p0) / draws));
}

}  // namespace
}  // namespace hayate
