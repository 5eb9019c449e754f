// Hugging Face checkpoint directories: model.safetensors, or shards listed in
// model.safetensors.index.json. The loop at the bottom is the one load-time
// chokepoint: each of our weights takes its HF tensors through take(), which
// checks name, dtype and shape, and fused weights list their parts' rows.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/mapped_file.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace hayate {
namespace {

namespace fs = std::filesystem;

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += cat(i ? ", " : "", s[i]);
  return out + "]";
}

// Tensors the model computes rather than loads: older exports saved the
// rotary embedding's buffers. HF and vLLM skip them; so do we.
bool is_ignored_buffer(const std::string& name) {
  for (const char* suffix :
       {"rotary_emb.inv_freq", "rotary_emb.cos_cached", "rotary_emb.sin_cached"})
    if (name.ends_with(suffix)) return true;
  return false;
}

struct LoadedFile {
  std::string path;
  std::shared_ptr<MappedFile> mapped;
  SafetensorsFile st;
};

// Indices, not pointers: files_ may reallocate while shards are opened.
struct TensorRef {
  size_t file;
  size_t tensor;
};

class Checkpoint {
 public:
  explicit Checkpoint(const std::string& dir) : dir_(dir) {
    const std::string index = (fs::path(dir) / "model.safetensors.index.json").string();
    const std::string single = (fs::path(dir) / "model.safetensors").string();
    std::error_code ec;
    if (fs::exists(index, ec)) {
      load_index(index);
    } else {
      HAYATE_CHECK(fs::exists(single, ec), dir,
                   ": no model.safetensors nor model.safetensors.index.json");
      source_ = single;
      open(single);
    }
  }

  // What a tensor may be stored as: a dense weight or scale (F32, F16,
  // BF16), or an FP8 linear weight (F8_E4M3).
  enum class Stored { kDense, kFp8 };

  // The chokepoint: the tensor `name`, with a dtype hayate reads as `stored`
  // and exactly the shape config.json implies (or one of `alt` shapes).
  const SafetensorsTensor& take(const std::string& name, const std::vector<int64_t>& shape,
                                Stored stored = Stored::kDense,
                                const std::vector<std::vector<int64_t>>& alt = {}) {
    auto it = tensors_.find(name);
    HAYATE_CHECK(it != tensors_.end(), source_, ": missing tensor '", name, "' (expected shape ",
                 shape_str(shape), ")");
    const LoadedFile& f = files_[it->second.file];
    const SafetensorsTensor& t = f.st.tensors[it->second.tensor];
    const std::string& file = f.path;
    HAYATE_CHECK(t.dtype_name != "F8_E5M2", file, ": tensor '", name,
                 "' is F8_E5M2: hayate reads FP8 weights as F8_E4M3 only");
    if (stored == Stored::kFp8) {
      HAYATE_CHECK(t.dtype == DType::F8E4M3, file, ": tensor '", name, "' has dtype ",
                   t.dtype_name, " but config.json's quantization_config makes it an FP8 ",
                   "(F8_E4M3) weight");
    } else {
      HAYATE_CHECK(t.dtype.has_value() && t.dtype != DType::F8E4M3, file, ": tensor '", name,
                   "' has unsupported dtype ", t.dtype_name,
                   t.dtype == DType::F8E4M3
                       ? " (F8_E4M3 where config.json's quantization_config quantizes nothing: "
                         "hayate runs FP8 only in the layers' linear weights, not in ignored "
                         "modules, embeddings, norms or lm_head)"
                       : " (hayate reads F32, F16, BF16, and F8_E4M3 for FP8 linear weights)");
    }
    bool shape_ok = t.shape == shape;
    for (const auto& a : alt) shape_ok = shape_ok || t.shape == a;
    HAYATE_CHECK(shape_ok, file, ": tensor '", name, "' has shape ", shape_str(t.shape),
                 alt.empty() ? " but config.json implies " : " but expected ", shape_str(shape),
                 alt.empty() ? "" : cat(" or ", shape_str(alt[0])));
    taken_.insert(name);
    return t;
  }

  bool has(const std::string& name) const { return tensors_.count(name) > 0; }

