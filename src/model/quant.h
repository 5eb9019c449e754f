// FP8 quantization of a model: config.json's `quantization_config` in the two
// formats in common use, or `--quantization fp8` applied at load. Only the
// layers' linear weights (q/k/v, o, gate/up, down) run in FP8: W8A8 with e4m3
// weights (scale per output row) and e4m3 activations (scale per token, or a
// static per-tensor scale from the checkpoint). Embedding, norms and the LM
// head stay in the model dtype (core/fp8.h: the arithmetic).
//
// Accepted:
//   quant_method "compressed-tensors", format "float-quantized" (llm-compressor):
//     one config group targeting "Linear"; weights {type float, num_bits 8,
//     symmetric, strategy "channel" (weight_scale [out, 1]) or "tensor"
//     (weight_scale [] or [1])}; input_activations {type float, num_bits 8,
//     dynamic true + strategy "token", or dynamic false + strategy "tensor"
//     (input_scale [] or [1])}; `ignore`: module names or "re:" regexes;
//     kv_cache_scheme {type float, num_bits 8, strategy tensor}: per-layer
//     self_attn.k_scale / v_scale.
//   quant_method "fp8" (vLLM's Fp8Config, AutoFP8): per-tensor weight_scale,
//     activation_scheme "dynamic" or "static" (input_scale), ignored_layers.
// Everything else (awq, gptq, bitsandbytes, int8, block-wise weight_block_size,
// group strategies, weight-only FP8, e5m2) is a one-line Error naming it.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace hayate {

struct QuantConfig {
  enum class Method { kNone, kCompressedTensors, kFp8, kOnLoad };
  Method method = Method::kNone;
  bool channel_weights = false;  // checkpoint: weight_scale per output row (else per tensor)
  bool static_inputs = false;    // checkpoint: input_scale per linear (else dynamic per token)
  bool kv_scales = false;        // checkpoint: self_attn.k_scale / v_scale per layer
  std::vector<std::string> ignore;  // modules that stay in the model dtype

  bool fp8() const { return method != Method::kNone; }
  // Whether HF module `module` (e.g. "model.layers.0.self_attn.q_proj",
  // "lm_head") is in the ignore list (exact name, or a "re:" full match).
  bool ignored(const std::string& module) const;
  // One line: e.g. "fp8 (compressed-tensors): e4m3 weights per channel,
  // activations per token".
  std::string describe() const;
};

// Parses config.json's quantization_config (`q` may be null: no
// quantization); `source` names the file in errors.
QuantConfig parse_quant_config(const nlohmann::json& q, const std::string& source);

// FP8 (`what`: the quantization, or "--kv-cache-dtype fp8") on a GPU of
// compute capability major.minor: an Error naming it and the GPU's sm_ unless
// the GPU has FP8 tensor cores and conversions (sm_89 or newer). Host-only,
// so that the refusal is tested without such a GPU.
void check_fp8_capability(int major, int minor, const std::string& what);

}  // namespace hayate
