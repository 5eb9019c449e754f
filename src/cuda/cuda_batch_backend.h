// The batched CUDA backend's factory (continuous batching over a paged KV
// pool on the GPU). Plain C++: no CUDA headers, so the CLI and host code
// include it freely.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/batch_backend.h"

namespace hayate {

struct Model;

// How the decode graphs of small buckets multiply by the weights. kAuto
// captures each bucket of up to 16 rows every way it can run at start-up,
// times a few replays of each, and keeps the fastest (printed to stderr);
// tests force one.
//   kCublas: cuBLAS GEMMs (tensor cores), separate RMSNorm and SiLU*mul.
//   kGemv:   batched GEMVs (weights read once for all rows) for buckets of up
//            to 16 rows.
//   kAuto also tries bucket 1 on the persistent decode kernel (sm_90, the
//   shapes it has a configuration for, and a start-up trial launch the
//   runtime accepts); kPersistent runs bucket 1 on it wherever it can run and
//   picks the other buckets as kAuto.
enum class DecodeMatmul { kAuto, kCublas, kGemv, kPersistent };

// Weights in options.dtype (f16 or bf16); the KV pool takes what is left of
// options.gpu_memory_fraction of device memory after weights and workspace
// (or exactly options.num_blocks blocks when that is > 0, for tests). All-
// decode steps replay a CUDA graph per batch-size bucket captured here.
// Throws Error for bad options, an unsupported GPU or too little memory.
std::unique_ptr<BatchBackend> make_cuda_batch_backend(const Model& model,
                                                      const BatchBackendOptions& options,
                                                      DecodeMatmul matmul = DecodeMatmul::kAuto);

// Number of visible CUDA devices (0 when there is no driver or no GPU).
int cuda_device_count();

// Test hook: logits [sampled sequences of the last step, in batch order,
// vocab] of the last step(). Throws Error for any other backend.
std::vector<float> cuda_batch_last_logits(BatchBackend& backend);

// Test hook: all-decode steps so far that replayed each kind of decode graph:
// the regular one, the one-pass short-attention one, and the whole-row one
// (split attention with one slot per row and kv head). Throws Error for any
// other backend.
struct DecodeGraphReplays {
  int64_t regular = 0, short_attn = 0, whole_rows = 0;
};
DecodeGraphReplays cuda_batch_graph_replays(BatchBackend& backend);

}  // namespace hayate
