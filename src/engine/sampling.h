// Sampling parameters and the host sampler. The CUDA sampler mirrors it and
// uses the same counter-based random numbers (core/rng.h), so a seeded run
// picks the same tokens on either backend up to logit rounding.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace hayate {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy
  float top_p = 1.0f;        // (0, 1]
  int top_k = 0;             // 0 = off
  float min_p = 0.0f;        // [0, 1]
  uint64_t seed = 0;

  // Throws Error naming the bad field (negative or non-finite temperature,
  // top_p outside (0, 1], top_k < 0, min_p outside [0, 1]).
  void validate() const;
  bool greedy() const { return temperature == 0.0f; }
};

// Picks the next token from `logits` (vocab values). `step` indexes the
// random stream so that each generated position draws a fresh number.
int32_t sample_token(std::span<const float> logits, const SamplingParams& p, uint64_t step);

}  // namespace hayate
