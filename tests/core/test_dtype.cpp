// Host dtype conversions against independent references: the compiler's own
// _Float16 conversions (IEEE binary16), and brute-force nearest-even for bf16.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "core/dtype.h"
#include "core/fp8.h"

namespace hayate {
namespace {

TEST(DType, F16ToF32MatchesCompilerForEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    _Float16 ref;
    uint16_t bits = uint16_t(h);
    std::memcpy(&ref, &bits, 2);
    float want = float(ref);
    float got = f16_to_f32(bits);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << h;
    } else {
      EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << h;
    }
  }
}

TEST(DType, F32ToF16MatchesCompilerOnRandomAndEdgeValues) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<uint32_t> bits;
  auto check = [](float f) {
    _Float16 ref = _Float16(f);
    uint16_t want;
    std::memcpy(&want, &ref, 2);
    uint16_t got = f32_to_f16(f);
    if (std::isnan(f)) {
      EXPECT_EQ(got & 0x7c00u, 0x7c00u);
      EXPECT_NE(got & 0x3ffu, 0u);
    } else {
      EXPECT_EQ(got, want) << f;
    }
  };
  for (int i = 0; i < 200000; ++i) check(std::bit_cast<float>(bits(rng)));
  // Values near half's range and precision edges, where rounding is delicate.
  std::uniform_real_distribution<float> near(-70000.0f, 70000.0f), small(-1e-4f, 1e-4f);
  for (int i = 0; i < 100000; ++i) {
    check(near(rng));
    check(small(rng));
  }
  for (float f : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 5.96e-8f, 2.98e-8f, 2.99e-8f,
                  6.1035e-5f, INFINITY, -INFINITY, NAN}) {
    check(f);
  }
}

TEST(DType, F32ToBf16IsNearestEven) {
  std::mt19937 rng(99);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    float f = std::bit_cast<float>(bits(rng));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f))));
      continue;
    }
    // The two bf16 neighbours of f (truncation and one ulp up); an infinite
    // neighbour stands for 2^128, which IEEE rounding uses for overflow.
    uint32_t u = std::bit_cast<uint32_t>(f);
    uint16_t lo = uint16_t(u >> 16), hi = uint16_t(lo + 1);
    auto value = [](uint16_t b) {
      double v = bf16_to_f32(b);
      return std::isinf(v) ? std::copysign(std::ldexp(1.0, 128), v) : v;
    };
    if (std::isinf(f)) {
      EXPECT_EQ(f32_to_bf16(f), lo);
      continue;
    }
    double dlo = std::fabs(value(lo) - f), dhi = std::fabs(value(hi) - f);
    uint16_t want = (dlo < dhi || (dlo == dhi && (lo & 1) == 0)) ? lo : hi;
    EXPECT_EQ(f32_to_bf16(f), want) << f;
  }
}

TEST(DType, LoadAsF32ReadsEachType) {
  float f[2] = {1.5f, -2.25f};
  uint16_t h[2] = {f32_to_f16(1.5f), f32_to_f16(-2.25f)};
  uint16_t b[2] = {f32_to_bf16(1.5f), f32_to_bf16(-2.25f)};
  EXPECT_EQ(load_as_f32(f, DType::F32, 1), -2.25f);
  EXPECT_EQ(load_as_f32(h, DType::F16, 1), -2.25f);
  EXPECT_EQ(load_as_f32(b, DType::BF16, 0), 1.5f);
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_name(DType::F16), "float16");
}

