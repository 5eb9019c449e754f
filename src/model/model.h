// A loaded model: config, generation defaults, where its tokenizer lives, and
// the weight table. This is the one load-time chokepoint: every weight is
// checked here for name, dtype and shape, and q/k/v and gate/up are fused
// here (as lists of row blocks, so no host copy is made).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"
#include "model/quant.h"

namespace hayate {

class MappedFile;

// One weight of the model under our name. Its data is the concatenation of
// `parts` along dim 0 (each part a whole number of rows, in file dtype), or,
// for dummy models, offset + scale * uniform_pm1(seed, stream, i) for element
// i (core/rng.h); then `parts` is empty. Parts point into memory-mapped
// safetensors data, which the format does not align to the element size:
// read elements with memcpy (weight_to_f32 does) or copy them as bytes.
// Dummy weights carry the config's torch_dtype as `dtype`.
struct WeightSource {
  std::string name;            // e.g. "layers.3.wqkv"
  DType dtype = DType::F32;    // dtype of the stored data
  std::vector<int64_t> shape;  // row-major, e.g. {qkv_dim, hidden}
  std::vector<std::span<const uint8_t>> parts;
  uint64_t dummy_stream = 0;
  float dummy_scale = 0.0f;
  float dummy_offset = 0.0f;
  // FP8 (quant.h): fp8 says the weight runs W8A8. Stored as F8E4M3, `scales`
  // holds its scale per output row (a fused weight's per-tensor scales
  // repeated over each part's rows); stored in fp16/bf16 or dummy
  // (--quantization fp8), the backends quantize it per row at load and
  // `scales` is empty. input_scale: the static activation scale (the max
  // over a fused weight's parts, as vLLM), 0 for dynamic per-token scales.
  bool fp8 = false;
  std::vector<float> scales;
  float input_scale = 0.0f;

  int64_t numel() const;
  bool is_dummy() const { return parts.empty(); }
};

// Our weight names (all 2-D weights are [out_features, in_features], as HF):
//   embed            [vocab, hidden]           model.embed_tokens.weight
//   final_norm       [hidden]                  model.norm.weight
//   lm_head          [vocab, hidden]           lm_head.weight (absent when tied)
//   layers.L.attn_norm  [hidden]              input_layernorm
//   layers.L.wqkv    [q_dim + 2 kv_dim, hidden] q_proj ; k_proj ; v_proj rows
//   layers.L.bqkv    [q_dim + 2 kv_dim]        q_proj ; k_proj ; v_proj biases (qkv_bias)
//   layers.L.q_norm  [head_dim]                q_norm (qk_norm), likewise k_norm
//   layers.L.wo      [hidden, q_dim]           o_proj
//   layers.L.ffn_norm   [hidden]              post_attention_layernorm
//   layers.L.w_gate_up [2 * intermediate, hidden] gate_proj ; up_proj rows
//   layers.L.w_down  [hidden, intermediate]    down_proj
struct Model {
  ModelConfig config;
  QuantConfig quant;
  std::string spec;           // what the user passed: a directory or dummy:NAME
  std::string tokenizer_dir;  // holds tokenizer.json and tokenizer_config.json
  uint64_t seed = 0;          // dummy weights only
  std::vector<WeightSource> weights;
  std::vector<std::shared_ptr<MappedFile>> files;  // keep the mapped data alive
  // The checkpoint's per-layer KV-cache scales (quant.kv_scales), else empty:
  // an FP8 KV cache then uses 1.0.
  std::vector<float> k_scales, v_scales;

  const WeightSource& weight(const std::string& name) const;  // throws if absent
  const WeightSource& lm_head() const;                        // lm_head, or embed when tied
  bool is_dummy() const { return spec.rfind("dummy:", 0) == 0; }
};

// Loads `spec`: a Hugging Face checkpoint directory, or dummy:NAME (random
// weights from `seed`, its family's tokenizer from `assets_dir`).
Model load_model(const std::string& spec, uint64_t seed, const std::string& assets_dir);

// `--quantization fp8` (vLLM's): the layers' linear weights run W8A8,
// quantized per output row at load. An FP8 checkpoint is left as it is;
// `method` other than "fp8" (or "none"/"" for no change) is an Error.
void apply_quantization(Model& m, const std::string& method);

// The config.json text of a named dummy architecture (llama-3.1-8b,
// llama-3.2-1b, tiny, qwen3-8b, qwen2.5-7b, mistral-7b-v0.3, tiny-qwen2); throws Error
// listing the known names.
std::string dummy_config_json(const std::string& name);
// The folder under assets/ holding that dummy's tokenizer files.
std::string dummy_tokenizer(const std::string& name);

// Writes element values of `w` as float32 into `out` (numel values): converts
// file data or computes dummy values; an F8E4M3 weight's codes times its row
// scales. Used by the CPU backend and tests.
void weight_to_f32(const Model& m, const WeightSource& w, std::span<float> out);

}  // namespace hayate
