// The batched backend's GEMMs (cuda_batch_backend.cu): y [m, N] = x [m, K] .
// W [N, K]^T (+ y), weights and activations in T (half or bf16), fp32
// accumulation, y in fp32 or T. Three paths (HAYATE_BATCH_GEMM, for
// same-binary comparisons on the device; bench/kernels/NOTES.md, "GEMM lab"):
//   lt (default): at the row counts timed at start-up (tune_model), the
//         fastest of cuBLASLt's first 8 algorithms and cublasGemmEx for each
//         shape; other row counts cublasGemmEx; QKV and gate/up written in T.
//   ex16: cublasGemmEx only, QKV and gate/up written in T.
//   ex:   cublasGemmEx only, fp32 outputs everywhere (the path before the lab).
// FP8 weights (W8A8) take cuBLASLt on every path, and up to 64 rows the hand
// kernels (gemm_fp8_small's mma.sync tiles or gemm_fp8_wgmma's K splits) where
// one won the start-up timing (bench/kernels/NOTES.md, "FP8 GEMM at few rows",
// "wgmma at few rows").
// Used from one .cu file only, so the class template lives in this header.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "core/check.h"
#include "cuda/buffer.h"
#include "cuda/gemm_lt.h"
#include "cuda/launch.h"
#include "cuda/ops.h"
#include "cuda/stream_timing.h"
#include "cuda/weights.h"
#include "core/switches.h"

namespace hayate::cuda {

template <typename T>
constexpr cudaDataType_t cublas_type();
template <>
constexpr cudaDataType_t cublas_type<half>() {
  return CUDA_R_16F;
}
template <>
constexpr cudaDataType_t cublas_type<__nv_bfloat16>() {
  return CUDA_R_16BF;
}


template <typename T>
class BatchGemm {
 public:
  static constexpr size_t kWorkspace = size_t(32) << 20;  // fixed, so GEMMs can be graph-captured

  BatchGemm(GemmPath path, cudaStream_t s)
      : s_(s), t_out_(path != GemmPath::kEx), lt_path_(path == GemmPath::kLt) {
    HAYATE_CUBLAS_CHECK(cublasCreate(&cublas_));
    HAYATE_CUBLAS_CHECK(cublasSetStream(cublas_, s_));
    ws_ = DeviceBuffer(kWorkspace);
    HAYATE_CUBLAS_CHECK(cublasSetWorkspace(cublas_, ws_.as(), kWorkspace));
    lt_ = std::make_unique<LtGemm>(ws_.as(), kWorkspace);  // FP8 products take it on every path
  }
  ~BatchGemm() {
    lt_.reset();
    if (cublas_) cublasDestroy(cublas_);
  }
  BatchGemm(const BatchGemm&) = delete;
  BatchGemm& operator=(const BatchGemm&) = delete;

  // QKV and gate/up write T (their only readers, paged_rope_kv and silu_mul,
  // take T) instead of fp32: every path but ex.
  bool t_out() const { return t_out_; }

  // y [m, N] = x [m, K] . W [N, K]^T (+ y when accumulate), y in E (float or
  // T): the cuBLASLt algorithm tuned for m rows, else (m not tuned, or
  // cublasGemmEx won the timing there) cublasGemmEx.
  template <typename E>
  void operator()(const T* W, const T* x, int m, int N, int K, E* y, bool accumulate) const {
    const cudaDataType_t out = std::is_same_v<E, float> ? CUDA_R_32F : cublas_type<T>();
    if (lt_path_ && lt_->run_tuned({N, K, cublas_type<T>(), out, accumulate}, m, W, x, y, s_)) return;
    ex(W, x, m, N, K, y, out, accumulate);
  }

  // The FP8 product (W8A8): y [m, N] = x_scale[i] W.scale[n] (xq [m, K] .
  // W.w [N, K]^T) (+ y), e4m3 operands, fp32 accumulation, y in E. Up to 64
  // rows: the hand kernel (gemm_fp8_small) where it beat cuBLASLt at start-up
  // for m's row class; else the cuBLASLt algorithm tuned for m, else
  // cuBLASLt's first pick for m.
  template <typename E>
  void fp8(const Fp8Linear& W, const uint8_t* xq, const float* x_scale, int m, int N, int K, E* y,
           bool accumulate) const {
    const cudaDataType_t out = std::is_same_v<E, float> ? CUDA_R_32F : cublas_type<T>();
    const LtShape sh{N, K, CUDA_R_8F_E4M3, out, accumulate};
    if (const Fp8SmallTile* tile = small_tile(sh, m)) {
      gemm_fp8_small(W.w, W.scale, xq, x_scale, m, N, K, y, accumulate, *tile, s_);
      return;
    }
    lt_->run_any(sh, m, W.w, xq, y, s_, {W.scale, x_scale});
  }

