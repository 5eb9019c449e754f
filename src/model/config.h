// Model hyperparameters, parsed from a Hugging Face config.json. Nothing here
// is keyed by model name: dummy architectures are config.json texts too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/dtype.h"

namespace hayate {

// rope_scaling {"rope_type": "llama3", factor, low_freq_factor,
// high_freq_factor, original_max_position_embeddings}.
struct RopeScaling {
  bool llama3 = false;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_max_position_embeddings = 8192;
};

// The most layers a config may declare (a validation bound, docs/api.md).
inline constexpr int kMaxLayers = 1024;

struct ModelConfig {
  std::string architecture = "LlamaForCausalLM";
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // config.head_dim, else hidden_size / num_heads
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // q/k/v projections carry biases (Qwen2)
  bool qk_norm = false;   // per-head RMSNorm of q and k before RoPE (Qwen3)
  int max_position_embeddings = 2048;
  std::vector<int32_t> bos_ids;  // config.bos_token_id, int or list (may be empty)
  std::vector<int32_t> eos_ids;  // config.eos_token_id merged with generation_config.json's
  DType torch_dtype = DType::BF16;

  int q_dim() const { return num_heads * head_dim; }
  int kv_dim() const { return num_kv_heads * head_dim; }
  int qkv_dim() const { return q_dim() + 2 * kv_dim(); }
};

// The architectures hayate runs (config.json's `architectures[0]`, or
// `model_type` when that is absent), for error messages.
inline constexpr const char* kSupportedArchitectures =
    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM";

// Parses and validates config.json contents; `source` names the file in errors.
ModelConfig parse_config(const nlohmann::json& j, const std::string& source);

// Inverse frequencies of RoPE, head_dim / 2 values, with llama3 scaling
// applied as transformers' _compute_llama3_parameters does. Both backends
// use this one table.
std::vector<float> rope_inv_freq(const ModelConfig& c);

}  // namespace hayate
