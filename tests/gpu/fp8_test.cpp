// FP8 on the GPU against its CPU twins (core/fp8.h, cpu/ops.h): the
// quantization kernels (weights at load bit for bit; the fused RMSNorm and
// SiLU*mul within one e4m3 step, since their fp32 inputs differ from the
// CPU's by rsqrtf and T rounding), the cuBLASLt FP8 GEMM with per-row
// scales against a double-precision sum of the same codes, and the backend
// (dummy:tiny with --quantization fp8, and the FP8 fixtures of both formats)
// against the CPU oracle and the torch references, with bucket 1 on the
// persistent kernel and on cuBLASLt; the e4m3 KV cache (--kv-cache-dtype
// fp8): the paged attention kernels on e4m3 pools against the CPU attention
// on the codes' values, the backend against the CPU oracle's e4m3 KV and the
// fixtures against torch's; then the fp8-vs-fp16 gap on dummy:llama-3.1-8b
// (KL and top-1 agreement over 128 greedy steps), printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "core/fp8.h"
#include "cpu/ops.h"
#include "cuda/batch_gemm.h"
#include "cuda/cuda_batch_backend.h"
#include "cuda/ops.h"
#include "cuda/paged_attention.cuh"
#include "engine/generate.h"
#include "golden/golden.h"
#include "gpu/gpu_test_util.h"
#include "gpu/one_seq.h"
#include "model/model.h"