  // What each FP8 product of the layers runs at m rows, for `hayate profile`:
  // "qkv wgmma over 4 blocks, o mma.sync 16x8x1, gate_up cuBLASLt, ..." in the
  // order the start-up timing took them; empty before it, or without FP8 weights.
  std::string fp8_kernels(int m) const {
    std::string r;
    const auto kernel = [](const Fp8SmallTile* t) -> std::string {
      if (!t) return "cuBLASLt";
      if (t->k_blocks > 0)
        return cat("wgmma over ", t->k_blocks, " blocks", t->rows == 64 ? " of 64 rows" : "");
      return cat("mma.sync ", t->rows, "x", t->k_warps, "x", t->row_warps);
    };
    for (const SmallPicks& p : small_)
      r += cat(r.empty() ? "" : ", ", p.name, " ", kernel(small_tile(p.sh, m)));
    return r;
  }

  // Buffers the start-up timing fills and overwrites (before any step):
  // x [max_tokens, max(hidden, inter)], attn [max_tokens, q_dim], last
  // [max_seqs, hidden] in T; big [max_tokens, max(qkv_dim, 2 inter)] (as T),
  // h [max_tokens, hidden], logits [max_seqs, vocab] in fp32.
  struct TuneBuffers {
    T *x, *attn, *last;
    void* big;
    float *h, *logits;
    uint8_t* xq;  // FP8 weights: [max_tokens, max(hidden, inter)] codes and
    float* xs;    // [max_tokens] scales of x, quantized here
  };

