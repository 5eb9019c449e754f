// config.json parsing and the RoPE frequency table.
#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/check.h"

namespace hayate {
namespace {

using nlohmann::json;

// Typed field readers: each error names the file and the field.
int get_int(const json& j, const std::string& source, const char* key, int fallback,
            bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    HAYATE_CHECK(!required, source, ": missing field '", key, "'");
    return fallback;
  }
  HAYATE_CHECK(it->is_number_integer(), source, ": field '", key, "' must be an integer");
  int64_t v = it->get<int64_t>();
  HAYATE_CHECK(v >= std::numeric_limits<int>::min() && v <= std::numeric_limits<int>::max(), source,
               ": field '", key, "' is out of range: ", v);
  return int(v);
}

double get_number(const json& j, const std::string& source, const char* key, double fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  HAYATE_CHECK(it->is_number(), source, ": field '", key, "' must be a number");
  double v = it->get<double>();
  HAYATE_CHECK(std::isfinite(v), source, ": field '", key, "' must be finite");
  return v;
}

bool get_bool(const json& j, const std::string& source, const char* key, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  HAYATE_CHECK(it->is_boolean(), source, ": field '", key, "' must be true or false");
  return it->get<bool>();
}

// Token ids given as an int or a list of ints (bos_token_id, eos_token_id).
std::vector<int32_t> get_ids(const json& j, const std::string& source, const char* key) {
  std::vector<int32_t> ids;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return ids;
  auto one = [&](const json& v) {
    HAYATE_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0 &&
                     v.get<int64_t>() <= std::numeric_limits<int32_t>::max(),
                 source, ": field '", key, "' must hold non-negative integer token ids");
    ids.push_back(int32_t(v.get<int64_t>()));
  };
  if (it->is_array()) {
    for (const json& v : *it) one(v);
  } else {
    one(*it);
  }
  return ids;
}

DType parse_dtype_name(const json& j, const std::string& source, const char* key) {
  const std::string s = j.at(key).is_string() ? j.at(key).get<std::string>() : "";
  if (s == "float32") return DType::F32;
  if (s == "float16") return DType::F16;
  if (s == "bfloat16") return DType::BF16;
  fail(cat(source, ": field '", key, "' is '", j.at(key).dump(),
           "'; hayate supports float32, float16, bfloat16"));
}

