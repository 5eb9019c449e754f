// Reading the Hugging Face fixtures made by tools/make_golden.py.
#pragma once

#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/check.h"
#include "engine/engine.h"

namespace hayate::golden {

inline std::string data_dir() { return std::string(HAYATE_SOURCE_DIR) + "/tests/golden/data"; }

// Checkpoints written by tools/make_golden.py (directories under data/).
inline const std::vector<std::string>& checkpoints() {
  static const std::vector<std::string> names = {
      "gqa1_untied_bf16", "gqa2_tied_fp16_sharded", "gqa4_headdim_bf16",
      "gqa2_f32_norope_scaling", "realvocab_tied_bf16", "hd64_gqa2_fp16",
      "hd128_gqa4_tied_bf16", "qwen2_bias_gqa7_tied_bf16", "qwen3_qknorm_hd128_bf16",
      "mistral_hd64_gqa4_fp16"};
  return names;
}

// The checkpoints whose head size the CUDA backend's kernels take (32, 64, 128):
// Llama's, and Qwen2's (q/k/v biases, 7 heads per kv head), Qwen3's (q/k norms), Mistral's.
inline const std::vector<std::string>& cuda_checkpoints() {
  static const std::vector<std::string> names = {
      "hd64_gqa2_fp16", "hd128_gqa4_tied_bf16", "qwen2_bias_gqa7_tied_bf16",
      "qwen3_qknorm_hd128_bf16", "mistral_hd64_gqa4_fp16"};
  return names;
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  HAYATE_CHECK(f.good(), path, ": cannot open");
  return nlohmann::json::parse(f);
}

inline std::vector<float> read_f32(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  HAYATE_CHECK(f.good(), path, ": cannot open");
  const auto bytes = size_t(f.tellg());
  std::vector<float> v(bytes / sizeof(float));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
  return v;
}

// Norm-wise relative error ||a - b|| / ||b|| (b the reference).
inline double rel_err(const float* a, const float* b, size_t n) {
  double d = 0, r = 0;
  for (size_t i = 0; i < n; ++i) {
    d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    r += double(b[i]) * b[i];
  }
  return std::sqrt(d / r);
}

// The fp32 logits [prompt, vocab] of every prompt position, read the way
// perplexity reads them: one prompt-only request with prompt_logits.
inline std::vector<float> prompt_logits(Engine& engine, const std::vector<int32_t>& prompt) {
  const size_t V = size_t(engine.backend().config().vocab_size);
  std::vector<float> all(prompt.size() * V);
  size_t got = 0;
  std::string error;
  EngineRequest r;
  r.prompt = prompt;
  r.max_tokens = 0;
  r.prompt_logits = true;
  r.on_event = [&](const EngineEvent& e) {
    HAYATE_CHECK(size_t(e.prompt_logits_pos) * V == got, "prompt logits out of order");
    std::copy(e.prompt_logits.begin(), e.prompt_logits.end(), all.begin() + ptrdiff_t(got));
    got += e.prompt_logits.size();
    if (e.finished) error = e.error;
  };
  engine.submit(std::move(r));
  engine.run_until_idle();
  HAYATE_CHECK(error.empty(), error);
  HAYATE_CHECK(got == all.size(), "prompt logits: ", got / V, " of ", prompt.size(), " rows");
  return all;
}

}  // namespace hayate::golden
