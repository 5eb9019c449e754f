// Overlap and power lab for max load's decode steps (bench/kernels/NOTES.md,
// "Max load, session 6: the power limit"). Llama-3.1-8B shapes in fp16, R
// decode rows with contexts spread over [lo, hi] keys in a paged pool (blocks
// of 16 at random; LAB_LAYOUT=engine: in the order the engine's FIFO free list
// hands them out), the batched backend's decode layer:
//   rmsnorm, QKV GEMM (T out), paged RoPE + KV write, paged decode attention,
//   o_proj GEMM (+= fp32), rmsnorm, gate/up GEMM (T out), silu_mul, down (+= fp32)
//
//   overlap_lab R lo hi            the layer x 32, timed with CUDA events
//                                  (median of 5 after warm runs) three ways:
//     full:    the R rows as one batch on one stream (what the backend does);
//     serial:  two halves of R / 2 rows one after the other;
//     overlap: the halves on two streams, the GEMMs told to leave k SMs free
//              (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET = SMs - k), the second
//              half held behind the first by events (sync modes, time_overlap),
//              so one half's attention can run beside the other's GEMMs.
//   overlap_lab R lo hi attn       the decode attention alone (R and R / 2 rows).
//   overlap_lab R lo hi sustain    GEMM, attention and layer rates in 250 ms
//                                  windows over seconds (boost, then power limit).
//   overlap_lab R lo hi candidates cuBLASLt's first 8 candidates per layer GEMM
//                                  at R and 16 R rows, burst vs sustained.
//   overlap_lab R lo hi maxload    max-load-128's GPU work without the engine
//                                  (MaxLoad): GEMMs only, + small kernels, +
//                                  decode attention; GEMMs picked in bursts or
//                                  sustained.
// GEMMs: cuBLASLt, the fastest of the heuristic's first candidates per shape,
// row count and SM target (Gemm::plan). Weights and activations are random;
// the KV of layer l is pool l % 2 (each far larger than L2). No correctness
// check: every variant runs the same kernels on the same data (the backend's
// tests check the kernels).
#include <cublasLt.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/buffer.h"
#include "cuda/launch.h"
#include "cuda/ops.h"
#include "cuda/paged_attention.cuh"
#include "lab_timing.h"

namespace hayate::cuda {
namespace {

using T = half;
constexpr int kD = 4096, kI = 14336, kHeads = 32, kKv = 8, kHd = 128, kBs = 16, kLayers = 32;
constexpr int kQd = kHeads * kHd, kKvd = kKv * kHd, kQkv = kQd + 2 * kKvd, kSplits = 16;
constexpr size_t kWs = size_t(32) << 20;

// y [m, N] = x [m, K] W^T (+ y): cuBLASLt, the fastest of the first 4
// candidates per (shape, m, SM target), timed on first use.
class Gemm {
 public:
  Gemm() { HAYATE_CUBLAS_CHECK(cublasLtCreate(&h_)); }
  ~Gemm() {
    for (auto& [k, p] : plans_) {
      cublasLtMatrixLayoutDestroy(p.y);
      cublasLtMatrixLayoutDestroy(p.x);
      cublasLtMatrixLayoutDestroy(p.w);
      cublasLtMatmulDescDestroy(p.op);
    }
    cublasLtDestroy(h_);
  }
  void operator()(const T* W, const T* x, int m, int N, int K, void* y, bool f32_acc, int sms,
                  void* ws, cudaStream_t s) {
    Plan& p = plan(W, x, m, N, K, y, f32_acc, f32_acc, sms, ws, s);
    run(p, W, x, y, f32_acc, ws, s);
  }
  // y in fp32 without accumulating (the LM head's logits).
  void f32_out(const T* W, const T* x, int m, int N, int K, float* y, void* ws, cudaStream_t s) {
    Plan& p = plan(W, x, m, N, K, y, true, false, 0, ws, s);
    run(p, W, x, y, false, ws, s);
  }
  // Plans picked from now on: false: the fastest of the first 4 candidates in
  // bursts (median of 5, as the backend's start-up tuning); true: the fastest
  // of the first 8 sustained (~150 ms each after ~150 ms of heating).
  bool sustained_pick = false;

