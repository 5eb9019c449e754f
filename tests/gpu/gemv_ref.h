// The CPU references of the fused decode GEMVs and the QKV + RoPE + KV-append
// check, shared by the register-kernel tests (kernels_test.cpp) and the ring
// kernel's (gemv_tma_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <type_traits>
#include <vector>

#include "cpu/ops.h"
#include "gpu/gpu_test_util.h"

namespace hayate::cuda::test {

constexpr float kGemvAtol = 2e-4f, kGemvRtol = 2e-3f;  // fp32 sums in another order

// SiLU(gate) * up of W [2 inter, K] applied to rmsnorm(h) * nw.
inline std::vector<float> ref_gate_up(const std::vector<float>& W, const std::vector<float>& h,
                                      const std::vector<float>& nw, int inter, int K) {
  std::vector<float> xn(static_cast<size_t>(K)), gu(2 * static_cast<size_t>(inter)),
      act(static_cast<size_t>(inter));
  cpu::rmsnorm(h.data(), nw.data(), xn.data(), 1, K, 1e-5f);
  cpu::matmul(W.data(), xn.data(), gu.data(), 1, 2 * inter, K);
  cpu::silu_mul(gu.data(), act.data(), 1, inter);
  return act;
}

// q, k, v [H d + 2 Hkv d] of W applied to rmsnorm(h) * nw, q and k roped at pos.
inline std::vector<float> ref_qkv_rope(const std::vector<float>& W, const std::vector<float>& h,
                                       const std::vector<float>& nw, int H, int Hkv, int d, int K,
                                       int pos, const std::vector<float>& inv) {
  const int rows = (H + 2 * Hkv) * d;
  std::vector<float> xn(static_cast<size_t>(K)), qkv(static_cast<size_t>(rows));
  cpu::rmsnorm(h.data(), nw.data(), xn.data(), 1, K, 1e-5f);
  cpu::matmul(W.data(), xn.data(), qkv.data(), 1, rows, K);
  cpu::rope(qkv.data(), 1, H + Hkv, d, pos, inv.data());  // q heads then k heads: same rotation
  return qkv;
}

// The kernel's q [q_dim] and the cache rows at pos against qkv; the row below
// pos must keep its poison.
template <typename T>
void expect_qkv_rope(const Dev<float>& dq, const Dev<T>& kc, const Dev<T>& vc,
                     const std::vector<float>& qkv, int q_dim, int kv_dim, int pos) {
  const float rt = std::is_same_v<T, half> ? 1e-3f : 8e-3f;  // the cache rounds to T
  expect_close(dq.download(), std::vector<float>(qkv.begin(), qkv.begin() + q_dim), kGemvAtol,
               kGemvRtol, "q");
  auto k = download_f(kc), v = download_f(vc);
  expect_close(std::vector<float>(k.begin() + pos * kv_dim, k.begin() + (pos + 1) * kv_dim),
               std::vector<float>(qkv.begin() + q_dim, qkv.begin() + q_dim + kv_dim), 1e-4f, rt,
               "k row");
  expect_close(std::vector<float>(v.begin() + pos * kv_dim, v.begin() + (pos + 1) * kv_dim),
               std::vector<float>(qkv.begin() + q_dim + kv_dim, qkv.end()), 1e-4f, rt, "v row");
  for (int i = 0; i < kv_dim; ++i)
    ASSERT_TRUE(std::isnan(k[(pos - 1) * kv_dim + i])) << "wrote outside row pos";
}

}  // namespace hayate::cuda::test
