// FP8 GEMM lab at few rows: the batched backend's W8A8 products on the
// Llama-3.1-8B shapes (e4m3 weights with a scale per output row, activations
// per token), m = 1 .. 64 (and 128 for cuBLASLt), through
//   lt     cuBLASLt, outer-vector scales, the fastest of the heuristic's first
//          8 algorithms (LtGemm::tune), as the backend runs it
//   hand   gemm_fp8_small (src/cuda/kernels/gemm_fp8_small.cu), every tile of
//          kTiles (rows per warp x K groups x row warps; wgN: the wgmma
//          kernel, gemm_fp8_wgmma.cu, K over N blocks)
// against the byte floor (N K bytes over the read probe). Weights rotate over
// copies totalling >= 256 MB so that no product reads them from L2 (a step's
// layers have distinct weights). Each variant is checked on 256 sampled
// outputs against a double-precision sum of the same codes times the scales
// (the error printed is max |got - ref| over max |ref| of the samples).
// Median of 20 timed runs after 3 warm-ups (lab_timing.h). NOTES.md, "FP8
// GEMM at few rows".
//
// Usage: gemm_fp8_lab [SHAPE [M [TILE]]]: only that shape (qkv, o, gate_up,
// down), row count and hand tile (e.g. wg4), for a profiler such as ncu.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/fp8.h"
#include "cuda/buffer.h"
#include "cuda/gemm_lt.h"
#include "cuda/launch.h"
#include "cuda/ops.h"
#include "lab_timing.h"

