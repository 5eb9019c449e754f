// The batched CUDA backend's factory (continuous batching over a paged KV
// pool on the GPU). Plain C++: no CUDA headers, so the CLI and host code
// include it freely.
#pragma once

#include <memory>
#include <vector>

#include "engine/batch_backend.h"

namespace hayate {

struct Model;

// Weights in options.dtype (f16 or bf16); the KV pool takes what is left of
// options.gpu_memory_fraction of device memory after weights and workspace
// (or exactly options.num_blocks blocks when that is > 0, for tests). All-
// decode steps replay a CUDA graph per batch-size bucket captured here.
// Throws Error for bad options, an unsupported GPU or too little memory.
std::unique_ptr<BatchBackend> make_cuda_batch_backend(const Model& model,
                                                      const BatchBackendOptions& options);

// Test hook: logits [sampled sequences of the last step, in batch order,
// vocab] of the last step(). Throws Error for any other backend.
std::vector<float> cuda_batch_last_logits(BatchBackend& backend);

}  // namespace hayate
