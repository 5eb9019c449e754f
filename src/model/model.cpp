// load_model, the weight table layout, and weight_to_f32.
#include "model/model.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/hot_loop.h"
#include "core/mapped_file.h"
#include "core/rng.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace hayate {
namespace {

namespace fs = std::filesystem;

WeightSpec spec(std::string name, std::vector<int64_t> shape, std::vector<std::string> hf_names,
                std::vector<int64_t> part_rows) {
  WeightSpec s;
  s.weight.name = std::move(name);
  s.weight.shape = std::move(shape);
  s.hf_names = std::move(hf_names);
  s.part_rows = std::move(part_rows);
  return s;
}

// Appends generation_config.json's eos ids (int or list) to the config's,
// without duplicates: Llama 3.1 instruct lists <|eot_id|> only there in some
// exports.
void merge_generation_config(const std::string& path, ModelConfig& c) {
  nlohmann::json j = parse_json_strict(read_text_file(path), path);
  HAYATE_CHECK(j.is_object(), path, ": expected a JSON object");
  auto it = j.find("eos_token_id");
  if (it == j.end() || it->is_null()) return;
  std::vector<nlohmann::json> ids =
      it->is_array() ? it->get<std::vector<nlohmann::json>>() : std::vector<nlohmann::json>{*it};
  for (const nlohmann::json& v : ids) {
    HAYATE_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < c.vocab_size,
                 path, ": field 'eos_token_id' must hold token ids below vocab_size (",
                 c.vocab_size, "), got ", v.dump());
    const int32_t id = int32_t(v.get<int64_t>());
    if (std::find(c.eos_ids.begin(), c.eos_ids.end(), id) == c.eos_ids.end())
      c.eos_ids.push_back(id);
  }
}

}  // namespace

bool is_layer_linear(const std::string& name) {
  for (const char* s : {".wqkv", ".wo", ".w_gate_up", ".w_down"})
    if (name.rfind("layers.", 0) == 0 && name.ends_with(s)) return true;
  return false;
}

int64_t WeightSource::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const WeightSource& Model::weight(const std::string& name) const {
  for (const WeightSource& w : weights)
    if (w.name == name) return w;
  fail(cat(spec, ": model has no weight '", name, "'"));
}

const WeightSource& Model::lm_head() const {
  return config.tie_word_embeddings ? weight("embed") : weight("lm_head");
}

std::vector<WeightSpec> weight_layout(const ModelConfig& c) {
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
  const int64_t q = c.q_dim(), kv = c.kv_dim();
  std::vector<WeightSpec> out;
  out.push_back(
      spec("embed", {c.vocab_size, hidden}, {"model.embed_tokens.weight"}, {c.vocab_size}));
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string ours = cat("layers.", l, ".");
    const std::string hf = cat("model.layers.", l, ".");
    out.push_back(spec(ours + "attn_norm", {hidden}, {hf + "input_layernorm.weight"}, {hidden}));
    out.push_back(spec(ours + "wqkv", {q + 2 * kv, hidden},
                       {hf + "self_attn.q_proj.weight", hf + "self_attn.k_proj.weight",
                        hf + "self_attn.v_proj.weight"},
                       {q, kv, kv}));
    if (c.qkv_bias)
      out.push_back(spec(ours + "bqkv", {q + 2 * kv},
                         {hf + "self_attn.q_proj.bias", hf + "self_attn.k_proj.bias",
                          hf + "self_attn.v_proj.bias"},
                         {q, kv, kv}));
    if (c.qk_norm) {
      const int64_t d = c.head_dim;
      out.push_back(spec(ours + "q_norm", {d}, {hf + "self_attn.q_norm.weight"}, {d}));
      out.push_back(spec(ours + "k_norm", {d}, {hf + "self_attn.k_norm.weight"}, {d}));
    }
    out.push_back(spec(ours + "wo", {hidden, q}, {hf + "self_attn.o_proj.weight"}, {hidden}));
    out.push_back(
        spec(ours + "ffn_norm", {hidden}, {hf + "post_attention_layernorm.weight"}, {hidden}));
    out.push_back(spec(ours + "w_gate_up", {2 * inter, hidden},
                       {hf + "mlp.gate_proj.weight", hf + "mlp.up_proj.weight"}, {inter, inter}));
    out.push_back(spec(ours + "w_down", {hidden, inter}, {hf + "mlp.down_proj.weight"}, {hidden}));
  }
  out.push_back(spec("final_norm", {hidden}, {"model.norm.weight"}, {hidden}));
  if (!c.tie_word_embeddings)
    out.push_back(spec("lm_head", {c.vocab_size, hidden}, {"lm_head.weight"}, {c.vocab_size}));
  return out;
}

