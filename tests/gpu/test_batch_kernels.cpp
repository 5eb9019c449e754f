// The batched backend's T-input kernel variants (what its cuBLASLt path feeds
// them: QKV and gate/up GEMM outputs in T) against their CPU twins, on fresh
// random inputs rounded to T, outputs poisoned first, in half and bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <tuple>
#include <type_traits>

#include "cpu/ops.h"
#include "cuda/ops.h"
#include "cuda/paged_attention.cuh"
#include "gpu/gpu_test_util.h"

namespace hayate::cuda::test {
namespace {

template <typename T>
class BatchKernelTest : public SeededGpuTest {};
using Types = ::testing::Types<half, __nv_bfloat16>;
TYPED_TEST_SUITE(BatchKernelTest, Types);

template <typename T>
float out_rtol() {
  return std::is_same_v<T, half> ? 1e-3f : 8e-3f;  // one rounding to T
}

// Token rows of two sequences in one launch (a prefill chunk of seq 0 at
// positions 3..7 and decode rows of seq 1 at 17 and of seq 0's neighbour at
// 40), block tables that scatter positions over the pool, per head_dim; the
// QKV rows in T (the lt GEMM's output) and in fp32 (the ex path's); with
// Qwen2's q/k/v biases (pre & 1) and Qwen3's per-head q/k norms (pre & 2)
// against cpu::add_bias and cpu::qk_norm before cpu::rope.
TYPED_TEST(BatchKernelTest, PagedRopeKvFromTAndF32) {
  using T = TypeParam;
  SCOPED_TRACE(::testing::Message() << "seed " << this->seed_);
  for (auto [H, Hkv, d, f32_in, pre] :
       {std::tuple{4, 2, 32, false, 0}, std::tuple{8, 2, 128, false, 0},
        std::tuple{6, 6, 64, false, 0}, std::tuple{8, 2, 128, true, 0},
        std::tuple{4, 2, 32, true, 0},
        std::tuple{2, 1, 12, false, 0},  // head_dim 12: the scalar (V = 1) path
        std::tuple{7, 1, 32, false, 1}, std::tuple{7, 1, 32, true, 1},
        std::tuple{8, 2, 128, false, 2}, std::tuple{32, 8, 128, true, 2},
        std::tuple{4, 2, 64, false, 3}, std::tuple{2, 1, 12, false, 3}}) {
    SCOPED_TRACE(::testing::Message() << "H " << H << " Hkv " << Hkv << " d " << d << " input "
                                      << (f32_in ? "fp32" : "T") << " pre " << pre);
    const int bs = 4, max_blocks = 16, num_blocks = 3 * max_blocks;
    const int q_dim = H * d, kv_dim = Hkv * d, width = q_dim + 2 * kv_dim;
    const std::vector<int32_t> pos = {3, 4, 5, 6, 7, 17, 40}, seq = {0, 0, 0, 0, 0, 1, 2};
    const int n = int(pos.size());
    std::vector<int32_t> tables(3 * max_blocks);
    std::iota(tables.begin(), tables.end(), 0);
    std::shuffle(tables.begin(), tables.end(), this->rng_);  // distinct blocks < num_blocks
    auto qkv = random_vec(size_t(n) * width, this->rng_, -2.0f, 2.0f);
    auto inv = random_vec(d / 2, this->rng_, 0.0f, 1.0f);
    round_to<T>(qkv);  // what the T GEMM output holds
    auto bias = random_vec(size_t(width), this->rng_, -1.0f, 1.0f);
    auto qn = random_vec(size_t(d), this->rng_, 0.5f, 1.5f), kn = random_vec(size_t(d), this->rng_, 0.5f, 1.5f);
    round_to<T>(bias), round_to<T>(qn), round_to<T>(kn);  // weights in T
    Dev<T> dbias = dev_t<T>(bias), dqn = dev_t<T>(qn), dkn = dev_t<T>(kn);
    const float eps = 1e-6f;
    QkvPre<T> qp;
    if (pre & 1) qp.bias = dbias.get();
    if (pre & 2) qp.q_norm = dqn.get(), qp.k_norm = dkn.get(), qp.eps = eps;
    Dev<T> dqkv = dev_t<T>(qkv);
    Dev<float> dinv(inv), dq(size_t(n) * q_dim);
    Dev<int32_t> dpos(pos), dseq(seq), dtab(tables);
    Dev<T> kp(size_t(num_blocks) * bs * kv_dim), vp(size_t(num_blocks) * bs * kv_dim);  // poisoned
    const PagedShape sh{H, Hkv, d, bs, max_blocks};
    const PagedMeta meta{dpos.get(), dseq.get(), dtab.get()};
    Dev<float> dqkv_f(qkv);  // the same (T-rounded) values in fp32
    if (f32_in)
      paged_rope_kv<float, T>(dqkv_f.get(), sh, n, dinv.get(), meta, dq.get(), kp.get(), vp.get(),
                              nullptr, qp);
    else
      paged_rope_kv<T, T>(dqkv.get(), sh, n, dinv.get(), meta, dq.get(), kp.get(), vp.get(),
                          nullptr, qp);
    std::vector<float> q_ref(size_t(n) * q_dim);
    std::vector<float> k_all = download_f(kp), v_all = download_f(vp), k_got, v_got, k_ref, v_ref;
    std::vector<bool> written(k_all.size() / kv_dim, false);
    std::vector<float> qkv_ref = qkv;
    if (pre & 1) cpu::add_bias(qkv_ref.data(), bias.data(), n, width);
    if (pre & 2) cpu::qk_norm(qkv_ref.data(), qn.data(), kn.data(), n, H, Hkv, d, eps);
    for (int t = 0; t < n; ++t) {
      const float* row = qkv_ref.data() + size_t(t) * width;
      std::vector<float> q(row, row + q_dim), k(row + q_dim, row + q_dim + kv_dim),
          v(row + q_dim + kv_dim, row + width);
      cpu::rope(q.data(), 1, H, d, pos[size_t(t)], inv.data());
      cpu::rope(k.data(), 1, Hkv, d, pos[size_t(t)], inv.data());
      std::copy(q.begin(), q.end(), q_ref.begin() + size_t(t) * q_dim);
      const int p = pos[size_t(t)];
      const size_t slot =
          size_t(tables[size_t(seq[size_t(t)] * max_blocks + p / bs)]) * bs + p % bs;
      written[slot] = true;
      k_got.insert(k_got.end(), k_all.begin() + slot * kv_dim, k_all.begin() + (slot + 1) * kv_dim);
      v_got.insert(v_got.end(), v_all.begin() + slot * kv_dim, v_all.begin() + (slot + 1) * kv_dim);
      k_ref.insert(k_ref.end(), k.begin(), k.end());
      v_ref.insert(v_ref.end(), v.begin(), v.end());
    }
    const float q_tol = pre ? 1e-4f : 1e-5f;  // the bias sum, the norm's rsqrt
    expect_close(dq.download(), q_ref, q_tol, q_tol, "q roped (fp32)");
    expect_close(k_got, k_ref, 1e-5f, out_rtol<T>(), "k rows in the pool");
    // v: copied, or the bias added and rounded to T once
    expect_close(v_got, v_ref, 0.0f, (pre & 1) ? out_rtol<T>() : 0.0f, "v rows in the pool");
    size_t touched = 0;  // every other pool row must still hold the poison (NaN)
    for (size_t r = 0; r < written.size(); ++r)
      if (!written[r])
        for (size_t e = 0; e < size_t(kv_dim); ++e)
          touched += !std::isnan(k_all[r * kv_dim + e]) + !std::isnan(v_all[r * kv_dim + e]);
    EXPECT_EQ(touched, 0u) << "pool rows written that no token owns";
  }
}

// Pool contents as floats: T's values, or e4m3 code values (unscaled).
template <typename KV>
std::vector<float> pool_values(const Dev<KV>& d) {
  if constexpr (std::is_same_v<KV, KvFp8>) {
    const std::vector<KV> c = d.download();
    std::vector<float> f(c.size());
    for (size_t i = 0; i < c.size(); ++i) f[i] = float(c[i]);
    return f;
  } else {
    return download_f(d);
  }
}
template <typename KV>
Dev<KV> pool_from(const std::vector<float>& v) {
  if constexpr (std::is_same_v<KV, KvFp8>) {
    std::vector<KV> c(v.size());
    for (size_t i = 0; i < v.size(); ++i) c[i] = KV(v[i]);
    return Dev<KV>(c);
  } else {
    return dev_t<KV>(v);
  }
}

// paged_attention_decode_rope (RoPE and the KV append inside the split
// kernel) against what it replaces, paged_rope_kv then paged_attention_decode
// (each checked against the CPU above and in gpu_paged_attention_tests), on
// the same QKV rows and the same pools filled with earlier keys: the
// attention output, and the whole pools (the new rows written alike, no other
// touched). Each row its own sequence; positions from 0 (a graph's padding
// row: one key) to rows cut into several splits (few pairs), and 64 rows of
// one split each (many pairs).
template <typename T, typename KV>
void rope_in_attention_case(std::mt19937_64& rng, int H, int Hkv, bool with_bias,
                            const std::vector<int32_t>& pos, int max_blocks) {
  constexpr bool e4m3 = std::is_same_v<KV, KvFp8>;
  SCOPED_TRACE(::testing::Message() << "H " << H << " Hkv " << Hkv << " bias " << with_bias
                                    << " rows " << pos.size() << " pool " << (e4m3 ? "e4m3" : "T"));
  const int d = 128, bs = 16, n = int(pos.size()), n_splits = 8;
  const int q_dim = H * d, kv_dim = Hkv * d, width = q_dim + 2 * kv_dim;
  const int num_blocks = n * max_blocks + 1;
  const size_t rows_n = size_t(n);
  std::vector<int32_t> seq(rows_n), rows(rows_n), tables(rows_n * max_blocks);
  std::iota(seq.begin(), seq.end(), 0);
  std::iota(rows.begin(), rows.end(), 0);
  std::iota(tables.begin(), tables.end(), 0);
  std::shuffle(tables.begin(), tables.end(), rng);  // distinct blocks < num_blocks
  auto qkv = random_vec(size_t(n) * width, rng, -2.0f, 2.0f);
  auto bias = random_vec(size_t(width), rng, -1.0f, 1.0f);
  auto inv = random_vec(d / 2, rng, 0.0f, 1.0f);
  round_to<T>(qkv), round_to<T>(bias);
  // Earlier keys: every pool element holds a value (codes of values within range).
  auto pool_k = random_vec(size_t(num_blocks) * bs * kv_dim, rng, -3.0f, 3.0f);
  auto pool_v = random_vec(pool_k.size(), rng, -3.0f, 3.0f);
  Dev<KV> ka = pool_from<KV>(pool_k), va = pool_from<KV>(pool_v);
  Dev<KV> kb = pool_from<KV>(pool_k), vb = pool_from<KV>(pool_v);
  Dev<T> dqkv = dev_t<T>(qkv), dbias = dev_t<T>(bias);
  Dev<float> dinv(inv), dq(size_t(n) * q_dim);
  Dev<int32_t> dpos(pos), dseq(seq), drows(rows), dtab(tables);
  PagedShape sh{H, Hkv, d, bs, max_blocks};
  if (e4m3) sh.k_scale = 0.5f, sh.v_scale = 0.25f;
  const PagedMeta meta{dpos.get(), dseq.get(), dtab.get()};
  ASSERT_TRUE(paged_decode_rope_supported(n, sh, n_splits, 0, e4m3));
  const size_t parts = size_t(n) * H * n_splits;
  Dev<float> po_a(parts * d), pml_a(parts * 2), po_b(parts * d), pml_b(parts * 2);
  Dev<T> out_a(size_t(n) * q_dim), out_b(size_t(n) * q_dim);  // poisoned
  QkvPre<T> pre;
  if (with_bias) pre.bias = dbias.get();
  paged_rope_kv<T, KV, T>(dqkv.get(), sh, n, dinv.get(), meta, dq.get(), ka.get(), va.get(),
                          nullptr, pre);
  paged_attention_decode<T, KV>(dq.get(), ka.get(), va.get(), sh, meta, drows.get(), n, n_splits, 0,
                                po_a.get(), pml_a.get(), out_a.get(), nullptr);
  paged_attention_decode_rope<T, KV>(dqkv.get(), with_bias ? dbias.get() : nullptr, dinv.get(),
                                     kb.get(), vb.get(), sh, meta, drows.get(), n, n_splits, 0,
                                     po_b.get(), pml_b.get(), out_b.get(), nullptr);
  // The same arithmetic compiled in two kernels: a multiply-add may contract
  // differently, moving a value by an fp32 ulp and, rarely, its rounding to T
  // or its e4m3 code by one step.
  const float pool_rtol = e4m3 ? 0.13f : out_rtol<T>();
  expect_close(pool_values(kb), pool_values(ka), 0.0f, pool_rtol, "k pool");
  expect_close(pool_values(vb), pool_values(va), 0.0f, pool_rtol, "v pool");
  expect_close(download_f(out_b), download_f(out_a), 2e-3f, 2 * out_rtol<T>(), "attention output");
}

TYPED_TEST(BatchKernelTest, PagedDecodeRopeMatchesRopeKvThenAttention) {
  using T = TypeParam;
  SCOPED_TRACE(::testing::Message() << "seed " << this->seed_);
  const std::vector<int32_t> few = {0, 15, 16, 200, 700, 1500};  // several splits
  std::vector<int32_t> many(64);                                 // one split each
  std::uniform_int_distribution<int32_t> len(0, 600);
  for (int32_t& p : many) p = len(this->rng_);
  for (bool b : {false, true}) {
    rope_in_attention_case<T, T>(this->rng_, 32, 8, b, few, 94);
    rope_in_attention_case<T, KvFp8>(this->rng_, 32, 8, b, few, 94);
    rope_in_attention_case<T, T>(this->rng_, 28, 4, b, few, 94);  // group 7 (Qwen2.5-7B)
    rope_in_attention_case<T, KvFp8>(this->rng_, 28, 4, b, few, 94);
  }
  rope_in_attention_case<T, T>(this->rng_, 32, 8, false, many, 40);
  rope_in_attention_case<T, KvFp8>(this->rng_, 32, 8, false, many, 40);
  rope_in_attention_case<T, KvFp8>(this->rng_, 28, 4, true, many, 40);
}

// The 8-wide kernel (inter % 8 == 0), the scalar one (other widths, or an
// output that is not 16-byte aligned), and more rows than grid.y holds.
TYPED_TEST(BatchKernelTest, SiluMulFromT) {
  using T = TypeParam;
  SCOPED_TRACE(::testing::Message() << "seed " << this->seed_);
  for (auto [n, inter, out_off] : {std::tuple{5, 96, 0}, std::tuple{5, 100, 0},
                                   std::tuple{3, 1432, 3}, std::tuple{65537, 8, 0}}) {
    SCOPED_TRACE(::testing::Message()
                 << "n " << n << " inter " << inter << " out offset " << out_off);
    auto gu = random_vec(size_t(n) * 2 * inter, this->rng_, -4.0f, 4.0f);
    round_to<T>(gu);
    Dev<T> dgu = dev_t<T>(gu);
    Dev<T> dact(size_t(n) * inter + size_t(out_off));  // poisoned
    silu_mul<T>(dgu.get(), n, inter, dact.get() + out_off, nullptr);
    std::vector<float> want(size_t(n) * inter);
    cpu::silu_mul(gu.data(), want.data(), n, inter);
    std::vector<float> got = download_f(dact);
    got.erase(got.begin(), got.begin() + out_off);
    expect_close(got, want, 1e-5f, out_rtol<T>(), "silu(gate) * up from T");
  }
}

}  // namespace
}  // namespace hayate::cuda::test