namespace hayate::cuda::test {
namespace {

// Codes * scales as floats: [rows, cols].
std::vector<float> dequant(const std::vector<uint8_t>& codes, const std::vector<float>& scales,
                           int cols) {
  std::vector<float> v(codes.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = e4m3_to_f32(codes[i]) * scales[i / size_t(cols)];
  return v;
}

// got within one e4m3 step of ref (2^-3 relative for normals, 2^-9 of the
// row's scale for subnormals), and at least `exact_share` of the codes equal.
void expect_fp8_close(const std::vector<uint8_t>& got_codes, const std::vector<float>& got_scales,
                      const std::vector<uint8_t>& ref_codes, const std::vector<float>& ref_scales,
                      int cols, double exact_share, const char* what) {
  ASSERT_EQ(got_codes.size(), ref_codes.size()) << what;
  for (size_t r = 0; r < ref_scales.size(); ++r)
    EXPECT_NEAR(got_scales[r], ref_scales[r], 1e-5f * ref_scales[r]) << what << " scale " << r;
  const std::vector<float> g = dequant(got_codes, got_scales, cols);
  const std::vector<float> w = dequant(ref_codes, ref_scales, cols);
  size_t exact = 0;
  for (size_t i = 0; i < w.size(); ++i) exact += got_codes[i] == ref_codes[i];
  std::vector<float> atol(w.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const float tol = 0.13f * std::fabs(w[i]) + 0.002f * ref_scales[i / size_t(cols)];
    if (!(std::fabs(g[i] - w[i]) <= tol) && bad++ == 0) first = i;
  }
  EXPECT_EQ(bad, 0u) << what << ": first at " << first << ": " << g[first] << " vs " << w[first];
  EXPECT_GE(double(exact), exact_share * double(w.size())) << what << ": codes equal";
}

// The CPU twin of the row quantization kernels: rows of `cols` values of v to
// e4m3 codes, each row with its own scale (static_scale 0) or static_scale.
struct Fp8Rows {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};
Fp8Rows quantize_rows_ref(const std::vector<float>& v, int cols, float static_scale) {
  const size_t c = size_t(cols);
  Fp8Rows q{std::vector<uint8_t>(v.size()), std::vector<float>(v.size() / c)};
  for (size_t r = 0; r < q.scales.size(); ++r)
    q.scales[r] = fp8_quantize_row(&v[r * c], c, static_scale, &q.codes[r * c]);
  return q;
}

template <typename T>
class Fp8KernelTest : public SeededGpuTest {};
using Types = ::testing::Types<half, __nv_bfloat16>;
TYPED_TEST_SUITE(Fp8KernelTest, Types);

TYPED_TEST(Fp8KernelTest, QuantizationKernelsMatchTheirCpuTwins) {
  using T = TypeParam;
  SCOPED_TRACE(::testing::Message() << "seed " << this->seed_);
  // Weights at load: bit for bit (fp32 in, the same division and rounding).
  for (int cols : {128, 4096, 1000}) {
    const int rows = 7;
    auto w = random_vec(size_t(rows) * cols, this->rng_, -0.3f, 0.3f);
    for (int c = 0; c < cols; ++c) w[size_t(3) * cols + c] = 0.0f;  // an all-zero row
    Dev<float> dw(w);
    Dev<uint8_t> codes(w.size());
    Dev<float> scale(rows);
    quantize_weight_rows(dw.get(), rows, cols, codes.get(), scale.get(), nullptr);
    const Fp8Rows want = quantize_rows_ref(w, cols, 0.0f);
    EXPECT_EQ(codes.download(), want.codes) << "weights, cols " << cols;
    EXPECT_EQ(scale.download(), want.scales) << "weight scales, cols " << cols;
  }
  // Quotients within an fp32 ulp of every e4m3 rounding midpoint: x = RN(m s)
  // and its two fp32 neighbours, both signs, for each midpoint m of adjacent
  // codes, s the scale the kernel derives from the row's amax (its first
  // value). The kernels divide by s without a division an element
  // (Fp8RowQuantizer); the codes must still be the division's.
  for (const float amax : {3.1f, 0.037f, 1234.5f, 7.3e-3f}) {
    const float s = fp8_scale_for(amax);
    std::vector<float> w{amax};
    for (uint8_t c = 0; c < 0x7e; ++c) {
      const float x = 0.5f * (e4m3_to_f32(c) + e4m3_to_f32(uint8_t(c + 1))) * s;
      for (const float v : {std::nextafter(x, 0.0f), x, std::nextafter(x, 2.0f * x)}) {
        w.push_back(v);
        w.push_back(-v);
      }
    }
    const int cols = int(w.size());
    Dev<float> dw(w);
    Dev<uint8_t> codes(w.size());
    Dev<float> scale(1);
    quantize_weight_rows(dw.get(), 1, cols, codes.get(), scale.get(), nullptr);
    const Fp8Rows want = quantize_rows_ref(w, cols, 0.0f);
    ASSERT_EQ(want.scales[0], s);
    EXPECT_EQ(codes.download(), want.codes) << "near e4m3 midpoints, amax " << amax;
  }
  // 5 rows: the in-register kernels' few-rows forms (512 or 1,024 threads a
  // row); 160: their 256-thread forms.
  for (const int n : {5, 160}) {
    for (float static_scale : {0.0f, 0.02f}) {
      SCOPED_TRACE(::testing::Message() << "rows " << n << ", static scale " << static_scale);
      // The attention output (T in): exact, like the weights, in each of the
      // kernel's forms: in registers, 2 and 4 runs of 8 a thread (256, 3,584,
      // 4,096; 6,144; with few rows 1 run of 512 or 1,024 threads), and the
      // two-pass form (100, not a multiple of 8).
      for (int dim : {256, 100, 3584, 4096, 6144}) {
        SCOPED_TRACE(::testing::Message() << "quantize_rows dim " << dim);
        auto x = random_vec(size_t(n) * dim, this->rng_, -2.0f, 2.0f);
        round_to<T>(x);
        Dev<T> dx = dev_t<T>(x);
        Dev<uint8_t> codes(x.size());
        Dev<float> scale(n);
        quantize_rows_fp8<T>(dx.get(), n, dim, static_scale, codes.get(), scale.get(), nullptr);
        const Fp8Rows want = quantize_rows_ref(x, dim, static_scale);
        EXPECT_EQ(codes.download(), want.codes) << "quantize_rows_fp8";
        EXPECT_EQ(scale.download(), want.scales) << "quantize_rows_fp8 scales";
      }
      // RMSNorm + quantization vs cpu::rmsnorm then the row quantization, in
      // each of the kernel's forms: 4-wide with 4 and 8 runs a thread (4,096;
      // 6,144) and scalar (130, not a multiple of 4).
      for (int dim : {128, 130, 4096, 6144}) {
        SCOPED_TRACE(::testing::Message() << "rmsnorm dim " << dim);
        auto x = random_vec(size_t(n) * dim, this->rng_, -3.0f, 3.0f),
             w = random_vec(dim, this->rng_, 0.5f, 1.5f);
        round_to<T>(w);
        Dev<float> dx(x);
        Dev<T> dw = dev_t<T>(w);
        Dev<uint8_t> codes(x.size());
        Dev<float> scale(n);
        rmsnorm_fp8<T>(dx.get(), dw.get(), n, dim, 1e-5f, static_scale, codes.get(), scale.get(),
                       nullptr);
        std::vector<float> y(x.size());
        cpu::rmsnorm(x.data(), w.data(), y.data(), n, dim, 1e-5f);
        const Fp8Rows want = quantize_rows_ref(y, dim, static_scale);
        expect_fp8_close(codes.download(), scale.download(), want.codes, want.scales, dim, 0.98,
                         "rmsnorm_fp8");
      }
      // SiLU * mul + quantization from T gate/up rows, in each of the kernel's
      // forms: 2, 6, 7, 8 and 12 runs of 8 a thread (384; Qwen3's 12,288;
      // Llama's 14,336; 16,384; Qwen2.5's 18,944; with few rows 1, 2, 2, 2 and 3
      // runs of 512 or 1,024 threads) and the two-pass form (100, not a
      // multiple of 8).
      for (int inter : {100, 384, 12288, 14336, 16384, 18944}) {
        SCOPED_TRACE(::testing::Message() << "silu_mul inter " << inter);
        auto gu = random_vec(size_t(n) * 2 * inter, this->rng_, -4.0f, 4.0f);
        round_to<T>(gu);
        Dev<T> dgu = dev_t<T>(gu);
        Dev<uint8_t> codes(size_t(n) * inter);
        Dev<float> scale(n);
        silu_mul_fp8<T>(dgu.get(), n, inter, static_scale, codes.get(), scale.get(), nullptr);
        std::vector<float> act(size_t(n) * inter);
        cpu::silu_mul(gu.data(), act.data(), n, inter);
        const Fp8Rows want = quantize_rows_ref(act, inter, static_scale);
        expect_fp8_close(codes.download(), scale.download(), want.codes, want.scales, inter, 0.98,
                         "silu_mul_fp8");
      }
    }
  }
}

// y [m, N] = xs[i] ws[n] sum_k x[i, k] W[n, k] (+ y) against the same sum of
// the code values in double, at graph-bucket row counts, odd ones, T and fp32
// out. Bound 2e-3 of the largest output: Hopper's FP8 tensor cores add the
// exact products in an accumulator narrower than fp32 (H200, cuBLAS 13.0:
// up to 6 of 384 .. 361 of 76,800 outputs off by 1e-4 of it, the worst
// ~1e-3; 1e-4 failed in fp16 and bf16 alike).
TYPED_TEST(Fp8KernelTest, CublasLtGemmWithRowScales) {
  using T = TypeParam;
  SCOPED_TRACE(::testing::Message() << "seed " << this->seed_);
  const int N = 384, K = 256;
  const cudaStream_t s = nullptr;
  BatchGemm<T> gemm(GemmPath::kLt, s);
  std::uniform_int_distribution<int> code(0, 0x7e);
  for (int m : {1, 3, 16, 64, 200}) {
    SCOPED_TRACE(::testing::Message() << "rows " << m);
    std::vector<uint8_t> xc(size_t(m) * K), wc(size_t(N) * K);
    for (auto& c : xc) c = uint8_t(code(this->rng_) | (code(this->rng_) & 1 ? 0x80 : 0));
    for (auto& c : wc) c = uint8_t(code(this->rng_) | (code(this->rng_) & 1 ? 0x80 : 0));
    const auto xs = random_vec(m, this->rng_, 0.001f, 0.01f);
    const auto ws = random_vec(N, this->rng_, 0.001f, 0.01f);
    auto y0 = random_vec(size_t(m) * N, this->rng_, -1.0f, 1.0f);
    std::vector<double> ref(size_t(m) * N);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < N; ++j) {
        double acc = 0;
        for (int k = 0; k < K; ++k)
          acc += double(e4m3_to_f32(xc[size_t(i) * K + k])) * e4m3_to_f32(wc[size_t(j) * K + k]);
        ref[size_t(i) * N + j] = acc * xs[size_t(i)] * ws[size_t(j)];
      }
    Dev<uint8_t> dx(xc), dw(wc);
    Dev<float> dxs(xs), dws(ws), dy(y0);
    const Fp8Linear W{dw.get(), dws.get(), 0.0f};
    gemm.fp8(W, dx.get(), dxs.get(), m, N, K, dy.get(), true);  // y += ...
    Dev<T> dyt(size_t(m) * N);
    gemm.fp8(W, dx.get(), dxs.get(), m, N, K, dyt.get(), false);
    const std::vector<float> got = dy.download(), got_t = download_f(dyt);
    double scale = 0;
    for (double v : ref) scale = std::max(scale, std::fabs(v));
    std::vector<float> want(ref.size()), want_acc(ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      want[i] = float(ref[i]);
      want_acc[i] = float(ref[i] + y0[i]);
    }
    expect_close(got, want_acc, float(2e-3 * scale), 1e-4f, "fp8 gemm, fp32 += ");
    expect_close(got_t, want, float(2e-3 * scale), std::is_same_v<T, half> ? 1e-3f : 8e-3f,
                 "fp8 gemm, T out");
  }
}

double rel_err(std::span<const float> got, std::span<const float> ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double(got[i]) - ref[i];
    num += d * d;
    den += double(ref[i]) * ref[i];
  }
  return std::isfinite(num) ? std::sqrt(num / den) : INFINITY;
}

int32_t argmax(std::span<const float> v) {
  return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

// The paged attention kernels on e4m3 pools (KvFp8) with per-tensor scales
// against cpu::attention on the codes' values (code * scale): the one-pass
// decode, the split decode (v2 at head_dim 32 and 64, the tensor-core split
// kernel at 128, several splits on the long rows; the streaming tensor-core
// kernel at 128 with many pairs) and the prefill tiles. Random codes under
// scales != 1, so a scale applied twice or not at all shows. Bounds: the
// 16-bit kernels' (the values are exact in T and in f16); the prefill rounds
// Q and P to T (twice the bound), the tensor-core decode kernels to f16 (a
// host emulation of that rounding: at most 21 % of the 1x bound, bf16 output).
struct KvCase {
  int n_heads, n_kv_heads, head_dim, block_size;
  std::vector<int> lens;  // keys per sequence
  int mode;               // 0: one-pass decode, 1: split decode, 2: prefill of every key
};

template <typename T>
void run_kv8_case(const KvCase& c) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(::testing::Message() << "e4m3 KV mode " << c.mode << " seed " << seed << " heads "
                                    << c.n_heads << "/" << c.n_kv_heads << " hd " << c.head_dim);
  std::mt19937_64 rng(seed);
  const int S = int(c.lens.size()), bs = c.block_size, hd = c.head_dim, n_splits = 16;
  const int kv_dim = c.n_kv_heads * hd, q_dim = c.n_heads * hd;
  int max_blocks = 0, total = 0;
  for (int l : c.lens) {
    max_blocks = std::max(max_blocks, (l + bs - 1) / bs);
    total += (l + bs - 1) / bs;
  }
  std::vector<int32_t> perm(size_t(total + 2));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  // Rows: one decode row per sequence (its last key), or every key (prefill).
  std::vector<int32_t> tables(size_t(S) * max_blocks, -1), pos, seq, dec_rows, tiles;
  const int tile_tok = paged_prefill_tile_tokens(c.n_heads / c.n_kv_heads);
  for (int s = 0, next = 0; s < S; ++s) {
    const int len = c.lens[size_t(s)];
    for (int j = 0; j < (len + bs - 1) / bs; ++j)
      tables[size_t(s) * max_blocks + j] = perm[size_t(next++)];
    const int first = c.mode == 2 ? 0 : len - 1, row0 = int(pos.size());
    for (int p = first; p < len; ++p) {
      pos.push_back(p);
      seq.push_back(s);
    }
    dec_rows.push_back(row0);
    for (int t = 0; t < len - first; t += tile_tok) {
      tiles.push_back(row0 + t);
      tiles.push_back(std::min(tile_tok, len - first - t));
    }
  }
  const int rows = int(pos.size());
  const size_t pool = perm.size() * size_t(bs) * kv_dim;
  std::uniform_int_distribution<int> code(0, 255);
  std::vector<uint8_t> kc(pool), vc(pool);
  for (size_t i = 0; i < pool; ++i) {  // finite codes only (0x7f / 0xff are NaN)
    do kc[i] = uint8_t(code(rng)); while ((kc[i] & 0x7f) == 0x7f);
    do vc[i] = uint8_t(code(rng)); while ((vc[i] & 0x7f) == 0x7f);
  }
  const float k_scale = 0.004f, v_scale = 0.0025f;
  std::vector<float> q = random_vec(size_t(rows) * q_dim, rng, -3.0f, 3.0f);
  Dev<uint8_t> dk(kc), dv(vc);
  Dev<float> dq(q), part_o(size_t(rows) * c.n_heads * n_splits * hd),
      part_ml(size_t(rows) * c.n_heads * n_splits * 2);
  Dev<int32_t> dtables(tables), dpos(pos), dseq(seq), drows(dec_rows), dtiles(tiles);
  Dev<T> out(size_t(rows) * q_dim);  // poisoned
  PagedShape sh{c.n_heads, c.n_kv_heads, hd, bs, max_blocks};
  sh.k_scale = k_scale;
  sh.v_scale = v_scale;
  const PagedMeta meta{dpos.get(), dseq.get(), dtables.get()};
  const auto* kp = reinterpret_cast<const KvFp8*>(dk.get());
  const auto* vp = reinterpret_cast<const KvFp8*>(dv.get());
  if (c.mode == 0)
    paged_attention_decode_short<T>(dq.get(), kp, vp, sh, meta, drows.get(), S, out.get(), nullptr);
  else if (c.mode == 1)
    paged_attention_decode<T>(dq.get(), kp, vp, sh, meta, drows.get(), S, n_splits, 0,
                              part_o.get(), part_ml.get(), out.get(), nullptr);
  else {
    paged_attention_init();
    paged_attention_prefill<T>(dq.get(), kp, vp, sh, meta,
                               reinterpret_cast<const int2*>(dtiles.get()), int(tiles.size() / 2),
                               out.get(), nullptr);
  }
  HAYATE_CUDA_CHECK(cudaGetLastError());
  std::vector<float> got = download_f(out), ref(got.size(), 0.0f);
  std::vector<int> checked;  // the rows the launch wrote
  for (int s = 0; s < S; ++s) {
    const int len = c.lens[size_t(s)], row0 = dec_rows[size_t(s)];
    const int n = c.mode == 2 ? len : 1;
    std::vector<float> kf(size_t(len) * kv_dim), vf(size_t(len) * kv_dim);
    for (int t = 0; t < len; ++t) {
      const size_t at = (size_t(tables[size_t(s) * max_blocks + t / bs]) * bs + t % bs) * kv_dim;
      for (int e = 0; e < kv_dim; ++e) {
        kf[size_t(t) * kv_dim + e] = e4m3_to_f32(kc[at + e]) * k_scale;
        vf[size_t(t) * kv_dim + e] = e4m3_to_f32(vc[at + e]) * v_scale;
      }
    }
    cpu::attention(q.data() + size_t(row0) * q_dim, kf.data(), vf.data(),
                   ref.data() + size_t(row0) * q_dim, n, len - n, c.n_heads, c.n_kv_heads, hd);
    for (int r = 0; r < n; ++r) checked.push_back(row0 + r);
  }
  std::vector<float> g, w;
  for (int r : checked) {
    g.insert(g.end(), got.begin() + size_t(r) * q_dim, got.begin() + size_t(r + 1) * q_dim);
    w.insert(w.end(), ref.begin() + size_t(r) * q_dim, ref.begin() + size_t(r + 1) * q_dim);
  }
  const float loose = c.mode == 2 && std::is_same_v<T, __nv_bfloat16> ? 3.0f : 1.0f;
  const float scale = c.mode == 2 ? 2.0f : 1.0f;  // the prefill's Q and P in T
  expect_close(g, w, 2e-3f * scale * loose * v_scale * 448.0f, 1e-2f * scale * loose,
               "e4m3 KV attention");
}

TEST(Fp8KvAttention, KernelsOnE4m3PoolsMatchTheCpu) {
  HAYATE_REQUIRE_GPU();
  const std::vector<int> shortl = {1, 7, 16, 17, 100, 128}, mixed = {1, 17, 129, 513, 1000, 2049};
  run_kv8_case<half>({32, 8, 128, 16, shortl, 0});
  run_kv8_case<__nv_bfloat16>({8, 2, 64, 7, shortl, 0});
  run_kv8_case<half>({32, 8, 128, 16, mixed, 1});
  run_kv8_case<__nv_bfloat16>({32, 8, 128, 16, mixed, 1});
  run_kv8_case<half>({6, 2, 32, 16, mixed, 1});
  run_kv8_case<half>({16, 2, 64, 16, std::vector<int>(300, 200), 1});  // many pairs
  run_kv8_case<half>({32, 8, 128, 16, std::vector<int>(300, 200), 1});  // streaming kernel
  run_kv8_case<half>({32, 8, 128, 16, std::vector<int>(64, 200), 1});   // 512 pairs: split
  run_kv8_case<__nv_bfloat16>({32, 8, 128, 16, std::vector<int>(256, 129), 1});
  run_kv8_case<half>({32, 8, 128, 16, {1, 37, 300, 129}, 2});
  run_kv8_case<__nv_bfloat16>({8, 2, 128, 7, {1, 37, 300, 129}, 2});
  run_kv8_case<half>({16, 2, 32, 16, {5, 64, 200}, 2});
}

// The backend on dummy:tiny with --quantization fp8 against the CPU oracle
// with the same quantization: prefill rows and decode steps (bucket 1 on the
// persistent kernel and on cuBLASLt). Bound 0.2 on a logits row (0.16 on the
// fixtures with 16-bit K/V, whose inputs do not depend on a seed): the e4m3 roundings flip
// wherever the GPU's inputs to a quantization (T-rounded QKV and gate/up
// outputs, the FP8 GEMM's narrower accumulation: ~1e-3, see the GEMM test)
// cross a midpoint the CPU's fp32 ones do not, and on these tiny random
// models one flip moves a logits row by up to 3e-2 (the CPU against torch,
// tests/golden/fp8_golden_test.cpp); the flips add up along the decode
// steps, and their number depends on the seed (every run draws one).
// Measured on the H200: 0.100-0.167 here, 0.072-0.121 on the fixtures
// (0.092-0.146 with e4m3 K/V), fp16 and bf16 alike, persistent and cuBLASLt
// alike. A wrong kernel is off by whole logits. The same flips make the
// greedy paths of these flat distributions part early: greedy picks are
// printed, and at least half must agree.
// kv8: --kv-cache-dtype fp8 on both sides (bucket 1 then runs the batched
// path: the persistent kernel reads 16-bit pools only); its K/V codes flip
// the same way, within the same bound (measured 0.112-0.116).
struct Fp8Param {
  DType dtype;
  bool persistent;
  bool kv8 = false;
};
constexpr double kFp8Bound = 0.2;
constexpr double kFp8FixtureBound = 0.16;

class Fp8Backend : public ::testing::TestWithParam<Fp8Param> {};

TEST_P(Fp8Backend, DummyTinyMatchesTheCpuOracle) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  Model model = load_model("dummy:tiny", seed % 1000, HAYATE_ASSETS_DIR);
  apply_quantization(model, "fp8");
  constexpr int kCtx = 160;
  const KvCacheDtype kv = GetParam().kv8 ? KvCacheDtype::kFp8 : KvCacheDtype::kAuto;
  BatchBackendOptions oc;
  oc.max_model_len = kCtx;
  oc.num_blocks = kCtx / 16;
  oc.max_num_seqs = 1;
  oc.max_logit_rows = kCtx;
  oc.kv_cache_dtype = kv;
  auto cpu = hayate::test::own(make_cpu_paged_backend(model, oc));
  BatchBackendOptions o;
  o.max_model_len = kCtx;
  o.num_blocks = kCtx / 16;
  o.max_num_seqs = 1;
  o.max_logit_rows = kCtx;
  o.max_num_batched_tokens = kCtx;
  o.dtype = GetParam().dtype;
  o.kv_cache_dtype = kv;
  const double bound = kFp8Bound;
  auto gpu = hayate::test::own(make_cuda_batch_backend(
      model, o, GetParam().persistent ? DecodeMatmul::kPersistent : DecodeMatmul::kCublas));
  const size_t V = size_t(model.config.vocab_size);
  std::uniform_int_distribution<int32_t> tok(0, int32_t(V) - 1);
  std::vector<int32_t> prompt(100);
  for (auto& t : prompt) t = tok(rng);
  std::vector<float> lc(prompt.size() * V), lg(prompt.size() * V, NAN);
  cpu->forward(prompt, 0, lc, true);
  gpu->forward(prompt, 0, lg, true);
  double worst = 0;
  for (size_t t = 0; t < prompt.size(); t += 9) {
    const double e = rel_err({lg.data() + t * V, V}, {lc.data() + t * V, V});
    worst = std::max(worst, e);
    EXPECT_LE(e, bound) << "prefill row " << t;
  }
  int32_t in = argmax({lc.data() + (prompt.size() - 1) * V, V});
  int agree = 0;
  const int steps = 24;
  for (int s = 0; s < steps; ++s) {
    const int pos = int(prompt.size()) + s;
    const int32_t gid = gpu->forward_sample(std::span(&in, 1), pos, SamplingParams{}, uint64_t(s));
    std::vector<float> c(V), g(V, NAN);
    cpu->forward(std::span(&in, 1), pos, c);
    gpu->forward(std::span(&in, 1), pos, g);
    const double e = rel_err(g, c);
    worst = std::max(worst, e);
    EXPECT_LE(e, bound) << "decode step " << s;
    agree += gid == argmax(c);
    in = argmax(c);
  }
  EXPECT_GE(agree, steps / 2) << "greedy picks equal to the CPU's";
  std::printf("fp8 dummy:tiny %s %s%s: worst logits rel err %.3e, greedy %d/%d\n",
              dtype_name(GetParam().dtype).data(), GetParam().persistent ? "persistent" : "cublas",
              GetParam().kv8 ? " (e4m3 KV)" : "", worst, agree, steps);
}

