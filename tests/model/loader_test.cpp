// Loading checkpoint directories written by st_writer.h: weight order,
// fusion, dtype conversion, shards, and each kind of bad input.
#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/rng.h"
#include "model/expect_error.h"
#include "model/model.h"
#include "model/st_writer.h"

namespace hayate {
namespace {

using nlohmann::json;
using test::StTensor;
using test::TempDir;

Model load(const std::string& dir) {
  return load_model(dir, 0, "/nonexistent-assets");
}

std::vector<float> to_f32(const Model& m, const std::string& name) {
  const WeightSource& w = m.weight(name);
  std::vector<float> v(size_t(w.numel()));
  weight_to_f32(m, w, v);
  return v;
}

// Values of HF tensor number `k` in llama_tensors' order, as written in `t`.
std::vector<float> source_values(const StTensor& s, DType t) {
  std::vector<float> v(s.data.size() / dtype_size(t));
  for (size_t i = 0; i < v.size(); ++i) v[i] = load_as_f32(s.data.data(), t, i);
  return v;
}

const StTensor& find(const std::vector<StTensor>& ts, const std::string& name) {
  for (const StTensor& t : ts)
    if (t.name == name) return t;
  throw std::runtime_error("no tensor " + name);
}

std::vector<StTensor> without(std::vector<StTensor> ts, const std::string& name) {
  std::erase_if(ts, [&](const StTensor& t) { return t.name == name; });
  return ts;
}

class LoaderDtype : public ::testing::TestWithParam<DType> {};

TEST_P(LoaderDtype, LoadsFusesAndConvertsEveryWeight) {
  const DType dt = GetParam();
  TempDir dir("load");
  const json cfg = test::small_llama_config();
  const std::vector<StTensor> ts = test::llama_tensors(cfg, dt, 7);
  test::write_checkpoint(dir.path(), cfg, ts);
  const Model m = load(dir.path());

  EXPECT_EQ(m.tokenizer_dir, dir.path());
  EXPECT_FALSE(m.is_dummy());
  ASSERT_EQ(m.files.size(), 1u);
  std::vector<std::string> names;
  for (const WeightSource& w : m.weights) names.push_back(w.name);
  std::vector<std::string> expected{"embed"};
  for (int l = 0; l < 2; ++l)
    for (const char* n : {"attn_norm", "wqkv", "wo", "ffn_norm", "w_gate_up", "w_down"})
      expected.push_back("layers." + std::to_string(l) + "." + n);
  expected.push_back("final_norm");
  expected.push_back("lm_head");
  EXPECT_EQ(names, expected);

  for (const WeightSource& w : m.weights) EXPECT_EQ(w.dtype, dt) << w.name;
  // q 16 rows + k 8 + v 8, each of hidden 16; gate 24 + up 24.
  const WeightSource& qkv = m.weight("layers.1.wqkv");
  EXPECT_EQ(qkv.shape, (std::vector<int64_t>{32, 16}));
  ASSERT_EQ(qkv.parts.size(), 3u);
  EXPECT_EQ(qkv.parts[1].size(), 8u * 16u * dtype_size(dt));
  EXPECT_EQ(m.weight("layers.0.w_gate_up").shape, (std::vector<int64_t>{48, 16}));
  EXPECT_EQ(m.weight("layers.0.w_down").shape, (std::vector<int64_t>{16, 24}));
  EXPECT_EQ(&m.lm_head(), &m.weight("lm_head"));

  // The fused weight is q ; k ; v rows, values exactly as stored.
  std::vector<float> want;
  for (const char* p : {"q_proj", "k_proj", "v_proj"}) {
    const std::vector<float> v =
        source_values(find(ts, std::string("model.layers.1.self_attn.") + p + ".weight"), dt);
    want.insert(want.end(), v.begin(), v.end());
  }
  EXPECT_EQ(to_f32(m, "layers.1.wqkv"), want);
  EXPECT_EQ(to_f32(m, "final_norm"), source_values(find(ts, "model.norm.weight"), dt));
  // A stored value round-trips through the file's dtype within its precision.
  const float stored = to_f32(m, "embed")[5];
  const float written = uniform_pm1(7, 0, 5);
  EXPECT_NEAR(stored, written, dt == DType::F32 ? 0.0f : dt == DType::F16 ? 1e-3f : 8e-3f);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LoaderDtype,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16));

TEST(Loader, LoadsShardedCheckpointAndMergesGenerationConfig) {
  TempDir dir("shards");
  const json cfg = test::small_llama_config();
  const std::vector<StTensor> ts = test::llama_tensors(cfg, DType::BF16, 3);
  test::write_checkpoint(dir.path(), cfg, ts, 3);
  test::write_file(dir / "generation_config.json", std::string(R"({"eos_token_id": [2, 9, 2]})"));
  const Model m = load(dir.path());
  EXPECT_EQ(m.files.size(), 3u);
  EXPECT_EQ(m.config.eos_ids, (std::vector<int32_t>{2, 9}));
  // Parts of one fused weight come from different shards.
  EXPECT_EQ(to_f32(m, "layers.0.w_gate_up").size(), 48u * 16u);
  std::vector<float> want =
      source_values(find(ts, "model.layers.0.mlp.gate_proj.weight"), DType::BF16);
  const std::vector<float> up =
      source_values(find(ts, "model.layers.0.mlp.up_proj.weight"), DType::BF16);
  want.insert(want.end(), up.begin(), up.end());
  EXPECT_EQ(to_f32(m, "layers.0.w_gate_up"), want);
}

TEST(Loader, TiedEmbeddingsUseEmbedAndIgnoreStoredLmHead) {
  TempDir dir("tied");
  const json cfg = test::small_llama_config(true);
  std::vector<StTensor> ts = test::llama_tensors(cfg, DType::F32, 1);
  test::write_checkpoint(dir.path(), cfg, ts);
  Model m = load(dir.path());
  EXPECT_EQ(m.weights.back().name, "final_norm");
  EXPECT_EQ(&m.lm_head(), &m.weight("embed"));
  EXPECT_ERROR(m.weight("lm_head"), "no weight 'lm_head'");
  // Some exports store lm_head.weight even when tied: HF ties it anyway.
  ts.push_back(
      test::make_tensor("lm_head.weight", DType::F32, {40, 16}, std::vector<float>(640, 0.0f)));
  test::write_checkpoint(dir.path(), cfg, ts);
  EXPECT_EQ(load(dir.path()).weights.size(), m.weights.size());
}

TEST(Loader, IgnoresRotaryBuffers) {
  TempDir dir("rotary");
  const json cfg = test::small_llama_config();
  std::vector<StTensor> ts = test::llama_tensors(cfg, DType::F32, 1);
  ts.push_back(test::make_tensor("model.layers.0.self_attn.rotary_emb.inv_freq", DType::F32, {2},
                                 {1.0f, 0.01f}));
  test::write_checkpoint(dir.path(), cfg, ts);
  EXPECT_EQ(load(dir.path()).weights.size(), 15u);
}

TEST(Loader, RejectsMissingOrUnreadableFiles) {
  TempDir dir("missing");
  EXPECT_ERROR(load(dir / "nope"), "not a checkpoint directory");
  EXPECT_ERROR(load(dir.path()), "config.json: cannot open");
  const json cfg = test::small_llama_config();
  test::write_file(dir / "config.json", cfg.dump());
  EXPECT_ERROR(load(dir.path()), "no model.safetensors nor model.safetensors.index.json");
  std::filesystem::create_directory(dir / "model.safetensors");  // not a regular file
  EXPECT_ERROR(load(dir.path()), "model.safetensors: not a regular file");
  std::filesystem::remove(dir / "model.safetensors");
  test::write_file(dir / "model.safetensors", std::string("\x05\x00", 2));
  EXPECT_ERROR(load(dir.path()), "model.safetensors: file of 2 bytes is too short");
}

TEST(Loader, RejectsMalformedJsonFiles) {
  TempDir dir("badjson");
  const json cfg = test::small_llama_config();
  test::write_checkpoint(dir.path(), cfg, test::llama_tensors(cfg, DType::F32, 1));
  test::write_file(dir / "generation_config.json", std::string("{\"eos_token_id\": [2,"));
  EXPECT_ERROR(load(dir.path()), "generation_config.json: file is not valid UTF-8 JSON");
  test::write_file(dir / "generation_config.json", std::string(R"({"eos_token_id": 99})"));
  EXPECT_ERROR(load(dir.path()), "generation_config.json: field 'eos_token_id'");
  std::filesystem::remove(dir / "generation_config.json");
  test::write_file(dir / "config.json", std::string(R"({"vocab_size": 4, "vocab_size": 5})"));
  EXPECT_ERROR(load(dir.path()), "config.json: duplicate key 'vocab_size'");
}

TEST(Loader, RejectsMissingWeight) {
  TempDir dir("missw");
  const json cfg = test::small_llama_config();
  test::write_checkpoint(
      dir.path(), cfg,
      without(test::llama_tensors(cfg, DType::F32, 1), "model.layers.1.self_attn.v_proj.weight"));
  EXPECT_ERROR(load(dir.path()),
               "model.safetensors: missing tensor 'model.layers.1.self_attn.v_proj.weight' "
               "(expected shape [8, 16])");
  // Untied config without lm_head.weight: HF would initialize it randomly.
  test::write_checkpoint(dir.path(), cfg,
                         without(test::llama_tensors(cfg, DType::F32, 1), "lm_head.weight"));
  EXPECT_ERROR(load(dir.path()), "missing tensor 'lm_head.weight'");
}

TEST(Loader, RejectsWrongShape) {
  TempDir dir("shape");
  json cfg = test::small_llama_config();
  const std::vector<StTensor> ts = test::llama_tensors(cfg, DType::F32, 1);
  cfg["intermediate_size"] = 32;  // config and weights disagree
  test::write_checkpoint(dir.path(), cfg, ts);
  EXPECT_ERROR(load(dir.path()),
               "model.safetensors: tensor 'model.layers.0.mlp.gate_proj.weight' has shape "
               "[24, 16] but config.json implies [32, 16]");
}

TEST(Loader, RejectsUnsupportedDtype) {
  TempDir dir("dtype");
  const json cfg = test::small_llama_config();
  std::vector<StTensor> ts = test::llama_tensors(cfg, DType::F32, 1);
  for (StTensor& t : ts)
    if (t.name == "model.norm.weight") t.dtype = "I32";  // same byte size as F32
  test::write_checkpoint(dir.path(), cfg, ts);
  EXPECT_ERROR(
      load(dir.path()),
      "tensor 'model.norm.weight' has unsupported dtype I32 (hayate reads F32, F16, BF16, and "
      "F8_E4M3 for FP8 linear weights)");
}

TEST(Loader, RejectsMixedDtypesWithinAFusedWeight) {
  TempDir dir("mixed");
  const json cfg = test::small_llama_config();
  std::vector<StTensor> ts = test::llama_tensors(cfg, DType::BF16, 1);
  for (StTensor& t : ts)
    if (t.name == "model.layers.0.mlp.up_proj.weight") t.dtype = "F16";
  test::write_checkpoint(dir.path(), cfg, ts);
  EXPECT_ERROR(load(dir.path()), "the parts of layers.0.w_gate_up must share a dtype");
}

TEST(Loader, RejectsUnexpectedTensor) {
  TempDir dir("extra");
  json cfg = test::small_llama_config();
  const std::vector<StTensor> ts = test::llama_tensors(cfg, DType::F32, 1);
  cfg["num_hidden_layers"] = 1;  // the file holds a second layer the config does not know
  test::write_checkpoint(dir.path(), cfg, ts);
  EXPECT_ERROR(load(dir.path()), "unexpected tensor 'model.layers.1.");
}

// Qwen2's q/k/v biases and Qwen3's q/k norms are weights of their own
// (layers.L.bqkv fused from three tensors, layers.L.q_norm, k_norm); a bias a
// Llama config does not declare is an unexpected tensor.
TEST(Loader, FamiliesExtraWeightsAreCheckedAndFused) {
  TempDir dir("qwen");
  json cfg = test::small_llama_config();
  cfg["architectures"] = {"Qwen2ForCausalLM"};
  std::vector<StTensor> ts = test::llama_tensors(cfg, DType::F32, 1);
  const int hd = 4, q = 16, kv = 8;  // 4 heads of 4, 2 kv heads
  std::vector<StTensor> biased = ts;
  for (int l = 0; l < 2; ++l)
    for (auto [proj, rows] : {std::pair{"q", q}, {"k", kv}, {"v", kv}})
      biased.push_back(test::make_tensor(cat("model.layers.", l, ".self_attn.", proj, "_proj.bias"),
                                         DType::F32, {rows},
                                         std::vector<float>(size_t(rows), 0.25f * float(l + 1))));
  test::write_checkpoint(dir.path(), cfg, biased);
  const Model m = load(dir.path());
  EXPECT_EQ(m.weight("layers.1.bqkv").shape, (std::vector<int64_t>{q + 2 * kv}));
  EXPECT_EQ(m.weight("layers.1.bqkv").parts.size(), 3u);
  test::write_checkpoint(dir.path(), cfg, ts);
  EXPECT_ERROR(load(dir.path()), "missing tensor 'model.layers.0.self_attn.q_proj.bias'");
  cfg["architectures"] = {"LlamaForCausalLM"};
  test::write_checkpoint(dir.path(), cfg, biased);
  EXPECT_ERROR(load(dir.path()), "unexpected tensor 'model.layers.0.self_attn.");
  cfg["architectures"] = {"Qwen3ForCausalLM"};
  std::vector<StTensor> normed = ts;
  for (int l = 0; l < 2; ++l)
    for (const char* n : {"q_norm", "k_norm"})
      normed.push_back(test::make_tensor(cat("model.layers.", l, ".self_attn.", n, ".weight"),
                                         DType::F32, {hd},
                                         std::vector<float>(size_t(hd), 1.0f)));
  test::write_checkpoint(dir.path(), cfg, normed);
  EXPECT_EQ(load(dir.path()).weight("layers.0.k_norm").shape, (std::vector<int64_t>{hd}));
  normed.back() = test::make_tensor("model.layers.1.self_attn.k_norm.weight", DType::F32,
                                    {hd + 1}, std::vector<float>(size_t(hd + 1), 1.0f));
  test::write_checkpoint(dir.path(), cfg, normed);
  EXPECT_ERROR(load(dir.path()), "'model.layers.1.self_attn.k_norm.weight' has shape [5]");
}

TEST(Loader, RejectsHostileWeightFile) {
  TempDir dir("hostile");
  const json cfg = test::small_llama_config();
  test::write_checkpoint(dir.path(), cfg, test::llama_tensors(cfg, DType::F32, 1));
  std::vector<uint8_t> bytes = test::safetensors_bytes(test::llama_tensors(cfg, DType::F32, 1));
  bytes.pop_back();  // a truncated download
  test::write_file(dir / "model.safetensors", bytes);
  EXPECT_ERROR(load(dir.path()), "model.safetensors: tensor 'lm_head.weight' data_offsets");
}

class ShardedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    test::write_checkpoint(dir.path(), cfg, ts, 2);
    index = json::parse(read(dir / "model.safetensors.index.json"));
  }
  static std::string read(const std::string& path) {
    std::ifstream in(path);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  void write_index() { test::write_file(dir / "model.safetensors.index.json", index.dump()); }

  TempDir dir{"index"};
  json cfg = test::small_llama_config();
  std::vector<StTensor> ts = test::llama_tensors(cfg, DType::F32, 1);
  json index;
};

