// GEMV lab: every variant of the decode GEMV on every Llama-3.1-8B weight
// shape, fp16, checked against the CPU reference (cpu::matmul on the same
// rounded weights) and timed with CUDA events: median of 30 launches, the
// weights rotated over copies that together exceed the 60 MB L2 several times
// so that each launch streams from HBM. Prints GB/s and the share of the
// measured read bandwidth (a read-only kernel over 4 GiB, the same probe as
// the backend). The decode step runs the persistent kernel's machinery
// (src/cuda/kernels/persistent.cuh), timed here GEMV by GEMV beside the
// standalone variants that lost to it (gemv_variants.cuh: registers,
// gemv_ring.cuh: the shared-memory ring); see NOTES.md.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/rng.h"
#include "cpu/ops.h"
#include "cuda/buffer.h"
#include "cuda/kernels/persistent.cuh"
#include "cuda/launch.h"
#include "cuda/ops.h"
#include "gemv_ring.cuh"
#include "gemv_variants.cuh"
#include "lab_timing.h"

namespace hayate::cuda {
namespace {

using T = half;
constexpr uint64_t kSeed = 42;

struct Shape {
  const char* name;
  int rows, K;
};

// Host copy of one weight copy, as the GPU holds it (fill_dummy, rounded to T).
std::vector<float> host_weights(size_t n, uint64_t stream, float scale) {
  std::vector<float> w(n);
  const unsigned nt = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < nt; ++t)
    pool.emplace_back([&, t] {
      for (size_t i = n * t / nt; i < n * (t + 1) / nt; ++i)
        w[i] = __half2float(__float2half_rn(scale * uniform_pm1(kSeed, stream, i)));
    });
  for (auto& th : pool) th.join();
  return w;
}

double max_rel(const std::vector<float>& got, const std::vector<float>& ref) {
  double worst = 0;
  double scale = 0;
  for (float r : ref) scale = std::max(scale, double(std::fabs(r)));
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = std::fabs(double(got[i]) - ref[i]) / (1e-2 * scale + std::fabs(ref[i]));
    worst = std::isfinite(e) ? std::max(worst, e) : INFINITY;
  }
  return worst;
}

struct Variant {
  std::string name;
  // launch(W, rows, K, x, y, stream): y = W x
  std::function<void(const T*, int, int, const float*, float*, cudaStream_t)> run;
};

template <int R, int U, int KS>
Variant store_variant() {
  char name[32];
  std::snprintf(name, sizeof name, "R%d U%d KS%d", R, U, KS);
  return {name, [](const T* W, int rows, int K, const float* x, float* y, cudaStream_t s) {
            constexpr int gpb = kGemvThreads / (32 * KS);
            // Register cap (4 blocks per SM) only where the loads fit it.
            auto kernel = gemv_kernel<T, R, U, KS, false, StoreEpi<R>, (R * U <= 8 ? 4 : 1)>;
            int per_sm = 0;
            HAYATE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kGemvThreads, 0));
            const unsigned blocks = std::min<unsigned>(ceil_div(rows / R, gpb), unsigned(per_sm * 132));
            launch({blocks, kGemvThreads, 0, s, false}, kernel, W, K, rows / R,
                   GemvInput<T>{x, nullptr, 0.0f}, StoreEpi<R>{y});
          }};
}

// gemv2_kernel (two rounds of loads in flight): K <= U * 8 * 32 * KS only;
// other shapes print a copy of the one-round kernel's row, marked "(1r)".
template <int R, int U, int KS>
Variant store2_variant() {
  char name[32];
  std::snprintf(name, sizeof name, "2R R%d U%d KS%d", R, U, KS);
  return {name, [](const T* W, int rows, int K, const float* x, float* y, cudaStream_t s) {
            constexpr int gpb = kGemvThreads / (32 * KS);
            auto kernel = K <= U * 8 * 32 * KS ? gemv2_kernel<T, R, U, KS, false, StoreEpi<R>>
                                               : gemv_kernel<T, R, U, KS, false, StoreEpi<R>>;
            int per_sm = 0;
            HAYATE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kGemvThreads, 0));
            const unsigned blocks = std::min<unsigned>(ceil_div(rows / R, gpb), unsigned(per_sm * 132));
            launch({blocks, kGemvThreads, 0, s, false}, kernel, W, K, rows / R,
                   GemvInput<T>{x, nullptr, 0.0f}, StoreEpi<R>{y});
          }};
}