// e4m3fn against the OCP 8-bit floating point spec (bias 7, 3 mantissa
// bits, max 448, no infinities, S.1111.111 NaN): known codes and values.
TEST(DType, E4m3KnownCodesAndValues) {
  const std::pair<uint8_t, float> codes[] = {
      {0x00, 0.0f},     {0x01, 0.001953125f} /* 2^-9, smallest subnormal */,
      {0x07, 0.013671875f} /* 7 * 2^-9 */, {0x08, 0.015625f} /* 2^-6, smallest normal */,
      {0x38, 1.0f},     {0x39, 1.125f},   {0x40, 2.0f},     {0x7e, 448.0f},
      {0xc0, -2.0f},    {0xfe, -448.0f},  {0x58, 16.0f},    {0x59, 18.0f}};
  for (const auto& [code, value] : codes) {
    EXPECT_EQ(e4m3_to_f32(code), value) << int(code);
    EXPECT_EQ(f32_to_e4m3(value), code) << value;
  }
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xff)));
  EXPECT_EQ(f32_to_e4m3(-0.0f), 0x80);
}

TEST(DType, E4m3RoundsToNearestEvenAndSaturates) {
  const std::pair<float, float> cases[] = {
      {1.0625f, 1.0f} /* tie: even mantissa 000 */, {1.1875f, 1.25f} /* tie: 010 */,
      {17.0f, 16.0f},  {19.0f, 20.0f},  {0.3f, 0.3125f},
      {0.0009765625f, 0.0f} /* 2^-10: tie with 0 */, {0.0029296875f, 0.00390625f},
      {464.0f, 448.0f} /* tie with 480, which e4m3fn lacks */, {500.0f, 448.0f},
      {1e30f, 448.0f}, {-1e30f, -448.0f}, {INFINITY, 448.0f}};
  for (const auto& [x, want] : cases) EXPECT_EQ(e4m3_to_f32(f32_to_e4m3(x)), want) << x;
  EXPECT_EQ(f32_to_e4m3(NAN), 0x7f);
}

// Every finite code survives the round trip, and every float between two
// neighbouring codes goes to the nearer one (brute force over a grid).
TEST(DType, E4m3RoundTripAndNearest) {
  std::vector<float> values;
  for (int c = 0; c < 0x7f; ++c) {
    EXPECT_EQ(f32_to_e4m3(e4m3_to_f32(uint8_t(c))), c);
    EXPECT_EQ(f32_to_e4m3(e4m3_to_f32(uint8_t(c | 0x80))), c | 0x80) << c;
    values.push_back(e4m3_to_f32(uint8_t(c)));
  }
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    const float lo = values[i], hi = values[i + 1];
    for (int k = 1; k < 16; ++k) {
      const float x = lo + (hi - lo) * float(k) / 16.0f;
      const float got = e4m3_to_f32(f32_to_e4m3(x));
      const float want = k < 8 ? lo : k > 8 ? hi : ((i % 2 == 0) ? lo : hi);
      EXPECT_EQ(got, want) << x;
    }
  }
}

TEST(DType, Fp8RowQuantization) {
  // Row {0.5, -3.5, 1}: amax 3.5 -> scale 3.5 / 448 = 1/128; x / s = 64, -448, 128.
  std::vector<float> row{0.5f, -3.5f, 1.0f};
  uint8_t codes[3];
  EXPECT_EQ(fp8_quantize_row(row.data(), 3, 0.0f, codes), 3.5f / 448.0f);
  EXPECT_EQ(e4m3_to_f32(codes[0]), 64.0f);
  EXPECT_EQ(e4m3_to_f32(codes[1]), -448.0f);
  EXPECT_EQ(e4m3_to_f32(codes[2]), 128.0f);
  // An all-zero row keeps a finite scale (vLLM's floor), and a static scale
  // clamps what exceeds 448 of it.
  std::vector<float> zeros(4, 0.0f);
  EXPECT_EQ(fp8_fake_quantize_row(zeros.data(), 4, 0.0f), 1.0f / (448.0f * 512.0f));
  EXPECT_EQ(zeros, std::vector<float>(4, 0.0f));
  std::vector<float> big{1000.0f, 0.3f};
  fp8_fake_quantize_row(big.data(), 2, 1.0f);
  EXPECT_EQ(big, (std::vector<float>{448.0f, 0.3125f}));
}

}  // namespace
}  // namespace hayate