namespace hayate::cuda {
namespace {

using T = half;
constexpr int kReps = 20, kChecks = 256;
constexpr size_t kRotateBytes = size_t(256) << 20;
// {weight rows per warp, K groups, row warps sharing staged activations} of the
// mma.sync kernel, then the wgmma kernel's {rows a block, 0, 0, K splits}.
constexpr Fp8SmallTile kTiles[] = {{16, 2, 1}, {16, 4, 1}, {16, 8, 1}, {32, 2, 1}, {32, 4, 1},
                                   {32, 8, 1}, {64, 2, 1}, {64, 4, 1}, {64, 8, 1}, {16, 2, 2},
                                   {16, 4, 2}, {32, 2, 2}, {32, 4, 2}, {16, 2, 4}, {32, 2, 4},
                                   {16, 1, 4}, {32, 1, 4}, {16, 1, 8}, {32, 1, 8},
                                   {128, 0, 0, 1}, {128, 0, 0, 2}, {128, 0, 0, 4},
                                   {128, 0, 0, 8}, {64, 0, 0, 1}, {64, 0, 0, 2},
                                   {64, 0, 0, 4}, {64, 0, 0, 8}};

struct Filter {  // empty / 0: all
  std::string shape, tile;
  int m = 0;
};

struct Shape {
  const char* name;
  int N, K;
  bool accumulate;  // o and down add into the fp32 residual; qkv and gate/up write T
};

// max |got - ref| / max |ref| over sampled (i, n) of a product with y zeroed first.
template <typename E>
double check(const std::vector<uint8_t>& wc, const std::vector<float>& ws,
             const std::vector<uint8_t>& xc, const std::vector<float>& xs, int m, int N, int K,
             const E* dy) {
  std::vector<E> y(size_t(m) * N);
  HAYATE_CUDA_CHECK(cudaDeviceSynchronize());
  HAYATE_CUDA_CHECK(cudaMemcpy(y.data(), dy, y.size() * sizeof(E), cudaMemcpyDeviceToHost));
  std::mt19937 rng(7);
  double worst = 0, scale = 0;
  for (int s = 0; s < kChecks; ++s) {
    const int i = int(rng() % unsigned(m)), n = int(rng() % unsigned(N));
    double acc = 0;
    for (int k = 0; k < K; ++k)
      acc += double(e4m3_to_f32(xc[size_t(i) * K + k])) * e4m3_to_f32(wc[size_t(n) * K + k]);
    const double ref = acc * xs[size_t(i)] * ws[size_t(n)];
    float got;
    if constexpr (std::is_same_v<E, float>)
      got = y[size_t(i) * N + n];
    else
      got = __half2float(y[size_t(i) * N + n]);
    worst = std::max(worst, std::isfinite(got) ? std::fabs(got - ref) : 1e30);
    scale = std::max(scale, std::fabs(ref));
  }
  return worst / scale;
}

template <typename E>
void run_shape(const Shape& sh, const Filter& only, double read_gbs, cudaStream_t s,
               LtGemm& lt) {
  if (!only.shape.empty() && only.shape != sh.name) return;
  const int N = sh.N, K = sh.K;
  const size_t wbytes = size_t(N) * K;
  const int copies = int(std::max<size_t>(1, (kRotateBytes + wbytes - 1) / wbytes));
  // Weights: uniform fp32 quantized per row (one copy), then copied.
  DeviceBuffer wf(wbytes * sizeof(float)), wq(wbytes * copies), wsc(size_t(N) * sizeof(float));
  fill_dummy<float>(wf.as<float>(), wbytes, 3, 0, 0.05f, 0.0f, 0, s);
  quantize_weight_rows(wf.as<float>(), N, K, wq.as<uint8_t>(), wsc.as<float>(), s);
  for (int c = 1; c < copies; ++c)
    HAYATE_CUDA_CHECK(cudaMemcpyAsync(wq.as<uint8_t>() + c * wbytes, wq.as(), wbytes,
                                      cudaMemcpyDeviceToDevice, s));
  std::vector<uint8_t> wc(wbytes);
  std::vector<float> ws(static_cast<size_t>(N));
  HAYATE_CUDA_CHECK(cudaStreamSynchronize(s));
  HAYATE_CUDA_CHECK(cudaMemcpy(wc.data(), wq.as(), wbytes, cudaMemcpyDeviceToHost));
  HAYATE_CUDA_CHECK(
      cudaMemcpy(ws.data(), wsc.as(), ws.size() * sizeof(float), cudaMemcpyDeviceToHost));
  const double floor_us = double(wbytes) / read_gbs / 1e3;
  const cudaDataType_t out = std::is_same_v<E, float> ? CUDA_R_32F : CUDA_R_16F;

  for (int m : {1, 8, 16, 32, 64, 128}) {
    if (only.m != 0 && only.m != m) continue;
    DeviceBuffer xh(size_t(m) * K * sizeof(T)), xq(size_t(m) * K), xsd(size_t(m) * sizeof(float));
    fill_dummy<T>(xh.as<T>(), size_t(m) * K, 5, uint64_t(m), 1.0f, 0.0f, 0, s);
    quantize_rows_fp8(xh.as<T>(), m, K, 0.0f, xq.as<uint8_t>(), xsd.as<float>(), s);
    std::vector<uint8_t> xc(size_t(m) * K);
    std::vector<float> xs(static_cast<size_t>(m));
    HAYATE_CUDA_CHECK(cudaStreamSynchronize(s));
    HAYATE_CUDA_CHECK(cudaMemcpy(xc.data(), xq.as(), xc.size(), cudaMemcpyDeviceToHost));
    HAYATE_CUDA_CHECK(
        cudaMemcpy(xs.data(), xsd.as(), xs.size() * sizeof(float), cudaMemcpyDeviceToHost));
    DeviceBuffer y(size_t(m) * N * sizeof(E));
    E* dy = y.as<E>();
    const auto wcopy = [&](int i) { return wq.as<uint8_t>() + size_t(i % copies) * wbytes; };

    const LtShape lsh{N, K, CUDA_R_8F_E4M3, out, sh.accumulate};
    lt.tune(lsh, {m}, 8, 5, wq.as(), xq.as(), dy, s, {}, {wsc.as<float>(), xsd.as<float>()});
    const auto run_lt = [&](int i) {
      if (!lt.run_tuned(lsh, m, wcopy(i), xq.as(), dy, s, {wsc.as<float>(), xsd.as<float>()}))
        lt.run_any(lsh, m, wcopy(i), xq.as(), dy, s, {wsc.as<float>(), xsd.as<float>()});
    };
    const double lt_us = median_ms(s, kReps, run_lt) * 1e3;
    HAYATE_CUDA_CHECK(cudaMemsetAsync(dy, 0, y.bytes(), s));
    run_lt(0);
    const double lt_err = check(wc, ws, xc, xs, m, N, K, dy);

    std::string tiles;
    double best_us = 0, best_err = 0;
    std::string best_name;
    for (const Fp8SmallTile tile : kTiles) {
      if (!gemm_fp8_small_supported(m, N, K, tile)) continue;
      char name[32];
      if (tile.k_blocks > 0)
        std::snprintf(name, sizeof name, "wg%d%s", tile.k_blocks, tile.rows == 64 ? "x64" : "");
      else
        std::snprintf(name, sizeof name, "%dx%dx%d", tile.rows, tile.k_warps, tile.row_warps);
      if (!only.tile.empty() && only.tile != name) continue;
      const auto run_hand = [&](int i) {
        gemm_fp8_small(wcopy(i), wsc.as<float>(), xq.as<uint8_t>(), xsd.as<float>(), m, N, K, dy,
                       sh.accumulate, tile, s);
      };
      const double us = median_ms(s, kReps, run_hand) * 1e3;
      HAYATE_CUDA_CHECK(cudaMemsetAsync(dy, 0, y.bytes(), s));
      run_hand(0);
      const double err = check(wc, ws, xc, xs, m, N, K, dy);
      char buf[64];
      std::snprintf(buf, sizeof buf, " %s:%.1f%s", name, us, err > 2e-3 ? "(WRONG)" : "");
      tiles += buf;
      if (best_us == 0 || us < best_us) best_us = us, best_err = err, best_name = name;
    }
    if (best_us > 0)
      std::printf(
          "%-8s m %3d  floor %6.1f us  lt %6.1f us (%3.0f %%)  hand %6.1f us (%3.0f %% of probe, "
          "%s)  lt/hand %.2fx  err hand %.1e lt %.1e\n",
          sh.name, m, floor_us, lt_us, 100 * floor_us / lt_us, best_us, 100 * floor_us / best_us,
          best_name.c_str(), lt_us / best_us, best_err, lt_err);
    else
      std::printf(
          "%-8s m %3d  floor %6.1f us  lt %6.1f us (%3.0f %%)  hand: unsupported  err lt %.1e\n",
          sh.name, m, floor_us, lt_us, 100 * floor_us / lt_us, lt_err);
    if (!tiles.empty()) std::printf("         tiles (us):%s\n", tiles.c_str());
    std::fflush(stdout);
  }
}

int run(const Filter& only) {
  cudaStream_t s;
  HAYATE_CUDA_CHECK(cudaStreamCreate(&s));
  cudaDeviceProp prop{};
  HAYATE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  double read_gbs = 0;
  {  // The ceiling: a read-only pass over 4 GiB (gemv_lab's probe).
    const size_t probe_bytes = size_t(4) << 30;
    DeviceBuffer probe(probe_bytes), sink(64);
    HAYATE_CUDA_CHECK(cudaMemset(probe.as(), 1, probe_bytes));
    const double ms =
        median_ms(s, 10, [&](int) { read_probe(probe.as(), probe_bytes, sink.as<float>(), s); });
    read_gbs = probe_bytes / ms / 1e6;
  }
  std::printf("device %s, %d SMs; read probe %.0f GB/s\n", prop.name, prop.multiProcessorCount,
              read_gbs);
  DeviceBuffer ws(size_t(32) << 20);
  LtGemm lt(ws.as(), ws.bytes());
  run_shape<T>({"qkv", 6144, 4096, false}, only, read_gbs, s, lt);
  run_shape<float>({"o", 4096, 4096, true}, only, read_gbs, s, lt);
  run_shape<T>({"gate_up", 28672, 4096, false}, only, read_gbs, s, lt);
  run_shape<float>({"down", 4096, 14336, true}, only, read_gbs, s, lt);
  HAYATE_CUDA_CHECK(cudaStreamDestroy(s));
  return 0;
}

}  // namespace
}  // namespace hayate::cuda

int main(int argc, char** argv) {
  hayate::cuda::Filter only;
  if (argc > 1) only.shape = argv[1];
  if (argc > 2) only.m = std::atoi(argv[2]);
  if (argc > 3) only.tile = argv[3];
  return hayate::cuda::run(only);
}
