// Each decode/prefill kernel against its CPU twin (src/cpu/ops.h) on fresh
// random inputs, outputs poisoned first, in half and bf16.
#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/rng.h"
#include "cpu/ops.h"
#include "cuda/ops.h"
#include "gpu/gemv_ref.h"
#include "gpu/gpu_test_util.h"

namespace hayate::cuda::test {
namespace {

template <typename T>
class KernelTest : public SeededGpuTest {};
using Types = ::testing::Types<half, __nv_bfloat16>;
TYPED_TEST_SUITE(KernelTest, Types);

// The GEMV accumulates in fp32 in another order than the host: that is the
// only difference, so fp32-level tolerances apply (inputs are T-rounded).
constexpr float kAtol = kGemvAtol, kRtol = kGemvRtol;

TYPED_TEST(KernelTest, GemvPlainAndNormed) {
  using T = TypeParam;
  SCOPED_TRACE(::testing::Message() << "seed " << this->seed_);
  // K <= 4096 runs gemv2_kernel (two rounds in flight) unless two_rounds is
  // off; K = 5000 always runs gemv_kernel.
  for (auto [rows, K] : {std::pair{300, 1024}, std::pair{97, 136}, std::pair{4096, 4096},
                         std::pair{256, 5000}}) {
    auto W = random_vec(size_t(rows) * K, this->rng_, -0.1f, 0.1f);
    auto x = random_vec(K, this->rng_, -2.0f, 2.0f);
    auto nw = random_vec(K, this->rng_, 0.5f, 1.5f);
    round_to<T>(W);
    round_to<T>(nw);
    Dev<T> dW = dev_t<T>(W), dnw = dev_t<T>(nw);
    Dev<float> dx(x), dy(rows);
    std::vector<float> ref(rows), xn(K);
    cpu::matmul(W.data(), x.data(), ref.data(), 1, rows, K);
    cpu::rmsnorm(x.data(), nw.data(), xn.data(), 1, K, 1e-5f);
    std::vector<float> ref_n(rows);
    cpu::matmul(W.data(), xn.data(), ref_n.data(), 1, rows, K);
    for (bool two : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "rows " << rows << " K " << K << " two_rounds " << two);
      const GemvLaunch l{nullptr, false, 0, two};
      dy.poison();
      gemv<T>(dW.get(), rows, K, dx.get(), nullptr, 0.0f, dy.get(), l);
      expect_close(dy.download(), ref, kAtol, kRtol, "gemv");
      dy.poison();
      gemv<T>(dW.get(), rows, K, dx.get(), dnw.get(), 1e-5f, dy.get(), l);
      expect_close(dy.download(), ref_n, kAtol, kRtol, "gemv with rmsnorm");
    }
  }
}

TYPED_TEST(KernelTest, GemvResidual) {
  using T = TypeParam;
  SCOPED_TRACE(::testing::Message() << "seed " << this->seed_);
  const int rows = 512, K = 1408;
  auto W = random_vec(size_t(rows) * K, this->rng_, -0.1f, 0.1f);
  auto x = random_vec(K, this->rng_), h = random_vec(rows, this->rng_);
  round_to<T>(W);
  Dev<T> dW = dev_t<T>(W);
  std::vector<float> y(rows), want = h;
  cpu::matmul(W.data(), x.data(), y.data(), 1, rows, K);
  cpu::add(want.data(), y.data(), rows);
  for (bool two : {true, false}) {
    Dev<float> dx(x), dh(h);
    gemv_residual<T>(dW.get(), rows, K, dx.get(), dh.get(), GemvLaunch{nullptr, false, 0, two});
    expect_close(dh.download(), want, kAtol, kRtol, two ? "h += W x (two rounds)" : "h += W x");
  }
}

TYPED_TEST(KernelTest, GemvGateUpSilu) {
  using T = TypeParam;
  SCOPED_TRACE(::testing::Message() << "seed " << this->seed_);
  const int inter = 384, K = 128;
  auto W = random_vec(size_t(2 * inter) * K, this->rng_, -0.2f, 0.2f);
  auto h = random_vec(K, this->rng_, -3.0f, 3.0f), nw = random_vec(K, this->rng_, 0.5f, 1.5f);
  round_to<T>(W);
  round_to<T>(nw);
  Dev<T> dW = dev_t<T>(W), dnw = dev_t<T>(nw);
  Dev<float> dh(h), dact(inter);
  gemv_gate_up<T>(dW.get(), inter, K, dh.get(), dnw.get(), 1e-5f, dact.get(), nullptr, false);
  expect_close(dact.download(), ref_gate_up(W, h, nw, inter, K), kAtol, kRtol, "silu(gate) * up");
}

TYPED_TEST(KernelTest, GemvQkvRopeAndKvAppend) {
  using T = TypeParam;
  SCOPED_TRACE(::testing::Message() << "seed " << this->seed_);
  const int H = 4, Hkv = 2, d = 32, K = 128, ctx = 64, pos = 37;
  const int q_dim = H * d, kv_dim = Hkv * d, rows = q_dim + 2 * kv_dim;
  auto W = random_vec(size_t(rows) * K, this->rng_, -0.2f, 0.2f);
  auto h = random_vec(K, this->rng_, -3.0f, 3.0f), nw = random_vec(K, this->rng_, 0.5f, 1.5f);
  auto inv = random_vec(d / 2, this->rng_, 0.0f, 1.0f);
  round_to<T>(W);
  round_to<T>(nw);
  Dev<T> dW = dev_t<T>(W), dnw = dev_t<T>(nw), kc(size_t(ctx) * kv_dim), vc(size_t(ctx) * kv_dim);
  Dev<float> dh(h), dinv(inv), dq(q_dim);
  Dev<int32_t> dpos(std::vector<int32_t>{pos});
  gemv_qkv_rope<T>(dW.get(), {H, Hkv, d}, K, dh.get(), dnw.get(), 1e-5f, dinv.get(), dpos.get(),
                   dq.get(), kc.get(), vc.get(), nullptr, false);
  expect_qkv_rope(dq, kc, vc, ref_qkv_rope(W, h, nw, H, Hkv, d, K, pos, inv), q_dim, kv_dim, pos);
}

TYPED_TEST(KernelTest, PrefillRmsnormRopeKvSiluEmbed) {
  using T = TypeParam;
  SCOPED_TRACE(::testing::Message() << "seed " << this->seed_);
  const float rt = std::is_same_v<T, half> ? 1e-3f : 8e-3f;  // outputs rounded to T
  const int n = 5, D = 192, H = 4, Hkv = 2, d = 32, ctx = 32, pos0 = 9, inter = 96, vocab = 50;
  // rmsnorm: 4-wide (dim % 4 == 0; one and several chunks per thread) and scalar (odd dim)
  for (int dim : {D, 4100, 1001}) {
    SCOPED_TRACE(::testing::Message() << "rmsnorm dim " << dim);
    auto x = random_vec(size_t(n) * dim, this->rng_, -3.0f, 3.0f),
         w = random_vec(dim, this->rng_, 0.5f, 1.5f);
    round_to<T>(w);
    Dev<float> dx(x);
    Dev<T> dw = dev_t<T>(w), dout(size_t(n) * dim);
    rmsnorm<T>(dx.get(), dw.get(), n, dim, 1e-5f, dout.get(), nullptr);
    std::vector<float> ref(size_t(n) * dim);
    cpu::rmsnorm(x.data(), w.data(), ref.data(), n, dim, 1e-5f);
    expect_close(download_f(dout), ref, 1e-5f, rt, "rmsnorm");
    const std::vector<int32_t> rows = {3, 0, 3};  // gathered rows (the LM head's), repeats allowed
    Dev<int32_t> drows(rows);
    Dev<T> dg(rows.size() * size_t(dim));
    rmsnorm_gather<T>(dx.get(), drows.get(), dw.get(), int(rows.size()), dim, 1e-5f, dg.get(),
                      nullptr);
    std::vector<float> gref;
    for (int r : rows)
      gref.insert(gref.end(), ref.begin() + size_t(r) * dim, ref.begin() + size_t(r + 1) * dim);
    expect_close(download_f(dg), gref, 1e-5f, rt, "rmsnorm_gather");
  }
  // rope + kv append
  const int q_dim = H * d, kv_dim = Hkv * d, width = q_dim + 2 * kv_dim;
  auto qkv = random_vec(size_t(n) * width, this->rng_, -2.0f, 2.0f);
  auto inv = random_vec(d / 2, this->rng_, 0.0f, 1.0f);
  Dev<float> dqkv(qkv), dinv(inv), dq(size_t(n) * q_dim);
  Dev<T> kc(size_t(ctx) * kv_dim), vc(size_t(ctx) * kv_dim);
  Dev<int32_t> dpos(std::vector<int32_t>{pos0});
  rope_kv<T>(dqkv.get(), {H, Hkv, d}, n, dinv.get(), dpos.get(), dq.get(), kc.get(), vc.get(), nullptr);
  std::vector<float> q(size_t(n) * q_dim), k(size_t(n) * kv_dim), v(size_t(n) * kv_dim);
  for (int t = 0; t < n; ++t) {
    std::copy_n(qkv.begin() + t * width, q_dim, q.begin() + t * q_dim);
    std::copy_n(qkv.begin() + t * width + q_dim, kv_dim, k.begin() + t * kv_dim);
    std::copy_n(qkv.begin() + t * width + q_dim + kv_dim, kv_dim, v.begin() + t * kv_dim);
  }
  cpu::rope(q.data(), n, H, d, pos0, inv.data());
  cpu::rope(k.data(), n, Hkv, d, pos0, inv.data());
  expect_close(dq.download(), q, 1e-5f, 1e-5f, "q roped");
  auto kg = download_f(kc), vg = download_f(vc);
  expect_close(std::vector<float>(kg.begin() + pos0 * kv_dim, kg.begin() + (pos0 + n) * kv_dim), k, 1e-5f, rt, "k rows");
  expect_close(std::vector<float>(vg.begin() + pos0 * kv_dim, vg.begin() + (pos0 + n) * kv_dim), v, 1e-5f, rt, "v rows");
  // silu * mul: the 4-wide kernel (inter % 4 == 0) and the scalar one (odd inter)
  for (int width : {inter, inter + 1}) {
    auto gu = random_vec(size_t(n) * 2 * width, this->rng_, -4.0f, 4.0f);
    Dev<float> dgu(gu);
    Dev<T> dact(size_t(n) * width);  // poisoned
    silu_mul<T>(dgu.get(), n, width, dact.get(), nullptr);
    std::vector<float> act(size_t(n) * width);
    cpu::silu_mul(gu.data(), act.data(), n, width);
    expect_close(download_f(dact), act, 1e-5f, rt, width % 4 ? "silu_mul (scalar)" : "silu_mul");
  }
  // embedding
  auto table = random_vec(size_t(vocab) * D, this->rng_);
  round_to<T>(table);
  std::vector<int32_t> toks = {3, 49, 0, 3, 17};
  Dev<T> dtable = dev_t<T>(table);
  Dev<int32_t> dtok(toks);
  Dev<float> dh(size_t(n) * D);
  embed<T>(dtable.get(), dtok.get(), n, D, dh.get(), nullptr, false);
  std::vector<float> emb(size_t(n) * D);
  cpu::embedding(toks, table.data(), vocab, D, emb.data());
  expect_close(dh.download(), emb, 0.0f, 0.0f, "embedding");
}

TYPED_TEST(KernelTest, DummyWeightsMatchHostFormula) {
  using T = TypeParam;
  const size_t n = 1000003;
  const uint64_t seed = this->seed_, stream = 7;
  Dev<T> d(n);
  fill_dummy<T>(d.get(), n, seed, stream, 0.05f, 1.0f, 0, nullptr);
  auto got = download_f(d);
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const float host = 1.0f + 0.05f * uniform_pm1(seed, stream, i);  // model.cpp's expression
    bad += got[i] != from_t<T>(to_t<T>(host));
  }
  EXPECT_EQ(bad, 0u) << "seed " << seed;
}