// The FP8 fixtures (both formats) through the engine on the GPU against the
// torch references: logits along the reference's greedy path (the bound
// above), and the greedy continuation's common prefix printed (the flips
// part these flat paths early: 2 to 16 of 16 ids on the H200).
TEST_P(Fp8Backend, FixturesMatchTorch) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  for (const char* name : {"ct_channel_dynamic", "ct_tensor_static_kv", "fp8_dynamic"}) {
    SCOPED_TRACE(name);
    const std::string dir = golden::data_dir() + "/fp8/" + name;
    const nlohmann::json ref = golden::read_json(dir + "/reference.json");
    const Model model = load_model(dir, 0, HAYATE_ASSETS_DIR);
    BatchBackendOptions o;
    o.max_model_len = 64;
    o.num_blocks = 8;
    o.max_num_seqs = 2;
    o.max_logit_rows = 64;
    o.dtype = GetParam().dtype;
    o.kv_cache_dtype = GetParam().kv8 ? KvCacheDtype::kFp8 : KvCacheDtype::kAuto;
    auto backend = make_cuda_batch_backend(
        model, o, GetParam().persistent ? DecodeMatmul::kPersistent : DecodeMatmul::kCublas);
    Engine engine(*backend, nullptr, EngineOptions{2, 64});
    const auto prompt = ref["prompt_ids"].get<std::vector<int32_t>>();
    // The e4m3-KV reference runs along its own greedy path.
    const auto greedy =
        ref[GetParam().kv8 ? "greedy_ids_kv8" : "greedy_ids"].get<std::vector<int32_t>>();
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), greedy.begin(), greedy.end() - 1);
    // The torch reference with e4m3 K/V (the checkpoint's k_scale / v_scale where present).
    const std::vector<float> want =
        golden::read_f32(dir + (GetParam().kv8 ? "/logits_kv8.bin" : "/logits.bin"));
    const std::vector<float> got = golden::prompt_logits(engine, seq);
    const size_t V = size_t(model.config.vocab_size);
    double worst = 0;
    for (size_t r = 0; r < seq.size(); ++r)
      worst = std::max(worst, golden::rel_err(got.data() + r * V, want.data() + r * V, V));
    EXPECT_LT(worst, GetParam().kv8 ? kFp8Bound : kFp8FixtureBound);
    GenerateOptions g;
    g.max_new_tokens = int(greedy.size());
    g.ignore_eos = true;
    const std::vector<int32_t> ids = generate(engine, prompt, g).ids;
    int same = 0;
    for (size_t i = 0; i < ids.size() && ids[i] == greedy[i]; ++i) ++same;
    std::printf(
        "fp8 fixture %s on cuda (%s, %s%s): worst logits rel err %.3e, greedy prefix %d/%zu\n",
        name, dtype_name(GetParam().dtype).data(), GetParam().persistent ? "persistent" : "cublas",
        GetParam().kv8 ? ", e4m3 KV" : "", worst, same, greedy.size());
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, Fp8Backend,
                         ::testing::Values(Fp8Param{DType::F16, true}, Fp8Param{DType::F16, false},
                                           Fp8Param{DType::BF16, true},
                                           Fp8Param{DType::BF16, false},
                                           Fp8Param{DType::F16, false, true},
                                           Fp8Param{DType::BF16, false, true}),
                         [](const auto& info) {
                           return std::string(dtype_name(info.param.dtype)) +
                                  (info.param.persistent ? "_persistent" : "_cublas") +
                                  (info.param.kv8 ? "_kv8" : "");
                         });

