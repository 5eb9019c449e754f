#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"

namespace hayate {
namespace {

TEST(Rng, UniformRangesMeansAndIndependence) {
  double sum = 0, sum2 = 0, cross = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    float a = uniform_pm1(7, 3, uint64_t(i));
    float u = uniform01(7, 3, uint64_t(i));
    ASSERT_GE(a, -1.0f);
    ASSERT_LT(a, 1.0f);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += a;
    sum2 += double(a) * a;
    cross += double(a) * uniform_pm1(7, 4, uint64_t(i));  // another stream
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sum2 / n, 1.0 / 3.0, 0.01);  // variance of U(-1, 1)
  EXPECT_NEAR(cross / n, 0.0, 0.01);
  EXPECT_NE(uniform_pm1(1, 0, 0), uniform_pm1(2, 0, 0));  // seed matters
  EXPECT_EQ(uniform_pm1(5, 6, 7), uniform_pm1(5, 6, 7));  // pure function
}

}  // namespace
}  // namespace hayate
