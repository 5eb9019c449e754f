// Shared by the batched CUDA backend tests (test_batch_backend.cpp,
// test_batch_sampling.cpp): the fixture (dummy:tiny with the vocabulary cut
// to 512 ids, fp16 on the GPU; the CPU backend as the oracle), the host-sampler
// judge, per-row sampling parameters, an environment guard and an Engine run.
// A named namespace: gtest needs one fixture type per suite name across files.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "cpu/cpu_paged_backend.h"
#include "cuda/cuda_batch_backend.h"
#include "cuda/ops.h"
#include "engine/engine.h"
#include "engine/sampling.h"
#include "gpu/gpu_test_util.h"
#include "gpu/one_seq.h"
#include "model/model.h"

namespace hayate::batch_test {

constexpr int kVocab = 512;
constexpr int kMaxLen = 256;

class BatchBackendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (cuda_device_count() == 0) return;
    model_ = new Model(load_model("dummy:tiny", 7, HAYATE_ASSETS_DIR));
    // Same weights, fewer vocabulary rows (dummy values depend on the index only).
    model_->config.vocab_size = kVocab;
    model_->config.eos_ids = {};
    for (WeightSource& w : model_->weights)
      if (w.name == "embed" || w.name == "lm_head") w.shape[0] = kVocab;
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  }

  static BatchBackendOptions options(int num_blocks, int max_seqs = 8, int max_len = kMaxLen) {
    BatchBackendOptions o;
    o.num_blocks = num_blocks;
    o.block_size = 16;
    o.max_model_len = max_len;
    o.max_num_seqs = max_seqs;
    o.max_num_batched_tokens = 256;
    o.dtype = DType::F16;
    o.switches = Switches::from_environment();  // as the binary reads them (EnvGuard)
    return o;
  }

  // One sequence through the fp32 CPU backend, stepped by hand.
  static hayate::test::OwnedSeq single_cpu(int max_len = kMaxLen) {
    return hayate::test::own(hayate::test::cpu_oracle_backend(*model_, max_len));
  }

  static int32_t argmax(std::span<const float> v) {
    return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
  }

  // The GPU's greedy id must be the CPU's, unless the CPU's top-2 margin is
  // within 16-bit rounding (1e-2 of the logit scale); then the two must be that close.
  static void check_pick(int32_t gid, std::span<const float> c, const std::string& where) {
    const int32_t want = argmax(c);
    if (gid == want) return;
    ASSERT_GE(gid, 0);
    ASSERT_LT(gid, kVocab);
    const float scale = std::fabs(*std::max_element(
        c.begin(), c.end(), [](float a, float b) { return std::fabs(a) < std::fabs(b); }));
    EXPECT_LT(c[size_t(want)] - c[size_t(gid)], 1e-2f * scale)
        << where << ": " << gid << " vs " << want;
  }

  inline static Model* model_ = nullptr;
};

// Norm-wise relative error of GPU logits row j against the fp32 reference.
inline double rel_err(const std::vector<float>& gpu, size_t j, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t v = 0; v < ref.size(); ++v) {
    const double d = gpu[j * ref.size() + v] - ref[v];
    num += d * d;
    den += double(ref[v]) * ref[v];
  }
  return std::sqrt(num / den);
}

