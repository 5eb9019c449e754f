// cuBLASLt GEMMs for the batched backend and the GEMM lab, with the algorithm
// picked once per shape and row tier by timing the heuristic's first few
// candidates (cuBLAS's GemmEx takes the heuristic's first pick on every call,
// and its fp32-output kernels are not always the fastest: bench/kernels/NOTES.md,
// "GEMM lab"). Every product is y [m, N] = x [m, K] . W [N, K]^T (+ y), i.e. in
// cuBLAS's column-major terms y^T (N x m) = op_T(W: K x N) . x^T (K x m).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace hayate::cuda {

// W and x in `ab` (CUDA_R_16F or CUDA_R_16BF, or CUDA_R_8F_E4M3); y in `out`
// (a 16-bit type or CUDA_R_32F); fp32 accumulation; accumulate: y += x W^T
// (y read and written in `out`). FP8 products scale row n of the result by
// the weight's w_scale[n] and column (token) i by x_scale[i] in cuBLASLt's
// epilogue (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, cuBLAS 12.9+ on
// sm_90): y[i, n] = x_scale[i] w_scale[n] sum_k x[i, k] W[n, k] (+ y).
struct LtShape {
  int N = 0, K = 0;
  cudaDataType_t ab = CUDA_R_16F, out = CUDA_R_32F;
  bool accumulate = false;
  using Key = std::tuple<int, int, int, int, bool>;
  Key key() const { return Key{N, K, int(ab), int(out), accumulate}; }
  bool fp8() const { return ab == CUDA_R_8F_E4M3; }
};

// The per-row scales of an FP8 product (device memory; null otherwise).
struct LtScales {
  const float* w = nullptr;  // [N]
  const float* x = nullptr;  // [m]
};

class LtGemm {
 public:
  // workspace: device memory that every product may use (stream-ordered, so
  // it can be shared with other GEMMs on the same stream); fixed, so products
  // can be captured into CUDA graphs.
  LtGemm(void* workspace, size_t bytes);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // The heuristic's first (best-ranked) up-to-k algorithms for m rows.
  std::vector<cublasLtMatmulAlgo_t> candidates(const LtShape& sh, int m, int k,
                                               LtScales sc = {}) const;

  // One product with `algo`. Returns the status instead of aborting: an
  // algorithm chosen at another m may not support this one.
  cublasStatus_t run(const LtShape& sh, int m, const cublasLtMatmulAlgo_t& algo, const void* W,
                     const void* x, void* y, cudaStream_t s, LtScales sc = {}) const;

  // For each tier (ascending row counts), times the first k candidates and
  // baseline(m) (the caller's fallback product, e.g. cublasGemmEx; may be
  // empty) on W, x, y (x and y hold tiers.back() rows; with accumulate, y
  // changes): median of `reps` runs after a warm one; keeps the fastest.
  // Returns a report (" m:us" per tier, "ex" where the baseline won).
  std::string tune(const LtShape& sh, const std::vector<int>& tiers, int k, int reps, const void* W,
                   const void* x, void* y, cudaStream_t s,
                   const std::function<void(int m)>& baseline, LtScales sc = {});

  // The product with the algorithm tuned for exactly m rows. False when m is
  // not a tuned tier of the shape, the baseline won there, or the algorithm
  // refuses: the caller then runs its fallback. (An algorithm tuned at 256
  // rows ran 160-row decode graphs 45 % slower than cublasGemmEx's own pick
  // in the first device call, so other row counts are not given a tier's.)
  bool run_tuned(const LtShape& sh, int m, const void* W, const void* x, void* y,
                 cudaStream_t s, LtScales sc = {}) const;

  // The product at any m: the tuned algorithm for m, else the heuristic's
  // first pick for (shape, m), looked up once and kept. For shapes with no
  // baseline (FP8: cublasGemmEx has no per-row scales). Throws Error when
  // cuBLASLt has no algorithm for it.
  void run_any(const LtShape& sh, int m, const void* W, const void* x, void* y, cudaStream_t s,
               LtScales sc = {}) const;

 private:
  struct Plan {
    std::vector<int> tiers;
    std::vector<std::optional<cublasLtMatmulAlgo_t>> algos;  // per tier; none: the baseline
  };
  cublasLtHandle_t h_ = nullptr;
  void* ws_ = nullptr;
  size_t ws_bytes_ = 0;
  std::map<LtShape::Key, Plan> plans_;
  mutable std::map<std::pair<LtShape::Key, int>, cublasLtMatmulAlgo_t> first_;  // run_any's picks
};

}  // namespace hayate::cuda
