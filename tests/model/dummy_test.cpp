// Dummy architectures: exact shapes (checked against the published parameter
// counts), stable weight order, deterministic values with the documented
// scales.
#include <cmath>

#include <gtest/gtest.h>

#include "core/rng.h"
#include "model/expect_error.h"
#include "model/model.h"

namespace hayate {
namespace {

int64_t parameter_count(const Model& m) {
  int64_t n = 0;
  for (const WeightSource& w : m.weights) n += w.numel();
  return n;
}

TEST(Dummy, Llama31_8bHasThePublishedParameterCount) {
  const Model m = load_model("dummy:llama-3.1-8b", 0, "/assets");
  EXPECT_TRUE(m.is_dummy());
  EXPECT_EQ(m.tokenizer_dir, "/assets/llama3_1");
  // Meta-Llama-3.1-8B: 8,030,261,248 parameters (untied).
  EXPECT_EQ(parameter_count(m), 8'030'261'248);
  EXPECT_EQ(m.weights.size(), 1u + 32u * 6u + 2u);
  EXPECT_EQ(m.weight("layers.31.wqkv").shape, (std::vector<int64_t>{6144, 4096}));
  EXPECT_EQ(m.weight("layers.0.w_gate_up").shape, (std::vector<int64_t>{28672, 4096}));
  EXPECT_EQ(m.weight("layers.0.w_down").shape, (std::vector<int64_t>{4096, 14336}));
  EXPECT_EQ(m.lm_head().name, "lm_head");
}

TEST(Dummy, Llama31_70bHasThePublishedParameterCount) {
  const Model m = load_model("dummy:llama-3.1-70b", 0, "/assets");
  // Meta-Llama-3.1-70B: 70,553,706,496 parameters (untied).
  EXPECT_EQ(parameter_count(m), 70'553'706'496);
  EXPECT_EQ(m.weight("layers.79.wqkv").shape, (std::vector<int64_t>{10240, 8192}));
  EXPECT_EQ(m.config.num_kv_heads, 8);
}

TEST(Dummy, Llama32_1bIsTiedWithThePublishedParameterCount) {
  const Model m = load_model("dummy:llama-3.2-1b", 0, "/assets");
  // Llama-3.2-1B: 1,235,814,400 parameters (tied embeddings counted once).
  EXPECT_EQ(parameter_count(m), 1'235'814'400);
  EXPECT_TRUE(m.config.tie_word_embeddings);
  EXPECT_EQ(m.weights.back().name, "final_norm");
  EXPECT_EQ(m.lm_head().name, "embed");
  EXPECT_FLOAT_EQ(m.config.rope_scaling.factor, 32.0f);
}

// The published parameter counts of the released models (safetensors totals).
TEST(Dummy, FamiliesHaveThePublishedParameterCounts) {
  const Model q3 = load_model("dummy:qwen3-8b", 0, "/assets");
  EXPECT_EQ(parameter_count(q3), 8'190'735'360);  // Qwen3-8B
  EXPECT_EQ(q3.tokenizer_dir, "/assets/qwen3");
  EXPECT_EQ(q3.weight("layers.35.q_norm").shape, (std::vector<int64_t>{128}));
  EXPECT_EQ(q3.weight("layers.0.wqkv").shape, (std::vector<int64_t>{6144, 4096}));
  const Model q2 = load_model("dummy:qwen2.5-7b", 0, "/assets");
  EXPECT_EQ(parameter_count(q2), 7'615'616'512);  // Qwen2.5-7B-Instruct
  EXPECT_EQ(q2.weight("layers.27.bqkv").shape, (std::vector<int64_t>{3584 + 2 * 512}));
  EXPECT_FLOAT_EQ(q2.weight("layers.0.bqkv").dummy_offset, 0.0f);
  const Model m = load_model("dummy:mistral-7b-v0.3", 0, "/assets");
  EXPECT_EQ(parameter_count(m), 7'248'023'552);  // Mistral-7B-Instruct-v0.3
  EXPECT_EQ(m.tokenizer_dir, "/assets/llama2");
}

TEST(Dummy, TinyShapes) {
  const Model m = load_model("dummy:tiny", 0, "/assets");
  const ModelConfig& c = m.config;
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.hidden_size, 128);
  EXPECT_EQ(c.num_layers, 4);
  EXPECT_EQ(c.num_heads / c.num_kv_heads, 2);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 256);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_ids, (std::vector<int32_t>{128000}));
  EXPECT_EQ(c.eos_ids, (std::vector<int32_t>{128001, 128008, 128009}));
}

TEST(Dummy, StreamsAreTableIndicesAndValuesFollowTheFormula) {
  const Model m = load_model("dummy:tiny", 42, "");
  for (size_t i = 0; i < m.weights.size(); ++i) {
    const WeightSource& w = m.weights[i];
    EXPECT_TRUE(w.is_dummy());
    EXPECT_EQ(w.dummy_stream, i);
    if (w.shape.size() == 1) {
      EXPECT_EQ(w.dummy_offset, 1.0f) << w.name;
      EXPECT_EQ(w.dummy_scale, 0.1f) << w.name;
    } else if (w.name == "embed") {
      EXPECT_EQ(w.dummy_scale, 1.0f);
    } else {
      EXPECT_FLOAT_EQ(w.dummy_scale, std::sqrt(3.0f / float(w.shape[1]))) << w.name;
    }
  }
  const WeightSource& wo = m.weight("layers.2.wo");
  std::vector<float> v(size_t(wo.numel()));
  weight_to_f32(m, wo, v);
  for (size_t i : {size_t(0), size_t(1), v.size() - 1})
    EXPECT_EQ(v[i], wo.dummy_scale * uniform_pm1(42, wo.dummy_stream, i));
  // std 1/sqrt(in): uniform on [-s, s) with s = sqrt(3 / in).
  double sum2 = 0;
  for (float x : v) sum2 += double(x) * x;
  EXPECT_NEAR(std::sqrt(sum2 / double(v.size())), 1.0 / std::sqrt(128.0), 0.01 / std::sqrt(128.0));

  // Another seed gives other values; the same seed the same ones.
  const Model other = load_model("dummy:tiny", 43, "");
  std::vector<float> w(v.size());
  weight_to_f32(other, other.weight("layers.2.wo"), w);
  EXPECT_NE(v, w);
  weight_to_f32(m, wo, w);
  EXPECT_EQ(v, w);
}

TEST(Dummy, NormsStayNearOne) {
  const Model m = load_model("dummy:tiny", 1, "");
  std::vector<float> v(128);
  weight_to_f32(m, m.weight("final_norm"), v);
  for (float x : v) {
    EXPECT_GE(x, 0.9f);
    EXPECT_LT(x, 1.1f);
  }
}

TEST(Dummy, RejectsUnknownName) {
  EXPECT_ERROR(load_model("dummy:llama-9", 0, ""),
               "unknown dummy model 'dummy:llama-9' (known: llama-3.1-8b, llama-3.2-1b, llama-3.1-70b, tiny, qwen3-8b, qwen2.5-7b, mistral-7b-v0.3, tiny-qwen2)");
  EXPECT_ERROR(dummy_config_json(""), "known: llama-3.1-8b");
}

}  // namespace
}  // namespace hayate
