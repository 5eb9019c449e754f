#include "model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/check.h"

namespace hayate {
namespace {

using nlohmann::json;

// A header is three levels deep ({name: {shape: [..]}}), a config.json a few; refusing
// deeper nesting early bounds the parser's work on hostile input.
constexpr int kMaxDepth = 16;

// Parses the header text, rejecting duplicate keys in any object:
// nlohmann::json would silently keep the last one, and a duplicated tensor
// name is exactly the ambiguity the spec forbids.
json parse_strict(const char* begin, const char* end, const std::string& source, const char* what) {
  std::vector<std::unordered_set<std::string>> keys;  // one set per open object
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        HAYATE_CHECK(depth < kMaxDepth, source, ": ", what, " is nested deeper than ", kMaxDepth,
                     " levels");
        if (event == json::parse_event_t::object_start) keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        keys.pop_back();
        break;
      case json::parse_event_t::key: {
        const std::string& k = parsed.get_ref<const std::string&>();
        HAYATE_CHECK(keys.back().insert(k).second, source, ": duplicate key '", k, "' in the ",
                     what);
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(begin, end, callback);
  } catch (const json::exception& e) {
    fail(cat(source, ": ", what, " is not valid UTF-8 JSON: ", e.what()));
  }
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A non-negative integer that fits int64 (shape entries, offsets).
uint64_t get_index(const json& v, const std::string& what) {
  HAYATE_CHECK(
      v.is_number_unsigned() && v.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()),
      what, " must be a non-negative integer, got ", v.dump());
  return v.get<uint64_t>();
}

SafetensorsTensor parse_entry(const std::string& name, const json& info,
                              const std::string& source) {
  const std::string what = cat(source, ": tensor '", name, "'");
  HAYATE_CHECK(info.is_object(), what, ": entry must be an object");
  SafetensorsTensor t;
  t.name = name;

  auto dt = info.find("dtype");
  HAYATE_CHECK(dt != info.end() && dt->is_string(), what, ": missing string 'dtype'");
  t.dtype_name = dt->get<std::string>();
  const int bits = safetensors_dtype_bits(t.dtype_name);
  HAYATE_CHECK(bits > 0, what, ": unknown dtype '", t.dtype_name, "'");
  if (t.dtype_name == "F32") t.dtype = DType::F32;
  if (t.dtype_name == "F16") t.dtype = DType::F16;
  if (t.dtype_name == "BF16") t.dtype = DType::BF16;
  if (t.dtype_name == "F8_E4M3") t.dtype = DType::F8E4M3;

  auto sh = info.find("shape");
  HAYATE_CHECK(sh != info.end() && sh->is_array(), what, ": missing list 'shape'");
  // numel * bits, overflow-checked: a hostile shape must not wrap to a small size.
  uint64_t total_bits = uint64_t(bits);
  for (const json& d : *sh) {
    uint64_t n = get_index(d, what + ": shape entry");
    HAYATE_CHECK(!__builtin_mul_overflow(total_bits, n, &total_bits), what, ": shape overflows (",
                 sh->dump(), ")");
    t.shape.push_back(int64_t(n));
  }
  HAYATE_CHECK(total_bits % 8 == 0, what, ": size of ", sh->dump(), " x ", t.dtype_name,
               " is not a whole number of bytes");

  auto off = info.find("data_offsets");
  HAYATE_CHECK(off != info.end() && off->is_array() && off->size() == 2, what,
               ": 'data_offsets' must be [begin, end]");
  t.begin = get_index((*off)[0], what + ": data_offsets begin");
  t.end = get_index((*off)[1], what + ": data_offsets end");
  HAYATE_CHECK(t.begin <= t.end, what, ": data_offsets [", t.begin, ", ", t.end,
               "] end before begin");
  HAYATE_CHECK(t.end - t.begin == total_bits / 8, what, ": data_offsets [", t.begin, ", ", t.end,
               "] hold ", t.end - t.begin, " bytes but shape ", sh->dump(), " x ", t.dtype_name,
               " needs ", total_bits / 8);
  return t;
}

}  // namespace

int safetensors_dtype_bits(const std::string& d) {
  static constexpr std::pair<std::string_view, int> kBits[] = {
      {"BOOL", 8},    {"U8", 8},   {"I8", 8},      {"F8_E5M2", 8}, {"F8_E4M3", 8},
      {"F8_E8M0", 8}, {"F4", 4},   {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"I16", 16},
      {"U16", 16},    {"F16", 16}, {"BF16", 16},   {"I32", 32},    {"U32", 32},
      {"F32", 32},    {"I64", 64}, {"U64", 64},    {"F64", 64},    {"C64", 64}};
  for (const auto& [name, bits] : kBits)
    if (name == d) return bits;
  return 0;
}

json parse_json_strict(std::string_view text, const std::string& source) {
  return parse_strict(text.data(), text.data() + text.size(), source, "file");
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = index.find(name);
  return it == index.end() ? nullptr : &tensors[it->second];
}

SafetensorsFile parse_safetensors(std::span<const uint8_t> bytes, const std::string& source) {
  HAYATE_CHECK(bytes.size() >= 8, source, ": file of ", bytes.size(),
               " bytes is too short for a safetensors header");
  const uint64_t n = read_u64_le(bytes.data());
  HAYATE_CHECK(n <= kMaxSafetensorsHeader, source, ": header length ", n,
               " exceeds the 100 MB limit");
  HAYATE_CHECK(n <= bytes.size() - 8, source, ": header length ", n, " runs past the end of the ",
               bytes.size(), "-byte file");
  HAYATE_CHECK(n >= 2 && bytes[8] == '{', source, ": header must be a JSON object");
  const char* text = reinterpret_cast<const char*>(bytes.data() + 8);
  json header = parse_strict(text, text + n, source, "header");
  HAYATE_CHECK(header.is_object(), source, ": header must be a JSON object");

  const std::span<const uint8_t> data = bytes.subspan(8 + n);
  SafetensorsFile f;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      HAYATE_CHECK(info.is_object(), source, ": __metadata__ must be an object");
      for (const auto& [k, v] : info.items()) {
        HAYATE_CHECK(v.is_string(), source, ": __metadata__ value of '", k, "' must be a string");
        f.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    f.tensors.push_back(parse_entry(name, info, source));
  }

  // The tensors must tile the data section exactly: sorted by offset, each
  // begins where the previous ended (no overlap, no hole) and the last ends
  // at the end of the file.
  std::vector<size_t> order(f.tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& x = f.tensors[a];
    const auto& y = f.tensors[b];
    return x.begin != y.begin ? x.begin < y.begin : x.end < y.end;
  });
  uint64_t expected = 0;
  for (size_t i : order) {
    const SafetensorsTensor& t = f.tensors[i];
    HAYATE_CHECK(t.end <= data.size(), source, ": tensor '", t.name, "' data_offsets [", t.begin,
                 ", ", t.end, "] run past the ", data.size(), "-byte data section");
    HAYATE_CHECK(t.begin >= expected, source, ": tensor '", t.name, "' overlaps the previous ",
                 "tensor (begins at ", t.begin, ", previous ends at ", expected, ")");
    HAYATE_CHECK(t.begin == expected, source, ": tensor '", t.name, "' leaves a hole in the ",
                 "data section (begins at ", t.begin, ", previous ends at ", expected, ")");
    expected = t.end;
  }
  HAYATE_CHECK(expected == data.size(), source, ": tensors cover ", expected, " of the ",
               data.size(), " bytes of the data section");

  for (size_t i = 0; i < f.tensors.size(); ++i) {
    SafetensorsTensor& t = f.tensors[i];
    t.data = data.subspan(t.begin, t.end - t.begin);
    f.index.emplace(t.name, i);
  }
  return f;
}

}  // namespace hayate
