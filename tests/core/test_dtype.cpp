// Host dtype conversions against independent references: the compiler's own
// _Float16 conversions (IEEE binary16), and brute-force nearest-even for bf16.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "core/dtype.h"

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

}  // namespace
}  // namespace hayate