// One sequence of up to ctx tokens on the 8B dummy: prefill chunks of 64,
// 16 logits rows.
BatchBackendOptions one_sequence(int ctx, KvCacheDtype kv = KvCacheDtype::kAuto) {
  BatchBackendOptions o;
  o.max_model_len = ctx;
  o.num_blocks = ctx / 16;
  o.max_num_seqs = 1;
  o.max_logit_rows = 16;
  o.max_num_batched_tokens = 64;
  o.kv_cache_dtype = kv;
  return o;
}

// The persistent kernel's FP8 tiles on the 8B shapes (K = 4,096 over all 8
// warps, down rows of 14,336 = 56 chunks of 256 bytes, 8 rows per QKV, o and
// gate/up stage, 2 per down stage) against the batched path's cuBLASLt FP8
// GEMMs, decode steps teacher-forced along cuBLASLt's greedy path. Both
// quantize the same activations per token; they differ in where x is
// rounded (fp32 in the kernel, T before rmsnorm_fp8 / silu_mul_fp8 in the
// batched path) and in the tensor cores' accumulation, so codes flip at
// midpoints as in the test above (bound 0.2 on a logits row, the same
// reasoning); a wrong fragment layout or row mapping is off by whole logits.
// The worst error and the top-1 agreement (at least half) are printed.
TEST(Fp8Persistent, Llama8bDummyMatchesCublasLt) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  constexpr int kCtx = 96, kSteps = 32;
  Model m = load_model("dummy:llama-3.1-8b", 3, HAYATE_ASSETS_DIR);
  apply_quantization(m, "fp8");
  const size_t V = size_t(m.config.vocab_size);
  std::vector<int32_t> prompt(16);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t(500 + 91 * i);
  // logits after the prompt, then after each decode step; inputs: the
  // reference's greedy picks (forced) or the run's own (recorded in path).
  const auto run = [&](DecodeMatmul how, std::vector<int32_t>& path, bool forced) {
    auto b = hayate::test::own(make_cuda_batch_backend(m, one_sequence(kCtx), how));
    std::vector<std::vector<float>> out(1, std::vector<float>(V));
    b->forward(prompt, 0, out[0]);
    for (int s = 0; s < kSteps; ++s) {
      if (!forced) path.push_back(argmax(out.back()));
      out.emplace_back(V);
      b->forward(std::span(&path[size_t(s)], 1), int(prompt.size()) + s, out.back());
    }
    return out;
  };
  std::vector<int32_t> path;
  const std::vector<std::vector<float>> ref = run(DecodeMatmul::kCublas, path, false);
  const std::vector<std::vector<float>> got = run(DecodeMatmul::kPersistent, path, true);
  double worst = 0;
  int top1 = 0;
  for (int s = 1; s <= kSteps; ++s) {  // out[0] is the prefill's, the same path for both
    const double e = rel_err(got[size_t(s)], ref[size_t(s)]);
    worst = std::max(worst, e);
    EXPECT_LE(e, kFp8Bound) << "decode step " << s;
    top1 += argmax(got[size_t(s)]) == argmax(ref[size_t(s)]);
  }
  std::printf("fp8 persistent vs cuBLASLt on dummy:llama-3.1-8b, %d decode steps: worst logits "
              "rel err %.3e, top-1 %d/%d\n",
              kSteps, worst, top1, kSteps);
  EXPECT_GE(top1, kSteps / 2);
}