// rope_scaling (transformers 4.x config.json) or rope_parameters (transformers
// 5.x, which also carries rope_theta). Only "default" and "llama3" are
// implemented; any other type would silently change every position's angle,
// so it is an error.
void parse_rope(const json& j, const std::string& source, ModelConfig& c) {
  c.rope_theta = float(get_number(j, source, "rope_theta", 10000.0));
  const json* params = nullptr;
  std::string field = "rope_scaling";
  if (auto it = j.find("rope_parameters"); it != j.end() && !it->is_null()) {
    params = &*it;
    field = "rope_parameters";
  } else if (auto it2 = j.find("rope_scaling"); it2 != j.end() && !it2->is_null()) {
    params = &*it2;
  }
  if (!params) return;
  HAYATE_CHECK(params->is_object(), source, ": field '", field, "' must be an object");
  const json& p = *params;
  if (field == "rope_parameters" && p.contains("rope_theta"))
    c.rope_theta = float(get_number(p, source, "rope_theta", c.rope_theta));
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    if (auto it = p.find(key); it != p.end() && !it->is_null()) {
      HAYATE_CHECK(it->is_string(), source, ": field '", field, ".", key, "' must be a string");
      type = it->get<std::string>();
      break;
    }
  }
  if (type.empty() || type == "default") return;
  HAYATE_CHECK(type == "llama3", source, ": ", field, " type '", type,
               "' is not supported (hayate implements default and llama3)");
  RopeScaling& r = c.rope_scaling;
  r.llama3 = true;
  const std::string where = cat(source, " (", field, ")");
  for (const char* key :
       {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
    HAYATE_CHECK(p.contains(key), source, ": ", field, " of type llama3 lacks '", key, "'");
  r.factor = float(get_number(p, where, "factor", 1.0));
  r.low_freq_factor = float(get_number(p, where, "low_freq_factor", 1.0));
  r.high_freq_factor = float(get_number(p, where, "high_freq_factor", 4.0));
  r.original_max_position_embeddings =
      get_int(p, where, "original_max_position_embeddings", 8192, true);
  HAYATE_CHECK(r.factor > 0, source, ": ", field, ".factor must be positive");
  HAYATE_CHECK(r.low_freq_factor > 0, source, ": ", field, ".low_freq_factor must be positive");
  HAYATE_CHECK(r.high_freq_factor > r.low_freq_factor, source, ": ", field,
               ".high_freq_factor must exceed low_freq_factor");
  HAYATE_CHECK(r.original_max_position_embeddings > 0, source, ": ", field,
               ".original_max_position_embeddings must be positive");
}

// The families differ from Llama in ways the shapes do not reveal, so each
// is named: Qwen2 adds q/k/v biases, Qwen3 a per-head RMSNorm of q and k;
// Mistral is Llama's layout. What a family could also switch on and hayate
// does not implement (biases elsewhere, sliding windows) is refused by name.
void parse_architecture(const json& j, const std::string& source, ModelConfig& c) {
  struct Family {
    const char* arch;
    const char* model_type;
  };
  static constexpr Family kFamilies[] = {{"LlamaForCausalLM", "llama"},
                                         {"MistralForCausalLM", "mistral"},
                                         {"Qwen2ForCausalLM", "qwen2"},
                                         {"Qwen3ForCausalLM", "qwen3"}};
  std::string model_type;
  if (auto it = j.find("model_type"); it != j.end() && it->is_string())
    model_type = it->get<std::string>();
  const Family* fam = nullptr;
  if (auto it = j.find("architectures"); it != j.end() && !it->is_null()) {
    HAYATE_CHECK(it->is_array() && !it->empty() && (*it)[0].is_string(), source,
                 ": field 'architectures' must be a list of names");
    const std::string arch = (*it)[0].get<std::string>();
    for (const Family& f : kFamilies)
      if (arch == f.arch) fam = &f;
    HAYATE_CHECK(fam, source, ": architecture '", arch, "' is not supported (hayate runs ",
                 kSupportedArchitectures, ")");
  } else {
    for (const Family& f : kFamilies)
      if (model_type == f.model_type) fam = &f;
    HAYATE_CHECK(fam, source, ": field 'architectures' is missing and model_type '", model_type,
                 "' is not one of llama, mistral, qwen2, qwen3 (hayate runs ",
                 kSupportedArchitectures, ")");
  }
  c.architecture = fam->arch;
  const std::string name = fam->arch;
  const bool qwen = name == "Qwen2ForCausalLM" || name == "Qwen3ForCausalLM";
  c.qkv_bias = name == "Qwen2ForCausalLM";  // Qwen2Attention: q/k/v biases, none on o_proj
  c.qk_norm = name == "Qwen3ForCausalLM";
  // attention_bias: Llama, Mistral and Qwen3 would put biases on q/k/v and o_proj.
  HAYATE_CHECK(!get_bool(j, source, "attention_bias", false), source,
               ": field 'attention_bias' is true; hayate runs ", name,
               " without attention biases");
  HAYATE_CHECK(!get_bool(j, source, "mlp_bias", false), source,
               ": field 'mlp_bias' is true; hayate has no MLP biases");
  if (qwen) {
    HAYATE_CHECK(!get_bool(j, source, "use_sliding_window", false), source,
                 ": field 'use_sliding_window' is true; hayate implements full attention only "
                 "(the released ", name, " models set it false)");
    if (auto it = j.find("layer_types"); it != j.end() && it->is_array())
      for (const json& t : *it)
        HAYATE_CHECK(t == "full_attention", source, ": field 'layer_types' lists ", t.dump(),
                     "; hayate implements full_attention only");
  }
}

// Mistral's sliding_window: attention over the last `window` positions.
// Within the window that is full attention, so a context capped at the
// window is exact; hayate caps max_position_embeddings there rather than
// implement the window (v0.3 sets it null).
void apply_sliding_window(const json& j, const std::string& source, ModelConfig& c) {
  if (c.architecture != "MistralForCausalLM") return;
  const int window = get_int(j, source, "sliding_window", 0, false);
  if (window == 0) return;
  HAYATE_CHECK(window > 0, source, ": field 'sliding_window' must be positive or null");
  c.max_position_embeddings = std::min(c.max_position_embeddings, window);
}

}  // namespace