 public:
  // Sustained rate of each of cuBLASLt's first k candidates for one shape:
  // ~300 ms of the candidate back to back (the GPU settles at its power
  // limit), then ~300 ms timed; and its burst time (median of 5, after the
  // previous candidate's sustained run, i.e. hot). TFLOP/s of both.
  void candidates(const T* W, const T* x, int m, int N, int K, void* y, bool acc, int k, void* ws,
                  cudaStream_t s) {
    Plan p = plan(W, x, m, N, K, y, acc, acc, 0, ws, s);  // descs (the picked algo is replaced below)
    cublasLtMatmulPreference_t pref = nullptr;
    HAYATE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    size_t wsb = kWs;
    HAYATE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb)));
    cublasLtMatmulHeuristicResult_t res[8];  // (a std::vector of these crashes nvcc 13)
    int got = 0;
    HAYATE_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(h_, p.op, p.w, p.x, p.y, p.y, pref,
                                                       std::min(k, 8), res, &got));
    cublasLtMatmulPreferenceDestroy(pref);
    const double flop = 2.0 * m * N * K;
    cudaEvent_t a, b;
    HAYATE_CUDA_CHECK(cudaEventCreate(&a));
    HAYATE_CUDA_CHECK(cudaEventCreate(&b));
    for (int i = 0; i < got; ++i) {
      p.algo = res[i].algo;
      const double burst = median_ms(s, 5, [&](int) { run(p, W, x, y, acc, ws, s); });
      const int iters = std::max(1, int(300.0 / burst));
      for (int j = 0; j < iters; ++j) run(p, W, x, y, acc, ws, s);
      HAYATE_CUDA_CHECK(cudaEventRecord(a, s));
      for (int j = 0; j < iters; ++j) run(p, W, x, y, acc, ws, s);
      HAYATE_CUDA_CHECK(cudaEventRecord(b, s));
      HAYATE_CUDA_CHECK(cudaEventSynchronize(b));
      float ms = 0;
      HAYATE_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
      const double hot = double(ms) / iters;
      int tile = 0, stages = 0, cluster = 0;
      size_t w = 0;
      cublasLtMatmulAlgoConfigGetAttribute(&p.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile,
                                           sizeof(tile), &w);
      cublasLtMatmulAlgoConfigGetAttribute(&p.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages,
                                           sizeof(stages), &w);
      cublasLtMatmulAlgoConfigGetAttribute(&p.algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID,
                                           &cluster, sizeof(cluster), &w);
      std::printf("  cand %d m %5d N %5d K %5d: burst %6.0f, sustained %6.0f TFLOP/s "
                  "(tile %d stages %d cluster %d)\n",
                  i, m, N, K, flop / (burst * 1e-3) / 1e12, flop / (hot * 1e-3) / 1e12, tile,
                  stages, cluster);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }

 private:
  struct Plan {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t w, x, y;
    cublasLtMatmulAlgo_t algo;
  };
  void run(const Plan& p, const T* W, const T* x, void* y, bool acc, void* ws, cudaStream_t s) {
    const float alpha = 1.0f, beta = acc ? 1.0f : 0.0f;
    HAYATE_CUBLAS_CHECK(cublasLtMatmul(h_, p.op, &alpha, W, p.w, x, p.x, &beta, y, p.y, y, p.y,
                                       &p.algo, ws, kWs, s));
  }
  Plan& plan(const T* W, const T* x, int m, int N, int K, void* y, bool out32, bool acc, int sms,
             void* ws, cudaStream_t s) {
    const auto key = std::make_tuple(m, N, K, out32, acc, sms, sustained_pick);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    Plan p{};
    HAYATE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
    HAYATE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
    HAYATE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof(n)));
    if (sms > 0) {
      const int32_t v = sms;
      HAYATE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
          p.op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &v, sizeof(v)));
    }
    const cudaDataType_t out = out32 ? CUDA_R_32F : CUDA_R_16F;
    HAYATE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.w, CUDA_R_16F, K, N, K));
    HAYATE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.x, CUDA_R_16F, K, m, K));
    HAYATE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.y, out, N, m, N));
    cublasLtMatmulPreference_t pref = nullptr;
    HAYATE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    size_t wsb = kWs;
    HAYATE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb)));
    cublasLtMatmulHeuristicResult_t res[8];
    int got = 0;
    HAYATE_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(h_, p.op, p.w, p.x, p.y, p.y, pref,
                                                       sustained_pick ? 8 : 4, res, &got));
    cublasLtMatmulPreferenceDestroy(pref);
    HAYATE_CHECK(got > 0, "no cuBLASLt algorithm for m ", m, " N ", N, " K ", K);
    float best = 1e30f;
    for (int i = 0; i < got; ++i) {
      p.algo = res[i].algo;
      const float ms = sustained_pick ? float(sustained_ms(p, W, x, y, acc, ws, s))
                                      : float(median_ms(s, 5, [&](int) { run(p, W, x, y, acc, ws, s); }));
      if (ms < best) {
        best = ms;
        std::swap(res[0].algo, res[i].algo);
      }
    }
    p.algo = res[0].algo;
    std::printf("  gemm m %5d N %5d K %5d sms %3d%s: %7.1f us (%.0f TFLOP/s)\n", m, N, K, sms,
                sustained_pick ? " sustained" : "", best * 1e3f,
                2.0 * m * N * K / (best * 1e-3) / 1e12);
    return plans_.emplace(key, p).first->second;
  }
  double sustained_ms(const Plan& p, const T* W, const T* x, void* y, bool acc, void* ws,
                      cudaStream_t s) {
    const double one = median_ms(s, 1, [&](int) { run(p, W, x, y, acc, ws, s); });
    const int iters = std::max(1, int(80.0 / one));
    for (int j = 0; j < iters; ++j) run(p, W, x, y, acc, ws, s);
    return median_ms(s, 1, [&](int) {
             for (int j = 0; j < iters; ++j) run(p, W, x, y, acc, ws, s);
           }) /
           iters;
  }
  cublasLtHandle_t h_ = nullptr;
  std::map<std::tuple<int, int, int, bool, bool, int, bool>, Plan> plans_;
};

