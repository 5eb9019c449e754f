// A validated view of one .safetensors file (https://github.com/huggingface/safetensors):
//   [u64 little-endian N][N bytes of UTF-8 JSON header][data section]
// The header maps tensor names to {dtype, shape, data_offsets [begin, end)}
// relative to the data section, plus an optional "__metadata__" string map.
// Everything the spec requires is checked before any byte of data is
// handed out, so a hostile file yields an Error, never an out-of-bounds read.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/dtype.h"

namespace hayate {

struct SafetensorsTensor {
  std::string name;
  std::string dtype_name;      // as in the file: "BF16", "F32", "I64", ...
  std::optional<DType> dtype;  // set for F32, F16, BF16, F8_E4M3 (what hayate reads)
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // offsets within the data section
  std::span<const uint8_t> data;
};

struct SafetensorsFile {
  std::vector<SafetensorsTensor> tensors;  // sorted by name
  std::map<std::string, std::string> metadata;
  std::unordered_map<std::string, size_t> index;  // name -> position in tensors

  const SafetensorsTensor* find(const std::string& name) const;
};

// Largest header accepted, as the reference implementation does (100 MB).
inline constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

// Parses and validates `bytes` (a whole file). `source` names the file in
// errors. The returned spans point into `bytes`.
SafetensorsFile parse_safetensors(std::span<const uint8_t> bytes, const std::string& source);

// Parses JSON text, rejecting duplicate keys (nlohmann::json would silently
// keep the last) and nesting deeper than 16 levels; Error names `source`.
nlohmann::json parse_json_strict(std::string_view text, const std::string& source);

// Size in bits of one element of a known safetensors dtype, 0 if unknown.
int safetensors_dtype_bits(const std::string& dtype_name);

}  // namespace hayate
