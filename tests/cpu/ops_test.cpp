// The CPU ops against straightforward double-precision formulas and against
// the invariants they must keep (RoPE is a rotation that depends only on
// relative position; attention is causal and GQA maps heads like repeat_kv).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "cpu/ops.h"

namespace hayate::cpu {
namespace {

std::vector<float> rnd(size_t n, uint64_t stream, float scale = 1.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * uniform_pm1(123, stream, i);
  return v;
}

void expect_close(const std::vector<float>& a, const std::vector<double>& ref, double tol) {
  ASSERT_EQ(a.size(), ref.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], ref[i], tol * (1.0 + std::abs(ref[i]))) << "index " << i;
}

TEST(CpuOps, MatmulMatchesDoubleSum) {
  // Token counts below, at and past the 4-token blocks; odd sizes exercise
  // the tail of the dot.
  for (int n : {1, 3, 4, 9}) {
    SCOPED_TRACE(n);
    const int out = 37, in = 29;
    auto W = rnd(size_t(out) * in, 1), x = rnd(size_t(n) * in, 2);
    std::vector<float> y(size_t(n) * out, NAN);
    matmul(W.data(), x.data(), y.data(), n, out, in);
    std::vector<double> ref(y.size());
    for (int t = 0; t < n; ++t)
      for (int o = 0; o < out; ++o) {
        double s = 0;
        for (int i = 0; i < in; ++i) s += double(W[size_t(o) * in + i]) * x[size_t(t) * in + i];
        ref[size_t(t) * out + o] = s;
      }
    expect_close(y, ref, 1e-5);
  }
}

// A token's outputs do not depend on the batch around it: the 4-token
// blocks sum each output in the one-token order, bit for bit (a single
// request is a batch of one, and batched and single runs must agree).
TEST(CpuOps, MatmulRowsAreTheSameInAnyBatch) {
  for (int in : {29, 128}) {
    const int n = 11, out = 70;
    auto W = rnd(size_t(out) * in, 5), x = rnd(size_t(n) * in, 6);
    std::vector<float> y(size_t(n) * out), one(static_cast<size_t>(out));
    matmul(W.data(), x.data(), y.data(), n, out, in);
    for (int t = 0; t < n; ++t) {
      matmul(W.data(), x.data() + size_t(t) * in, one.data(), 1, out, in);
      for (int o = 0; o < out; ++o)
        ASSERT_EQ(y[size_t(t) * out + o], one[size_t(o)])
            << "in " << in << " token " << t << " output " << o;
    }
  }
}

TEST(CpuOps, RmsnormMatchesFormula) {
  const int n = 2, dim = 50;
  auto x = rnd(size_t(n) * dim, 3, 4.0f), w = rnd(dim, 4);
  std::vector<float> y(x.size(), NAN);
  rmsnorm(x.data(), w.data(), y.data(), n, dim, 1e-5f);
  std::vector<double> ref(y.size());
  for (int t = 0; t < n; ++t) {
    double ss = 0;
    for (int i = 0; i < dim; ++i) ss += double(x[size_t(t) * dim + i]) * x[size_t(t) * dim + i];
    double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
    for (int i = 0; i < dim; ++i) ref[size_t(t) * dim + i] = x[size_t(t) * dim + i] * inv * w[i];
  }
  expect_close(y, ref, 1e-6);
}

TEST(CpuOps, SiluMulAndAdd) {
  const int n = 2, inter = 9;
  auto gu = rnd(size_t(n) * 2 * inter, 5, 3.0f);
  std::vector<float> out(size_t(n) * inter, NAN);
  silu_mul(gu.data(), out.data(), n, inter);
  std::vector<double> ref(out.size());
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < inter; ++j) {
      double g = gu[size_t(t) * 2 * inter + j], u = gu[size_t(t) * 2 * inter + inter + j];
      ref[size_t(t) * inter + j] = g / (1 + std::exp(-g)) * u;
    }
  expect_close(out, ref, 1e-6);
  auto a = rnd(10, 6), b = rnd(10, 7);
  std::vector<double> sum(10);
  for (size_t i = 0; i < 10; ++i) sum[i] = double(a[i]) + b[i];
  add(a.data(), b.data(), 10);
  expect_close(a, sum, 1e-7);
}

