// The batching engine's host time per step, without a model: a backend whose
// step() only validates the batch and writes a fixed id per sampling sequence,
// so what is timed is the engine (scheduling, block bookkeeping, stop checks,
// events) and the throughput bench's callbacks. On the GPU this host time is
// GPU idle between steps (the H200 idles ~0.93 ms per max-load step,
// bench/kernels/NOTES.md "Max load, session 5"); asynchronous scheduling would
// hide it. Run by hand (not a ctest):
//   build/<dir>/tests/engine/bench_engine
// Counter us_per_step: wall time of a whole run over its engine steps.
#include <benchmark/benchmark.h>

#include <chrono>
#include <string>

#include <deque>
#include <vector>

#include "bench/throughput.h"
#include "engine/batch_backend.h"
#include "model/model.h"

namespace hayate {
namespace {

class NullBackend final : public BatchBackend {
 public:
  NullBackend(const ModelConfig& c, int max_model_len) : c_(c), max_len_(max_model_len) {}
  std::string name() const override { return "null"; }
  const ModelConfig& config() const override { return c_; }
  int num_blocks() const override { return 1 << 20; }
  int block_size() const override { return 16; }
  int max_model_len() const override { return max_len_; }
  void launch(const Batch& batch) override {
    validate_batch(batch, max_len_, block_size(), num_blocks(), max_logit_rows(),
                   int(last_.size()));
    std::vector<int32_t> ids(batch.seqs.size(), -1);
    for (size_t i = 0; i < batch.seqs.size(); ++i)
      if (batch.seqs[i].sample)  // never an EOS id: every request runs to its length
        ids[i] = int32_t(1000 + (batch.seqs[i].seq_id + batch.seqs[i].sample_step) % 1000);
    last_ = ids;
    unfinished_.push_back(std::move(ids));
    ++steps;
  }
  void finish(std::span<int32_t> sampled) override {
    for (size_t i = 0; i < sampled.size(); ++i)
      if (unfinished_.front()[i] >= 0) sampled[i] = unfinished_.front()[i];
    unfinished_.pop_front();
  }
  void last_logits_row(int, std::span<float>) override {}
  void last_chunk_logits(int, std::span<float>) override {}
  int max_logit_rows() const override { return 1 << 20; }
  double weight_bytes_per_token() const override { return 0.0; }
  int64_t steps = 0;

 private:
  std::vector<int32_t> last_;
  std::deque<std::vector<int32_t>> unfinished_;
  ModelConfig c_;
  int max_len_;
};

// One throughput preset's whole run per iteration (dummy:llama-3.1-8b's config).
void BM_PresetHostPerStep(benchmark::State& state, const std::string& preset) {
  const Model model = load_model("dummy:llama-3.1-8b", 1, HAYATE_ASSETS_DIR);
  bench::ThroughputOptions o;
  bench::apply_throughput_preset(preset, o, false);
  double us = 0.0;
  int64_t steps = 0;
  for (auto _ : state) {
    NullBackend backend(model.config, o.input_len + o.output_len);
    const auto t0 = std::chrono::steady_clock::now();
    bench::ThroughputResult r = bench::run_throughput(backend, nullptr, o, nullptr);
    us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    steps += backend.steps;
    benchmark::DoNotOptimize(r);
  }
  state.counters["us_per_step"] = us / double(steps);
  state.counters["steps_per_run"] = double(steps) / double(state.iterations());
}

BENCHMARK_CAPTURE(BM_PresetHostPerStep, max_load_128, std::string("max-load-128"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PresetHostPerStep, llmib_128_b64, std::string("llmib-128-b64"))
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace hayate

BENCHMARK_MAIN();
