// The host sampler. Order of the filters, as HF's logits warpers: temperature,
// then top-k, then top-p, then min-p; then one draw u = uniform01(seed, step, 0)
// walks the kept tokens sorted by probability (descending, ties by id). The
// CUDA sampler follows the same order and the same draw.
#include "engine/sampling.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/rng.h"

namespace hayate {

void SamplingParams::validate() const {
  HAYATE_CHECK(std::isfinite(temperature) && temperature >= 0.0f, "temperature must be >= 0, got ",
               temperature);
  HAYATE_CHECK(std::isfinite(top_p) && top_p > 0.0f && top_p <= 1.0f,
               "top_p must be in (0, 1], got ", top_p);
  HAYATE_CHECK(top_k >= 0, "top_k must be >= 0 (0 = off), got ", top_k);
  HAYATE_CHECK(std::isfinite(min_p) && min_p >= 0.0f && min_p <= 1.0f,
               "min_p must be in [0, 1], got ", min_p);
  HAYATE_CHECK(std::isfinite(presence_penalty) && std::fabs(presence_penalty) <= 2.0f,
               "presence_penalty must be in [-2, 2], got ", presence_penalty);
  HAYATE_CHECK(std::isfinite(frequency_penalty) && std::fabs(frequency_penalty) <= 2.0f,
               "frequency_penalty must be in [-2, 2], got ", frequency_penalty);
  HAYATE_CHECK(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f,
               "repetition_penalty must be > 0, got ", repetition_penalty);
  HAYATE_CHECK(logprobs >= -1, "logprobs must be >= -1 (-1 = none), got ", logprobs);
}

namespace {

// First index of the largest value (torch.argmax picks the first on ties).
int32_t argmax(std::span<const float> v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = i;
  return int32_t(best);
}

struct Cand {
  float logit;
  int32_t id;
};

// Descending by logit, then ascending by id: a total order, so the kept set and
// the walk are the same on every run and backend.
bool before(const Cand& a, const Cand& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

}  // namespace

int32_t sample_token(std::span<const float> logits, const SamplingParams& p, uint64_t step) {
  HAYATE_CHECK(!logits.empty(), "sample_token: empty logits");
  p.validate();
  if (p.greedy()) return argmax(logits);

  const size_t V = logits.size();
  std::vector<Cand> c(V);
  for (size_t i = 0; i < V; ++i) c[i] = {logits[i] / p.temperature, int32_t(i)};

  // top-k: keep the k best (all when k is 0 or >= V).
  size_t keep = V;
  if (p.top_k > 0 && size_t(p.top_k) < V) {
    keep = size_t(p.top_k);
    std::nth_element(c.begin(), c.begin() + keep - 1, c.end(), before);
    c.resize(keep);
  }
  std::sort(c.begin(), c.end(), before);

  // Softmax over the kept tokens in double, max subtracted.
  std::vector<double> prob(keep);
  const double mx = c[0].logit;
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) total += prob[i] = std::exp(double(c[i].logit) - mx);
  for (double& q : prob) q /= total;

  // top-p: the smallest prefix whose mass reaches top_p (token i is kept when
  // the mass before it is below top_p; the first token is always kept).
  if (p.top_p < 1.0f) {
    double before_mass = 0.0;
    size_t n = 0;
    while (n < keep && before_mass < double(p.top_p)) before_mass += prob[n++];
    keep = std::max<size_t>(n, 1);
  }
  // min-p: drop tokens below min_p times the top probability (a ratio, so it
  // does not matter whether the earlier filters renormalised).
  if (p.min_p > 0.0f) {
    const double floor = double(p.min_p) * prob[0];
    size_t n = 1;
    while (n < keep && prob[n] >= floor) ++n;
    keep = n;
  }