// The shared-memory ring kernel (gemv_ring.cuh), plain store, R rows
// per group, G groups per stage, S stages, NC chunks per thread and row (K <=
// NC * 8 * 256 / G, else the variant is skipped). mode 0: no PDL; 1: PDL, the
// next launch allowed once a block issued its last stage; 2: PDL, at entry.
struct TmaVariant {
  std::string name;
  int max_k;
  std::function<void(const T*, int, int, const float*, float*, cudaStream_t, int)> run;
};
template <int R, int G, int S, int NC>
TmaVariant tma_variant() {
  char name[32];
  std::snprintf(name, sizeof name, "tma R%d G%d S%d", R, G, S);
  return {name, NC * 8 * kGemvThreads / G,
          [](const T* W, int rows, int K, const float* x, float* y, cudaStream_t s, int mode) {
            launch_gemv_tma<T, R, G, S, NC, false>(W, rows / R, K, GemvInput<T>{x, nullptr, 0.0f},
                                                   StoreEpi<R>{y}, s, mode != 0, mode == 2);
          }};
}

// Per-launch time inside a CUDA graph of kChain launches, as in the decode
// graph (no programmatic dependent launch: see NOTES.md):
// includes the gaps between kernels, excludes the event overhead of a lone
// launch. Median of 7 replays.
constexpr int kChain = 20;
double chained_ms(cudaStream_t s, const std::function<void(int)>& body) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  HAYATE_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < kChain; ++i) body(i);
  HAYATE_CUDA_CHECK(cudaStreamEndCapture(s, &g));
  HAYATE_CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
  const double ms = median_ms(s, 7, [&](int) { HAYATE_CUDA_CHECK(cudaGraphLaunch(ge, s)); });
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  return ms / kChain;
}

// The persistent decode kernel's machinery (persistent.cuh) on one
// shape: `n` GEMVs of rotating weight copies (first, first + 1, ...) in one
// cooperative launch, one block per SM, as between the decode step's phases.
// mode 0: a grid barrier after each GEMV, x loaded after it (production);
// 1: no barrier (the ring streaming across GEMVs, the upper bound); 2: the n
// barriers alone, no GEMV (their cost); 3: instead of the barrier each
// block's consumers pause 1.5 us (__nanosleep): whether the ring absorbs a
// stall of the consumers. Per-GEMV time = launch / n (NOTES.md). Tiles are
// claimed from claims [n] (zero; reset at exit).
template <int R, int G, int NC>
__global__ void __launch_bounds__(kPersistThreads, 1)
    persist_chain_kernel(const T* W, size_t copy_elems, int copies, int first, int n, int K,
                         int groups, const float* x, float* y, unsigned* bar, int* claims,
                         int mode) {
  extern __shared__ __align__(128) unsigned char stages[];
  __shared__ __align__(8) uint64_t full[kPersistStages], empty[kPersistStages], done[kPersistParts];
  __shared__ float part[kPersistParts][kPersistWarps][kPersistPartRows];
  __shared__ int tile[kPersistStages];
  const PersistRing rg{stages, tile, full, empty, done, part};
  if (threadIdx.x == kPersistConsumers) persist_ring_init(full, empty, done);
  __syncthreads();
  int j = 0;
  if (threadIdx.x >= kPersistConsumers) {
    if (threadIdx.x == kPersistConsumers && mode != 2)
      for (int i = 0; i < n; ++i)
        persist_produce<T, R, G>(rg, W + copy_elems * ((first + i) % copies), K, groups,
                                 StoreEpi<R>{y}, claims + i, j);
    return;
  }
  auto from_x = [&](int c, float (&v)[8]) { load8_cg(x + size_t(c) * 8, v); };
  unsigned k = 0;
  int jd = 0;
  for (int i = 0; i < n; ++i) {
    if (mode != 2)
      persist_consume<T, T, R, G, NC, false>(rg, K, groups, nullptr, 0.0f, from_x, StoreEpi<R>{y}, j,
                                             jd);
    if (mode == 0 || mode == 2) grid_sync(bar, k);
    if (mode == 3) __nanosleep(1500);
  }
  persist_exit(bar, claims, n);
}

template <int R, int G, int NC>
void persist_chain(const T* W, size_t copy_elems, int copies, int first, int n, int rows, int K,
                   const float* x, float* y, unsigned* bar, int* claims, int mode,
                   cudaStream_t s) {
  auto kernel = persist_chain_kernel<R, G, NC>;
  const size_t smem = size_t(kPersistStages) * kPersistStageBytes;
  HAYATE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  int sms = 0;
  HAYATE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  launch({unsigned(sms), kPersistThreads, smem, s, false, true}, kernel, W, copy_elems, copies,
         first, n, K, rows / R, x, y, bar, claims, mode);
}