  // The lt path's plans: every GEMM shape of the forward pass timed at the
  // row counts 16, 32, 64, ... below max_tokens, max_tokens itself and
  // max_seqs (LM head: up to max_seqs), on the real weights of layer 0 and
  // random activations: the heuristic's first 8 algorithms and cublasGemmEx,
  // the fastest kept (GemmEx won e.g. down at 16,384 rows in the GEMM lab).
  // Once, before capture: nothing is timed or queried per step. Prints the
  // picks to stderr.
  void tune_model(const ModelConfig& c, std::span<const LayerWeights<T>> layers, const T* lm_head,
                  int max_tokens, int max_seqs, const TuneBuffers& b) {
    HAYATE_CHECK(!layers.empty(), "tune_model: no layers");
    const LayerWeights<T>& L = layers[0];
    if (!lt_path_ && !L.qkv8.w) return;
    const int D = c.hidden_size, I = c.intermediate_size, qd = c.q_dim();
    const auto tiers = [](int top, int also) {
      std::vector<int> t;
      for (int m = 16; m < top; m *= 2) t.push_back(m);
      t.push_back(top);
      if (also > 0 && also < top) t.push_back(also);
      std::sort(t.begin(), t.end());
      t.erase(std::unique(t.begin(), t.end()), t.end());
      return t;
    };
    const std::vector<int> rows = tiers(max_tokens, max_seqs), heads = tiers(max_seqs, 0);
    const size_t x_elems = size_t(max_tokens) * size_t(std::max(D, I));
    fill_dummy<T>(b.x, x_elems, 1, 0, 1.0f, 0.0f, 0, s_);  // activations of about unit size
    fill_dummy<T>(b.attn, size_t(max_tokens) * qd, 1, 1, 1.0f, 0.0f, 0, s_);
    fill_dummy<T>(b.last, size_t(max_seqs) * D, 1, 2, 1.0f, 0.0f, 0, s_);
    const cudaDataType_t t = cublas_type<T>(), f = CUDA_R_32F;
    const auto t0 = std::chrono::steady_clock::now();
    std::string r;
    constexpr int kCands = 8, kReps = 3;
    const auto tune = [&](const char* name, LtShape sh, const std::vector<int>& ms, const T* W,
                          const T* x, void* y) {
      r += cat(" ", name, lt_->tune(sh, ms, kCands, kReps, W, x, y, s_, [&](int m) {
        ex(W, x, m, sh.N, sh.K, y, sh.out, sh.accumulate);
      }));
    };
    if (L.qkv8.w) {  // FP8: no baseline (cublasGemmEx has no per-row scales)
      const int wide = std::max(D, I);
      quantize_rows_fp8(b.x, max_tokens, wide, 0.0f, b.xq, b.xs, s_);
      const auto tune8 = [&](const char* name, LtShape sh, const Fp8Linear& W, void* y) {
        r += cat(" ", name, "(fp8)",
                 lt_->tune(sh, rows, kCands, kReps, W.w, b.xq, y, s_, {}, {W.scale, b.xs}));
      };
      const cudaDataType_t e = CUDA_R_8F_E4M3;
      // x rows are `wide` apart in the tuning buffer; the products read K of
      // each, which only changes which values are multiplied.
      tune8("qkv", {c.qkv_dim(), D, e, t, false}, L.qkv8, b.big);
      tune8("o", {D, qd, e, f, true}, L.o8, b.h);
      tune8("gate_up", {2 * I, D, e, t, false}, L.gate_up8, b.big);
      tune8("down", {D, I, e, f, true}, L.down8, b.h);
      const auto linears = [&](Fp8Linear LayerWeights<T>::*which) {
        std::vector<Fp8Linear> v;  // up to 8 layers: distinct weights, as in a step
        for (size_t l = 0; l < std::min<size_t>(layers.size(), 8); ++l)
          v.push_back(layers[l].*which);
        return v;
      };
      r += " |";
      r += tune_small("qkv", {c.qkv_dim(), D, e, t, false}, linears(&LayerWeights<T>::qkv8), b,
                      max_tokens, b.big);
      r += tune_small("o", {D, qd, e, f, true}, linears(&LayerWeights<T>::o8), b, max_tokens, b.h);
      r += tune_small("gate_up", {2 * I, D, e, t, false}, linears(&LayerWeights<T>::gate_up8), b,
                      max_tokens, b.big);
      r += tune_small("down", {D, I, e, f, true}, linears(&LayerWeights<T>::down8), b, max_tokens,
                      b.h);
    } else {
      tune("qkv", {c.qkv_dim(), D, t, t, false}, rows, L.wqkv, b.x, b.big);
      tune("o", {D, qd, t, f, true}, rows, L.wo, b.attn, b.h);
      tune("gate_up", {2 * I, D, t, t, false}, rows, L.w_gate_up, b.x, b.big);
      tune("down", {D, I, t, f, true}, rows, L.w_down, b.x, b.h);
    }
    if (lt_path_)
      tune("lm_head", {c.vocab_size, D, t, f, false}, heads, lm_head, b.last, b.logits);
    std::fprintf(
        stderr,
        "hayate: GEMM algorithms timed in %.0f ms (fastest of %d cuBLASLt candidates and "
        "cublasGemmEx, marked ex; rows:us):%s\n",
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
        kCands, r.c_str());
  }

 private:
  // Row classes of the hand FP8 kernel: up to 8, 16, 32, 64 rows (its token
  // groups are padded to a power of two, so a class's rows cost about the same).
  static constexpr int kSmallClasses = 4;
  static int small_class(int m) { return m <= 8 ? 0 : m <= 16 ? 1 : m <= 32 ? 2 : 3; }

  const Fp8SmallTile* small_tile(const LtShape& sh, int m) const {
    if (m < 1 || m > kFp8SmallMaxRows) return nullptr;
    const auto it = std::find_if(small_.begin(), small_.end(),
                                 [&](const SmallPicks& p) { return p.sh.key() == sh.key(); });
    if (it == small_.end()) return nullptr;
    const std::optional<Fp8SmallTile>& t = it->picks[size_t(small_class(m))];
    return t && gemm_fp8_small_supported(m, sh.N, sh.K, *t) ? &*t : nullptr;
  }