  // Inverse-CDF draw over the kept, renormalised mass.
  double mass = 0.0;
  for (size_t i = 0; i < keep; ++i) mass += prob[i];
  const double target = double(uniform01(p.seed, step, 0)) * mass;
  double acc = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    acc += prob[i];
    if (target < acc) return c[i].id;
  }
  return c[keep - 1].id;  // rounding left target at the very end
}

}  // namespace hayate

namespace hayate {

namespace {

void check_ids(std::span<const int32_t> ids, size_t V) {
  for (int32_t t : ids)
    HAYATE_CHECK(t >= 0 && size_t(t) < V, "penalties: token id ", t, " outside the vocabulary [0, ",
                 V, ")");
}

// seen bits: 1 = repetition penalty applied, 2 = presence penalty applied.
constexpr uint8_t kRepeated = 1, kPresent = 2;

}  // namespace

void apply_penalties(std::span<float> logits, const SamplingParams& p,
                     std::span<const int32_t> prompt, std::span<const int32_t> generated,
                     std::vector<uint8_t>& seen) {
  const size_t V = logits.size();
  check_ids(prompt, V);
  check_ids(generated, V);
  if (seen.size() != V) seen.assign(V, 0);
  if (p.repetition_penalty != 1.0f) {
    // Once per distinct id of prompt + generated (HF gathers the scores of the
    // ids, so a repeated id is penalised once).
    for (std::span<const int32_t> ids : {prompt, generated})
      for (int32_t t : ids) {
        if (seen[size_t(t)] & kRepeated) continue;
        seen[size_t(t)] |= kRepeated;
        float& l = logits[size_t(t)];
        l = l > 0.0f ? l / p.repetition_penalty : l * p.repetition_penalty;
      }
  }
  // frequency_penalty * count: subtracted once per occurrence.
  if (p.frequency_penalty != 0.0f)
    for (int32_t t : generated) logits[size_t(t)] -= p.frequency_penalty;
  if (p.presence_penalty != 0.0f)
    for (int32_t t : generated) {
      if (seen[size_t(t)] & kPresent) continue;
      seen[size_t(t)] |= kPresent;
      logits[size_t(t)] -= p.presence_penalty;
    }
  // Back to all zeros, touching only what was set (seen is vocab-sized).
  for (std::span<const int32_t> ids : {prompt, generated})
    for (int32_t t : ids) seen[size_t(t)] = 0;
}

SampleResult sample_with_logprobs(std::span<const float> logits, const SamplingParams& p,
                                  uint64_t step, std::span<const int32_t> prompt,
                                  std::span<const int32_t> generated, std::vector<float>& work,
                                  std::vector<uint8_t>& seen) {
  HAYATE_CHECK(!logits.empty(), "sample_with_logprobs: empty logits");
  SampleResult r;
  std::span<const float> use = logits;
  if (p.has_penalties()) {
    work.assign(logits.begin(), logits.end());
    apply_penalties(work, p, prompt, generated, seen);
    use = work;
  }
  r.id = sample_token(use, p, step);
  if (p.logprobs < 0) return r;

  // log_softmax of the raw logits in double, max subtracted: lse = mx + log sum exp(l - mx).
  const size_t V = logits.size();
  double mx = logits[0];
  for (float l : logits) mx = std::max(mx, double(l));
  double sum = 0.0;
  for (float l : logits) sum += std::exp(double(l) - mx);
  const double lse = mx + std::log(sum);
  r.logprob = float(double(logits[size_t(r.id)]) - lse);

  // The N best in sample_token's total order, by insertion into a sorted
  // list of at most N (N is small: the server allows 20).
  const size_t N = std::min(size_t(p.logprobs), V);
  std::vector<Cand> best;
  best.reserve(N + 1);
  for (size_t i = 0; i < V && N > 0; ++i) {
    Cand c{logits[i], int32_t(i)};
    if (best.size() == N && !before(c, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), c, before), c);
    if (best.size() > N) best.pop_back();
  }
  r.top.reserve(N);
  for (const Cand& c : best) r.top.push_back({c.id, float(double(c.logit) - lse)});
  return r;
}

}  // namespace hayate