int run(bool persistent_only) {
  cudaStream_t s;
  HAYATE_CUDA_CHECK(cudaStreamCreate(&s));
  cudaDeviceProp prop{};
  HAYATE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));

  // The ceiling: a read-only pass over 4 GiB.
  const size_t probe_bytes = size_t(4) << 30;
  double read_gbs = 0;
  {
    DeviceBuffer probe(probe_bytes), sink(64);
    HAYATE_CUDA_CHECK(cudaMemset(probe.as(), 1, probe_bytes));
    const double ms = median_ms(s, 10, [&](int) { read_probe(probe.as(), probe_bytes, sink.as<float>(), s); });
    read_gbs = probe_bytes / ms / 1e6;
    DeviceBuffer dst(probe_bytes / 2);
    const double cms = median_ms(s, 10, [&](int) {
      HAYATE_CUDA_CHECK(cudaMemcpyAsync(dst.as(), probe.as(), probe_bytes / 2, cudaMemcpyDeviceToDevice, s));
    });
    std::printf("device %s, %d SMs; read probe %.0f GB/s; D2D copy %.0f GB/s read+written\n", prop.name,
                prop.multiProcessorCount, read_gbs, probe_bytes / cms / 1e6);
  }

  const Shape shapes[] = {{"qkv", 6144, 4096}, {"o_proj", 4096, 4096}, {"gate_up", 28672, 4096},
                          {"down", 4096, 14336}, {"lm_head", 128256, 4096}};
  const std::vector<Variant> variants = {
      store_variant<1, 4, 1>(), store_variant<2, 4, 1>(), store_variant<2, 4, 4>(),
      store_variant<2, 8, 4>(), store_variant<4, 4, 2>(), store_variant<2, 4, 8>(),
      store_variant<4, 4, 8>(), store_variant<2, 8, 8>(), store2_variant<2, 2, 8>(),
      store2_variant<4, 2, 8>()};
  // Ring sizes: K = 4096 rows are 8 KB (R2 G1 S6 = 96 KB, two blocks per SM
  // fit); K = 14336 rows are 28 KB (R1 G1 S3 = 84 KB).
  const std::vector<TmaVariant> tma_variants = {
      tma_variant<2, 1, 4, 2>(), tma_variant<2, 1, 6, 2>(), tma_variant<2, 2, 3, 4>(),
      tma_variant<2, 1, 12, 2>(), tma_variant<1, 1, 3, 8>(), tma_variant<1, 1, 4, 8>(),
      tma_variant<2, 1, 2, 8>(), tma_variant<1, 1, 6, 8>()};
  std::mt19937_64 rng(7);
  std::printf("\n%-8s %-14s %8s %8s %8s %6s %9s\n", "shape", "variant", "us_iso", "us_chain",
              "GB/s", "%read", "max_err");
  DeviceBuffer barrier(8), claims(kChain * sizeof(int));
  HAYATE_CUDA_CHECK(cudaMemset(barrier.as(), 0, 8));
  HAYATE_CUDA_CHECK(cudaMemset(claims.as(), 0, kChain * sizeof(int)));
  for (const Shape& sh : shapes) {
    const size_t n = size_t(sh.rows) * sh.K, bytes = n * sizeof(T);
    const int copies = int(std::max<size_t>(1, (size_t(256) << 20) / bytes + 1));
    const float scale = 1.0f / std::sqrt(float(sh.K));
    DeviceBuffer W(bytes * copies), x(sh.K * 4), y(size_t(sh.rows) * 4 * 2);
    for (int c = 0; c < copies; ++c)
      fill_dummy(W.as<T>() + n * c, n, kSeed, 100 + c, scale, 0.0f, 0, s);
    std::vector<float> xh(sh.K);
    std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
    for (float& v : xh) v = ud(rng);
    HAYATE_CUDA_CHECK(cudaMemcpy(x.as(), xh.data(), sh.K * 4, cudaMemcpyHostToDevice));
    const std::vector<float> wh = host_weights(n, 100, scale);  // copy 0
    std::vector<float> ref(sh.rows);
    cpu::matmul(wh.data(), xh.data(), ref.data(), 1, sh.rows, sh.K);
    const double moved = double(bytes) + sh.K * 4.0 + sh.rows * 4.0;
    // GB/s from the chained time (the decode graph's situation).
    auto report = [&](const std::string& name, const std::function<void(int)>& body, double err) {
      const double iso = median_ms(s, 30, body), chain = chained_ms(s, body);
      const double gbs = moved / chain / 1e6;
      std::printf("%-8s %-14s %8.1f %8.1f %8.0f %5.1f%% %9.2e%s\n", sh.name, name.c_str(), iso * 1e3,
                  chain * 1e3, gbs, 100 * gbs / read_gbs, err, err < 2e-3 ? "" : "  WRONG");
    };
    {  // The persistent machinery; us_iso: one GEMV per launch, us_chain: per GEMV of 20
      auto pc = [&](int first, int count, int mode) {
        if (sh.K <= 4096)
          persist_chain<2, 2, 4>(W.as<T>(), n, copies, first, count, sh.rows, sh.K, x.as<float>(),
                                 y.as<float>(), barrier.as<unsigned>(), claims.as<int>(), mode, s);
        else
          persist_chain<1, 1, 8>(W.as<T>(), n, copies, first, count, sh.rows, sh.K, x.as<float>(),
                                 y.as<float>(), barrier.as<unsigned>(), claims.as<int>(), mode, s);
      };
      HAYATE_CUDA_CHECK(cudaMemset(y.as(), 0xff, sh.rows * 4));  // poison
      pc(0, 1, 0);
      std::vector<float> got(sh.rows);
      HAYATE_CUDA_CHECK(cudaMemcpy(got.data(), y.as(), sh.rows * 4, cudaMemcpyDeviceToHost));
      const double e = max_rel(got, ref);
      const char* names[] = {"persist", "persist nobar", "barriers only", "persist 1.5us"};
      for (int mode : {0, 1, 2, 3}) {
        // Each launch starts where the last one stopped in the rotation: no copy is still in L2.
        const double iso = median_ms(s, 30, [&](int i) { pc(i, 1, mode); });
        const double chain = median_ms(s, 7, [&](int i) { pc(i * kChain, kChain, mode); }) / kChain;
        const double gbs = moved / chain / 1e6;
        std::printf("%-8s %-14s %8.1f %8.1f %8.0f %5.1f%% %9.2e%s\n", sh.name, names[mode], iso * 1e3,
                    chain * 1e3, mode == 2 ? 0.0 : gbs, mode == 2 ? 0.0 : 100 * gbs / read_gbs, e,
                    e < 2e-3 ? "" : "  WRONG");
      }
      if (persistent_only) continue;
    }
    for (const Variant& v : variants) {
      HAYATE_CUDA_CHECK(cudaMemset(y.as(), 0xff, sh.rows * 4));  // poison
      v.run(W.as<T>(), sh.rows, sh.K, x.as<float>(), y.as<float>(), s);
      std::vector<float> got(sh.rows);
      HAYATE_CUDA_CHECK(cudaMemcpy(got.data(), y.as(), sh.rows * 4, cudaMemcpyDeviceToHost));
      report(v.name, [&](int i) {
        v.run(W.as<T>() + n * (i % copies), sh.rows, sh.K, x.as<float>(), y.as<float>(), s);
      }, max_rel(got, ref));
    }
    for (const TmaVariant& v : tma_variants) {
      if (sh.K > v.max_k || v.max_k >= 4 * sh.K) continue;  // configs sized for another K
      HAYATE_CUDA_CHECK(cudaMemset(y.as(), 0xff, sh.rows * 4));  // poison
      v.run(W.as<T>(), sh.rows, sh.K, x.as<float>(), y.as<float>(), s, 0);
      std::vector<float> got(sh.rows);
      HAYATE_CUDA_CHECK(cudaMemcpy(got.data(), y.as(), sh.rows * 4, cudaMemcpyDeviceToHost));
      const double e = max_rel(got, ref);
      for (int mode : {0, 1, 2})
        report(v.name + (mode == 0 ? "" : mode == 1 ? " pdl" : " pdl e"), [&](int i) {
          v.run(W.as<T>() + n * (i % copies), sh.rows, sh.K, x.as<float>(), y.as<float>(), s, mode);
        }, e);
    }
  }
  std::printf("\nmax_err: max |gpu - cpu| / (|ref| + 1e-2 max|ref|); under 2e-3 passes (fp32 sums in another order).\n");
  return 0;
}

}  // namespace
}  // namespace hayate::cuda

// --persistent: the read probe and the persistent rows only.
int main(int argc, char** argv) {
  return hayate::cuda::run(argc > 1 && std::string(argv[1]) == "--persistent");
}
