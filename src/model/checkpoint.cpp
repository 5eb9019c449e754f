// Hugging Face checkpoint directories: model.safetensors, or shards listed in
// model.safetensors.index.json. The loop at the bottom is the one load-time
// chokepoint: each of our weights takes its HF tensors through take(), which
// checks name, dtype and shape, and fused weights list their parts' rows.
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

  // The chokepoint: the tensor `name`, with a dtype hayate reads and exactly
  // the shape config.json implies.
  const SafetensorsTensor& take(const std::string& name, const std::vector<int64_t>& shape) {
    auto it = tensors_.find(name);
    HAYATE_CHECK(it != tensors_.end(), source_, ": missing tensor '", name, "' (expected shape ",
                 shape_str(shape), ")");
    const LoadedFile& f = files_[it->second.file];
    const SafetensorsTensor& t = f.st.tensors[it->second.tensor];
    const std::string& file = f.path;
    HAYATE_CHECK(t.dtype.has_value(), file, ": tensor '", name, "' has unsupported dtype ",
                 t.dtype_name, " (hayate reads F32, F16, BF16)");
    HAYATE_CHECK(t.shape == shape, file, ": tensor '", name, "' has shape ", shape_str(t.shape),
                 " but config.json implies ", shape_str(shape));
    taken_.insert(name);
    return t;
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

}  // namespace

void load_checkpoint_weights(const std::string& dir, Model& m) {
  Checkpoint ck(dir);
  for (WeightSpec& spec : weight_layout(m.config)) {
    WeightSource w = std::move(spec.weight);
    const bool matrix = w.shape.size() == 2;
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
  ck.check_all_taken(m.config.tie_word_embeddings);
  m.files = ck.mapped();
}

}  // namespace hayate
