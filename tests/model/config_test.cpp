// config.json parsing and the RoPE frequency table.
#include "model/config.h"

#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/expect_error.h"
#include "model/model.h"
#include "model/st_writer.h"

namespace hayate {
namespace {

using nlohmann::json;

ModelConfig parse(const json& j) {
  return parse_config(j, "config.json");
}

TEST(Config, ParsesLlama31Config) {
  const ModelConfig c = parse(json::parse(dummy_config_json("llama-3.1-8b")));
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.q_dim(), 4096);
  EXPECT_EQ(c.kv_dim(), 1024);
  EXPECT_EQ(c.qkv_dim(), 6144);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  EXPECT_TRUE(c.rope_scaling.llama3);
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 8.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_ids, (std::vector<int32_t>{128000}));
  EXPECT_EQ(c.eos_ids, (std::vector<int32_t>{128001, 128008, 128009}));
  EXPECT_EQ(c.torch_dtype, DType::BF16);
}

TEST(Config, DefaultsHeadDimAndKvHeadsAndRope) {
  json j = test::small_llama_config();
  j.erase("num_key_value_heads");
  j.erase("rope_theta");
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.head_dim, 4);  // hidden 16 / 4 heads
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
  EXPECT_FALSE(c.rope_scaling.llama3);
  EXPECT_EQ(c.torch_dtype, DType::F32);
  EXPECT_EQ(c.eos_ids, (std::vector<int32_t>{2}));  // an int
}

TEST(Config, HeadDimMayDifferFromHiddenOverHeads) {
  json j = test::small_llama_config();
  j["head_dim"] = 8;  // q_dim 32 != hidden 16, as some models do
  EXPECT_EQ(parse(j).q_dim(), 32);
}

TEST(Config, AcceptsModelTypeWithoutArchitecturesAndRopeTypeSpellings) {
  json j = test::small_llama_config();
  j.erase("architectures");
  j["rope_scaling"] = {{"type", "llama3"},
                       {"factor", 2.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 2.0},
                       {"original_max_position_embeddings", 16}};
  const ModelConfig c = parse(j);
  EXPECT_TRUE(c.rope_scaling.llama3);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 16);
  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_FALSE(parse(j).rope_scaling.llama3);
}

// transformers 5 writes rope_parameters (with rope_theta inside) and "dtype".
TEST(Config, AcceptsTransformers5RopeParameters) {
  json j = test::small_llama_config();
  j.erase("rope_theta");
  j.erase("torch_dtype");
  j["dtype"] = "float16";
  j["rope_parameters"] = {{"rope_type", "llama3"},   {"rope_theta", 500000.0},
                          {"factor", 8.0},           {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 32}};
  const ModelConfig c = parse(j);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  EXPECT_TRUE(c.rope_scaling.llama3);
  EXPECT_EQ(c.torch_dtype, DType::F16);
}

TEST(Config, RejectsUnsupportedArchitectureNamingTheSupportedOnes) {
  json j = test::small_llama_config();
  j["architectures"] = {"GemmaForCausalLM"};
  EXPECT_ERROR(parse(j),
               "config.json: architecture 'GemmaForCausalLM' is not supported (hayate runs "
               "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM)");
  j.erase("architectures");
  j["model_type"] = "gemma";
  EXPECT_ERROR(parse(j), "model_type 'gemma' is not one of llama, mistral, qwen2, qwen3");
}

TEST(Config, ParsesTheFamiliesDummyConfigs) {
  const ModelConfig q3 = parse(json::parse(dummy_config_json("qwen3-8b")));
  EXPECT_EQ(q3.architecture, "Qwen3ForCausalLM");
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_FALSE(q3.qkv_bias);
  EXPECT_EQ(q3.head_dim, 128);
  EXPECT_EQ(q3.num_layers, 36);
  EXPECT_EQ(q3.intermediate_size, 12288);
  EXPECT_EQ(q3.vocab_size, 151936);
  EXPECT_FLOAT_EQ(q3.rope_theta, 1e6f);
  EXPECT_FLOAT_EQ(q3.rms_norm_eps, 1e-6f);
  EXPECT_FALSE(q3.rope_scaling.llama3);
  const ModelConfig q2 = parse(json::parse(dummy_config_json("qwen2.5-7b")));
  EXPECT_EQ(q2.architecture, "Qwen2ForCausalLM");
  EXPECT_TRUE(q2.qkv_bias);
  EXPECT_FALSE(q2.qk_norm);
  EXPECT_EQ(q2.head_dim, 128);  // 3584 / 28, derived
  EXPECT_EQ(q2.num_heads / q2.num_kv_heads, 7);
  EXPECT_EQ(q2.intermediate_size, 18944);
  EXPECT_EQ(q2.max_position_embeddings, 32768);  // sliding_window ignored: use_sliding_window false
  const ModelConfig m = parse(json::parse(dummy_config_json("mistral-7b-v0.3")));
  EXPECT_EQ(m.architecture, "MistralForCausalLM");
  EXPECT_FALSE(m.qkv_bias || m.qk_norm);
  EXPECT_EQ(m.vocab_size, 32768);
  EXPECT_EQ(m.max_position_embeddings, 32768);
  EXPECT_EQ(dummy_tokenizer("qwen2.5-7b"), "qwen3");
  EXPECT_EQ(dummy_tokenizer("mistral-7b-v0.3"), "llama2");
}