struct Lab {
  int R = 1024, lo = 128, hi = 256, sms = 132;
  Gemm gemm;
  std::vector<DeviceBuffer> bufs;
  T *wqkv, *wo, *wgu, *wd, *norm;
  T *kp[2], *vp[2];
  float *h, *q, *inv_freq, *part_o, *part_ml;
  T *xn, *big, *attn;
  int32_t *pos, *seq, *tables, *ident;
  void* ws[2];
  int max_blocks = 0;
  cudaStream_t s[2];

  template <typename E>
  E* alloc(size_t n) {
    bufs.emplace_back(n * sizeof(E));
    return bufs.back().as<E>();
  }

  void init() {
    HAYATE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    for (auto& st : s) HAYATE_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    wqkv = alloc<T>(size_t(kQkv) * kD);
    wo = alloc<T>(size_t(kD) * kQd);
    wgu = alloc<T>(size_t(2 * kI) * kD);
    wd = alloc<T>(size_t(kD) * kI);
    norm = alloc<T>(kD);
    const float ws_ = 0.02f;
    fill_dummy<T>(wqkv, size_t(kQkv) * kD, 1, 0, ws_, 0.0f, 0, s[0]);
    fill_dummy<T>(wo, size_t(kD) * kQd, 1, 1, ws_, 0.0f, 0, s[0]);
    fill_dummy<T>(wgu, size_t(2 * kI) * kD, 1, 2, ws_, 0.0f, 0, s[0]);
    fill_dummy<T>(wd, size_t(kD) * kI, 1, 3, ws_, 0.0f, 0, s[0]);
    fill_dummy<T>(norm, kD, 1, 4, 0.1f, 1.0f, 0, s[0]);
    h = alloc<float>(size_t(R) * kD);
    {
      std::mt19937 g(5);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      std::vector<float> hv(size_t(R) * kD);
      for (float& v : hv) v = nd(g);
      HAYATE_CUDA_CHECK(cudaMemcpy(h, hv.data(), hv.size() * 4, cudaMemcpyHostToDevice));
    }
    q = alloc<float>(size_t(R) * kQd);
    xn = alloc<T>(size_t(R) * kI);
    big = alloc<T>(size_t(R) * 2 * kI);
    attn = alloc<T>(size_t(R) * kQd);
    part_o = alloc<float>(size_t(R) * kHeads * kSplits * kHd);
    part_ml = alloc<float>(size_t(R) * kHeads * kSplits * 2);
    std::vector<float> inv(kHd / 2);
    for (int i = 0; i < kHd / 2; ++i) inv[size_t(i)] = std::pow(500000.0f, -2.0f * i / kHd);
    inv_freq = alloc<float>(inv.size());
    HAYATE_CUDA_CHECK(cudaMemcpy(inv_freq, inv.data(), inv.size() * 4, cudaMemcpyHostToDevice));
    // Contexts: uniform in [lo, hi]; blocks at random over the pool.
    std::mt19937 rng(7);
    const size_t nr = static_cast<size_t>(R);
    std::vector<int32_t> hp(nr), hs(nr), hid(nr);
    max_blocks = (hi + kBs - 1) / kBs;
    int total = 0;
    for (int r = 0; r < R; ++r) {
      const int len = lo + int(rng() % unsigned(hi - lo + 1));
      hp[size_t(r)] = len - 1;
      hs[size_t(r)] = r;
      hid[size_t(r)] = r;
      total += (len + kBs - 1) / kBs;
    }
    std::vector<int32_t> perm(static_cast<size_t>(total));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<int32_t> ht(nr * size_t(max_blocks), 0);
    // LAB_LAYOUT=engine: the blocks a FIFO free list hands out when every row
    // prefills 128 tokens (8 blocks, one row after the other) and then grows
    // in lockstep (block j >= 8 of row r is the (j - 8) R + r-th after those).
    const char* layout = std::getenv("LAB_LAYOUT");
    const bool engine = layout && std::string(layout) == "engine";
    if (engine) total = R * max_blocks;
    for (int r = 0, b = 0; r < R; ++r)
      for (int j = 0; j * kBs <= hp[size_t(r)]; ++j)
        ht[size_t(r) * max_blocks + j] =
            !engine ? perm[size_t(b++)] : j < 8 ? r * 8 + j : R * 8 + (j - 8) * R + r;
    const size_t pool = size_t(total) * kBs * kKvd;
    for (int i = 0; i < 2; ++i) {
      kp[i] = alloc<T>(pool);
      vp[i] = alloc<T>(pool);
      fill_dummy<T>(kp[i], pool, 2, uint64_t(i), 1.0f, 0.0f, 0, s[0]);
      fill_dummy<T>(vp[i], pool, 3, uint64_t(i), 1.0f, 0.0f, 0, s[0]);
    }
    pos = alloc<int32_t>(size_t(R));
    seq = alloc<int32_t>(size_t(R));
    ident = alloc<int32_t>(size_t(R));
    tables = alloc<int32_t>(ht.size());
    HAYATE_CUDA_CHECK(cudaMemcpy(pos, hp.data(), hp.size() * 4, cudaMemcpyHostToDevice));
    HAYATE_CUDA_CHECK(cudaMemcpy(seq, hs.data(), hs.size() * 4, cudaMemcpyHostToDevice));
    HAYATE_CUDA_CHECK(cudaMemcpy(ident, hid.data(), hid.size() * 4, cudaMemcpyHostToDevice));
    HAYATE_CUDA_CHECK(cudaMemcpy(tables, ht.data(), ht.size() * 4, cudaMemcpyHostToDevice));
    for (auto& w : ws) w = alloc<char>(kWs);
    HAYATE_CUDA_CHECK(cudaDeviceSynchronize());
    std::printf("overlap lab: %d rows, contexts %d..%d keys, %s blocks, %d SMs, K+V %.2f GB per "
                "layer\n",
                R, lo, hi, engine ? "engine-ordered" : "random", sms,
                double(pool) * 2 * sizeof(T) / 1e9);
  }

