#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/check.h"

namespace hayate::bench {

static void check_nonempty(std::span<const double> v, const char* what) {
  HAYATE_CHECK(!v.empty(), what, ": no values");
}

double mean(std::span<const double> v) {
  check_nonempty(v, "mean");
  return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}

double percentile(std::span<const double> v, double p) {
  check_nonempty(v, "percentile");
  HAYATE_CHECK(p >= 0.0 && p <= 100.0, "percentile: p=", p, " is outside [0, 100]");
  std::vector<double> s(v.begin(), v.end());
  std::sort(s.begin(), s.end());
  double rank = p / 100.0 * double(s.size() - 1);
  size_t lo = size_t(std::floor(rank));
  size_t hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (s[hi] - s[lo]) * (rank - double(lo));
}

double median(std::span<const double> v) {
  check_nonempty(v, "median");
  return percentile(v, 50.0);
}

double min_of(std::span<const double> v) {
  check_nonempty(v, "min");
  return *std::min_element(v.begin(), v.end());
}

double max_of(std::span<const double> v) {
  check_nonempty(v, "max");
  return *std::max_element(v.begin(), v.end());
}

std::optional<double> mean_from_run(std::span<const double> v, int first_run) {
  HAYATE_CHECK(first_run >= 1, "mean_from_run: first_run must be at least 1, got ", first_run);
  if (v.size() < size_t(first_run)) return std::nullopt;
  return mean(v.subspan(size_t(first_run - 1)));
}

std::optional<double> max_over_median_after_first(std::span<const double> v) {
  if (v.size() < 2) return std::nullopt;
  auto rest = v.subspan(1);
  double med = median(rest);
  if (!(med > 0.0)) return std::nullopt;
  return max_of(rest) / med;
}

}  // namespace hayate::bench
