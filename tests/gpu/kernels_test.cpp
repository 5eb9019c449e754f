// The elementwise kernels (RMSNorm, SiLU*mul from fp32, the embedding) and
// the weight generation and conversion against their CPU twins (src/cpu/ops.h,
// the host formulas) on fresh random inputs, outputs poisoned first, in half
// and bf16. RoPE + the KV append into the paged pools and the T-input
// SiLU*mul: test_batch_kernels.cpp; attention: test_paged_attention.cpp.
#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/rng.h"
#include "cpu/ops.h"
#include "cuda/kv_copy.h"
#include "cuda/ops.h"
#include "gpu/gpu_test_util.h"

namespace hayate::cuda::test {
namespace {

template <typename T>
class KernelTest : public SeededGpuTest {};
using Types = ::testing::Types<half, __nv_bfloat16>;
TYPED_TEST_SUITE(KernelTest, Types);

TYPED_TEST(KernelTest, RmsnormSiluEmbed) {
  using T = TypeParam;
  SCOPED_TRACE(::testing::Message() << "seed " << this->seed_);
  const float rt = std::is_same_v<T, half> ? 1e-3f : 8e-3f;  // outputs rounded to T
  const int n = 5, D = 192, inter = 96, vocab = 50;
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

// Copy on write of KV blocks against cpu::copy_blocks: pairs in order (a
// copy may read a block an earlier pair wrote), every layer, 16-byte and
// element-wise paths (block sizes in bytes that are and are not multiples
// of 16), more pairs than one launch carries.
TYPED_TEST(KernelTest, CopyBlocks) {
  using T = TypeParam;
  SCOPED_TRACE(::testing::Message() << "seed " << this->seed_);
  const int layers = 3, blocks = 80;
  for (int64_t elems : {int64_t(16 * 64), int64_t(7 * 3)}) {
    SCOPED_TRACE(::testing::Message() << "block elems " << elems);
    std::vector<float> pool = random_vec(size_t(layers) * blocks * size_t(elems), this->rng_,
                                         -2.0f, 2.0f);
    round_to<T>(pool);
    std::vector<int32_t> pairs = {1, 4, 4, 2, 0, 5};  // 1 -> 4, then 4 (now 1's) -> 2, 0 -> 5
    for (int c = 0; c < 70; ++c) pairs.insert(pairs.end(), {10 + c % 5, 6 + c});
    const int n = int(pairs.size() / 2);
    Dev<T> d = dev_t<T>(pool);
    copy_blocks<T>(d.get(), layers, blocks, elems, pairs.data(), n, nullptr);
    cpu::copy_blocks(pool.data(), layers, blocks, elems, pairs.data(), n);
    expect_close(download_f(d), pool, 0.0f, 0.0f, "copy_blocks");
  }
}

}  // namespace
}  // namespace hayate::cuda::test