  // Times every GEMM of a half-layer of n rows at SM target gsms now, alone
  // on stream 0 (the plans are picked on first use).
  void pretune(int n, int gsms) {
    gemm(wqkv, xn, n, kQkv, kD, big, false, gsms, ws[0], s[0]);
    gemm(wo, attn, n, kD, kQd, h, true, gsms, ws[0], s[0]);
    gemm(wgu, xn, n, 2 * kI, kD, big, false, gsms, ws[0], s[0]);
    gemm(wd, xn, n, kD, kI, h, true, gsms, ws[0], s[0]);
    HAYATE_CUDA_CHECK(cudaStreamSynchronize(s[0]));
  }

  // Events a half records inside a layer (for the other stream to wait on).
  struct Marks {
    cudaEvent_t after_qkv = nullptr, after_attn = nullptr;
  };

  // One decode layer over rows [r0, r0 + n) on stream si; GEMMs with SM
  // target gsms (0: all). Each half has its own slices of xn and big.
  // parts: 0 GEMMs only, 1 GEMMs + RMSNorm + RoPE/KV write + SiLU*mul,
  // 2 everything (with the attention).
  void layer(int l, int r0, int n, int si, int gsms, const Marks& mk, int parts = 2) {
    cudaStream_t st = s[si];
    T* x = xn + size_t(r0) * kI;
    T* b = big + size_t(r0) * 2 * kI;
    float* hh = h + size_t(r0) * kD;
    const PagedShape sh{kHeads, kKv, kHd, kBs, max_blocks};
    const PagedMeta half_meta{pos + r0, seq + r0, tables}, meta{pos, seq, tables};
    if (parts >= 1) rmsnorm(hh, norm, n, kD, 1e-5f, x, st);
    gemm(wqkv, x, n, kQkv, kD, b, false, gsms, ws[si], st);
    if (parts >= 1)
      paged_rope_kv<T, T>(b, sh, n, inv_freq, half_meta, q + size_t(r0) * kQd, kp[l % 2],
                          vp[l % 2], st);
    if (mk.after_qkv) HAYATE_CUDA_CHECK(cudaEventRecord(mk.after_qkv, st));
    if (parts >= 2)
      paged_attention_decode<T>(q, kp[l % 2], vp[l % 2], sh, meta, ident + r0, n, kSplits, 0,
                                part_o + size_t(r0) * kHeads * kSplits * kHd,
                                part_ml + size_t(r0) * kHeads * kSplits * 2, attn, st);
    if (mk.after_attn) HAYATE_CUDA_CHECK(cudaEventRecord(mk.after_attn, st));
    gemm(wo, attn + size_t(r0) * kQd, n, kD, kQd, hh, true, gsms, ws[si], st);
    if (parts >= 1) rmsnorm(hh, norm, n, kD, 1e-5f, x, st);
    gemm(wgu, x, n, 2 * kI, kD, b, false, gsms, ws[si], st);
    if (parts >= 1) silu_mul<T>(b, n, kI, x, st);
    gemm(wd, x, n, kD, kI, hh, true, gsms, ws[si], st);
  }
};

