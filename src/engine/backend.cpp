// Host-side defaults of the Backend interface.
#include "engine/backend.h"

#include <chrono>
#include <vector>

namespace hayate {

int32_t Backend::forward_sample(std::span<const int32_t> tokens, int pos,
                                const SamplingParams& params, uint64_t step) {
  std::vector<float> logits(size_t(config().vocab_size));
  forward(tokens, pos, logits, /*all_logits=*/false);
  return sample_token(logits, params, step);
}

namespace {

class SteadyTimer final : public RegionTimer {
 public:
  void start() override { t0_ = std::chrono::steady_clock::now(); }
  double stop_ms() override {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_)
        .count();
  }

 private:
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

}  // namespace

std::unique_ptr<RegionTimer> Backend::make_timer() { return std::make_unique<SteadyTimer>(); }

}  // namespace hayate