ModelConfig parse_config(const json& j, const std::string& source) {
  HAYATE_CHECK(j.is_object(), source, ": expected a JSON object");
  ModelConfig c;

  parse_architecture(j, source, c);
  if (auto it = j.find("hidden_act"); it != j.end() && !it->is_null())
    HAYATE_CHECK(it->is_string() && it->get<std::string>() == "silu", source,
                 ": field 'hidden_act' is ", it->dump(), "; hayate implements silu");

  c.vocab_size = get_int(j, source, "vocab_size", 0, true);
  c.hidden_size = get_int(j, source, "hidden_size", 0, true);
  c.intermediate_size = get_int(j, source, "intermediate_size", 0, true);
  c.num_layers = get_int(j, source, "num_hidden_layers", 0, true);
  c.num_heads = get_int(j, source, "num_attention_heads", 0, true);
  c.num_kv_heads = get_int(j, source, "num_key_value_heads", c.num_heads, false);
  for (auto [key, v] : {std::pair{"vocab_size", c.vocab_size},
                        {"hidden_size", c.hidden_size},
                        {"intermediate_size", c.intermediate_size},
                        {"num_hidden_layers", c.num_layers},
                        {"num_attention_heads", c.num_heads},
                        {"num_key_value_heads", c.num_kv_heads}})
    HAYATE_CHECK(v > 0, source, ": field '", key, "' must be positive, got ", v);
  // The weight table is sized from the layer count before any tensor is
  // read; the largest Llama has 126 layers.
  HAYATE_CHECK(c.num_layers <= kMaxLayers, source, ": field 'num_hidden_layers' must be at most ",
               kMaxLayers, ", got ", c.num_layers);
  HAYATE_CHECK(c.num_heads % c.num_kv_heads == 0, source, ": field 'num_attention_heads' (",
               c.num_heads, ") is not a multiple of 'num_key_value_heads' (", c.num_kv_heads, ")");
  if (j.contains("head_dim") && !j.at("head_dim").is_null()) {
    c.head_dim = get_int(j, source, "head_dim", 0, true);
  } else {
    HAYATE_CHECK(c.hidden_size % c.num_heads == 0, source, ": field 'hidden_size' (", c.hidden_size,
                 ") is not a multiple of 'num_attention_heads' (", c.num_heads,
                 ") and no 'head_dim' is given");
    c.head_dim = c.hidden_size / c.num_heads;
  }
  HAYATE_CHECK(c.head_dim > 0 && c.head_dim % 2 == 0, source,
               ": field 'head_dim' must be positive and even (RoPE rotates pairs), got ",
               c.head_dim);
  // q_dim + 2 kv_dim must fit an int: the backends index rows with int.
  HAYATE_CHECK(int64_t(c.num_heads + 2 * int64_t(c.num_kv_heads)) * c.head_dim <
                   std::numeric_limits<int>::max(),
               source, ": attention sizes are too large");
  HAYATE_CHECK(2 * int64_t(c.intermediate_size) < std::numeric_limits<int>::max(), source,
               ": field 'intermediate_size' is too large");

  c.rms_norm_eps = float(get_number(j, source, "rms_norm_eps", 1e-6));
  HAYATE_CHECK(c.rms_norm_eps > 0, source, ": field 'rms_norm_eps' must be positive");
  parse_rope(j, source, c);
  HAYATE_CHECK(c.rope_theta > 0, source, ": field 'rope_theta' must be positive");
  c.tie_word_embeddings = get_bool(j, source, "tie_word_embeddings", false);
  c.max_position_embeddings = get_int(j, source, "max_position_embeddings", 2048, false);
  HAYATE_CHECK(c.max_position_embeddings > 0, source,
               ": field 'max_position_embeddings' must be positive");
  apply_sliding_window(j, source, c);
  c.bos_ids = get_ids(j, source, "bos_token_id");
  c.eos_ids = get_ids(j, source, "eos_token_id");
  for (const std::vector<int32_t>* ids : {&c.bos_ids, &c.eos_ids})
    for (int32_t id : *ids)
      HAYATE_CHECK(id < c.vocab_size, source, ": token id ", id, " is outside the vocabulary (",
                   c.vocab_size, ")");
  // transformers 5 writes "dtype", 4.x "torch_dtype"; it is informational
  // (the tensors carry their own dtypes), default bfloat16.
  for (const char* key : {"dtype", "torch_dtype"}) {
    if (j.contains(key) && !j.at(key).is_null()) {
      c.torch_dtype = parse_dtype_name(j, source, key);
      break;
    }
  }
  return c;
}

// transformers' _compute_default_rope_parameters and
// _compute_llama3_parameters, step by step in float32 as torch does them
// (python scalars meet float32 tensors as float32), so both backends rotate by
// the same angles as the reference:
//   inv_freq[i] = 1 / theta^(2i / head_dim)
//   wavelen = 2 pi / inv_freq; long waves (> old_ctx / low) are divided by
//   factor, short ones (< old_ctx / high) kept, the band between blended.
std::vector<float> rope_inv_freq(const ModelConfig& c) {
  const int half = c.head_dim / 2;
  std::vector<float> inv(size_t(half), 0.0f);
  const float dim = float(c.head_dim);
  for (int i = 0; i < half; ++i) {
    const float expo = float(2 * i) / dim;
    // Correctly rounded float pow (what torch's float kernel yields).
    const float p = float(std::pow(double(c.rope_theta), double(expo)));
    inv[size_t(i)] = 1.0f / p;
  }
  if (!c.rope_scaling.llama3) return inv;

  const RopeScaling& r = c.rope_scaling;
  const double old_ctx = r.original_max_position_embeddings;
  const float low_wavelen = float(old_ctx / double(r.low_freq_factor));
  const float high_wavelen = float(old_ctx / double(r.high_freq_factor));
  const float two_pi = float(2.0 * M_PI);
  const float band = float(double(r.high_freq_factor) - double(r.low_freq_factor));
  for (float& f : inv) {
    const float wavelen = two_pi / f;
    float scaled = wavelen > low_wavelen ? f / r.factor : f;
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    if (medium) {
      const float smooth = (float(old_ctx) / wavelen - r.low_freq_factor) / band;
      scaled = (1.0f - smooth) * scaled / r.factor + smooth * scaled;
    }
    f = scaled;
  }
  return inv;
}

}  // namespace hayate
