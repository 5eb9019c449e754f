// The model's weights on the GPU: one allocation, every weight converted to
// the compute dtype T at load (dummy weights generated in place).
#pragma once

#include <functional>

#include <cuda_runtime.h>

#include <vector>

#include "cuda/buffer.h"
#include "model/model.h"

namespace hayate::cuda {

template <typename T>
struct LayerWeights {
  const T* attn_norm;  // [hidden]
  const T* wqkv;       // [q_dim + 2 kv_dim, hidden]
  const T* wo;         // [hidden, q_dim]
  const T* ffn_norm;   // [hidden]
  const T* w_gate_up;  // [2 inter, hidden]
  const T* w_down;     // [hidden, inter]
};

template <typename T>
struct DeviceWeights {
  DeviceBuffer storage;
  const T* embed = nullptr;       // [vocab, hidden]
  const T* final_norm = nullptr;  // [hidden]
  const T* lm_head = nullptr;     // [vocab, hidden]; == embed when tied (uploaded once)
  std::vector<LayerWeights<T>> layers;
  double streamed_bytes = 0;      // what one decode step reads: all but the embedding table
};

// Bytes the weights take on the GPU in T.
size_t device_weight_bytes(const Model& m, size_t elem_size);

// Uploads (or generates) every weight; synchronises before returning.
template <typename T>
DeviceWeights<T> upload_weights(
    const Model& m, cudaStream_t s,
    const std::function<void(uint64_t done, uint64_t total)>& progress = {});

}  // namespace hayate::cuda