TYPED_TEST(KernelTest, ConvertFromEveryFileDtype) {
  using T = TypeParam;
  auto v = random_vec(4099, this->rng_, -100.0f, 100.0f);
  std::vector<uint16_t> f16(v.size()), bf16(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    f16[i] = f32_to_f16(v[i]);
    bf16[i] = f32_to_bf16(v[i]);
  }
  Dev<float> src32(v);
  Dev<uint16_t> src16(f16), srcbf(bf16);
  Dev<T> out(v.size());
  const std::pair<const void*, std::vector<float>> cases[] = {
      {src32.get(), v},
      {src16.get(), [&] { std::vector<float> r(v.size()); for (size_t i = 0; i < v.size(); ++i) r[i] = f16_to_f32(f16[i]); return r; }()},
      {srcbf.get(), [&] { std::vector<float> r(v.size()); for (size_t i = 0; i < v.size(); ++i) r[i] = bf16_to_f32(bf16[i]); return r; }()}};
  for (int dt = 0; dt < 3; ++dt) {
    out.poison();
    convert<T>(cases[dt].first, dt, v.size(), out.get(), nullptr);
    std::vector<float> want = cases[dt].second;
    round_to<T>(want);
    expect_close(download_f(out), want, 0.0f, 0.0f, "convert");
  }
}

}  // namespace
}  // namespace hayate::cuda::test