// sync: 0 = the second half starts after the first half's first QKV, then
// runs free; 1 = the second half's layer l waits for the first half's QKV of
// layer l; 2 = as 1, and the first half's layer l + 1 also waits for the
// second half's QKV of layer l (lockstep, offset by one QKV); 3 = the second
// half's layer l waits for the first half's attention of layer l.
double time_overlap(Lab& lab, int k, int sync) {
  const int n = lab.R / 2, gsms = k > 0 ? lab.sms - k : 0;
  lab.pretune(n, gsms);
  std::vector<cudaEvent_t> ev;
  auto mk = [&] {
    cudaEvent_t e;
    HAYATE_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    ev.push_back(e);
    return e;
  };
  std::vector<Lab::Marks> a(kLayers), b(kLayers);
  for (int l = 0; l < kLayers; ++l) {
    a[size_t(l)] = {mk(), mk()};
    b[size_t(l)] = {mk(), mk()};
  }
  cudaEvent_t fork = mk(), join = mk();
  const double ms = median_ms(lab.s[0], 5, [&](int) {
    HAYATE_CUDA_CHECK(cudaEventRecord(fork, lab.s[0]));
    HAYATE_CUDA_CHECK(cudaStreamWaitEvent(lab.s[1], fork));
    for (int l = 0; l < kLayers; ++l) {
      if (sync == 2 && l > 0) HAYATE_CUDA_CHECK(cudaStreamWaitEvent(lab.s[0], b[size_t(l - 1)].after_qkv));
      lab.layer(l, 0, n, 0, gsms, a[size_t(l)]);
      if (l == 0 || sync == 1 || sync == 2)
        HAYATE_CUDA_CHECK(cudaStreamWaitEvent(lab.s[1], a[size_t(l)].after_qkv));
      if (sync == 3) HAYATE_CUDA_CHECK(cudaStreamWaitEvent(lab.s[1], a[size_t(l)].after_attn));
      lab.layer(l, n, n, 1, gsms, b[size_t(l)]);
    }
    HAYATE_CUDA_CHECK(cudaEventRecord(join, lab.s[1]));
    HAYATE_CUDA_CHECK(cudaStreamWaitEvent(lab.s[0], join));
  });
  for (cudaEvent_t e : ev) cudaEventDestroy(e);
  return ms;
}

