// Times the CUDA backend end to end on a dummy model: start to first token,
// prefill, decode ms/token against the weight-streaming floor, decode at a
// long context, and the decode step under other CudaTuning knobs (PDL, grid caps,
// the split attention kernel at short context).
// Usage: decode_bench [dummy:NAME] [float16|bfloat16] [--no-compare | --quick]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "engine/sampling.h"
#include "model/model.h"

namespace hayate {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<int32_t> prompt_ids(int n, int vocab) {
  std::vector<int32_t> p(n);
  for (int i = 0; i < n; ++i) p[i] = int32_t((uint64_t(i) * 2654435761u + 128000) % uint64_t(vocab));
  return p;
}

// ms per token of `n` greedy decode steps from position `pos`.
double decode_ms(Backend& b, int pos, int n) {
  int32_t tok = 1000;
  for (int i = 0; i < 3; ++i) tok = b.forward_sample(std::span(&tok, 1), pos + i, SamplingParams{}, 0);
  auto timer = b.make_timer();
  timer->start();
  for (int i = 0; i < n; ++i) tok = b.forward_sample(std::span(&tok, 1), pos + i, SamplingParams{}, 0);
  return timer->stop_ms() / n;
}

int run(int argc, char** argv) {
  const auto t0 = Clock::now();
  std::string spec = "dummy:llama-3.1-8b", dtype_name_arg = "float16";
  bool compare = true, quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--no-compare")) compare = false;
    else if (!std::strcmp(argv[i], "--quick")) quick = true;  // the first two rows only
    else if (std::string(argv[i]).rfind("dummy:", 0) == 0) spec = argv[i];
    else dtype_name_arg = argv[i];
  }
  const DType dtype = dtype_name_arg == "bfloat16" ? DType::BF16 : DType::F16;
  Model m = load_model(spec, 0, HAYATE_ASSETS_DIR);
  const double t_load = since(t0);
  auto b = make_cuda_backend(m, {8192, dtype, 0});
  const double t_ready = since(t0);
  const std::vector<int32_t> prompt = prompt_ids(11, m.config.vocab_size);
  b->forward_sample(prompt, 0, SamplingParams{}, 0);
  const double t_first = since(t0);
  const DeviceInfo d = b->device_info();
  std::printf("%s %s on %s (%d SMs, %.0f GB), driver %s, CUDA runtime %s\n", spec.c_str(),
              dtype_name_arg.c_str(), d.name.c_str(), d.sm_count, d.memory_gb, d.driver_version.c_str(),
              d.cuda_runtime.c_str());
  std::printf("start: model table %.2f s, backend ready (weights generated, graphs captured) %.2f s, "
              "first token %.2f s\n", t_load, t_ready, t_first);

  const double bw = b->measure_read_bandwidth_gbs();
  const double bytes = b->weight_bytes_per_token();
  auto timer = b->make_timer();
  std::vector<double> pre;
  for (int i = 0; i < 7; ++i) {
    timer->start();
    b->forward_sample(prompt, 0, SamplingParams{}, 0);
    pre.push_back(timer->stop_ms());
  }
  std::sort(pre.begin(), pre.end());
  std::printf("prefill of %zu tokens: %.2f ms (median of 7, sampled id included)\n", prompt.size(), pre[3]);

  const double ms = decode_ms(*b, int(prompt.size()), 117);
  std::printf("decode: %.3f ms/token at context 11..128; weights %.2f GB/token -> %.0f GB/s = %.1f%% of "
              "read bandwidth %.0f GB/s; floor %.3f ms\n",
              ms, bytes / 1e9, bytes / ms / 1e6, 100 * bytes / ms / 1e6 / bw, bw, bytes / bw / 1e6);
  // Long context: prefill 4000 tokens (16 chunks) then decode there.
  std::vector<int32_t> long_prompt = prompt_ids(4000, m.config.vocab_size);
  timer->start();
  b->forward_sample(long_prompt, 0, SamplingParams{}, 0);
  const double long_pre = timer->stop_ms();
  const double ms_long = decode_ms(*b, 4000, 64);
  std::printf("prefill of 4000 tokens: %.1f ms (%.0f tokens/s); decode at context 4000: %.3f ms/token\n",
              long_pre, 4000 / long_pre * 1e3, ms_long);
  SamplingParams sp{0.8f, 0.95f, 50, 0.0f, 1};
  int32_t tok = 1000;
  timer->start();
  for (int i = 0; i < 32; ++i) tok = b->forward_sample(std::span(&tok, 1), 11 + i, sp, i);
  std::printf("decode with sampling (T 0.8, top-k 50, top-p 0.95): %.3f ms/token\n", timer->stop_ms() / 32);

  if (compare) {
    // The same decode under other tunings (run 8): the split attention kernel
    // at short context, and PDL with the GEMV grids capped at N blocks per SM.
    b.reset();
    struct Alt {
      const char* what;
      CudaTuning t;
    };
    // Since run 12 the default is the persistent kernel; every other row runs
    // the per-kernel decode graph (persistent = false) with the knobs named.
    const Alt alts[] = {{"the per-kernel decode graph", {.persistent = false}},
                        {"the persistent kernel, phases timed", {.persistent_trace = true}},
                        {"split attention at short context",
                         {.short_attention = false, .persistent = false}},
                        {"PDL, full-occupancy grids", {.pdl = true, .persistent = false}},
                        {"one round of loads in flight (gemv_kernel) at K = 4096",
                         {.gemv_two_rounds = false, .persistent = false}},
                        // Run 10: GEMVs on the shared-memory ring kernel, launched with PDL.
                        {"ring GEMVs (PDL), at entry, 32 KB stages", {.gemv_tma = 3, .persistent = false}},
                        // Run 11: one shared-memory carveout preference for every kernel.
                        {"ring GEMVs (PDL), at entry, 32 KB stages, prefer shared",
                         {.gemv_tma = 3, .prefer_shared = true, .persistent = false}}};
    // (Run 8's first call also timed PDL at 3 and 2 blocks per SM, +0.21 and
    // +0.72 ms/token, and no PDL at 3 blocks per SM, +0.10; runs 10-11 the
    // ring with 16 KB stages, trigger after the last stage, PDL on every
    // kernel, prefer shared with the register kernels: all slower, dropped.)
    for (const Alt& a : alts) {
      if (quick && &a - alts > 1) continue;
      auto nb = make_cuda_backend(m, {8192, dtype, 0}, a.t);
      nb->forward_sample(prompt, 0, SamplingParams{}, 0);
      const double ms_alt = decode_ms(*nb, int(prompt.size()), 117);
      std::printf("decode with %s: %.3f ms/token (%+.3f ms/token vs default)\n", a.what, ms_alt,
                  ms_alt - ms);
      if (&a == alts) {  // the per-kernel graph at the long context too
        nb->forward_sample(long_prompt, 0, SamplingParams{}, 0);
        const double ms_alt_long = decode_ms(*nb, 4000, 64);
        std::printf("decode with %s at context 4000: %.3f ms/token (%+.3f vs default)\n", a.what,
                    ms_alt_long, ms_alt_long - ms_long);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace hayate

int main(int argc, char** argv) {
  try {
    return hayate::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decode_bench: %s\n", e.what());
    return 1;
  }
}
