// GEMM lab: the batched backend's products on the Llama-3.1-8B shapes at
// decode (1024 rows: the max-load graph) and prefill (16384 rows: one step of
// max_num_batched_tokens), fp16 weights and activations, fp32 accumulation:
//   ex f32   cublasGemmEx, fp32 output (the backend before the lt path)
//   ex f16   cublasGemmEx, fp16 output
//   lt f16   cuBLASLt, fp16 output, the heuristic's first 8 algorithms each
//            timed: the fastest, and the heuristic's own first pick (#0)
//   lt f32   the same with fp32 output (o_proj / down accumulate into it)
// Each variant is checked on 256 sampled outputs against a double-precision
// host dot product of the same rounded inputs; timed with CUDA events, median
// of 10 after 3 warm-up calls. Then the chip's best on a square 8192^3 product
// and a projection of max-load-128 from these times (NOTES.md, "GEMM lab").
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/rng.h"
#include "cuda/buffer.h"
#include "cuda/gemm_lt.h"
#include "cuda/launch.h"
#include "cuda/ops.h"
#include "lab_timing.h"

namespace hayate::cuda {
namespace {

using T = half;
constexpr uint64_t kSeed = 42, kXStream = 1000;
constexpr float kWScale = 0.02f;  // |W| like a trained 8B's projections; x of unit size
constexpr int kReps = 10, kCands = 8, kChecks = 256;
constexpr size_t kWorkspace = size_t(32) << 20;  // the backend's

struct Shape {
  const char* name;
  int N, K;
  bool accumulate;  // the backend adds it into the fp32 residual (beta = 1)
};
// QKV (q 4096 + k 1024 + v 1024), o_proj, gate/up (2 x 14336), down, LM head.
constexpr Shape kLayer[] = {{"qkv", 6144, 4096, false},
                            {"o_proj", 4096, 4096, true},
                            {"gate_up", 28672, 4096, false},
                            {"down", 4096, 14336, true}};
constexpr Shape kHead{"lm_head", 128256, 4096, false};

float host_t(float v) {
  return __half2float(__float2half_rn(v));
}
float w_at(uint64_t stream, size_t i) {
  return host_t(kWScale * uniform_pm1(kSeed, stream, i));
}
float x_at(size_t i) {
  return host_t(uniform_pm1(kSeed, kXStream, i));
}

struct Result {
  double ms = 0;
  double err = 0;  // worst |got - ref| / (1e-2 max|ref| + |ref|) over the samples
  int index = -1;  // Lt: which heuristic candidate
};

class Lab {
 public:
  Lab() : ws_(kWorkspace), lt_(ws_.as(), kWorkspace) {
    HAYATE_CUDA_CHECK(cudaStreamCreate(&s_));
    if (cublasCreate(&cublas_) != CUBLAS_STATUS_SUCCESS) std::abort();
    cublasSetStream(cublas_, s_);
    cublasSetWorkspace(cublas_, ws_.as(), kWorkspace);
  }
  ~Lab() {
    cublasDestroy(cublas_);
    cudaStreamDestroy(s_);
  }

  // The weight of a shape (stream = its index), x [m, K], y [m, N] (fp32-sized).
  void prepare(const Shape& sh, uint64_t stream, int m) {
    const size_t wn = size_t(sh.N) * sh.K, xn = size_t(m) * sh.K, yb = size_t(m) * sh.N * 4;
    if (w_.bytes() < wn * sizeof(T)) w_ = DeviceBuffer(wn * sizeof(T));
    if (x_.bytes() < xn * sizeof(T)) x_ = DeviceBuffer(xn * sizeof(T));
    if (y_.bytes() < yb) y_ = DeviceBuffer(yb);
    fill_dummy<T>(w_.as<T>(), wn, kSeed, stream, kWScale, 0.0f, 0, s_);
    fill_dummy<T>(x_.as<T>(), xn, kSeed, kXStream, 1.0f, 0.0f, 0, s_);
    HAYATE_CUDA_CHECK(cudaStreamSynchronize(s_));
    // Sampled outputs and their double-precision references.
    samples_.clear();
    for (int i = 0; i < kChecks; ++i) {
      const int r = int(uint64_t(i) * 2654435761u % uint64_t(m));
      const int c = int((uint64_t(i) * 40503u + 17u) % uint64_t(sh.N));
      double ref = 0;
      for (int k = 0; k < sh.K; ++k)
        ref += double(x_at(size_t(r) * sh.K + k)) * w_at(stream, size_t(c) * sh.K + k);
      samples_.push_back({r, c, ref});
    }
  }