// Sustained rate: body() back to back for ~seconds, in windows of ~250 ms;
// prints each window's time per call (the first windows run at boost clock,
// later ones at whatever the power and thermal limits leave), with wall-clock
// seconds since the epoch to line up with nvidia-smi's samples.
void sustain(Lab& lab, const char* name, double flop, double seconds,
             const std::function<void()>& body) {
  cudaStream_t s = lab.s[0];
  const double one = median_ms(s, 3, [&](int) { body(); });
  const int iters = std::max(1, int(250.0 / one));
  const int windows = std::max(1, int(seconds * 4));
  std::vector<cudaEvent_t> ev(size_t(windows) + 1);
  for (auto& e : ev) HAYATE_CUDA_CHECK(cudaEventCreate(&e));
  const double t0 = std::chrono::duration<double>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  HAYATE_CUDA_CHECK(cudaEventRecord(ev[0], s));
  for (int w = 0; w < windows; ++w) {
    for (int i = 0; i < iters; ++i) body();
    HAYATE_CUDA_CHECK(cudaEventRecord(ev[size_t(w) + 1], s));
  }
  HAYATE_CUDA_CHECK(cudaStreamSynchronize(s));
  std::printf("sustain %s (start %.1f, burst %.1f us):", name, t0, one * 1e3);
  for (int w = 0; w < windows; ++w) {
    float ms = 0;
    HAYATE_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[size_t(w)], ev[size_t(w) + 1]));
    const double per = double(ms) / iters;
    if (flop > 0)
      std::printf(" %.0f", flop / (per * 1e-3) / 1e12);
    else
      std::printf(" %.1f", per * 1e3);
  }
  std::printf(flop > 0 ? " TFLOP/s per window\n" : " us per call per window\n");
  for (auto& e : ev) cudaEventDestroy(e);
}

