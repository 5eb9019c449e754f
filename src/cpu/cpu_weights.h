// The fp32 weight set of the CPU backend: converted once at load from the
// model's weight table.
#pragma once

#include <functional>

#include <vector>

#include "model/config.h"
#include "model/tensor_parallel.h"

namespace hayate {

struct Model;

// How a linear weight runs: fp32 (fp8 false), or W8A8: the weight holds its
// dequantized e4m3 values and the input is quantized per token (input_scale
// 0) or with input_scale before the product (ops.h: quantize_fp8).
struct LinearQuant {
  bool fp8 = false;
  float input_scale = 0.0f;
};

struct CpuLayer {
  std::vector<float> attn_norm;  // [hidden]
  std::vector<float> wqkv;       // [q_dim + 2 kv_dim, hidden]
  std::vector<float> bqkv;       // [q_dim + 2 kv_dim] (qkv_bias), else empty
  std::vector<float> q_norm;     // [head_dim] (qk_norm), else empty
  std::vector<float> k_norm;     // [head_dim] (qk_norm), else empty
  std::vector<float> wo;         // [hidden, q_dim]
  std::vector<float> ffn_norm;   // [hidden]
  std::vector<float> w_gate_up;  // [2 * intermediate, hidden]
  std::vector<float> w_down;     // [hidden, intermediate]
  LinearQuant q_qkv, q_o, q_gate_up, q_down;
};

struct CpuWeights {
  std::vector<float> embed;       // [vocab, hidden]
  std::vector<float> final_norm;  // [hidden]
  std::vector<float> lm_head;     // [vocab, hidden]; empty when tied to embed
  std::vector<CpuLayer> layers;
  std::vector<float> inv_freq;  // [head_dim / 2] RoPE frequencies (llama3 scaling applied)
  std::vector<float> k_scales, v_scales;  // [layers] FP8 KV-cache scales (1.0 by default)

  const std::vector<float>& lm(const ModelConfig& c) const {
    return c.tie_word_embeddings ? embed : lm_head;
  }
  // Floats read per decoded token: everything but the embedding table.
  double floats_per_token(const ModelConfig& c) const;
};

// Throws Error when the GQA/head shape is unusable or a weight has the wrong size.
// FP8 weights (WeightSource::fp8) come dequantized: an F8E4M3 weight as its
// codes times its row scales, an fp16/bf16/dummy one (--quantization fp8)
// quantized per row first (core/fp8.h), as the CUDA backend does at load.
// `progress` (may be empty) hears bytes of source data converted so far.
CpuWeights load_cpu_weights(const Model& model,
                            const std::function<void(uint64_t done, uint64_t total)>& progress = {});

// Rank `s`'s slice of `full` (model/tensor_parallel.h): its q/k/v rows (and
// biases), o_proj's and down_proj's input columns, gate/up rows, embedding
// and LM head vocabulary rows; norms, RoPE table and KV scales copied.
CpuWeights shard_cpu_weights(const CpuWeights& full, const ModelConfig& c, const TpShard& s);

}  // namespace hayate