// Whether `id` is the host sampler's pick from logits `l` (engine/sampling.h),
// up to rounding: 0 = the host's id; 1 = another id, but the draw lands within
// `tol` (a share of the kept mass) of that id's interval, allowing a top-p or
// min-p cut within `tol` of its threshold (the device sums weights in float,
// the host in double; through the engine, fp16 logits against fp32 ones);
// greedy: a logit gap within tol of the logit scale. 2 = a real mismatch.
inline int judge(std::span<const float> l, const SamplingParams& p, uint64_t step, int32_t id,
                 double tol) {
  const int32_t want = sample_token(l, p, step);
  if (id == want) return 0;
  const size_t V = l.size();
  if (id < 0 || size_t(id) >= V) return 2;
  if (p.greedy()) {
    float scale = 0.0f;
    for (float x : l) scale = std::max(scale, std::fabs(x));
    return l[size_t(want)] - l[size_t(id)] <= tol * scale ? 1 : 2;
  }
  // The host's order (logit / T descending, ties by id) and its probabilities over the top-k.
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  auto scaled = [&](int32_t i) { return l[size_t(i)] / p.temperature; };
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return scaled(a) > scaled(b); });
  const size_t k = p.top_k > 0 ? std::min(size_t(p.top_k), V) : V;
  std::vector<double> prob(k), cum(k);
  double total = 0.0;
  for (size_t i = 0; i < k; ++i)
    total += prob[i] = std::exp(double(scaled(order[i])) - double(scaled(order[0])));
  for (size_t i = 0; i < k; ++i) cum[i] = (i ? cum[i - 1] : 0.0) + (prob[i] /= total);
  const size_t pos = size_t(std::find(order.begin(), order.begin() + long(k), id) - order.begin());
  if (pos == k) return 2;  // outside the top-k
  // Ends of the kept prefix that rounding allows: top-p's, then min-p's.
  std::vector<size_t> ends_p, ends_m;
  for (size_t n = 1; n <= k; ++n) {
    if (p.top_p >= 1.0f
            ? n == k
            : (n == 1 || cum[n - 2] < p.top_p + tol) && (n == k || cum[n - 1] >= p.top_p - tol))
      ends_p.push_back(n);
    if (p.min_p <= 0.0f ? n == k
                        : prob[n - 1] >= (p.min_p - tol) * prob[0] &&
                              (n == k || prob[n] < (p.min_p + tol) * prob[0]))
      ends_m.push_back(n);
  }
  const double u = uniform01(p.seed, step, 0);
  for (size_t a : ends_p)
    for (size_t b : ends_m) {
      const size_t n = std::min(a, b);
      if (pos >= n) continue;
      const double mass = cum[n - 1], target = u * mass;
      const double lo = pos ? cum[pos - 1] : 0.0, hi = cum[pos];
      const double dist = target < lo ? lo - target : target >= hi ? target - hi : 0.0;
      if (dist <= tol * mass) return 1;
    }
  return 2;
}

// Per-row sampling parameters: a mix of every filter (row % 4 == 0: greedy when
// `with_greedy`), fresh seeds and steps.
inline SamplingParams random_params(std::mt19937_64& rng, int row, int vocab, bool with_greedy) {
  const float temps[] = {0.5f, 0.8f, 1.0f, 1.3f}, top_ps[] = {1.0f, 0.95f, 0.7f, 0.3f};
  const float min_ps[] = {0.0f, 0.0f, 0.02f, 0.1f};
  const int top_ks[] = {0, 1, 7, 40, 300, vocab + 3};
  SamplingParams p;
  if (with_greedy && row % 4 == 0) return p;
  p.temperature = temps[rng() % 4];
  p.top_p = top_ps[rng() % 4];
  p.min_p = min_ps[rng() % 4];
  p.top_k = top_ks[rng() % 6];
  p.seed = rng();
  return p;
}

// Sets an environment variable for its lifetime (the lead may run the whole
// suite with HAYATE_BATCH_SAMPLER=rows; it is restored for the later tests).
class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (old) old_ = old;
    EXPECT_EQ(setenv(name, value, 1), 0);
  }
  ~EnvGuard() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// Runs the prompts through an Engine over `backend`; ids by request index.
inline std::map<RequestId, std::vector<int32_t>> run_engine(
    BatchBackend& backend, const std::vector<std::vector<int32_t>>& prompts, int max_tokens,
    int max_seqs, uint64_t* preemptions, const std::vector<SamplingParams>& params = {}) {
  EngineOptions eo;
  eo.max_num_seqs = max_seqs;
  eo.max_num_batched_tokens = 64;  // prompts go in chunks, mixed with decodes
  Engine engine(backend, nullptr, eo);
  std::map<RequestId, std::vector<int32_t>> out;
  std::vector<RequestId> ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EngineRequest r;
    r.prompt = prompts[i];
    if (i < params.size()) r.sampling = params[i];
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    auto* sink = &out;
    r.on_event = [sink](const EngineEvent& e) {
      auto& v = (*sink)[e.id];
      v.insert(v.end(), e.token_ids.begin(), e.token_ids.end());
    };
    ids.push_back(engine.submit(std::move(r)));
  }
  engine.run_until_idle();
  if (preemptions) *preemptions = engine.stats().preemptions_total;
  std::map<RequestId, std::vector<int32_t>> by_index;
  for (size_t i = 0; i < ids.size(); ++i) by_index[i] = out[ids[i]];
  return by_index;
}

}  // namespace hayate::batch_test