// Max-load-128's GPU work without the engine (1024 requests of 128 + 128
// tokens, 16,384-token steps): 8 prefill steps of 16,384 rows (128 prompts;
// LM head on their 128 last rows) and 127 decode steps of R = 1024 rows (LM
// head and argmax on every row), each layer as Lab::layer with `parts`
// (prefill: no RoPE or attention at any parts; they are ~2 % of the run).
// One timed pass after a ~1 s warm-up of decode steps: the GPU at its power
// limit throughout, as in the engine's run.
struct MaxLoad {
  static constexpr int kVocab = 128256, kP = 16384, kPrefillSteps = 8, kDecodeSteps = 127;
  T *wlm, *last, *xnP, *bigP, *attnP;
  float *hP, *logits;
  int32_t* out;
  void init(Lab& lab) {
    wlm = lab.alloc<T>(size_t(kVocab) * kD);
    fill_dummy<T>(wlm, size_t(kVocab) * kD, 1, 6, 0.027f, 0.0f, 0, lab.s[0]);
    last = lab.alloc<T>(size_t(lab.R) * kD);
    fill_dummy<T>(last, size_t(lab.R) * kD, 1, 7, 1.0f, 0.0f, 0, lab.s[0]);
    xnP = lab.alloc<T>(size_t(kP) * kI);
    bigP = lab.alloc<T>(size_t(kP) * 2 * kI);
    attnP = lab.alloc<T>(size_t(kP) * kQd);
    fill_dummy<T>(xnP, size_t(kP) * kI, 1, 8, 1.0f, 0.0f, 0, lab.s[0]);
    fill_dummy<T>(attnP, size_t(kP) * kQd, 1, 9, 1.0f, 0.0f, 0, lab.s[0]);
    hP = lab.alloc<float>(size_t(kP) * kD);
    HAYATE_CUDA_CHECK(cudaMemsetAsync(hP, 0, size_t(kP) * kD * 4, lab.s[0]));
    logits = lab.alloc<float>(size_t(lab.R) * kVocab);
    out = lab.alloc<int32_t>(size_t(lab.R));
  }
  void prefill_step(Lab& lab, int parts) {
    cudaStream_t st = lab.s[0];
    for (int l = 0; l < kLayers; ++l) {
      if (parts >= 1) rmsnorm(hP, lab.norm, kP, kD, 1e-5f, xnP, st);
      lab.gemm(lab.wqkv, xnP, kP, kQkv, kD, bigP, false, 0, lab.ws[0], st);
      lab.gemm(lab.wo, attnP, kP, kD, kQd, hP, true, 0, lab.ws[0], st);
      if (parts >= 1) rmsnorm(hP, lab.norm, kP, kD, 1e-5f, xnP, st);
      lab.gemm(lab.wgu, xnP, kP, 2 * kI, kD, bigP, false, 0, lab.ws[0], st);
      if (parts >= 1) silu_mul<T>(bigP, kP, kI, xnP, st);
      lab.gemm(lab.wd, xnP, kP, kD, kI, hP, true, 0, lab.ws[0], st);
    }
    lab.gemm.f32_out(wlm, last, 128, kVocab, kD, logits, lab.ws[0], st);
    if (parts >= 1) argmax_rows(logits, 128, kVocab, out, st);
  }
  void decode_step(Lab& lab, int parts) {
    const Lab::Marks none{};
    for (int l = 0; l < kLayers; ++l) lab.layer(l, 0, lab.R, 0, 0, none, parts);
    if (parts >= 1) rmsnorm_gather(lab.h, lab.ident, lab.norm, lab.R, kD, 1e-5f, last, lab.s[0]);
    lab.gemm.f32_out(wlm, last, lab.R, kVocab, kD, logits, lab.ws[0], lab.s[0]);
    if (parts >= 1) argmax_rows(logits, lab.R, kVocab, out, lab.s[0]);
  }
  double run(Lab& lab, int parts) {
    for (int i = 0; i < 30; ++i) decode_step(lab, parts);  // warm-up, ~1 s
    return median_ms(lab.s[0], 1, [&](int) {
      for (int i = 0; i < kPrefillSteps; ++i) prefill_step(lab, parts);
      for (int i = 0; i < kDecodeSteps; ++i) decode_step(lab, parts);
    });
  }
};

