// The CPU backend on dummy:tiny without any outside reference: the paged KV
// cache must make every way of feeding a sequence (all at once, in chunks,
// token by token, rewritten from a position, next to another sequence) give
// the same logits, on any thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "core/check.h"
#include "cpu/cpu_paged_backend.h"
#include "model/model.h"

namespace hayate {
namespace {

class CpuBackendTest : public ::testing::Test {
 protected:
  // One model and one backend for the suite: converting dummy:tiny's 33M
  // weights is most of the time.
  static void SetUpTestSuite() {
    model_ = new Model(load_model("dummy:tiny", 1, HAYATE_ASSETS_DIR));
    BatchBackendOptions o;
    o.max_model_len = kCtx;
    o.block_size = 4;
    o.num_blocks = 2 * kCtx / 4;
    o.max_num_seqs = 2;
    o.max_logit_rows = 2 * kCtx;
    backend_ = make_cpu_paged_backend(*model_, o).release();
  }
  static void TearDownTestSuite() {
    delete backend_;
    delete model_;
  }
  static constexpr int kCtx = 32;
  int vocab() const { return model_->config.vocab_size; }
  std::vector<int32_t> tokens(int n, uint64_t seed) const {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i)
      t[size_t(i)] = int32_t((uint64_t(i) * 7919 + seed * 104729) % uint64_t(vocab()));
    return t;
  }
  // Sequence `slot` owns blocks [slot * kCtx / 4, (slot + 1) * kCtx / 4).
  static std::vector<int32_t> table(int slot) {
    std::vector<int32_t> t(kCtx / 4);
    std::iota(t.begin(), t.end(), slot * kCtx / 4);
    return t;
  }
  // All rows of logits for `toks` fed at `pos` to sequence `slot`.
  std::vector<float> run(std::span<const int32_t> toks, int pos, int slot = 0) {
    const std::vector<int32_t> t = table(slot);
    Batch b;
    b.seqs.push_back(BatchSeq{uint64_t(slot), toks, pos, t, false, true, nullptr, 0});
    b.num_tokens = int(toks.size());
    std::vector<int32_t> sampled(1, -1);
    backend_->step(b, sampled);
    std::vector<float> out(toks.size() * size_t(vocab()));
    backend_->last_chunk_logits(0, out);
    return out;
  }
  static Model* model_;
  static BatchBackend* backend_;
};
Model* CpuBackendTest::model_ = nullptr;
BatchBackend* CpuBackendTest::backend_ = nullptr;

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
  auto toks = tokens(12, 1);
  std::vector<float> all = run(toks, 0);
  const size_t V = size_t(vocab());
  for (size_t t = 0; t < toks.size(); ++t) {
    std::vector<float> row = run(std::span(toks).subspan(t, 1), int(t));
    EXPECT_LT(rel_err(row.data(), all.data() + t * V, V), 1e-6) << "position " << t;
  }
  // Chunks of 5 and 7.
  auto first = run(std::span(toks).first(5), 0);
  auto rest = run(std::span(toks).subspan(5), 5);
  EXPECT_LT(rel_err(first.data(), all.data(), 5 * V), 1e-6);
  EXPECT_LT(rel_err(rest.data(), all.data() + 5 * V, 7 * V), 1e-6);
}

TEST_F(CpuBackendTest, RewritingFromAPositionReplacesTheTail) {
  auto a = tokens(10, 2), c = tokens(9, 3);
  for (int i = 0; i < 4; ++i) c[size_t(i)] = a[size_t(i)];  // shared prefix of 4
  auto fresh = run(c, 0);
  run(a, 0);
  auto tail = run(std::span(c).subspan(4), 4);  // from position 4 on
  const size_t V = size_t(vocab());
  EXPECT_LT(rel_err(tail.data(), fresh.data() + 4 * V, 5 * V), 1e-6);
  auto again = run(c, 0);
  EXPECT_EQ(again, fresh);
}