TEST_F(ShardedCheckpoint, RejectsIndexNamingMissingShard) {
  index["weight_map"]["model.norm.weight"] = "model-00009-of-00009.safetensors";
  write_index();
  EXPECT_ERROR(load(dir.path()), "model-00009-of-00009.safetensors: cannot open");
}

TEST_F(ShardedCheckpoint, RejectsIndexEntryForTensorNotInShard) {
  index["weight_map"]["model.layers.7.mlp.up_proj.weight"] = "model-00001-of-00002.safetensors";
  write_index();
  EXPECT_ERROR(load(dir.path()),
               "model.safetensors.index.json: tensor "
               "'model.layers.7.mlp.up_proj.weight' is not in "
               "model-00001-of-00002.safetensors");
}

TEST_F(ShardedCheckpoint, RejectsIndexPointingAtWrongShard) {
  // embed (tensor 0) lives in shard 1; the index claims shard 2.
  index["weight_map"]["model.embed_tokens.weight"] = "model-00002-of-00002.safetensors";
  write_index();
  EXPECT_ERROR(load(dir.path()), "is listed in model-00002-of-00002.safetensors but found in");
}

TEST_F(ShardedCheckpoint, RejectsShardTensorMissingFromIndex) {
  index["weight_map"].erase("model.norm.weight");
  write_index();
  EXPECT_ERROR(load(dir.path()), "tensor 'model.norm.weight' is not listed in");
}