int run(int argc, char** argv) {
  Lab lab;
  if (argc > 1) lab.R = std::atoi(argv[1]);
  if (argc > 2) lab.lo = std::atoi(argv[2]);
  if (argc > 3) lab.hi = std::atoi(argv[3]);
  lab.init();
  const int R = lab.R, n = R / 2;
  const PagedShape sh{kHeads, kKv, kHd, kBs, lab.max_blocks};
  const PagedMeta meta{lab.pos, lab.seq, lab.tables};
  const Lab::Marks none{};
  lab.pretune(R, 0);
  lab.pretune(n, 0);
  // Parts, full batch and half batch, on all SMs.
  for (int rows : {R, n}) {
    const double att = median_ms(lab.s[0], 10, [&](int i) {
      paged_attention_decode<T>(lab.q, lab.kp[i % 2], lab.vp[i % 2], sh, meta, lab.ident, rows,
                                kSplits, 0, lab.part_o, lab.part_ml, lab.attn, lab.s[0]);
    });
    std::printf("attention %d rows: %.1f us\n", rows, att * 1e3);
  }
  if (argc > 4 && std::string(argv[4]) == "attn") return 0;
  const double full = median_ms(lab.s[0], 5, [&](int) {
    for (int l = 0; l < kLayers; ++l) lab.layer(l, 0, R, 0, 0, none);
  });
  std::printf("full     %4d rows x %d layers: %8.3f ms (%.1f us per layer)\n", R, kLayers, full,
              full * 1e3 / kLayers);
  const double serial = median_ms(lab.s[0], 5, [&](int) {
    for (int l = 0; l < kLayers; ++l) {
      lab.layer(l, 0, n, 0, 0, none);
      lab.layer(l, n, n, 0, 0, none);
    }
  });
  std::printf("serial   2 x %4d rows:          %8.3f ms (%+.1f %% vs full)\n", n, serial,
              100.0 * (serial / full - 1.0));
  if (argc > 4 && std::string(argv[4]) == "maxload") {
    MaxLoad ml;
    ml.init(lab);
    for (bool sus : {false, true}) {
      lab.gemm.sustained_pick = sus;
      // Plans first (prefill and decode shapes), outside the timed passes.
      ml.prefill_step(lab, 2);
      ml.decode_step(lab, 2);
      HAYATE_CUDA_CHECK(cudaStreamSynchronize(lab.s[0]));
      for (int parts : {0, 1, 2}) {
        const double ms = ml.run(lab, parts);
        std::printf("max load GEMMs picked %s, parts %d (%s): %.3f s = %.0f output tok/s\n",
                    sus ? "sustained" : "in bursts", parts,
                    parts == 0 ? "GEMMs only" : parts == 1 ? "+ norms, RoPE, SiLU, argmax"
                                                            : "+ decode attention",
                    ms / 1e3, 1024.0 * 128 / (ms / 1e3));
      }
    }
    return 0;
  }
  if (argc > 4 && std::string(argv[4]) == "candidates") {
    for (int m : {R, 16 * R}) {
      if (m > R) {  // activations for 16 R rows
        lab.xn = lab.alloc<T>(size_t(m) * kI);
        lab.big = lab.alloc<T>(size_t(m) * 2 * kI);
        lab.h = lab.alloc<float>(size_t(m) * kD);
        lab.attn = lab.alloc<T>(size_t(m) * kQd);
        fill_dummy<T>(lab.xn, size_t(m) * kI, 9, 0, 1.0f, 0.0f, 0, lab.s[0]);
        fill_dummy<T>(lab.attn, size_t(m) * kQd, 9, 1, 1.0f, 0.0f, 0, lab.s[0]);
      }
      lab.gemm.candidates(lab.wqkv, lab.xn, m, kQkv, kD, lab.big, false, 8, lab.ws[0], lab.s[0]);
      lab.gemm.candidates(lab.wo, lab.attn, m, kD, kQd, lab.h, true, 8, lab.ws[0], lab.s[0]);
      lab.gemm.candidates(lab.wgu, lab.xn, m, 2 * kI, kD, lab.big, false, 8, lab.ws[0], lab.s[0]);
      lab.gemm.candidates(lab.wd, lab.xn, m, kD, kI, lab.h, true, 8, lab.ws[0], lab.s[0]);
    }
    return 0;
  }
  if (argc > 4 && std::string(argv[4]) == "sustain") {
    sustain(lab, "gate_up 1024 rows", 2.0 * R * 2 * kI * kD, 3.0, [&] {
      lab.gemm(lab.wgu, lab.xn, R, 2 * kI, kD, lab.big, false, 0, lab.ws[0], lab.s[0]);
    });
    sustain(lab, "attention", 0, 2.0, [&] {
      paged_attention_decode<T>(lab.q, lab.kp[0], lab.vp[0], sh, meta, lab.ident, R, kSplits, 0,
                                lab.part_o, lab.part_ml, lab.attn, lab.s[0]);
    });
    sustain(lab, "decode layer", 0, 3.0, [&] { lab.layer(0, 0, R, 0, 0, none); });
    sustain(lab, "down 1024 rows", 2.0 * R * kD * kI, 3.0, [&] {
      lab.gemm(lab.wd, lab.xn, R, kD, kI, lab.h, true, 0, lab.ws[0], lab.s[0]);
    });
    return 0;
  }
  for (int sync : {0, 1, 2, 3})
    for (int k : {0, 8, 16, 24, 32, 48}) {
      const double ms = time_overlap(lab, k, sync);
      std::printf("overlap  sync %d, GEMMs leave %2d SMs: %8.3f ms (%+.1f %% vs full)\n", sync, k,
                  ms, 100.0 * (ms / full - 1.0));
    }
  return 0;
}

}  // namespace
}  // namespace hayate::cuda

int main(int argc, char** argv) {
  try {
    return hayate::cuda::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "overlap_lab: %s\n", e.what());
    return 1;
  }
}
