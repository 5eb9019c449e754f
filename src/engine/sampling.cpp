// The host sampler. Order of the filters, as HF's logits warpers: temperature,
// then top-k, then top-p, then min-p; then one draw u = uniform01(seed, step, 0)
// walks the kept tokens sorted by probability (descending, ties by id). The
// CUDA sampler follows the same order and the same draw.
#include "engine/sampling.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/hot_loop.h"
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
  HAYATE_CHECK(min_tokens >= 0, "min_tokens must be >= 0, got ", min_tokens);
  for (size_t i = 0; i < logit_bias.size(); ++i) {
    const auto [id, bias] = logit_bias[i];
    HAYATE_CHECK(id >= 0, "logit_bias: token id ", id, " is negative");
    HAYATE_CHECK(i == 0 || logit_bias[i - 1].first < id, "logit_bias: ids must be sorted, unique");
    HAYATE_CHECK(std::isfinite(bias) && std::fabs(bias) <= 100.0f,
                 "logit_bias: bias of token ", id, " must be in [-100, 100], got ", bias);
  }
  for (int32_t id : suppressed) HAYATE_CHECK(id >= 0, "suppressed token id ", id, " is negative");
  for (const std::vector<int32_t>& w : bad_words) {
    HAYATE_CHECK(!w.empty(), "bad_words: an entry has no token ids");
    for (int32_t id : w) HAYATE_CHECK(id >= 0, "bad_words: token id ", id, " is negative");
  }
}

void apply_logit_edits(std::span<float> logits, const SamplingParams& p,
                       std::span<const int32_t> generated) {
  const size_t V = logits.size();
  for (const auto& [id, bias] : p.logit_bias) {
    HAYATE_CHECK(size_t(id) < V, "logit_bias: token id ", id, " is outside the vocabulary");
    logits[size_t(id)] += bias;
  }
  for (int32_t id : p.suppressed) {
    HAYATE_CHECK(size_t(id) < V, "suppressed token id ", id, " is outside the vocabulary");
    logits[size_t(id)] = -INFINITY;
  }
  // vLLM's rule: a word of n ids bans its last id once the generated ids end
  // with its first n - 1 (a one-id word is banned everywhere).
  for (const std::vector<int32_t>& w : p.bad_words) {
    const size_t prefix = w.size() - 1;
    if (prefix > generated.size()) continue;
    if (!std::equal(w.begin(), w.end() - 1, generated.end() - ptrdiff_t(prefix))) continue;
    HAYATE_CHECK(size_t(w.back()) < V, "bad_words: token id ", w.back(),
                 " is outside the vocabulary");
    logits[size_t(w.back())] = -INFINITY;
  }
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
  double w = 0.0;  // probability, once computed
};

