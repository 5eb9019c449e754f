// The CPU backend on dummy:tiny without any outside reference: the KV cache
// must make every way of feeding a sequence (all at once, in chunks, token by
// token, after a rewind) give the same logits, on any thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "core/check.h"
#include "cpu/cpu_backend.h"
#include "model/model.h"

namespace hayate {
namespace {

class CpuBackendTest : public ::testing::Test {
 protected:
  // One model and one backend for the suite: converting dummy:tiny's 33M
  // weights is most of the time, and forward at position 0 starts afresh.
  static void SetUpTestSuite() {
    model_ = new Model(load_model("dummy:tiny", 1, HAYATE_ASSETS_DIR));
    BackendOptions o;
    o.max_context = kCtx;
    backend_ = make_cpu_backend(*model_, o).release();
  }
  static void TearDownTestSuite() {
    delete backend_;
    delete model_;
  }
  static constexpr int kCtx = 32;
  int vocab() const { return model_->config.vocab_size; }
  std::vector<int32_t> tokens(int n, uint64_t seed) const {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) t[size_t(i)] = int32_t((uint64_t(i) * 7919 + seed * 104729) % uint64_t(vocab()));
    return t;
  }
  // All rows of logits for `toks` fed at `pos`.
  std::vector<float> run(Backend& b, std::span<const int32_t> toks, int pos) {
    std::vector<float> out(toks.size() * size_t(vocab()));
    b.forward(toks, pos, out, true);
    return out;
  }
  static Model* model_;
  static Backend* backend_;
};
Model* CpuBackendTest::model_ = nullptr;
Backend* CpuBackendTest::backend_ = nullptr;

// ||a - b|| / ||b|| over a row range.
double rel_err(const float* a, const float* b, size_t n) {
  double d = 0, r = 0;
  for (size_t i = 0; i < n; ++i) {
    d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    r += double(b[i]) * b[i];
  }
  return std::sqrt(d / r);
}

TEST_F(CpuBackendTest, PrefillEqualsTokenByTokenDecode) {
  Backend* b = backend_;
  auto toks = tokens(12, 1);
  std::vector<float> all = run(*b, toks, 0);
  const size_t V = size_t(vocab());
  std::vector<float> row(V);
  for (size_t t = 0; t < toks.size(); ++t) {
    b->forward(std::span(toks).subspan(t, 1), int(t), row, false);
    EXPECT_LT(rel_err(row.data(), all.data() + t * V, V), 1e-6) << "position " << t;
  }
  // Chunks of 5 and 7, and last-row-only logits.
  auto first = run(*b, std::span(toks).first(5), 0);
  std::vector<float> last(V);
  b->forward(std::span(toks).subspan(5), 5, last, false);
  EXPECT_LT(rel_err(first.data() + 4 * V, all.data() + 4 * V, V), 1e-6);
  EXPECT_LT(rel_err(last.data(), all.data() + 11 * V, V), 1e-6);
}

TEST_F(CpuBackendTest, RewindReplacesTheTail) {
  Backend* b = backend_;
  auto a = tokens(10, 2), c = tokens(9, 3);
  for (int i = 0; i < 4; ++i) c[size_t(i)] = a[size_t(i)];  // shared prefix of 4
  auto fresh = run(*b, c, 0);
  run(*b, a, 0);
  auto tail = run(*b, std::span(c).subspan(4), 4);  // rewind to position 4
  const size_t V = size_t(vocab());
  EXPECT_LT(rel_err(tail.data(), fresh.data() + 4 * V, 5 * V), 1e-6);
  // And back to 0: a new request on the same backend.
  auto again = run(*b, c, 0);
  EXPECT_EQ(again, fresh);
}

TEST_F(CpuBackendTest, SameBitsOnOneOrTwoThreads) {
  auto toks = tokens(6, 4);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  auto one = run(*backend_, toks, 0);
  omp_set_num_threads(2);
  auto two = run(*backend_, toks, 0);
  omp_set_num_threads(saved);
  EXPECT_EQ(one, two);
  for (float v : one) ASSERT_TRUE(std::isfinite(v));
}

TEST_F(CpuBackendTest, RejectsBadCalls) {
  Backend* b = backend_;
  EXPECT_EQ(b->max_context(), kCtx);
  EXPECT_EQ(b->name(), "cpu");
  EXPECT_GT(b->weight_bytes_per_token(), 0.0);
  std::vector<float> row(static_cast<size_t>(vocab()));
  std::vector<int32_t> ok{1, 2};
  std::vector<int32_t> bad_id{1, vocab()};
  std::vector<int32_t> neg_id{-3};
  EXPECT_THROW(b->forward(bad_id, 0, row, false), Error);
  EXPECT_THROW(b->forward(neg_id, 0, row, false), Error);
  EXPECT_THROW(b->forward(ok, kCtx - 1, row, false), Error);  // one past the capacity
  EXPECT_THROW(b->forward(ok, -1, row, false), Error);
  EXPECT_THROW(b->forward({}, 0, row, false), Error);
  EXPECT_THROW(b->forward(ok, 0, row, true), Error);  // buffer holds one row, not two
  EXPECT_NO_THROW(b->forward(ok, kCtx - 2, row, false));
}

TEST_F(CpuBackendTest, ForwardSampleGreedyIsArgmax) {
  Backend* b = backend_;
  auto toks = tokens(5, 5);
  std::vector<float> row(static_cast<size_t>(vocab()));
  b->forward(toks, 0, row, false);
  int32_t best = int32_t(std::max_element(row.begin(), row.end()) - row.begin());
  EXPECT_EQ(b->forward_sample(toks, 0, SamplingParams{}, 0), best);
  auto timer = b->make_timer();
  timer->start();
  EXPECT_GE(timer->stop_ms(), 0.0);
}

}  // namespace
}  // namespace hayate