TEST(Config, FamiliesByModelTypeAlone) {
  json j = test::small_llama_config();
  j.erase("architectures");
  for (auto [type, arch] : {std::pair{"qwen2", "Qwen2ForCausalLM"}, {"qwen3", "Qwen3ForCausalLM"},
                            {"mistral", "MistralForCausalLM"}}) {
    j["model_type"] = type;
    EXPECT_EQ(parse(j).architecture, arch);
  }
}

TEST(Config, MistralSlidingWindowCapsTheContext) {
  json j = test::small_llama_config();
  j["architectures"] = {"MistralForCausalLM"};
  j["max_position_embeddings"] = 8192;
  j["sliding_window"] = 4096;  // v0.1: within the window attention is full
  EXPECT_EQ(parse(j).max_position_embeddings, 4096);
  j["sliding_window"] = nullptr;  // v0.3
  EXPECT_EQ(parse(j).max_position_embeddings, 8192);
  j["sliding_window"] = -1;
  EXPECT_ERROR(parse(j), "'sliding_window' must be positive or null");
}

TEST(Config, RejectsWhatTheFamiliesCouldSwitchOnAndHayateLacks) {
  json j = test::small_llama_config();
  j["architectures"] = {"Qwen2ForCausalLM"};
  j["use_sliding_window"] = true;
  EXPECT_ERROR(parse(j), "field 'use_sliding_window' is true; hayate implements full attention");
  j["use_sliding_window"] = false;
  j["layer_types"] = {"full_attention", "sliding_attention"};
  EXPECT_ERROR(parse(j), "'layer_types' lists \"sliding_attention\"");
  j = test::small_llama_config();
  j["architectures"] = {"Qwen3ForCausalLM"};
  j["attention_bias"] = true;
  EXPECT_ERROR(parse(j), "'attention_bias' is true; hayate runs Qwen3ForCausalLM without");
  j = test::small_llama_config();
  j["architectures"] = {"Qwen2ForCausalLM"};
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0},
                       {"original_max_position_embeddings", 32768}};
  EXPECT_ERROR(parse(j), "rope_scaling type 'yarn' is not supported");
}

TEST(Config, RejectsFeaturesHayateLacks) {
  json j = test::small_llama_config();
  j["hidden_act"] = "gelu";
  EXPECT_ERROR(parse(j), "'hidden_act'");
  j = test::small_llama_config();
  j["attention_bias"] = true;
  EXPECT_ERROR(parse(j), "'attention_bias'");
  j = test::small_llama_config();
  j["mlp_bias"] = true;
  EXPECT_ERROR(parse(j), "'mlp_bias'");
}

TEST(Config, RejectsUnsupportedRopeType) {
  json j = test::small_llama_config();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_ERROR(parse(j), "rope_scaling type 'yarn' is not supported");
}

TEST(Config, RejectsIncompleteLlama3Scaling) {
  json j = test::small_llama_config();
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  EXPECT_ERROR(parse(j), "lacks 'low_freq_factor'");
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 4.0},
                       {"high_freq_factor", 1.0},
                       {"original_max_position_embeddings", 16}};
  EXPECT_ERROR(parse(j), "high_freq_factor must exceed");
}

TEST(Config, RejectsMissingField) {
  json j = test::small_llama_config();
  j.erase("hidden_size");
  EXPECT_ERROR(parse(j), "config.json: missing field 'hidden_size'");
}

TEST(Config, RejectsAbsurdLayerCountBeforeAnyAllocation) {
  json j = test::small_llama_config();
  j["num_hidden_layers"] = 2147483647;
  EXPECT_ERROR(parse(j), "field 'num_hidden_layers' must be at most 1024, got 2147483647");
  j["num_hidden_layers"] = 1024;
  EXPECT_EQ(parse(j).num_layers, 1024);
}

