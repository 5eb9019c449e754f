// quantization_config parsing (quant.h lists what is accepted).
#include "model/quant.h"

#include <regex>

#include <nlohmann/json.hpp>

#include "core/check.h"

namespace hayate {
namespace {

using nlohmann::json;

// A string field of an object, or "" when absent or null.
std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

std::vector<std::string> strings(const json& j, const char* key, const std::string& where) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return out;
  HAYATE_CHECK(it->is_array(), where, ": '", key, "' must be a list of strings");
  for (const json& v : *it) {
    HAYATE_CHECK(v.is_string(), where, ": '", key, "' must be a list of strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

// An 8-bit symmetric float scheme (weights, activations or the KV cache of
// compressed-tensors); `what` names it in errors.
void check_float8(const json& s, const std::string& what) {
  HAYATE_CHECK(s.is_object(), what, " must be an object");
  const std::string type = str(s, "type"), bits = str(s, "num_bits");
  HAYATE_CHECK(type == "float" && bits == "8", what, " is type '", type, "' with num_bits ", bits,
               ": hayate runs 8-bit float (FP8 e4m3) only");
  auto sym = s.find("symmetric");
  HAYATE_CHECK(sym == s.end() || sym->is_null() || (sym->is_boolean() && sym->get<bool>()), what,
               " is asymmetric: hayate runs symmetric FP8 only");
  for (const char* key : {"group_size", "block_structure"})
    HAYATE_CHECK(str(s, key).empty(), what, " sets '", key, "' (", str(s, key),
                 "): block- and group-wise FP8 are not supported (channel or tensor scales only)");
}

// The ignore list's "re:" entries must be valid regular expressions.
std::vector<std::string> ignore_list(const json& q, const char* key, const std::string& where) {
  std::vector<std::string> out = strings(q, key, where);
  for (const std::string& p : out) {
    if (p.rfind("re:", 0) != 0) continue;
    try {
      std::regex re(p.substr(3));
    } catch (const std::regex_error&) {
      fail(cat(where, ": '", key, "' entry '", p, "' is not a valid regular expression"));
    }
  }
  return out;
}

QuantConfig compressed_tensors(const json& q, const std::string& where) {
  QuantConfig c;
  c.method = QuantConfig::Method::kCompressedTensors;
  const std::string format = str(q, "format");
  HAYATE_CHECK(format == "float-quantized", where, ": compressed-tensors format '", format,
               "' is not supported (hayate loads \"float-quantized\" FP8 checkpoints)");
  auto groups = q.find("config_groups");
  HAYATE_CHECK(groups != q.end() && groups->is_object() && groups->size() == 1, where,
               ": compressed-tensors needs exactly one entry in 'config_groups'");
  const json& g = groups->begin().value();
  const std::string gw = cat(where, ": config_groups.", groups->begin().key());
  HAYATE_CHECK(g.is_object(), gw, " must be an object");
  const std::vector<std::string> targets = strings(g, "targets", gw);
  HAYATE_CHECK(targets.size() == 1 && targets[0] == "Linear", gw,
               ": targets must be [\"Linear\"] (hayate quantizes every linear layer but those "
               "in 'ignore')");
  auto w = g.find("weights");
  HAYATE_CHECK(w != g.end() && w->is_object(), gw, ": missing 'weights'");
  check_float8(*w, gw + ".weights");
  const std::string ws = str(*w, "strategy");
  HAYATE_CHECK(ws == "channel" || ws == "tensor", gw, ".weights: strategy '", ws,
               "' is not supported (channel or tensor)");
  HAYATE_CHECK(str(*w, "dynamic") != "true", gw, ".weights: dynamic weight scales are not supported");
  c.channel_weights = ws == "channel";
  auto a = g.find("input_activations");
  HAYATE_CHECK(a != g.end() && a->is_object(), gw,
               ": input_activations is null: weight-only FP8 is not supported (hayate runs W8A8)");
  check_float8(*a, gw + ".input_activations");
  const std::string as = str(*a, "strategy"), dyn = str(*a, "dynamic");
  if (dyn == "true") {
    HAYATE_CHECK(as == "token", gw, ".input_activations: dynamic strategy '", as,
                 "' is not supported (dynamic activations are quantized per token)");
  } else {
    HAYATE_CHECK(as == "tensor", gw, ".input_activations: static strategy '", as,
                 "' is not supported (static activations have a per-tensor input_scale)");
    c.static_inputs = true;
  }
  auto out = g.find("output_activations");
  HAYATE_CHECK(out == g.end() || out->is_null(), gw, ": output_activations are not supported");
  c.ignore = ignore_list(q, "ignore", where);
  if (auto kv = q.find("kv_cache_scheme"); kv != q.end() && !kv->is_null()) {
    check_float8(*kv, where + ": kv_cache_scheme");
    const std::string ks = str(*kv, "strategy");
    HAYATE_CHECK(ks == "tensor", where, ": kv_cache_scheme strategy '", ks,
                 "' is not supported (per-tensor k_scale / v_scale)");
    c.kv_scales = true;
  }
  return c;
}

QuantConfig fp8(const json& q, const std::string& where) {
  QuantConfig c;
  c.method = QuantConfig::Method::kFp8;
  auto blocks = q.find("weight_block_size");
  HAYATE_CHECK(blocks == q.end() || blocks->is_null(), where, ": block-wise FP8 (weight_block_size ",
               blocks == q.end() ? "" : blocks->dump(),
               ") is not supported (per-tensor or per-channel scales only)");
  const std::string fmt = str(q, "fmt");
  HAYATE_CHECK(fmt.empty() || fmt == "e4m3", where, ": fp8 fmt '", fmt,
               "' is not supported (e4m3 only)");
  const std::string scheme = str(q, "activation_scheme");
  HAYATE_CHECK(scheme == "dynamic" || scheme == "static", where, ": activation_scheme '", scheme,
               "' (expected dynamic or static)");
  c.static_inputs = scheme == "static";
  c.ignore = ignore_list(q, "ignored_layers", where);
  for (const std::string& m : ignore_list(q, "modules_to_not_convert", where)) c.ignore.push_back(m);
  return c;
}

}  // namespace

bool QuantConfig::ignored(const std::string& module) const {
  for (const std::string& p : ignore) {
    if (p == module) return true;
    if (p.rfind("re:", 0) == 0 && std::regex_match(module, std::regex(p.substr(3)))) return true;
  }
  return false;
}

void check_fp8_capability(int major, int minor, const std::string& what) {
  HAYATE_CHECK(major * 10 + minor >= 89, "FP8 (", what,
               ") needs a GPU with FP8 tensor cores (sm_89 or newer); this one is sm_", major,
               minor);
}

std::string QuantConfig::describe() const {
  switch (method) {
    case Method::kNone: return "none";
    case Method::kOnLoad:
      return "fp8 (--quantization fp8): e4m3 weights per channel, quantized at load; "
             "activations per token";
    case Method::kCompressedTensors:
    case Method::kFp8:
      return cat("fp8 (", method == Method::kFp8 ? "fp8" : "compressed-tensors",
                 "): e4m3 weights per ", channel_weights ? "channel" : "tensor", ", activations ",
                 static_inputs ? "with static input scales" : "per token");
  }
  return "?";
}

QuantConfig parse_quant_config(const json& q, const std::string& source) {
  if (q.is_null()) return {};
  const std::string where = cat(source, ": quantization_config");
  HAYATE_CHECK(q.is_object(), where, " must be an object");
  const std::string method = str(q, "quant_method");
  if (method == "compressed-tensors") return compressed_tensors(q, where);
  if (method == "fp8") return fp8(q, where);
  fail(cat(where, ": quant_method '", method,
           "' is not supported (hayate loads FP8 checkpoints: compressed-tensors float-quantized "
           "or fp8; for fp16/bf16 checkpoints --quantization fp8 quantizes at load)"));
}

}  // namespace hayate
