// The hand FP8 GEMMs at few rows (gemm_fp8_small: mma.sync and wgmma) against
// their CPU twin: the same e4m3 codes summed in double and scaled per token and
// per weight row, every tile and K split, fp32 output added into y (o_proj /
// down) and T output written (QKV, gate/up) or added; poisoned outputs, fresh
// random codes and scales, row counts 1, 3, 16, 17, 40, 64, N that no tile
// divides, and K 2,048 (the wgmma kernel's ring wraps in split blocks).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/check.h"
#include "core/dtype.h"
#include "cuda/ops.h"
#include "gpu/gpu_test_util.h"

namespace hayate::cuda::test {
namespace {

template <typename T>
class Fp8SmallGemmTest : public SeededGpuTest {};
using Types = ::testing::Types<half, __nv_bfloat16>;
TYPED_TEST_SUITE(Fp8SmallGemmTest, Types);

std::vector<uint8_t> random_codes(size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> code(0, 0x7e);  // every finite e4m3 magnitude
  std::vector<uint8_t> c(n);
  for (auto& b : c) b = uint8_t(code(rng) | (code(rng) & 1 ? 0x80 : 0));
  return c;
}

// Bound: 1e-3 of the largest output. The kernels add the exact products of
// 64 k (mma.sync) or 128 k (wgmma) in the tensor core's accumulator (narrower
// than fp32 on Hopper), starting from zero, then into fp32 registers; the
// measured worst of each kernel is printed
// ("fp8 small gemm: worst ...") and stays far below cuBLASLt's 2e-3 bound
// (fp8_test.cpp) on the same kind of data. T outputs add T's rounding: half
// 2^-11, bf16 2^-8 of the value.
TYPED_TEST(Fp8SmallGemmTest, MatchesDoubleSumOfTheCodes) {
  using T = TypeParam;
  SCOPED_TRACE(::testing::Message() << "seed " << this->seed_);
  const cudaStream_t s = nullptr;
  const float rtol_t = std::is_same_v<T, half> ? 1e-3f : 8e-3f;
  double worst[2] = {};  // mma.sync, wgmma
  struct Case {
    int N, K;
  };
  // K 2,048: the wgmma kernel's ring wraps in every block up to 4 K splits.
  for (const Case sh : {Case{200, 1024}, Case{96, 128}, Case{200, 2048}}) {
    const int N = sh.N, K = sh.K;
    for (int m : {1, 3, 16, 17, 40, 64}) {
      SCOPED_TRACE(::testing::Message() << "m " << m << " N " << N << " K " << K);
      const auto xc = random_codes(size_t(m) * K, this->rng_);
      const auto wc = random_codes(size_t(N) * K, this->rng_);
      const auto xs = random_vec(m, this->rng_, 0.001f, 0.01f);
      const auto ws = random_vec(N, this->rng_, 0.001f, 0.01f);
      const auto y0 = random_vec(size_t(m) * N, this->rng_, -1.0f, 1.0f);
      std::vector<double> ref(size_t(m) * N);
      double scale = 0;
      for (int i = 0; i < m; ++i)
        for (int n = 0; n < N; ++n) {
          double acc = 0;
          for (int k = 0; k < K; ++k)
            acc += double(e4m3_to_f32(xc[size_t(i) * K + k])) * e4m3_to_f32(wc[size_t(n) * K + k]);
          ref[size_t(i) * N + n] = acc * xs[size_t(i)] * ws[size_t(n)];
          scale = std::max(scale, std::fabs(ref[size_t(i) * N + n]));
        }
      Dev<uint8_t> dx(xc), dw(wc);
      Dev<float> dxs(xs), dws(ws);
      std::vector<Fp8SmallTile> tiles;  // the mma.sync kernel's, then the wgmma kernel's
      for (int rows : {16, 32, 64})
        for (int kw : {1, 2, 4, 8})
          for (int nr : {1, 2, 4}) tiles.push_back({rows, kw, nr});
      for (int rows : {64, 128})
        for (int kb : {1, 2, 4, 8}) tiles.push_back({rows, 0, 0, kb});
      int ran = 0, ran_wgmma = 0;
      for (const Fp8SmallTile tile : tiles) {
        if (!gemm_fp8_small_supported(m, N, K, tile)) continue;
        SCOPED_TRACE(::testing::Message() << "tile " << tile.rows << " x " << tile.k_warps
                                          << " x " << tile.row_warps << ", k blocks "
                                          << tile.k_blocks);
        ran_wgmma += tile.k_blocks > 0;
        ++ran;
        // fp32 y += product (o_proj, down).
        Dev<float> yf(y0);
        gemm_fp8_small(dw.get(), dws.get(), dx.get(), dxs.get(), m, N, K, yf.get(), true, tile,
                       s);
        // T y = product, into poison (QKV, gate/up); and T y += product.
        Dev<T> yt(size_t(m) * N);
        gemm_fp8_small(dw.get(), dws.get(), dx.get(), dxs.get(), m, N, K, yt.get(), false, tile,
                       s);
        std::vector<float> y0t = y0;
        round_to<T>(y0t);
        Dev<T> yta = dev_t<T>(y0t);
        gemm_fp8_small(dw.get(), dws.get(), dx.get(), dxs.get(), m, N, K, yta.get(), true, tile,
                       s);
        const std::vector<float> got = yf.download(), got_t = download_f(yt),
                                 got_ta = download_f(yta);
        if (tile.k_blocks > 0) {  // the cluster adds its blocks' sums in rank order: same bits
          Dev<float> again(y0);
          gemm_fp8_small(dw.get(), dws.get(), dx.get(), dxs.get(), m, N, K, again.get(), true,
                         tile, s);
          EXPECT_TRUE(again.download() == got) << "a second run gave other bits";
        }
        std::vector<float> want(ref.size()), want_acc(ref.size()), want_acc_t(ref.size());
        for (size_t i = 0; i < ref.size(); ++i) {
          want[i] = float(ref[i]);
          want_acc[i] = float(ref[i] + y0[i]);
          want_acc_t[i] = float(ref[i] + y0t[i]);
          double& w = worst[tile.k_blocks > 0];
          w = std::max(w, std::fabs(got[i] - (ref[i] + y0[i])) / scale);
        }
        expect_close(got, want_acc, float(1e-3 * scale), 1e-5f, "fp32 +=");
        expect_close(got_t, want, float(1e-3 * scale), rtol_t, "T out");
        expect_close(got_ta, want_acc_t, float(1e-3 * scale), rtol_t, "T +=");
      }
      EXPECT_GT(ran, 0) << "no tile supports this shape";
      EXPECT_GT(ran_wgmma, 0) << "no wgmma split supports this shape";
    }
  }
  std::printf(
      "fp8 small gemm: worst |fp32 out - double ref| = %.2e (mma.sync), %.2e (wgmma) of the "
      "largest output\n",
      worst[0], worst[1]);
}

TEST(Fp8SmallGemm, RefusesWhatItDoesNotSupport) {
  const Fp8SmallTile tile{32, 8};
  EXPECT_TRUE(gemm_fp8_small_supported(64, 4096, 4096, tile));
  EXPECT_FALSE(gemm_fp8_small_supported(65, 4096, 4096, tile));     // rows past the kernel's
  EXPECT_FALSE(gemm_fp8_small_supported(8, 4096, 4000, tile));      // K not 64 per warp
  EXPECT_FALSE(gemm_fp8_small_supported(64, 4096, 4096, {64, 8}));  // 64-row tile: m <= 32
  EXPECT_FALSE(gemm_fp8_small_supported(8, 4096, 4096, {48, 8}));
  EXPECT_FALSE(gemm_fp8_small_supported(8, 4096, 4096, {32, 3}));
  EXPECT_FALSE(gemm_fp8_small_supported(8, 4096, 4096, {32, 2, 2}));  // staging: m > 8
  EXPECT_TRUE(gemm_fp8_small_supported(9, 4096, 4096, {32, 2, 2}));
  EXPECT_FALSE(gemm_fp8_small_supported(16, 4096, 4096, {32, 4, 4}));  // 16 warps
  EXPECT_FALSE(gemm_fp8_small_supported(16, 4096, 4096, {64, 2, 2}));  // 64 rows: 1 row warp
  EXPECT_TRUE(gemm_fp8_small_supported(64, 4096, 14336, {128, 0, 0, 8}));  // wgmma, 8 blocks
  EXPECT_TRUE(gemm_fp8_small_supported(64, 4096, 4096, {64, 0, 0, 4}));  // 64 rows a block
  EXPECT_FALSE(gemm_fp8_small_supported(65, 4096, 4096, {128, 0, 0, 1}));
  EXPECT_FALSE(gemm_fp8_small_supported(8, 4096, 1536, {128, 0, 0, 8}));  // K not 128 per block
  EXPECT_FALSE(gemm_fp8_small_supported(8, 4096, 4096, {128, 0, 0, 3}));
  EXPECT_FALSE(gemm_fp8_small_supported(8, 4096, 4096, {128, 0, 0, 16}));
  EXPECT_FALSE(gemm_fp8_small_supported(8, 4096, 4096, {0, 0, 0, 4}));   // rows 64 or 128
  EXPECT_FALSE(gemm_fp8_small_supported(8, 4096, 4096, {32, 0, 0, 4}));
  // The launcher refuses before touching the GPU.
  EXPECT_THROW(gemm_fp8_small<float>(nullptr, nullptr, nullptr, nullptr, 65, 4096, 4096, nullptr,
                                     false, tile, nullptr),
               Error);
  EXPECT_THROW(gemm_fp8_small<float>(nullptr, nullptr, nullptr, nullptr, 8, 4096, 1536, nullptr,
                                     false, {128, 0, 0, 8}, nullptr),
               Error);
}

}  // namespace
}  // namespace hayate::cuda::test
