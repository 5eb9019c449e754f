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
// with or without programmatic dependent launch (to measure what it buys).
struct CudaTuning {
  bool pdl = true;
};
std::unique_ptr<Backend> make_cuda_backend(const Model& model, const BackendOptions& options,
                                           const CudaTuning& tuning);

}  // namespace hayate