TEST_F(CpuBackendTest, ABatchOfTwoEqualsEachAlone) {
  auto a = tokens(7, 4), c = tokens(3, 5);
  auto alone_a = run(a, 0, 0), alone_c = run(c, 0, 1);
  const std::vector<int32_t> ta = table(0), tc = table(1);
  SamplingParams greedy;
  Batch b;
  b.seqs.push_back(BatchSeq{0, a, 0, ta, true, true, &greedy, 0});
  b.seqs.push_back(BatchSeq{1, c, 0, tc, true, false, &greedy, 0});
  b.num_tokens = 10;
  std::vector<int32_t> sampled(2, -1);
  backend_->step(b, sampled);
  const size_t V = size_t(vocab());
  std::vector<float> rows(7 * V), last(V);
  backend_->last_chunk_logits(0, rows);
  EXPECT_EQ(rows, alone_a);
  EXPECT_THROW(backend_->last_chunk_logits(1, last), Error);  // it kept its sampling row only
  backend_->last_logits_row(1, last);
  EXPECT_EQ(last, std::vector<float>(alone_c.end() - ptrdiff_t(V), alone_c.end()));
  // Greedy picks are the argmax of each sequence's last row.
  const float* ra = alone_a.data() + 6 * V;
  EXPECT_EQ(sampled[0], int32_t(std::max_element(ra, ra + V) - ra));
  EXPECT_EQ(sampled[1], int32_t(std::max_element(last.begin(), last.end()) - last.begin()));
}

TEST_F(CpuBackendTest, SameBitsOnOneOrTwoThreads) {
  auto toks = tokens(6, 4);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  auto one = run(toks, 0);
  omp_set_num_threads(2);
  auto two = run(toks, 0);
  omp_set_num_threads(saved);
  EXPECT_EQ(one, two);
  for (float v : one) ASSERT_TRUE(std::isfinite(v));
}

TEST_F(CpuBackendTest, RejectsBadSteps) {
  EXPECT_EQ(backend_->max_model_len(), kCtx);
  EXPECT_EQ(backend_->name(), "cpu");
  EXPECT_GT(backend_->weight_bytes_per_token(), 0.0);
  std::vector<int32_t> ok{1, 2}, bad_id{1, vocab()}, neg_id{-3}, none;
  EXPECT_THROW(run(bad_id, 0), Error);
  EXPECT_THROW(run(neg_id, 0), Error);
  EXPECT_THROW(run(ok, kCtx - 1), Error);  // one past the capacity
  EXPECT_THROW(run(ok, -1), Error);
  EXPECT_THROW(run(none, 0), Error);
  EXPECT_NO_THROW(run(ok, kCtx - 2));
  // More logits rows than the backend keeps per step.
  auto many = tokens(kCtx, 6);
  std::vector<int32_t> t0 = table(0), t1 = table(1);
  Batch b;
  b.seqs.push_back(BatchSeq{0, many, 0, t0, false, true, nullptr, 0});
  b.seqs.push_back(BatchSeq{1, many, 0, t1, false, true, nullptr, 0});
  b.seqs[1].tokens = std::span<const int32_t>(many).first(kCtx);
  b.num_tokens = 2 * kCtx;
  std::vector<int32_t> sampled(2);
  EXPECT_NO_THROW(backend_->step(b, sampled));  // 64 rows: exactly the limit
  std::vector<int32_t> one_more = tokens(1, 7);
  b.seqs.push_back(BatchSeq{2, one_more, kCtx - 1, t1, true, false, nullptr, 0});
  b.num_tokens += 1;
  sampled.resize(3);
  EXPECT_THROW(backend_->step(b, sampled), Error);  // samples without params, and 65 rows
  auto timer = backend_->make_timer();
  timer->start();
  EXPECT_GE(timer->stop_ms(), 0.0);
}

}  // namespace
}  // namespace hayate