Model load_model(const std::string& spec_text, uint64_t seed, const std::string& assets_dir) {
  Model m;
  m.spec = spec_text;
  m.seed = seed;
  if (m.is_dummy()) {
    const std::string name = spec_text.substr(6);
    const std::string source = cat("dummy:", name, " config.json");
    m.config = parse_config(parse_json_strict(dummy_config_json(name), source), source);
    m.tokenizer_dir = assets_dir + "/" + dummy_tokenizer(name);
    m.weights = dummy_weights(m.config);
    return m;
  }

  std::error_code ec;
  HAYATE_CHECK(fs::is_directory(spec_text, ec), spec_text,
               ": not a checkpoint directory (expected a directory or dummy:NAME)");
  const std::string dir = spec_text;
  const std::string config_path = (fs::path(dir) / "config.json").string();
  const nlohmann::json config_json =
      parse_json_strict(read_text_file(config_path), config_path);
  m.config = parse_config(config_json, config_path);
  if (auto q = config_json.find("quantization_config"); q != config_json.end())
    m.quant = parse_quant_config(*q, config_path);
  const std::string gen_path = (fs::path(dir) / "generation_config.json").string();
  if (fs::exists(gen_path, ec)) merge_generation_config(gen_path, m.config);
  m.tokenizer_dir = dir;
  load_checkpoint_weights(dir, m);
  return m;
}

// dst[i] = offset + scale * uniform_pm1(seed, stream, i), i in [i0, i1):
// every start of a dummy model draws each weight here (33M for dummy:tiny,
// whose start the sanitizer tests pay dozens of times).
HAYATE_HOT_LOOP static void draw_dummy(float* dst, int64_t i0, int64_t i1, uint64_t seed,
                                       uint64_t stream, float offset, float scale) {
  for (int64_t i = i0; i < i1; ++i)
    dst[i] = offset + scale * uniform_pm1(seed, stream, uint64_t(i));
}

void weight_to_f32(const Model& m, const WeightSource& w, std::span<float> out) {
  const int64_t n = w.numel();
  HAYATE_CHECK(int64_t(out.size()) == n, "weight_to_f32(", w.name, "): output holds ", out.size(),
               " values, the weight ", n);
  float* dst = out.data();
  if (w.is_dummy()) {
    constexpr int64_t kChunk = 1 << 14;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < (n + kChunk - 1) / kChunk; ++c)
      draw_dummy(dst, c * kChunk, std::min(n, (c + 1) * kChunk), m.seed, w.dummy_stream,
                 w.dummy_offset, w.dummy_scale);
    return;
  }
  const size_t es = dtype_size(w.dtype);
  if (w.dtype == DType::F8E4M3) {
    const int64_t cols = w.shape.size() == 2 ? w.shape[1] : 1;
    HAYATE_CHECK(int64_t(w.scales.size()) * cols == n, "weight_to_f32(", w.name, "): ",
                 w.scales.size(), " row scales for shape of ", n, " elements");
  }
  size_t bytes = 0;
  for (const auto& part : w.parts) bytes += part.size();
  HAYATE_CHECK(bytes == size_t(n) * es, "weight_to_f32(", w.name, "): parts hold ", bytes,
               " bytes, shape x ", dtype_name(w.dtype), " needs ", size_t(n) * es);
  // Safetensors data need not be aligned to the element size, so elements
  // are read with memcpy rather than through a cast pointer.
  int64_t first = 0;  // index of the part's first element in the weight
  for (const auto& part : w.parts) {
    const uint8_t* src = part.data();
    const int64_t count = int64_t(part.size() / es);
    const DType t = w.dtype;
    const int64_t cols = w.shape.size() == 2 ? w.shape[1] : 1;
    const float* scales = w.scales.data();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; ++i) {
      if (t == DType::F8E4M3) {
        dst[i] = e4m3_to_f32(src[i]) * scales[(first + i) / cols];
      } else if (t == DType::F32) {
        std::memcpy(&dst[i], src + size_t(i) * 4, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, src + size_t(i) * 2, 2);
        dst[i] = t == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
    }
    dst += count;
    first += count;
  }
}

void apply_quantization(Model& m, const std::string& method) {
  if (method.empty() || method == "none") return;
  HAYATE_CHECK(method == "fp8", "--quantization: unknown method '", method,
               "' (expected fp8; FP8 checkpoints need no flag)");
  if (m.quant.fp8()) return;  // the checkpoint's own FP8
  m.quant.method = QuantConfig::Method::kOnLoad;
  for (WeightSource& w : m.weights) w.fp8 = is_layer_linear(w.name);
}

}  // namespace hayate
