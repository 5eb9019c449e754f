// The model's weights on the GPU: one allocation, every weight converted to
// the compute dtype T at load (dummy weights generated in place).
#pragma once

#include <functional>

#include <cuda_runtime.h>

#include <vector>

#include "cuda/buffer.h"
#include "model/model.h"

namespace hayate::cuda {

// A linear weight in FP8 (model/quant.h): e4m3 codes [out, in] and a scale
// per output row; input_scale: static activation scale, 0 = per token.
struct Fp8Linear {
  const uint8_t* w = nullptr;
  const float* scale = nullptr;
  float input_scale = 0.0f;
};

// With FP8 weights (DeviceWeights::fp8) the four linears are in the *8
// fields and their T pointers are null.
template <typename T>
struct LayerWeights {
  const T* attn_norm;  // [hidden]
  const T* wqkv;       // [q_dim + 2 kv_dim, hidden]
  const T* wo;         // [hidden, q_dim]
  const T* ffn_norm;   // [hidden]
  const T* w_gate_up;  // [2 inter, hidden]
  const T* w_down;     // [hidden, inter]
  Fp8Linear qkv8, o8, gate_up8, down8;
  const T* bqkv = nullptr;    // [q_dim + 2 kv_dim] q/k/v biases (Qwen2), else null
  const T* q_norm = nullptr;  // [head_dim] per-head q/k RMSNorm weights (Qwen3), else null
  const T* k_norm = nullptr;
};

template <typename T>
struct DeviceWeights {
  DeviceBuffer storage;
  const T* embed = nullptr;       // [vocab, hidden]
  const T* final_norm = nullptr;  // [hidden]
  const T* lm_head = nullptr;     // [vocab, hidden]; == embed when tied (uploaded once)
  std::vector<LayerWeights<T>> layers;
  bool fp8 = false;               // every layer's linears in FP8 (W8A8)
  double streamed_bytes = 0;      // what one decode step reads: all but the embedding table
};

// Bytes the weights take on the GPU in T (FP8 linears: a byte per element
// and a float per row).
size_t device_weight_bytes(const Model& m, size_t elem_size);

// Uploads (or generates) every weight; synchronises before returning. FP8
// weights (WeightSource::fp8) arrive as e4m3 with their row scales, or are
// quantized per row on the GPU from fp32 values (dummy values generated in
// fp32, file data converted exactly), which matches the CPU backend's
// quantization bit for bit. The CUDA backend runs FP8 in every layer or in
// none: a checkpoint whose ignore list leaves some layers' linears in 16
// bits is an Error here (the CPU backend runs it).
template <typename T>
DeviceWeights<T> upload_weights(
    const Model& m, cudaStream_t s,
    const std::function<void(uint64_t done, uint64_t total)>& progress = {});

}  // namespace hayate::cuda