TEST(Config, RejectsWrongFieldTypes) {
  json j = test::small_llama_config();
  j["num_hidden_layers"] = "2";
  EXPECT_ERROR(parse(j), "field 'num_hidden_layers' must be an integer");
  j = test::small_llama_config();
  j["rms_norm_eps"] = "small";
  EXPECT_ERROR(parse(j), "field 'rms_norm_eps' must be a number");
  j = test::small_llama_config();
  j["tie_word_embeddings"] = 1;
  EXPECT_ERROR(parse(j), "field 'tie_word_embeddings' must be true or false");
  j = test::small_llama_config();
  j["vocab_size"] = 1e12;
  EXPECT_ERROR(parse(j), "field 'vocab_size' must be an integer");
  j = test::small_llama_config();
  j["torch_dtype"] = "float8";
  EXPECT_ERROR(parse(j), "field 'torch_dtype'");
  EXPECT_ERROR(parse(json::array()), "expected a JSON object");
}

TEST(Config, RejectsInconsistentShapes) {
  json j = test::small_llama_config();
  j["num_key_value_heads"] = 3;
  EXPECT_ERROR(parse(j),
               "'num_attention_heads' (4) is not a multiple of 'num_key_value_heads' (3)");
  j = test::small_llama_config();
  j["num_attention_heads"] = 3;
  j["num_key_value_heads"] = 3;
  EXPECT_ERROR(parse(j), "'hidden_size' (16) is not a multiple of 'num_attention_heads' (3)");
  j = test::small_llama_config();
  j["head_dim"] = 5;
  EXPECT_ERROR(parse(j), "'head_dim' must be positive and even");
  for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads", "num_key_value_heads"}) {
    j = test::small_llama_config();
    j[key] = 0;
    EXPECT_ERROR(parse(j), std::string("'") + key + "' must be positive");
    j[key] = -4;
    EXPECT_ERROR(parse(j), std::string("'") + key + "' must be positive");
  }
  j = test::small_llama_config();
  j["rms_norm_eps"] = 0;
  EXPECT_ERROR(parse(j), "'rms_norm_eps' must be positive");
}

TEST(Config, RejectsTokenIdsOutsideVocab) {
  json j = test::small_llama_config();
  j["eos_token_id"] = {2, 40};
  EXPECT_ERROR(parse(j), "token id 40 is outside the vocabulary");
  j["eos_token_id"] = -1;
  EXPECT_ERROR(parse(j), "'eos_token_id' must hold non-negative integer token ids");
}

// Properties of transformers' llama3 rule (values themselves are checked
// end to end by the golden tests against HF's logits): with
// old_ctx = original_max_position_embeddings and wavelen = 2 pi / f,
// wavelen < old_ctx / high_freq_factor keeps f, wavelen > old_ctx /
// low_freq_factor divides it by factor, and the band between blends the two
// so the result stays between f / factor and f.
TEST(Rope, DefaultFrequencies) {
  ModelConfig c = parse(test::small_llama_config());
  c.head_dim = 64;
  const std::vector<float> f = rope_inv_freq(c);
  ASSERT_EQ(f.size(), 32u);
  for (size_t i = 0; i < f.size(); ++i)
    EXPECT_NEAR(f[i], std::pow(10000.0, -double(2 * i) / 64.0), 1e-6 * f[i]) << i;
}

TEST(Rope, Llama3ScalingBands) {
  const ModelConfig c = parse(json::parse(dummy_config_json("tiny")));
  ModelConfig unscaled = c;
  unscaled.rope_scaling.llama3 = false;
  const std::vector<float> f = rope_inv_freq(c);
  const std::vector<float> base = rope_inv_freq(unscaled);
  ASSERT_EQ(f.size(), 16u);
  const double old_ctx = 256, factor = 8;
  int kept = 0, divided = 0, blended = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const double wavelen = 2 * M_PI / base[i];
    if (wavelen < old_ctx / 4) {
      EXPECT_EQ(f[i], base[i]) << i;
      ++kept;
    } else if (wavelen > old_ctx / 1) {
      EXPECT_NEAR(f[i], base[i] / factor, 1e-6 * f[i]) << i;
      ++divided;
    } else {
      const double smooth = (old_ctx / wavelen - 1) / (4 - 1);
      EXPECT_NEAR(f[i], (1 - smooth) * base[i] / factor + smooth * base[i], 1e-6 * f[i]) << i;
      EXPECT_LT(f[i], base[i]);
      EXPECT_GT(f[i], base[i] / factor);
      ++blended;
    }
    if (i > 0) {
      EXPECT_LT(f[i], f[i - 1]);
    }
  }
  // The tiny config is chosen so that all three bands occur.
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);
}

}  // namespace
}  // namespace hayate