  // One product y = x W^T (+ y) in `out` through GemmEx.
  void ex(const Shape& sh, int m, cudaDataType_t out, bool acc) {
    const float alpha = 1.0f, beta = acc ? 1.0f : 0.0f;
    if (cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, sh.N, m, sh.K, &alpha, w_.as(), CUDA_R_16F,
                     sh.K, x_.as(), CUDA_R_16F, sh.K, &beta, y_.as(), out, sh.N, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
      std::abort();
  }

  Result time_ex(const Shape& sh, int m, cudaDataType_t out, bool acc) {
    Result r;
    r.err = check(sh, m, out, acc, [&] { ex(sh, m, out, acc); });
    r.ms = median_ms(s_, kReps, [&](int) { ex(sh, m, out, acc); });
    return r;
  }

  // Every candidate checked and timed; the fastest and candidate #0.
  std::pair<Result, Result> time_lt(const Shape& sh, int m, cudaDataType_t out, bool acc) {
    const LtShape ls{sh.N, sh.K, CUDA_R_16F, out, acc};
    const std::vector<cublasLtMatmulAlgo_t> cands = lt_.candidates(ls, m, kCands);
    Result best, first;
    for (size_t i = 0; i < cands.size(); ++i) {
      const auto body = [&] {
        if (lt_.run(ls, m, cands[i], w_.as(), x_.as(), y_.as(), s_) != CUBLAS_STATUS_SUCCESS)
          std::abort();
      };
      Result r;
      r.index = int(i);
      r.err = check(sh, m, out, acc, body);
      r.ms = median_ms(s_, kReps, [&](int) { body(); });
      if (i == 0) first = r;
      if (best.index < 0 || r.ms < best.ms) best = r;
    }
    return {best, first};
  }

  // The chip's best: square 8192^3, fp16 out, best of the Lt candidates.
  double peak_tflops() {
    const Shape sq{"square", 8192, 8192, false};
    prepare_raw(sq, 8192);
    const LtShape ls{sq.N, sq.K, CUDA_R_16F, CUDA_R_16F, false};
    double best = 1e30;
    for (const cublasLtMatmulAlgo_t& a : lt_.candidates(ls, 8192, kCands))
      best = std::min(
          best, median_ms(s_, kReps, [&](int) {
            if (lt_.run(ls, 8192, a, w_.as(), x_.as(), y_.as(), s_) != CUBLAS_STATUS_SUCCESS)
              std::abort();
          }));
    return 2.0 * 8192.0 * 8192.0 * 8192.0 / (best * 1e-3) / 1e12;
  }

 private:
  struct Sample {
    int r, c;
    double ref;
  };

  void prepare_raw(const Shape& sh, int m) {
    const size_t wn = size_t(sh.N) * sh.K, xn = size_t(m) * sh.K, yb = size_t(m) * sh.N * 4;
    if (w_.bytes() < wn * sizeof(T)) w_ = DeviceBuffer(wn * sizeof(T));
    if (x_.bytes() < xn * sizeof(T)) x_ = DeviceBuffer(xn * sizeof(T));
    if (y_.bytes() < yb) y_ = DeviceBuffer(yb);
    fill_dummy<T>(w_.as<T>(), wn, kSeed, 99, kWScale, 0.0f, 0, s_);
    fill_dummy<T>(x_.as<T>(), xn, kSeed, kXStream, 1.0f, 0.0f, 0, s_);
  }

  // y poisoned (accumulate: zeroed, so y = x W^T is still the expected value),
  // one product, the sampled entries compared with their references.
  template <typename F>
  double check(const Shape& sh, int m, cudaDataType_t out, bool acc, F&& body) {
    const size_t bytes = size_t(m) * sh.N * (out == CUDA_R_32F ? 4 : 2);
    HAYATE_CUDA_CHECK(cudaMemsetAsync(y_.as(), acc ? 0 : 0xff, bytes, s_));
    body();
    HAYATE_CUDA_CHECK(cudaStreamSynchronize(s_));
    double scale = 0, worst = 0;
    for (const Sample& p : samples_) scale = std::max(scale, std::fabs(p.ref));
    for (const Sample& p : samples_) {
      const size_t at = size_t(p.r) * sh.N + p.c;
      float got = 0;
      if (out == CUDA_R_32F) {
        HAYATE_CUDA_CHECK(cudaMemcpy(&got, y_.as<float>() + at, 4, cudaMemcpyDeviceToHost));
      } else {
        half h;
        HAYATE_CUDA_CHECK(cudaMemcpy(&h, y_.as<T>() + at, 2, cudaMemcpyDeviceToHost));
        got = __half2float(h);
      }
      const double e = std::fabs(got - p.ref) / (1e-2 * scale + std::fabs(p.ref));
      worst = std::isfinite(e) ? std::max(worst, e) : INFINITY;
    }
    return worst;
  }

  DeviceBuffer ws_, w_, x_, y_;
  LtGemm lt_;
  cudaStream_t s_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::vector<Sample> samples_;
};

double tflops(const Shape& sh, int m, double ms) {
  return 2.0 * m * double(sh.N) * sh.K / (ms * 1e-3) / 1e12;
}

// Per (shape, m): the backend's old product (ex f32) and the lt path's
// (qkv / gate_up in f16, the rest in f32; the faster of lt and ex): ms of each.
struct Pair {
  double old_ms = 0, new_ms = 0;
};

int run() {
  Lab lab;
  int bad = 0;
  std::printf("%-8s %6s  %-7s %9s %8s %9s  %s\n", "shape", "m", "variant", "us", "TFLOP/s",
              "max_err", "note");
  const auto row = [&](const Shape& sh, int m, const char* v, const Result& r, std::string note) {
    const bool ok = r.err < 1e-2;
    bad += !ok;
    if (r.index >= 0) note = "cand #" + std::to_string(r.index) + " " + note;
    std::printf("%-8s %6d  %-7s %9.1f %8.1f %9.2e  %s%s\n", sh.name, m, v, r.ms * 1e3,
                tflops(sh, m, r.ms), r.err, note.c_str(), ok ? "" : " BAD");
  };
  // [decode 1024 | prefill 16384] per layer shape, and the LM head at 1024 / 128.
  Pair layer[2][4], head[2];
  const int ms_rows[2] = {1024, 16384}, head_rows[2] = {1024, 128};
  for (int p = 0; p < 2; ++p) {
    for (int i = 0; i <= 4; ++i) {
      const Shape& sh = i < 4 ? kLayer[i] : kHead;
      const int m = i < 4 ? ms_rows[p] : head_rows[p];
      lab.prepare(sh, uint64_t(i + 1), m);
      const Result a = lab.time_ex(sh, m, CUDA_R_32F, sh.accumulate);
      const Result b = lab.time_ex(sh, m, CUDA_R_16F, false);
      const auto [c, c0] = lab.time_lt(sh, m, CUDA_R_16F, false);
      const auto [d, d0] = lab.time_lt(sh, m, CUDA_R_32F, sh.accumulate);
      row(sh, m, "ex f32", a, sh.accumulate ? "beta 1" : "");
      row(sh, m, "ex f16", b, "");
      row(sh, m, "lt f16", c, "fastest");
      row(sh, m, "lt f16", c0, "heuristic's pick");
      row(sh, m, "lt f32", d, sh.accumulate ? "fastest, beta 1" : "fastest");
      row(sh, m, "lt f32", d0, "heuristic's pick");
      // What the lt path runs: T output where the backend takes it (qkv,
      // gate_up), the faster of the Lt candidates and GemmEx (its start-up timing).
      const bool t_out = i < 4 && !sh.accumulate;
      const Pair pr{a.ms, t_out ? std::min(c.ms, b.ms) : std::min(d.ms, a.ms)};
      (i < 4 ? layer[p][i] : head[p]) = pr;
    }
  }
  const double peak = lab.peak_tflops();
  std::printf("\nH200 best (8192^3, fp16 out, fastest of %d cuBLASLt candidates): %.1f TFLOP/s\n",
              kCands, peak);

  // max-load-128: 1024 requests of 128 prompt + 128 output tokens at 16,384
  // tokens / 1024 sequences per step: ~8 prefill steps of 16,384 rows (their
  // LM head on 128 rows), then ~127 decode steps of 1024 rows (the first token
  // comes from prefill). Attention: ~8 ms per 1024-row decode step (measured
  // in the s3 calls); prefill attention and small kernels are not counted.
  constexpr int kLayers = 32;
  for (int v = 0; v < 2; ++v) {
    double step[2];
    for (int p = 0; p < 2; ++p) {
      double s = v ? head[p].new_ms : head[p].old_ms;
      for (int i = 0; i < 4; ++i) s += kLayers * (v ? layer[p][i].new_ms : layer[p][i].old_ms);
      step[p] = s;
    }
    const double gemm_s = (8 * step[1] + 127 * step[0]) * 1e-3;
    const double with_attn = gemm_s + 127 * 8.0e-3;
    const double flop = 8 * 16384 * 13.95e9 + 127 * 1024 * 15.0e9;  // the brief's per-token costs
    std::printf(
        "%s path: decode step GEMMs %.2f ms (1024 rows), prefill step GEMMs %.1f ms (16384 rows); "
        "max-load GEMMs %.2f s (%.0f TFLOP/s), + decode attention %.2f s -> at most %.0f output "
        "tok/s (GEMMs alone: %.0f)\n",
        v ? "lt" : "old (ex f32)", step[0], step[1], gemm_s, flop / gemm_s / 1e12, with_attn,
        1024 * 128 / with_attn, 1024 * 128 / gemm_s);
  }
  std::printf("%s\n",
              bad ? "SOME VARIANTS FAILED THE CHECK" : "all variants match the host reference");
  return bad ? 1 : 0;
}

}  // namespace
}  // namespace hayate::cuda

int main() {
  return hayate::cuda::run();
}
