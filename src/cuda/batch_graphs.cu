// Decode graph capture and bucket selection of the batched CUDA backend
// (batch_graphs.h).
#include "cuda/batch_graphs.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "core/check.h"
#include "cuda/gemv_batched.h"
#include "cuda/launch.h"

namespace hayate::cuda {

std::vector<int> graph_buckets(int max_seqs) {
  std::vector<int> b;
  for (int n = 1; n < max_seqs;) {
    b.push_back(n);
    n = n < 8 ? n * 2 : n < 32 ? n + 8 : n < 64 ? n + 16 : n + 32;
  }
  b.push_back(max_seqs);
  return b;
}

DecodeGraphs::~DecodeGraphs() {
  for (const auto* list : {&graphs_, &short_graphs_, &whole_graphs_})
    for (cudaGraphExec_t g : *list)
      if (g) cudaGraphExecDestroy(g);
}

// Warmed up eagerly first (lazy module loading, cuBLAS heuristics), then captured.
cudaGraphExec_t DecodeGraphs::capture_one(cudaStream_t s, const std::function<void()>& body) {
  body();
  HAYATE_CUDA_CHECK(cudaStreamSynchronize(s));
  cudaGraph_t graph = nullptr;
  HAYATE_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  body();
  HAYATE_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec = nullptr;
  HAYATE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  HAYATE_CUDA_CHECK(cudaGraphDestroy(graph));
  return exec;
}

void DecodeGraphs::capture(int max_seqs, DecodeMatmul matmul, bool persistent, bool gemv,
                           int short_max_rows,
                           const std::function<int(int rows)>& whole_keys, cudaStream_t s,
                           const Record& record) {
  const auto now = [] { return std::chrono::steady_clock::now(); };
  const auto ms_since = [&](auto t) {
    return std::chrono::duration<double, std::milli>(now() - t).count();
  };
  const auto t0 = now();
  double short_ms = 0.0, whole_ms = 0.0;
  buckets_ = graph_buckets(max_seqs);
  std::string report;
  for (int B : buckets_) {
    std::vector<Matmul> cands;  // first = the choice when only one is allowed
    const bool small = B <= kGemvBatchedMaxRows;
    const bool only_persistent = B == 1 && persistent && matmul == DecodeMatmul::kPersistent;
    const bool any = matmul == DecodeMatmul::kAuto || matmul == DecodeMatmul::kPersistent;
    if (B == 1 && persistent && any) cands.push_back({1, true});
    if (!only_persistent && small && gemv && matmul != DecodeMatmul::kCublas)
      cands.push_back({B, false});
    if (!only_persistent && (!small || !gemv || matmul != DecodeMatmul::kGemv))
      cands.push_back({0, false});
    cudaGraphExec_t best = nullptr;
    float best_ms = 0.0f;
    Matmul best_mm;
    for (const Matmul& mm : cands) {
      cudaGraphExec_t exec = capture_one(s, [&] { record(B, mm, false, 0); });
      const float ms = time_on_stream(
          s, [&] { HAYATE_CUDA_CHECK(cudaGraphLaunch(exec, s)); }, 5);
      report += cat(" b", B,
                    mm.persistent  ? " persistent "
                    : mm.gemv_rows ? " gemv "
                                   : " cublas ",
                    int(ms * 1000.0f));
      if (best == nullptr || ms < best_ms) {
        if (best) HAYATE_CUDA_CHECK(cudaGraphExecDestroy(best));
        best = exec;
        best_ms = ms;
        best_mm = mm;
      } else {
        HAYATE_CUDA_CHECK(cudaGraphExecDestroy(exec));
      }
    }
    graphs_.push_back(best);
    matmuls_.push_back(best_mm);
    if (best_mm.gemv_rows > 0) gemv_max_ = std::max(gemv_max_, B);  // eager steps: m <= this
    cudaGraphExec_t shrt = nullptr;
    if (B <= short_max_rows) {
      const auto t1 = now();
      shrt = capture_one(s, [&] { record(B, best_mm, true, 0); });
      short_ms += ms_since(t1);
    }
    short_graphs_.push_back(shrt);
    const int wk = whole_keys(B);
    cudaGraphExec_t whole = nullptr;
    if (wk > 0) {
      const auto t1 = now();
      whole = capture_one(s, [&] { record(B, best_mm, false, wk); });
      whole_ms += ms_since(t1);
    }
    whole_graphs_.push_back(whole);
    whole_keys_.push_back(wk);
  }
  const auto captured = [](const std::vector<cudaGraphExec_t>& v) {
    return size_t(std::count_if(v.begin(), v.end(), [](cudaGraphExec_t g) { return g != nullptr; }));
  };
  const size_t n_whole = captured(whole_graphs_);
  const std::string whole =
      n_whole == 0 ? ""
                   : cat(" and ", n_whole, " with one split per row (contexts up to ",
                         *std::max_element(whole_keys_.begin(), whole_keys_.end()), " keys) in ",
                         int(whole_ms), " ms");
  std::fprintf(stderr,
               "hayate: captured %zu decode graphs (batch 1..%d) in %.0f ms, %zu of them again "
               "with one-pass short-context attention in %.0f ms of that%s; batched GEMV for up "
               "to %d rows; us/step on padding rows (attention over one key):%s\n",
               graphs_.size(), max_seqs, ms_since(t0), captured(short_graphs_), short_ms,
               whole.c_str(), gemv_max_, report.c_str());
}

size_t DecodeGraphs::bucket_of(int n) const {
  const auto it = std::lower_bound(buckets_.begin(), buckets_.end(), n);
  HAYATE_CHECK(it != buckets_.end(), "decode graphs: ", n, " rows exceed the largest bucket ",
               buckets_.empty() ? 0 : buckets_.back());
  return size_t(it - buckets_.begin());
}

cudaGraphExec_t DecodeGraphs::graph(size_t bucket, bool short_attn, int max_keys,
                                    Kind* kind) const {
  Kind k = Kind::kRegular;
  if (short_attn && short_graphs_[bucket])
    k = Kind::kShort;
  else if (whole_graphs_[bucket] && max_keys <= whole_keys_[bucket])
    k = Kind::kWholeRows;
  if (kind) *kind = k;
  return k == Kind::kShort       ? short_graphs_[bucket]
         : k == Kind::kWholeRows ? whole_graphs_[bucket]
                                 : graphs_[bucket];
}

}  // namespace hayate::cuda
