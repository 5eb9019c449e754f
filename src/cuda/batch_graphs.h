// The decode graphs of the batched CUDA backend (cuda_batch_backend.cu): one
// CUDA graph per batch-size bucket, captured at start-up, replayed by every
// all-decode step (rows past the batch are padding). Small buckets get a
// second graph whose attention is the one-pass short-context kernel
// (paged_attention_decode_short); the host picks it when every row's context
// fits.
// Large buckets get a second graph whose split attention is sized for rows
// of at most a bound of keys (paged_decode_whole_row_keys: one split per row,
// no empty split slots); the host picks it when every row fits the bound.
// What a graph runs is the backend's forward(), passed in as a callback: this
// file owns the bucket list, capture, the start-up timing that picks the
// matmul of each bucket, and the graphs' lifetime.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <vector>

#include "cuda/cuda_batch_backend.h"
#include "cuda/stream_timing.h"

namespace hayate::cuda {

// How the forward pass multiplies: products with at most gemv_rows rows run
// as batched GEMVs, larger ones through cuBLAS. persistent (one row, sampled,
// graph only): every layer and the LM head in the persistent decode kernel.
struct Matmul {
  int gemv_rows = 0;
  bool persistent = false;
};

// Batch-size buckets of the decode graphs: 1, 2, 4, 8, then every 8 up to 32,
// every 16 up to 64, every 32 beyond (padding stays under ~1/3 of a step).
std::vector<int> graph_buckets(int max_seqs);


class DecodeGraphs {
 public:
  // record(rows, mm, short_attn, attn_keys) enqueues one all-decode,
  // all-sampled forward of `rows` padding rows on the stream (same work as a
  // real step of that bucket; attention over one key, its split grid sized
  // for rows of up to attn_keys keys, 0: the block table's reach).
  using Record = std::function<void(int rows, Matmul mm, bool short_attn, int attn_keys)>;

  DecodeGraphs() = default;
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;
  ~DecodeGraphs();

  // Buckets of up to 16 rows are captured with each candidate matmul that
  // `matmul` allows and the faster graph is kept (kAuto: the GEMV / cuBLAS
  // crossover measured on this device); bucket 1 also with the persistent
  // kernel where `persistent` says it runs; GEMVs only where `gemv` (FP8
  // weights have no batched GEMV: their buckets run cuBLASLt). Buckets of up to short_max_rows rows
  // are captured a second time, with the kept matmul and short attention;
  // buckets B with whole_keys(B) > 0 a second time with attn_keys =
  // whole_keys(B). Prints every candidate's time and the capture time to stderr.
  void capture(int max_seqs, DecodeMatmul matmul, bool persistent, bool gemv, int short_max_rows,
               const std::function<int(int rows)>& whole_keys, cudaStream_t s,
               const Record& record);

  // Index of the smallest bucket that holds n rows (n <= max_seqs).
  size_t bucket_of(int n) const;
  int rows(size_t bucket) const { return buckets_[bucket]; }
  const std::vector<int>& buckets() const { return buckets_; }
  // The graph for a step whose decode rows have at most max_keys keys: the
  // bucket's short-attention graph when short_attn and captured, else its
  // whole-row graph when captured and max_keys fits it, else its regular
  // graph. kind (when given) says which.
  enum class Kind { kRegular, kShort, kWholeRows };
  cudaGraphExec_t graph(size_t bucket, bool short_attn, int max_keys, Kind* kind = nullptr) const;
  // How the bucket's graphs multiply (the capture's fastest candidate).
  Matmul matmul(size_t bucket) const { return matmuls_[bucket]; }
  // Largest bucket whose graph runs batched GEMVs (eager steps follow it).
  int gemv_max() const { return gemv_max_; }

 private:
  cudaGraphExec_t capture_one(cudaStream_t s, const std::function<void()>& body);

  std::vector<int> buckets_;
  // short, whole: null where not captured; whole_keys_: the whole graph's bound
  std::vector<cudaGraphExec_t> graphs_, short_graphs_, whole_graphs_;
  std::vector<int> whole_keys_;
  std::vector<Matmul> matmuls_;
  int gemv_max_ = 0;
};

}  // namespace hayate::cuda
