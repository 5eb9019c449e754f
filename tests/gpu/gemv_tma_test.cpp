// The shared-memory ring GEMV (gemv_tma.cuh, GemvLaunch::tma) against the CPU
// twin: plain and RMSNorm-fused stores, the residual add (rows of 8 KB and of
// 28 KB: down_proj's one-row stages), gate/up with SiLU and QKV with RoPE + KV
// append, each with PDL off and on and both trigger points, outputs poisoned
// first, in half and bf16. Shapes include fewer tiles than stages, many tiles
// per block (the ring wraps: mbarrier phases), odd rows (one row per group)
// and K not a multiple of 256 * 8 (partial chunk slices).
#include <gtest/gtest.h>

#include "core/dtype.h"
#include "cpu/ops.h"
#include "cuda/ops.h"
#include "gpu/gemv_ref.h"
#include "gpu/gpu_test_util.h"

namespace hayate::cuda::test {
namespace {

template <typename T>
class GemvTmaTest : public SeededGpuTest {};
using Types = ::testing::Types<half, __nv_bfloat16>;
TYPED_TEST_SUITE(GemvTmaTest, Types);

// fp32 sums in another order than the host (inputs are T-rounded).
constexpr float kAtol = kGemvAtol, kRtol = kGemvRtol;

// (tma mode, pdl): the launch options every case runs under. Without a
// previous kernel griddepcontrol.wait returns at once, so PDL here checks the
// trigger paths, not the overlap.
const std::pair<int, bool> kModes[] = {{1, false}, {1, true}, {2, true}, {3, true}};

TYPED_TEST(GemvTmaTest, PlainNormedAndResidual) {
  using T = TypeParam;
  SCOPED_TRACE(::testing::Message() << "seed " << this->seed_);
  for (auto [rows, K] : {std::pair{300, 1024}, std::pair{97, 136}, std::pair{4096, 4096},
                         std::pair{6, 4000}, std::pair{130, 14336}, std::pair{33, 5000}}) {
    auto W = random_vec(size_t(rows) * K, this->rng_, -0.1f, 0.1f);
    auto x = random_vec(K, this->rng_, -2.0f, 2.0f), h = random_vec(rows, this->rng_);
    auto nw = random_vec(K, this->rng_, 0.5f, 1.5f);
    round_to<T>(W);
    round_to<T>(nw);
    Dev<T> dW = dev_t<T>(W), dnw = dev_t<T>(nw);
    Dev<float> dx(x), dy(rows);
    std::vector<float> ref(rows), xn(K), ref_n(rows), ref_h = h;
    cpu::matmul(W.data(), x.data(), ref.data(), 1, rows, K);
    cpu::rmsnorm(x.data(), nw.data(), xn.data(), 1, K, 1e-5f);
    cpu::matmul(W.data(), xn.data(), ref_n.data(), 1, rows, K);
    cpu::add(ref_h.data(), ref.data(), rows);
    for (auto [tma, pdl] : kModes) {
      SCOPED_TRACE(::testing::Message()
                   << "rows " << rows << " K " << K << " tma " << tma << " pdl " << pdl);
      const GemvLaunch l{nullptr, pdl, 0, true, tma};
      dy.poison();
      gemv<T>(dW.get(), rows, K, dx.get(), nullptr, 0.0f, dy.get(), l);
      expect_close(dy.download(), ref, kAtol, kRtol, "gemv");
      dy.poison();
      gemv<T>(dW.get(), rows, K, dx.get(), dnw.get(), 1e-5f, dy.get(), l);
      expect_close(dy.download(), ref_n, kAtol, kRtol, "gemv with rmsnorm");
      Dev<float> dh(h);
      gemv_residual<T>(dW.get(), rows, K, dx.get(), dh.get(), l);
      expect_close(dh.download(), ref_h, kAtol, kRtol, "h += W x");
    }
  }
}

TYPED_TEST(GemvTmaTest, GateUpSilu) {
  using T = TypeParam;
  SCOPED_TRACE(::testing::Message() << "seed " << this->seed_);
  for (auto [inter, K] : {std::pair{384, 128}, std::pair{2048, 4096}}) {
    auto W = random_vec(size_t(2 * inter) * K, this->rng_, -0.2f, 0.2f);
    auto h = random_vec(K, this->rng_, -3.0f, 3.0f), nw = random_vec(K, this->rng_, 0.5f, 1.5f);
    round_to<T>(W);
    round_to<T>(nw);
    Dev<T> dW = dev_t<T>(W), dnw = dev_t<T>(nw);
    Dev<float> dh(h), dact(inter);
    const std::vector<float> ref = ref_gate_up(W, h, nw, inter, K);
    for (auto [tma, pdl] : kModes) {
      SCOPED_TRACE(::testing::Message()
                   << "inter " << inter << " K " << K << " tma " << tma << " pdl " << pdl);
      dact.poison();
      gemv_gate_up<T>(dW.get(), inter, K, dh.get(), dnw.get(), 1e-5f, dact.get(),
                      GemvLaunch{nullptr, pdl, 0, true, tma});
      expect_close(dact.download(), ref, kAtol, kRtol, "silu(gate) * up");
    }
  }
}

TYPED_TEST(GemvTmaTest, QkvRopeAndKvAppend) {
  using T = TypeParam;
  SCOPED_TRACE(::testing::Message() << "seed " << this->seed_);
  // Llama-3.1-8B's head layout (32 q heads, 8 kv heads, head_dim 128) at a
  // smaller K, so every block walks many tiles.
  const int H = 32, Hkv = 8, d = 128, K = 1024, ctx = 64, pos = 37;
  const int q_dim = H * d, kv_dim = Hkv * d, rows = q_dim + 2 * kv_dim;
  auto W = random_vec(size_t(rows) * K, this->rng_, -0.2f, 0.2f);
  auto h = random_vec(K, this->rng_, -3.0f, 3.0f), nw = random_vec(K, this->rng_, 0.5f, 1.5f);
  auto inv = random_vec(d / 2, this->rng_, 0.0f, 1.0f);
  round_to<T>(W);
  round_to<T>(nw);
  const std::vector<float> qkv = ref_qkv_rope(W, h, nw, H, Hkv, d, K, pos, inv);
  Dev<T> dW = dev_t<T>(W), dnw = dev_t<T>(nw);
  Dev<float> dh(h), dinv(inv);
  Dev<int32_t> dpos(std::vector<int32_t>{pos});
  for (auto [tma, pdl] : kModes) {
    SCOPED_TRACE(::testing::Message() << "tma " << tma << " pdl " << pdl);
    Dev<T> kc(size_t(ctx) * kv_dim), vc(size_t(ctx) * kv_dim);  // poisoned
    Dev<float> dq(q_dim);
    gemv_qkv_rope<T>(dW.get(), {H, Hkv, d}, K, dh.get(), dnw.get(), 1e-5f, dinv.get(), dpos.get(),
                     dq.get(), kc.get(), vc.get(), GemvLaunch{nullptr, pdl, 0, true, tma});
    expect_qkv_rope(dq, kc, vc, qkv, q_dim, kv_dim, pos);
  }
}

}  // namespace
}  // namespace hayate::cuda::test
