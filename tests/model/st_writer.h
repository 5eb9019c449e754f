// Test helpers that write safetensors files and small Llama checkpoint
// directories (any test may use them: include "model/st_writer.h").
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <stdexcept>

#include <stdlib.h>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/rng.h"

namespace hayate::test {

struct StTensor {
  std::string name;
  std::string dtype;  // safetensors name: "F32", "F16", "BF16", "I64", ...
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

// Encodes float values as F32, F16 or BF16 bytes (little-endian).
inline StTensor make_tensor(std::string name, DType t, std::vector<int64_t> shape,
                            const std::vector<float>& values) {
  StTensor s{std::move(name),
             t == DType::F32   ? "F32"
             : t == DType::F16 ? "F16"
                               : "BF16",
             std::move(shape),
             {}};
  s.data.resize(values.size() * dtype_size(t));
  for (size_t i = 0; i < values.size(); ++i) {
    if (t == DType::F32) {
      std::memcpy(&s.data[i * 4], &values[i], 4);
    } else {
      uint16_t h = t == DType::F16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
      std::memcpy(&s.data[i * 2], &h, 2);
    }
  }
  return s;
}

// Raw file from a header text and data bytes; `declared` overrides the
// length field (hostile files).
inline std::vector<uint8_t> raw_safetensors(const std::string& header,
                                            const std::vector<uint8_t>& data = {},
                                            uint64_t declared = UINT64_MAX) {
  const uint64_t n = declared == UINT64_MAX ? header.size() : declared;
  // Sized once and filled with memcpy: growing an 8-byte vector by insert
  // trips a GCC 12 -Warray-bounds false positive at -O3.
  std::vector<uint8_t> out(8 + header.size() + data.size());
  for (int i = 0; i < 8; ++i) out[size_t(i)] = uint8_t(n >> (8 * i));
  if (!header.empty()) std::memcpy(out.data() + 8, header.data(), header.size());
  if (!data.empty()) std::memcpy(out.data() + 8 + header.size(), data.data(), data.size());
  return out;
}

// A complete file: 8-byte length, header (padded with spaces to a multiple of
// 8 bytes, as the reference writer does), then the tensors' data back to back.
inline std::vector<uint8_t> safetensors_bytes(const std::vector<StTensor>& tensors,
                                              const std::map<std::string, std::string>& meta = {}) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!meta.empty()) h["__metadata__"] = meta;
  uint64_t offset = 0;
  for (const StTensor& t : tensors) {
    h[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string text = h.dump();
  while (text.size() % 8) text += ' ';
  std::vector<uint8_t> data;
  for (const StTensor& t : tensors) data.insert(data.end(), t.data.begin(), t.data.end());
  return raw_safetensors(text, data);
}

inline void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

inline void write_safetensors(const std::string& path, const std::vector<StTensor>& tensors,
                              const std::map<std::string, std::string>& meta = {}) {
  write_file(path, safetensors_bytes(tensors, meta));
}

// Every HF tensor of a Llama checkpoint with config `cfg` (a parsed
// config.json), in dtype `t`, filled with seeded uniform values (tensor k
// uses stream k): model.embed_tokens.weight, per layer input_layernorm,
// q/k/v/o_proj, post_attention_layernorm, gate/up/down_proj, model.norm,
// then lm_head.weight unless tied.
inline std::vector<StTensor> llama_tensors(const nlohmann::json& cfg, DType t, uint64_t seed) {
  const int64_t vocab = cfg["vocab_size"], hidden = cfg["hidden_size"],
                inter = cfg["intermediate_size"], layers = cfg["num_hidden_layers"],
                heads = cfg["num_attention_heads"], kv_heads = cfg["num_key_value_heads"];
  const int64_t head_dim = cfg.contains("head_dim") ? int64_t(cfg["head_dim"]) : hidden / heads;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  shapes.push_back({"model.embed_tokens.weight", {vocab, hidden}});
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    shapes.push_back({p + "input_layernorm.weight", {hidden}});
    shapes.push_back({p + "self_attn.q_proj.weight", {heads * head_dim, hidden}});
    shapes.push_back({p + "self_attn.k_proj.weight", {kv_heads * head_dim, hidden}});
    shapes.push_back({p + "self_attn.v_proj.weight", {kv_heads * head_dim, hidden}});
    shapes.push_back({p + "self_attn.o_proj.weight", {hidden, heads * head_dim}});
    shapes.push_back({p + "post_attention_layernorm.weight", {hidden}});
    shapes.push_back({p + "mlp.gate_proj.weight", {inter, hidden}});
    shapes.push_back({p + "mlp.up_proj.weight", {inter, hidden}});
    shapes.push_back({p + "mlp.down_proj.weight", {hidden, inter}});
  }
  shapes.push_back({"model.norm.weight", {hidden}});
  if (!cfg.value("tie_word_embeddings", false))
    shapes.push_back({"lm_head.weight", {vocab, hidden}});
  std::vector<StTensor> out;
  for (size_t k = 0; k < shapes.size(); ++k) {
    int64_t n = 1;
    for (int64_t d : shapes[k].second) n *= d;
    std::vector<float> v(size_t(n), 0.0f);
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = uniform_pm1(seed, k, uint64_t(i));
    out.push_back(make_tensor(shapes[k].first, t, shapes[k].second, v));
  }
  return out;
}

// A small valid LlamaForCausalLM config.json (GQA 2, head_dim 4).
inline nlohmann::json small_llama_config(bool tied = false) {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", 40},
          {"hidden_size", 16},
          {"intermediate_size", 24},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},
          {"max_position_embeddings", 64},
          {"tie_word_embeddings", tied},
          {"bos_token_id", 1},
          {"eos_token_id", 2},
          {"torch_dtype", "float32"}};
}

// Writes config.json and the weights into `dir`: one model.safetensors, or
// `shards` files with model.safetensors.index.json (tensors dealt round-robin).
inline void write_checkpoint(const std::string& dir, const nlohmann::json& cfg,
                             const std::vector<StTensor>& tensors, int shards = 1) {
  std::filesystem::create_directories(dir);
  write_file(dir + "/config.json", cfg.dump(2));
  if (shards <= 1) {
    write_safetensors(dir + "/model.safetensors", tensors);
    return;
  }
  std::vector<std::vector<StTensor>> parts(static_cast<size_t>(shards));
  nlohmann::json index = {{"metadata", {{"total_size", 0}}},
                          {"weight_map", nlohmann::json::object()}};
  for (size_t k = 0; k < tensors.size(); ++k) {
    const size_t s = k % size_t(shards);
    parts[s].push_back(tensors[k]);
    index["weight_map"][tensors[k].name] =
        "model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(shards) + ".safetensors";
  }
  for (size_t s = 0; s < parts.size(); ++s)
    write_safetensors(dir + "/model-0000" + std::to_string(s + 1) + "-of-0000" +
                          std::to_string(shards) + ".safetensors",
                      parts[s]);
  write_file(dir + "/model.safetensors.index.json", index.dump(2));
}

// A fresh empty directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / ("hayate_" + tag + "_XXXXXX")).string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed: " + pattern);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace hayate::test