TEST_F(ShardedCheckpoint, RejectsTensorInTwoShards) {
  std::vector<StTensor> shard2;
  for (size_t k = 1; k < ts.size(); k += 2) shard2.push_back(ts[k]);
  shard2.push_back(ts[0]);  // embed, which shard 1 also holds
  test::write_safetensors(dir / "model-00002-of-00002.safetensors", shard2);
  EXPECT_ERROR(load(dir.path()), "tensor 'model.embed_tokens.weight' is also in");
}

TEST_F(ShardedCheckpoint, RejectsPathsOutsideTheDirectory) {
  for (const char* bad : {"../model.safetensors", "/etc/passwd", "..", ""}) {
    index["weight_map"]["model.norm.weight"] = bad;
    write_index();
    EXPECT_ERROR(load(dir.path()), "not a file in the checkpoint directory");
  }
  index["weight_map"]["model.norm.weight"] = 3;
  write_index();
  EXPECT_ERROR(load(dir.path()), "weight_map entry 'model.norm.weight' must be a file name");
  index.erase("weight_map");
  write_index();
  EXPECT_ERROR(load(dir.path()), "expected an object with a 'weight_map' object");
}

TEST(Loader, RejectsWrongSizeOutputBuffer) {
  const Model m = load_model("dummy:tiny", 0, "");
  std::vector<float> v(10);
  EXPECT_ERROR(weight_to_f32(m, m.weight("final_norm"), v), "output holds 10 values");
}

}  // namespace
}  // namespace hayate