  // The values of a scale tensor (`count` of them, [] or [1] when count is
  // 1, else [count, 1]), each finite and positive: a load error names the
  // tensor otherwise.
  std::vector<float> scales(const std::string& name, int64_t count) {
    const SafetensorsTensor& t =
        count == 1 ? take(name, {}, Stored::kDense, {{1}}) : take(name, {count, 1});
    std::vector<uint8_t> bytes(t.data.begin(), t.data.end());  // aligned copy
    std::vector<float> out(static_cast<size_t>(count));
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = load_as_f32(bytes.data(), *t.dtype, i);
      HAYATE_CHECK(std::isfinite(out[i]) && out[i] > 0.0f, source_, ": scale tensor '", name,
                   "' holds ", out[i], " at ", i, " (scales must be finite and positive)");
    }
    return out;
  }

  // Every tensor of the files must have been taken, apart from computed
  // buffers and, with tied embeddings, lm_head.weight (HF ties it to the
  // embedding and vLLM skips it). Anything else means config.json and the
  // weights disagree (e.g. more layers in the file than in the config); HF
  // would only warn, but running such a model silently is never what the
  // user wants, so it is an error.
  void check_all_taken(bool tied) const {
    for (const auto& f : files_)
      for (const SafetensorsTensor& t : f.st.tensors) {
        if (taken_.count(t.name) || is_ignored_buffer(t.name)) continue;
        if (tied && t.name == "lm_head.weight") continue;
        fail(cat(f.path, ": unexpected tensor '", t.name,
                 "' (does config.json describe this checkpoint?)"));
      }
  }

  std::vector<std::shared_ptr<MappedFile>> mapped() const {
    std::vector<std::shared_ptr<MappedFile>> out;
    for (const auto& f : files_) out.push_back(f.mapped);
    return out;
  }

 private:
  size_t open(const std::string& path) {
    LoadedFile f;
    f.path = path;
    f.mapped = std::make_shared<MappedFile>(path);
    f.st = parse_safetensors(f.mapped->bytes(), path);
    files_.push_back(std::move(f));
    const size_t id = files_.size() - 1;
    const auto& tensors = files_[id].st.tensors;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const SafetensorsTensor& t = tensors[i];
      auto [it, fresh] = tensors_.emplace(t.name, TensorRef{id, i});
      HAYATE_CHECK(fresh, path, ": tensor '", t.name, "' is also in ",
                   files_[it->second.file].path);
    }
    return id;
  }

  // weight_map {tensor: shard file}: each shard is opened once, and the map
  // must agree with the shards both ways.
  void load_index(const std::string& index_path) {
    source_ = index_path;
    nlohmann::json j = parse_json_strict(read_text_file(index_path), index_path);
    HAYATE_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(),
                 index_path, ": expected an object with a 'weight_map' object");
    std::map<std::string, std::string> wanted;  // tensor -> shard (sorted: stable file order)
    std::map<std::string, size_t> shard_ids;
    for (const auto& [name, file] : j["weight_map"].items()) {
      HAYATE_CHECK(file.is_string(), index_path, ": weight_map entry '", name,
                   "' must be a file name");
      const std::string shard = file.get<std::string>();
      // A shard is a plain file name next to the index: no path can escape
      // the checkpoint directory.
      HAYATE_CHECK(!shard.empty() && shard.find('/') == std::string::npos &&
                       shard.find('\\') == std::string::npos && shard != "." && shard != "..",
                   index_path, ": weight_map entry '", name, "' names '", shard,
                   "', not a file in the checkpoint directory");
      wanted[name] = shard;
      shard_ids.emplace(shard, 0);
    }
    for (auto& [shard, id] : shard_ids) id = open((fs::path(dir_) / shard).string());
    for (const auto& [name, shard] : wanted) {
      auto it = tensors_.find(name);
      HAYATE_CHECK(it != tensors_.end(), index_path, ": tensor '", name, "' is not in ", shard);
      HAYATE_CHECK(it->second.file == shard_ids[shard], index_path, ": tensor '", name,
                   "' is listed in ", shard, " but found in ", files_[it->second.file].path);
    }
    for (const auto& [name, ref] : tensors_)
      HAYATE_CHECK(wanted.count(name), files_[ref.file].path, ": tensor '", name,
                   "' is not listed in ", index_path);
  }

  std::string dir_;
  std::string source_;  // the index, or model.safetensors: where a missing tensor was sought
  std::vector<LoadedFile> files_;
  std::unordered_map<std::string, TensorRef> tensors_;
  std::unordered_set<std::string> taken_;
};

