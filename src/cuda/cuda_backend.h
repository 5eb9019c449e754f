// The CUDA backend's factory. Plain C++: no CUDA headers, so host code and
// the CLI include it freely.
#pragma once

#include <memory>

#include "engine/backend.h"

namespace hayate {

std::unique_ptr<Backend> make_cuda_backend(const Model& model, const BackendOptions& options);

// Number of visible CUDA devices (0 when there is no driver or no GPU).
int cuda_device_count();

// Knobs for the kernel lab and the gpu tests, not for users: the decode graph
// with or without programmatic dependent launch. Off by default: on the H200
// it made the 8B decode step 0.2-0.4 ms slower (bench/kernels/NOTES.md).
struct CudaTuning {
  bool pdl = false;
};
std::unique_ptr<Backend> make_cuda_backend(const Model& model, const BackendOptions& options,
                                           const CudaTuning& tuning);

}  // namespace hayate
