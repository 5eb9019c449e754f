// The fp32 weight set of the CPU backend: converted once at load from the
// model's weight table.
#pragma once

#include <functional>

#include <vector>

#include "model/config.h"

namespace hayate {

struct Model;

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
};

struct CpuWeights {
  std::vector<float> embed;       // [vocab, hidden]
  std::vector<float> final_norm;  // [hidden]
  std::vector<float> lm_head;     // [vocab, hidden]; empty when tied to embed
  std::vector<CpuLayer> layers;
  std::vector<float> inv_freq;  // [head_dim / 2] RoPE frequencies (llama3 scaling applied)

  const std::vector<float>& lm(const ModelConfig& c) const {
    return c.tie_word_embeddings ? embed : lm_head;
  }
  // Floats read per decoded token: everything but the embedding table.
  double floats_per_token(const ModelConfig& c) const;
};

// Throws Error when the GQA/head shape is unusable or a weight has the wrong size.
// `progress` (may be empty) hears bytes of source data converted so far.
CpuWeights load_cpu_weights(const Model& model,
                            const std::function<void(uint64_t done, uint64_t total)>& progress = {});

}  // namespace hayate
