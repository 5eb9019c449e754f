// Reading the Hugging Face fixtures made by tools/make_golden.py.
#pragma once

#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/check.h"

namespace hayate::golden {

inline std::string data_dir() { return std::string(HAYATE_SOURCE_DIR) + "/tests/golden/data"; }

// Checkpoints written by tools/make_golden.py (directories under data/).
inline const std::vector<std::string>& checkpoints() {
  static const std::vector<std::string> names = {
      "gqa1_untied_bf16", "gqa2_tied_fp16_sharded", "gqa4_headdim_bf16",
      "gqa2_f32_norope_scaling", "realvocab_tied_bf16"};
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

}  // namespace hayate::golden