  // For each row class: cuBLASLt (run_any: tuned or first pick) and every
  // tile of the hand kernel at the class's largest row count (at most
  // max_tokens), each rep one pass over `Ws` (a product per layer, so the
  // weights stream from memory as in a step, not from L2); keeps the fastest
  // tile where it beats cuBLASLt. Returns " name m:hand/lt(tile)" per class,
  // "lt" for the tile where cuBLASLt won.
  std::string tune_small(const char* name, const LtShape& sh, const std::vector<Fp8Linear>& Ws,
                         const TuneBuffers& b, int max_tokens, void* y) {
    // {rows per warp, K groups, row warps} of the mma.sync kernel, then the
    // wgmma kernel's {rows a block, .., K splits}: the lab's set (gemm_fp8_lab).
    static constexpr Fp8SmallTile kTiles[] = {
        {16, 2, 1},    {16, 4, 1},    {16, 8, 1},    {32, 2, 1},    {32, 4, 1},
        {32, 8, 1},    {64, 2, 1},    {64, 4, 1},    {64, 8, 1},    {16, 2, 2},
        {16, 4, 2},    {32, 2, 2},    {32, 4, 2},    {16, 2, 4},    {32, 2, 4},
        {128, 0, 0, 1}, {128, 0, 0, 2}, {128, 0, 0, 4}, {128, 0, 0, 8}, {64, 0, 0, 1},
        {64, 0, 0, 2},  {64, 0, 0, 4},  {64, 0, 0, 8}};
    constexpr int kReps = 3;
    const int N = sh.N, K = sh.K;
    const float nl = float(Ws.size());
    std::array<std::optional<Fp8SmallTile>, kSmallClasses> picks{};
    std::string r = cat(" ", name);
    for (int c = 0; c < kSmallClasses; ++c) {
      if ((c == 0 ? 1 : (8 << (c - 1)) + 1) > max_tokens) break;  // the class's fewest rows
      const int m = std::min(8 << c, max_tokens);
      const auto hand = [&](Fp8SmallTile tile) {
        for (const Fp8Linear& W : Ws) {
          if (sh.out == CUDA_R_32F)
            gemm_fp8_small(W.w, W.scale, b.xq, b.xs, m, N, K, static_cast<float*>(y),
                           sh.accumulate, tile, s_);
          else
            gemm_fp8_small(W.w, W.scale, b.xq, b.xs, m, N, K, static_cast<T*>(y), sh.accumulate,
                           tile, s_);
        }
      };
      const float lt_ms = median_ms_on_stream(s_, 1, kReps, [&] {
        for (const Fp8Linear& W : Ws) lt_->run_any(sh, m, W.w, b.xq, y, s_, {W.scale, b.xs});
      });
      float best_ms = lt_ms;
      for (const Fp8SmallTile& tile : kTiles) {
        if (!gemm_fp8_small_supported(m, N, K, tile)) continue;
        const float ms = median_ms_on_stream(s_, 1, kReps, [&] { hand(tile); });
        if (ms < best_ms) {
          best_ms = ms;
          picks[size_t(c)] = tile;
        }
      }
      const auto& p = picks[size_t(c)];
      r += cat(" ", m, ":", int(best_ms / nl * 1000.0f), "/", int(lt_ms / nl * 1000.0f),
               !p              ? std::string("(lt)")
               : p->k_blocks > 0 ? cat("(wg", p->k_blocks, p->rows == 64 ? "x64" : "", ")")
                                 : cat("(", p->rows, "x", p->k_warps, "x", p->row_warps, ")"));
    }
    const auto it = std::find_if(small_.begin(), small_.end(),
                                 [&](const SmallPicks& p) { return p.sh.key() == sh.key(); });
    if (it != small_.end())
      it->picks = picks;
    else
      small_.push_back({name, sh, picks});
    return r;
  }

  // Column-major view: y^T (N x m) = W^T (N x K, W stored K x N) . x^T (K x m).
  void ex(const T* W, const T* x, int m, int N, int K, void* y, cudaDataType_t out,
          bool accumulate) const {
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    HAYATE_CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, N, m, K, &alpha, W,
                                       cublas_type<T>(), K, x, cublas_type<T>(), K, &beta, y, out,
                                       N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

  cudaStream_t s_ = nullptr;
  bool t_out_ = true;
  bool lt_path_ = true;  // 16-bit products through tuned cuBLASLt (else cublasGemmEx)
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer ws_;
  std::unique_ptr<LtGemm> lt_;
  // The hand FP8 kernel's tile per shape and row class (none: cuBLASLt), per
  // shape in the order the start-up timing took them.
  struct SmallPicks {
    std::string name;
    LtShape sh;
    std::array<std::optional<Fp8SmallTile>, kSmallClasses> picks;
  };
  std::vector<SmallPicks> small_;
};

}  // namespace hayate::cuda
