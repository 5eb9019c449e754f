// Internal to src/model: the weight table layout shared by the checkpoint
// loader and the dummy generator.
#pragma once

#include <string>
#include <vector>

#include "model/model.h"

namespace hayate {

// One of our weights and the Hugging Face tensors it is made of, in row
// order: wqkv <- q_proj ; k_proj ; v_proj, w_gate_up <- gate_proj ; up_proj
// (the declarative table, as nano-vllm's packed_modules_mapping).
struct WeightSpec {
  WeightSource weight;                // name and shape filled, no data
  std::vector<std::string> hf_names;  // parts, concatenated along dim 0
  std::vector<int64_t> part_rows;     // rows of each part
};

// Whether our weight `name` is one of a layer's linear weights (wqkv, wo,
// w_gate_up, w_down): the ones FP8 quantization applies to.
bool is_layer_linear(const std::string& name);

// Every weight of a model with config `c`, in Model::weights order: embed,
// per layer attn_norm, wqkv, [bqkv], [q_norm, k_norm], wo, ffn_norm, w_gate_up, w_down, then
// final_norm, then lm_head unless the embeddings are tied.
std::vector<WeightSpec> weight_layout(const ModelConfig& c);

// The layout with dummy parameters set (see dummy.cpp).
std::vector<WeightSource> dummy_weights(const ModelConfig& c);

// Loads a checkpoint directory's weights into m.weights / m.files (config
// already parsed into m.config).
void load_checkpoint_weights(const std::string& dir, Model& m);

}  // namespace hayate
