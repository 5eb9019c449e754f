// Summary statistics of per-run measurements. The article's figure of merit
// is the mean of runs 3..N: it drops the first two requests, which pay for
// compilation and warm-up in torch.compile and in HF eager alike.
#pragma once

#include <optional>
#include <span>

namespace hayate::bench {

// All of these throw Error on an empty span.
double mean(std::span<const double> v);
double median(std::span<const double> v);   // mean of the middle two for even sizes
double min_of(std::span<const double> v);
double max_of(std::span<const double> v);
// Linear interpolation between order statistics (numpy's default), p in [0, 100].
double percentile(std::span<const double> v, double p);

// Mean of runs first_run..N (1-based, as the article counts). nullopt when
// there are fewer than first_run runs.
std::optional<double> mean_from_run(std::span<const double> v, int first_run);

// Largest ratio to the median among runs 2..N: the varied-prompt criterion
// ("every run after the first within 1.10x of the median"). nullopt below 2 runs.
std::optional<double> max_over_median_after_first(std::span<const double> v);

}  // namespace hayate::bench
