// The test oracle for logprobs: log_softmax in double, written out by hand.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace hayate::testing_engine {

inline std::vector<double> log_softmax(const std::vector<float>& l) {
  double mx = -INFINITY;
  for (float x : l) mx = std::max(mx, double(x));
  double s = 0.0;
  for (float x : l) s += std::exp(double(x) - mx);
  std::vector<double> out(l.size());
  for (size_t i = 0; i < l.size(); ++i) out[i] = double(l[i]) - mx - std::log(s);
  return out;
}

}  // namespace hayate::testing_engine
