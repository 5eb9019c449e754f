// The fp32 CPU implementation of BatchBackend: many sequences per step over a
// paged KV pool: the oracle every other backend is tested against. It runs
// the same ops (cpu/ops.h) in the same order for every sequence, so a
// sequence's ids do not depend on what else is in the batch or on how its
// prompt was chunked. The engine's tests and the GPU-less CI run every
// command through it.
#pragma once

#include <memory>

#include "engine/batch_backend.h"

namespace hayate {

struct Model;

// Pool: options.num_blocks blocks of options.block_size tokens (num_blocks 0 =
// enough for 4 sequences of max_model_len). Throws Error for bad options.
std::unique_ptr<BatchBackend> make_cpu_paged_backend(const Model& model,
                                                     const BatchBackendOptions& options);

}  // namespace hayate