// Descending by logit, then ascending by id: a total order, so the kept set and
// the walk are the same on every run and backend.
bool before(const Cand& a, const Cand& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// The vocabulary-wide loops of one draw run on raw pointers, each sized by
// its caller just before (HAYATE_HOT_LOOP, core/hot_loop.h).

// c[i] = {logits[i] / temperature, i}; returns the largest scaled logit.
HAYATE_HOT_LOOP float scale_logits(const float* logits, size_t n, float temperature, Cand* c) {
  float mx = -INFINITY;
  for (size_t i = 0; i < n; ++i) {
    c[i].logit = logits[i] / temperature;
    c[i].id = int32_t(i);
    c[i].w = 0.0;
    mx = std::max(mx, c[i].logit);
  }
  return mx;
}

// Softmax weights over c[0, n) in double, max subtracted; returns their sum.
HAYATE_HOT_LOOP double softmax_weights(Cand* c, size_t n, float mx) {
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += c[i].w = std::exp(double(c[i].logit) - double(mx));
  for (size_t i = 0; i < n; ++i) c[i].w /= total;
  return total;
}

// The allowed ids of a mask (bit t of word t / 32) with finite logits, in id
// order, into kept/ids (each sized n); returns how many.
HAYATE_HOT_LOOP size_t compact_allowed(const float* logits, size_t n, const uint32_t* mask,
                                       float* kept, int32_t* ids) {
  size_t k = 0;
  for (size_t t = 0; t < n; ++t) {
    if (!((mask[t / 32] >> (t % 32)) & 1u) || logits[t] == -INFINITY) continue;
    kept[k] = logits[t];
    ids[k++] = int32_t(t);
  }
  return k;
}

// The candidates in the total order without sorting them all: a counting sort
// into buckets of equal logit width (bucket 0 holds the largest), each bucket
// sorted only when a walk has to look inside it. Every filter and the draw
// keeps a prefix of the order, found from the buckets' masses: one pass to
// bucket, a few small sorts, instead of sorting the vocabulary. Sums over
// buckets round differently from one running sum only in a double's last bits.
class Ordered {
 public:
  struct Scratch {
    std::vector<uint32_t> items;  // candidate indices grouped by bucket
    std::vector<uint16_t> of;     // each candidate's bucket
    std::vector<uint32_t> start, fill;
    std::vector<double> mass;
    std::vector<uint8_t> sorted;
  };

  Ordered(const std::vector<Cand>& c, size_t n, float top, Scratch& s) : c_(c), s_(s) {
    // The range of candidates with mass: masked ids (-inf logits) would
    // stretch it to infinity; they land in the last bucket.
    const float low = lowest_weighted(c.data(), n, top);
    const size_t buckets = n <= kSortAll ? 1 : std::min<size_t>(n / 16, 8192);
    const double scale = top > low ? double(buckets) / (double(top) - double(low)) : 0.0;
    s.of.resize(n);
    s.start.assign(buckets + 1, 0);
    s.mass.assign(buckets, 0.0);
    s.items.resize(n);
    s.fill.resize(buckets);
    bucket(c.data(), n, top, scale, buckets, s.of.data(), s.start.data(), s.mass.data(),
           s.fill.data(), s.items.data());
    s.sorted.assign(buckets, 0);
  }

  const Cand& operator[](size_t i) const { return c_[s_.items[i]]; }

  // The smallest logit with weight (masked ids, -inf, have none), or top.
  HAYATE_HOT_LOOP static float lowest_weighted(const Cand* c, size_t n, float top) {
    float low = top;
    for (size_t i = 0; i < n; ++i)
      if (c[i].w > 0.0) low = std::min(low, c[i].logit);
    return low;
  }

  // A counting sort of c[0, n) into `buckets` (of: each one's bucket; start:
  // bucket offsets, buckets + 1 zeroed; mass: bucket sums, zeroed; fill:
  // buckets' cursors; items: indices grouped by bucket).
  HAYATE_HOT_LOOP static void bucket(const Cand* c, size_t n, float top, double scale,
                                     size_t buckets, uint16_t* of, uint32_t* start, double* mass,
                                     uint32_t* fill, uint32_t* items) {
    for (size_t i = 0; i < n; ++i) {
      // Monotone in the logit: a larger logit never lands in a later bucket.
      const auto b =
          uint16_t(std::min(double(buckets - 1), (double(top) - double(c[i].logit)) * scale));
      of[i] = b;
      start[b + 1]++;
      mass[b] += c[i].w;
    }
    for (size_t b = 0; b < buckets; ++b) start[b + 1] += start[b];
    for (size_t b = 0; b < buckets; ++b) fill[b] = start[b];
    for (size_t i = 0; i < n; ++i) items[fill[of[i]]++] = uint32_t(i);
  }

  // The position of the first candidate, among the first `end`, at which the
  // running mass reaches `target` (exceeds it when `strict`); end - 1 if none.
  size_t cross(double target, bool strict, size_t end) {
    auto reached = [&](double sum) { return strict ? sum > target : sum >= target; };
    double acc = 0.0;
    for (size_t b = 0; b + 1 < s_.start.size() && s_.start[b] < end; ++b) {
      if (s_.start[b + 1] <= end && !reached(acc + s_.mass[b])) {
        acc += s_.mass[b];
        continue;
      }
      sort(b);
      for (size_t i = s_.start[b]; i < std::min<size_t>(s_.start[b + 1], end); ++i) {
        acc += (*this)[i].w;
        if (reached(acc)) return i;
      }
    }
    return end - 1;
  }

  // The first position, among the first `end`, whose probability is below `floor`.
  size_t first_below(double floor, size_t end) {
    for (size_t b = 0; b + 1 < s_.start.size() && s_.start[b] < end; ++b) {
      const size_t hi = std::min<size_t>(s_.start[b + 1], end);
      bool any = false;
      for (size_t i = s_.start[b]; i < hi && !any; ++i) any = (*this)[i].w < floor;
      if (!any) continue;
      sort(b);
      for (size_t i = s_.start[b]; i < hi; ++i)
        if ((*this)[i].w < floor) return i;
    }
    return end;
  }

  double mass(size_t end) const {
    double m = 0.0;
    size_t b = 0;
    for (; b + 1 < s_.start.size() && s_.start[b + 1] <= end; ++b) m += s_.mass[b];
    for (size_t i = s_.start[b]; i < end; ++i) m += (*this)[i].w;
    return m;
  }

 private:
  static constexpr size_t kSortAll = 2048;  // fewer candidates are simply sorted

  void sort(size_t b) {
    if (s_.sorted[b]) return;
    s_.sorted[b] = 1;
    std::sort(s_.items.begin() + ptrdiff_t(s_.start[b]),
              s_.items.begin() + ptrdiff_t(s_.start[b + 1]),
              [&](uint32_t x, uint32_t y) { return before(c_[x], c_[y]); });
  }

  const std::vector<Cand>& c_;
  Scratch& s_;
};

// Per-thread buffers, reused from token to token: fresh vocabulary-sized
// buffers for every sampled token page-fault in again each time (the
// allocator returns them to the system), which costs more than the sampling.
struct SampleScratch {
  std::vector<Cand> cand;
  Ordered::Scratch order;
};

}  // namespace