// What FP8 costs on the 8B shape: dummy:llama-3.1-8b in fp16 and with
// --quantization fp8 (16-bit and e4m3 KV cache), teacher-forced along the
// fp16 model's greedy path for 128 steps after a 16-token prompt: mean
// KL(fp16 || fp8) of the next-token distributions and top-1 agreement,
// printed (bounds: finite KL, top-1 >= 50 %, loose on purpose: random
// weights make flat distributions).
TEST(Fp8Gap, Llama8bDummyFp16VsFp8) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  constexpr int kCtx = 160, kSteps = 128;
  const auto make = [&](Model& m, KvCacheDtype kv) {
    return hayate::test::own(make_cuda_batch_backend(m, one_sequence(kCtx, kv)));
  };
  Model m16 = load_model("dummy:llama-3.1-8b", 1, HAYATE_ASSETS_DIR);
  std::vector<std::vector<float>> ref;  // fp16 logits per step
  std::vector<int32_t> path;
  std::vector<int32_t> prompt(16);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t(1000 + 37 * i);
  const size_t V = size_t(m16.config.vocab_size);
  {
    auto b = make(m16, KvCacheDtype::kAuto);
    std::vector<float> l(V);
    b->forward(prompt, 0, l);
    for (int s = 0; s < kSteps; ++s) {
      ref.push_back(l);
      path.push_back(argmax(l));
      b->forward(std::span(&path.back(), 1), int(prompt.size()) + s, l);
    }
  }
  Model m8 = load_model("dummy:llama-3.1-8b", 1, HAYATE_ASSETS_DIR);
  apply_quantization(m8, "fp8");
  // FP8 weights with the 16-bit KV cache, then with the e4m3 one.
  for (const KvCacheDtype kv : {KvCacheDtype::kAuto, KvCacheDtype::kFp8}) {
    auto b = make(m8, kv);
    std::vector<float> l(V);
    b->forward(prompt, 0, l);
    double kl = 0;
    int top1 = 0;
    for (int s = 0; s < kSteps; ++s) {
      const auto logp = [&](const std::vector<float>& x) {
        const float mx = *std::max_element(x.begin(), x.end());
        double z = 0;
        for (float v : x) z += std::exp(double(v) - mx);
        std::vector<double> o(x.size());
        for (size_t i = 0; i < x.size(); ++i) o[i] = double(x[i]) - mx - std::log(z);
        return o;
      };
      const std::vector<double> p = logp(ref[size_t(s)]), q = logp(l);
      for (size_t i = 0; i < V; ++i) kl += std::exp(p[i]) * (p[i] - q[i]);
      top1 += argmax(l) == path[size_t(s)];
      b->forward(std::span(&path[size_t(s)], 1), int(prompt.size()) + s, l);
    }
    kl /= kSteps;
    std::printf("fp8%s vs fp16 on dummy:llama-3.1-8b, %d teacher-forced steps: mean KL %.4g "
                "nats, top-1 agreement %.3f\n",
                kv == KvCacheDtype::kFp8 ? " + e4m3 KV" : "", kSteps, kl,
                double(top1) / kSteps);
    EXPECT_TRUE(std::isfinite(kl));
    EXPECT_GE(top1, kSteps / 2);
  }
}

}  // namespace
}  // namespace hayate::cuda::test
