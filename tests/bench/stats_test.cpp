#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "bench/stats.h"
#include "core/check.h"

namespace hayate::bench {
namespace {

TEST(Stats, MeanMedianMinMax) {
  std::vector<double> v = {4.0, 1.0, 3.0, 2.0};
  EXPECT_DOUBLE_EQ(mean(v), 2.5);
  EXPECT_DOUBLE_EQ(median(v), 2.5);  // even count: mean of the middle two
  EXPECT_DOUBLE_EQ(min_of(v), 1.0);
  EXPECT_DOUBLE_EQ(max_of(v), 4.0);
  std::vector<double> odd = {9.0, 1.0, 5.0};
  EXPECT_DOUBLE_EQ(median(odd), 5.0);
}

TEST(Stats, PercentileInterpolatesBetweenOrderStatistics) {
  std::vector<double> v = {10.0, 20.0, 30.0, 40.0, 50.0};
  EXPECT_DOUBLE_EQ(percentile(v, 0.0), 10.0);
  EXPECT_DOUBLE_EQ(percentile(v, 100.0), 50.0);
  EXPECT_DOUBLE_EQ(percentile(v, 25.0), 20.0);
  EXPECT_DOUBLE_EQ(percentile(v, 90.0), 46.0);  // rank 3.6: 40 + 0.6 * 10
  EXPECT_THROW(percentile(v, 101.0), Error);
}

TEST(Stats, OrderDoesNotMatter) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.1, 9.0);
  std::vector<double> v(37);
  for (auto& x : v) x = u(rng);
  double m = median(v), p = percentile(v, 75.0), a = mean(v);
  std::shuffle(v.begin(), v.end(), rng);
  EXPECT_DOUBLE_EQ(median(v), m);
  EXPECT_DOUBLE_EQ(percentile(v, 75.0), p);
  EXPECT_NEAR(mean(v), a, 1e-12);
  std::sort(v.begin(), v.end());
  EXPECT_DOUBLE_EQ(m, v[18]);
}

TEST(Stats, ArticleMeanDropsTheFirstTwoRuns) {
  // A torch.compile-like series: two slow compile runs, then steady ones.
  std::vector<double> v = {155.0, 60.0, 0.9, 0.8, 0.85, 0.8, 0.9, 0.8, 0.85, 0.8};
  auto m = mean_from_run(v, 3);
  ASSERT_TRUE(m.has_value());
  double expect = 0.0;
  for (size_t i = 2; i < v.size(); ++i) expect += v[i];
  EXPECT_DOUBLE_EQ(*m, expect / 8.0);
  EXPECT_FALSE(mean_from_run(std::vector<double>{1.0, 2.0}, 3).has_value());
  EXPECT_DOUBLE_EQ(*mean_from_run(v, 1), mean(v));
  EXPECT_THROW(mean_from_run(v, 0), Error);
}

TEST(Stats, SlowestRunAfterTheFirstOverTheMedian) {
  std::vector<double> v = {78.0, 1.0, 1.0, 1.2, 1.0};  // run 1 is excluded
  auto r = max_over_median_after_first(v);
  ASSERT_TRUE(r.has_value());
  EXPECT_DOUBLE_EQ(*r, 1.2);
  EXPECT_FALSE(max_over_median_after_first(std::vector<double>{1.0}).has_value());
}

TEST(Stats, EmptyInputIsAnError) {
  std::vector<double> none;
  EXPECT_THROW(mean(none), Error);
  EXPECT_THROW(median(none), Error);
  EXPECT_THROW(min_of(none), Error);
  EXPECT_THROW(max_of(none), Error);
}

}  // namespace
}  // namespace hayate::bench