int32_t sample_token(std::span<const float> logits, const SamplingParams& p, uint64_t step) {
  HAYATE_CHECK(!logits.empty(), "sample_token: empty logits");
  p.validate();
  if (p.greedy()) return argmax(logits);

  thread_local SampleScratch scratch;
  const size_t V = logits.size();
  std::vector<Cand>& c = scratch.cand;
  c.resize(V);
  const float mx = scale_logits(logits.data(), V, p.temperature, c.data());

  // top-k: keep the k best (all when k is 0 or >= V).
  size_t keep = V;
  if (p.top_k > 0 && size_t(p.top_k) < V) {
    keep = size_t(p.top_k);
    std::nth_element(c.begin(), c.begin() + ptrdiff_t(keep) - 1, c.end(), before);
  }

  // Softmax over the kept tokens in double, max subtracted.
  const double total = softmax_weights(c.data(), keep, mx);
  Ordered order(c, keep, mx, scratch.order);

  // top-p: the smallest prefix whose mass reaches top_p (token i is kept when
  // the mass before it is below top_p; the first token is always kept).
  if (p.top_p < 1.0f) keep = order.cross(double(p.top_p), false, keep) + 1;
  // min-p: drop tokens below min_p times the top probability (a ratio, so it
  // does not matter whether the earlier filters renormalised); the top
  // token's probability is exp(0) / total.
  if (p.min_p > 0.0f) keep = std::max<size_t>(order.first_below(double(p.min_p) / total, keep), 1);

  // Inverse-CDF draw over the kept, renormalised mass, walking the order.
  const double target = double(uniform01(p.seed, step, 0)) * order.mass(keep);
  return order[order.cross(target, true, keep)].id;
}

int32_t sample_token_masked(std::span<const float> logits, std::span<const uint32_t> mask,
                            const SamplingParams& p, uint64_t step) {
  HAYATE_CHECK(mask.size() * 32 >= logits.size(), "sample_token_masked: ", mask.size(),
               " mask words for ", logits.size(), " logits");
  // Masked ids have no weight, so dropping them keeps every filter and the
  // draw as over the full row; the kept ids stay in id order (ties alike).
  thread_local std::vector<float> kept;
  thread_local std::vector<int32_t> ids;
  kept.resize(logits.size());
  ids.resize(logits.size());
  const size_t n = compact_allowed(logits.data(), logits.size(), mask.data(), kept.data(), ids.data());
  if (n == 0) return -1;
  return ids[size_t(sample_token(std::span<const float>(kept.data(), n), p, step))];
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
  if (p.has_penalties() || p.has_logit_edits()) {
    work.assign(logits.begin(), logits.end());
    apply_logit_edits(work, p, generated);
    if (p.has_penalties()) apply_penalties(work, p, prompt, generated, seen);
    use = work;
  }
  r.id = sample_token(use, p, step);
  if (p.logprobs < 0) return r;
  SampleResult lp = logprobs_of(logits, r.id, p.logprobs);
  return lp;
}

SampleResult logprobs_of(std::span<const float> logits, int32_t id, int top) {
  HAYATE_CHECK(!logits.empty() && id >= 0 && size_t(id) < logits.size() && top >= 0,
               "logprobs_of: id ", id, " of ", logits.size(), " logits, top ", top);
  SampleResult r;
  r.id = id;
  // log_softmax of the raw logits in double, max subtracted: lse = mx + log sum exp(l - mx).
  const size_t V = logits.size();
  double mx = logits[0];
  for (float l : logits) mx = std::max(mx, double(l));
  double sum = 0.0;
  for (float l : logits) sum += std::exp(double(l) - mx);
  const double lse = mx + std::log(sum);
  r.logprob = float(double(logits[size_t(r.id)]) - lse);
  const Cand self{logits[size_t(id)], id};
  r.rank = 1;
  for (size_t i = 0; i < V; ++i) r.rank += before(Cand{logits[i], int32_t(i)}, self) ? 1 : 0;

  // The N best in sample_token's total order, by insertion into a sorted
  // list of at most N (N is small: the server allows 20).
  const size_t N = std::min(size_t(top), V);
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

void prompt_logprobs(std::span<const float> rows, size_t vocab, int pos,
                     std::span<const int32_t> prompt, int top, std::vector<SampleResult>& out) {
  HAYATE_CHECK(vocab > 0 && rows.size() % vocab == 0 && pos >= 0, "prompt_logprobs: ",
               rows.size(), " logits for rows of ", vocab, " at position ", pos);
  if (out.size() + 1 < prompt.size()) out.resize(prompt.size() - 1);
  for (size_t r = 0; r < rows.size() / vocab; ++r) {
    const size_t at = size_t(pos) + r;  // scores prompt[at + 1]
    if (at + 1 >= prompt.size()) break;
    out[at] = logprobs_of(rows.subspan(r * vocab, vocab), prompt[at + 1], top);
  }
}

}  // namespace hayate