TEST(CpuOps, EmbeddingCopiesRowsAndRejectsBadIds) {
  const int vocab = 5, hidden = 3;
  auto table = rnd(size_t(vocab) * hidden, 8);
  std::vector<int32_t> ids{4, 0, 4};
  std::vector<float> out(ids.size() * hidden);
  embedding(ids, table.data(), vocab, hidden, out.data());
  for (size_t t = 0; t < ids.size(); ++t)
    for (int i = 0; i < hidden; ++i)
      EXPECT_EQ(out[t * hidden + i], table[size_t(ids[t]) * hidden + i]);
  std::vector<int32_t> bad{1, 5};
  EXPECT_THROW(embedding(bad, table.data(), vocab, hidden, out.data()), Error);
  std::vector<int32_t> neg{-1};
  EXPECT_THROW(embedding(neg, table.data(), vocab, hidden, out.data()), Error);
}

TEST(CpuOps, RopeIsARelativeRotation) {
  const int head_dim = 16, half = head_dim / 2;
  std::vector<float> inv_freq(half);
  for (int i = 0; i < half; ++i) inv_freq[i] = float(std::pow(10000.0, -2.0 * i / head_dim));
  auto q = rnd(head_dim, 9), k = rnd(head_dim, 10);
  auto rot = [&](std::vector<float> v, int pos) {
    rope(v.data(), 1, 1, head_dim, pos, inv_freq.data());
    return v;
  };
  auto dot = [](const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
    return s;
  };
  // Position 0 is the identity; a rotation keeps each (i, i + half) pair's norm.
  EXPECT_EQ(rot(q, 0), q);
  auto q7 = rot(q, 7);
  for (int i = 0; i < half; ++i)
    EXPECT_NEAR(std::hypot(q7[i], q7[i + half]), std::hypot(q[i], q[i + half]), 1e-5);
  // <rope(q, m), rope(k, n)> depends only on m - n.
  EXPECT_NEAR(dot(rot(q, 10), rot(k, 3)), dot(rot(q, 27), rot(k, 20)), 1e-4);
  // Rows are consecutive positions: a block of 3 rows equals 3 single calls.
  std::vector<float> block;
  for (int t = 0; t < 3; ++t) block.insert(block.end(), q.begin(), q.end());
  rope(block.data(), 3, 1, head_dim, 5, inv_freq.data());
  for (int t = 0; t < 3; ++t) {
    auto one = rot(q, 5 + t);
    for (int i = 0; i < head_dim; ++i) EXPECT_EQ(block[size_t(t) * head_dim + i], one[i]);
  }
}

TEST(CpuOps, AttentionMatchesNaiveGqaCausal) {
  const int n = 4, pos0 = 3, n_heads = 6, n_kv = 2, hd = 8, len = pos0 + n;
  const int kv_dim = n_kv * hd, group = n_heads / n_kv;
  auto q = rnd(size_t(n) * n_heads * hd, 11, 2.0f);
  auto kc = rnd(size_t(len + 5) * kv_dim, 12, 2.0f), vc = rnd(size_t(len + 5) * kv_dim, 13);
  // Poison the cache past the last position: causal attention must not read it.
  for (size_t i = size_t(len) * kv_dim; i < kc.size(); ++i) kc[i] = vc[i] = NAN;
  std::vector<float> out(q.size(), NAN);
  attention(q.data(), kc.data(), vc.data(), out.data(), n, pos0, n_heads, n_kv, hd);
  std::vector<double> ref(out.size());
  for (int t = 0; t < n; ++t)
    for (int h = 0; h < n_heads; ++h) {
      const int kvh = h / group;  // repeat_kv: kv head j serves heads [j*group, (j+1)*group)
      std::vector<double> w(size_t(pos0 + t + 1));
      double mx = -1e300, s = 0;
      for (int p = 0; p <= pos0 + t; ++p) {
        double d = 0;
        for (int i = 0; i < hd; ++i)
          d += double(q[(size_t(t) * n_heads + h) * hd + i]) * kc[size_t(p) * kv_dim + kvh * hd + i];
        w[size_t(p)] = d / std::sqrt(double(hd));
        mx = std::max(mx, w[size_t(p)]);
      }
      for (double& x : w) s += x = std::exp(x - mx);
      for (int i = 0; i < hd; ++i) {
        double acc = 0;
        for (int p = 0; p <= pos0 + t; ++p) acc += w[size_t(p)] / s * vc[size_t(p) * kv_dim + kvh * hd + i];
        ref[(size_t(t) * n_heads + h) * hd + i] = acc;
      }
    }
  expect_close(out, ref, 1e-5);
}

}  // namespace
}  // namespace hayate::cpu