// One fused weight's parts as FP8 (quant.h): each part's e4m3 data, its
// scales expanded per row, and the largest static input scale.
void take_fp8(Checkpoint& ck, const QuantConfig& q, const WeightSpec& spec, WeightSource& w) {
  w.dtype = DType::F8E4M3;
  w.fp8 = true;
  for (size_t p = 0; p < spec.hf_names.size(); ++p) {
    const std::string& name = spec.hf_names[p];
    const std::string module = name.substr(0, name.size() - std::string(".weight").size());
    const int64_t rows = spec.part_rows[p];
    w.parts.push_back(ck.take(name, {rows, w.shape[1]}, Checkpoint::Stored::kFp8).data);
    const std::vector<float> s = ck.scales(module + ".weight_scale", q.channel_weights ? rows : 1);
    for (int64_t r = 0; r < rows; ++r) w.scales.push_back(s[q.channel_weights ? size_t(r) : 0]);
    if (q.static_inputs)
      w.input_scale = std::max(w.input_scale, ck.scales(module + ".input_scale", 1)[0]);
  }
}

}  // namespace

void load_checkpoint_weights(const std::string& dir, Model& m) {
  Checkpoint ck(dir);
  const QuantConfig& q = m.quant;
  for (WeightSpec& spec : weight_layout(m.config)) {
    WeightSource w = std::move(spec.weight);
    const bool matrix = w.shape.size() == 2;
    // FP8 applies to a layer's linear weights whose modules are not ignored;
    // a fused weight's parts must agree.
    size_t quantized = 0;
    if (q.fp8() && is_layer_linear(w.name))
      for (const std::string& n : spec.hf_names)
        quantized += q.ignored(n.substr(0, n.size() - std::string(".weight").size())) ? 0 : 1;
    HAYATE_CHECK(quantized == 0 || quantized == spec.hf_names.size(), dir,
                 ": quantization_config ignores some of the parts of ", w.name, " (",
                 spec.hf_names[0], " ...) but not all; hayate fuses them into one FP8 weight");
    if (quantized > 0) {
      take_fp8(ck, q, spec, w);
      m.weights.push_back(std::move(w));
      continue;
    }
    for (size_t p = 0; p < spec.hf_names.size(); ++p) {
      std::vector<int64_t> shape{spec.part_rows[p]};
      if (matrix) shape.push_back(w.shape[1]);
      const SafetensorsTensor& t = ck.take(spec.hf_names[p], shape);
      if (p == 0) w.dtype = *t.dtype;
      HAYATE_CHECK(*t.dtype == w.dtype, dir, ": tensor '", spec.hf_names[p], "' is ", t.dtype_name,
                   " but '", spec.hf_names[0], "' is ", dtype_name(w.dtype), "; the parts of ",
                   w.name, " must share a dtype");
      w.parts.push_back(t.data);
    }
    m.weights.push_back(std::move(w));
  }
  // The KV cache's per-layer scales (compressed-tensors kv_cache_scheme):
  // taken wherever present, required where the config declares them.
  for (int l = 0; l < m.config.num_layers; ++l) {
    const std::string p = cat("model.layers.", l, ".self_attn.");
    if (!q.kv_scales && !ck.has(p + "k_scale") && !ck.has(p + "v_scale")) continue;
    m.k_scales.push_back(ck.scales(p + "k_scale", 1)[0]);
    m.v_scales.push_back(ck.scales(p + "v_scale", 1)[0]);
  }
  HAYATE_CHECK(m.k_scales.empty() || int(m.k_scales.size()) == m.config.num_layers, dir,
               ": self_attn.k_scale / v_scale are present for ", m.k_scales.size(), " of ",
               m.config.num_layers, " layers");
  ck.check_all_taken(m.config.tie_word_embeddings);
  m.files = ck.mapped();
}

}  // namespace hayate
