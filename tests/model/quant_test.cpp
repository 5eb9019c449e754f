// FP8 checkpoints: quantization_config parsing (both formats, and the
// unsupported ones as one-line errors naming them), the loader's FP8 weights
// and scales, every bad scale as a load error naming its tensor, and
// --quantization fp8 on a 16-bit checkpoint.
#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/fp8.h"
#include "model/expect_error.h"
#include "model/model.h"
#include "model/st_writer.h"

namespace hayate {
namespace {

using nlohmann::json;
using test::StTensor;
using test::TempDir;

json ct_config(const std::string& weights = "channel", bool dynamic = true) {
  return {{"quant_method", "compressed-tensors"},
          {"format", "float-quantized"},
          {"config_groups",
           {{"group_0",
             {{"targets", {"Linear"}},
              {"weights",
               {{"num_bits", 8}, {"type", "float"}, {"symmetric", true}, {"dynamic", false},
                {"strategy", weights}}},
              {"input_activations",
               {{"num_bits", 8}, {"type", "float"}, {"symmetric", true}, {"dynamic", dynamic},
                {"strategy", dynamic ? "token" : "tensor"}}}}}}},
          {"ignore", {"lm_head"}}};
}

TEST(QuantConfig, ParsesBothFormats) {
  QuantConfig c = parse_quant_config(ct_config(), "cfg");
  EXPECT_EQ(c.method, QuantConfig::Method::kCompressedTensors);
  EXPECT_TRUE(c.channel_weights);
  EXPECT_FALSE(c.static_inputs);
  EXPECT_TRUE(c.ignored("lm_head"));
  EXPECT_FALSE(c.ignored("model.layers.0.mlp.down_proj"));
  c = parse_quant_config(ct_config("tensor", false), "cfg");
  EXPECT_FALSE(c.channel_weights);
  EXPECT_TRUE(c.static_inputs);
  json f = {{"quant_method", "fp8"}, {"activation_scheme", "static"},
            {"ignored_layers", {"re:.*layers\\.1\\..*"}}};
  c = parse_quant_config(f, "cfg");
  EXPECT_EQ(c.method, QuantConfig::Method::kFp8);
  EXPECT_TRUE(c.static_inputs);
  EXPECT_TRUE(c.ignored("model.layers.1.self_attn.q_proj"));
  EXPECT_FALSE(c.ignored("model.layers.0.self_attn.q_proj"));
  EXPECT_FALSE(parse_quant_config(json(nullptr), "cfg").fp8());
}

TEST(QuantConfig, UnsupportedConfigsAreOneLineErrorsNamingThem) {
  for (const char* m : {"awq", "gptq", "bitsandbytes", "int8", "marlin"})
    EXPECT_ERROR(parse_quant_config(json{{"quant_method", m}}, "cfg"),
                 std::string("quant_method '") + m + "' is not supported");
  EXPECT_ERROR(parse_quant_config(json{{"quant_method", "fp8"}, {"activation_scheme", "dynamic"},
                                       {"weight_block_size", {128, 128}}},
                                  "cfg"),
               "block-wise FP8 (weight_block_size [128,128]) is not supported");
  json ct = ct_config();
  ct["config_groups"]["group_0"]["weights"]["strategy"] = "group";
  EXPECT_ERROR(parse_quant_config(ct, "cfg"), "strategy 'group' is not supported");
  ct = ct_config();
  ct["config_groups"]["group_0"]["weights"]["type"] = "int";
  EXPECT_ERROR(parse_quant_config(ct, "cfg"), "type 'int' with num_bits 8");
  ct = ct_config();
  ct["config_groups"]["group_0"]["input_activations"] = nullptr;
  EXPECT_ERROR(parse_quant_config(ct, "cfg"), "weight-only FP8 is not supported");
  ct = ct_config();
  ct["format"] = "pack-quantized";
  EXPECT_ERROR(parse_quant_config(ct, "cfg"), "format 'pack-quantized' is not supported");
  ct = ct_config();
  ct["ignore"] = {"re:("};
  EXPECT_ERROR(parse_quant_config(ct, "cfg"), "not a valid regular expression");
}

// small_llama_config's checkpoint with its linears in FP8: codes of the bf16
// values' quantization per row (channel) or per tensor, scales beside them.
struct Fp8Checkpoint {
  json cfg;
  std::vector<StTensor> tensors;
};

Fp8Checkpoint fp8_checkpoint(bool channel, bool static_inputs) {
  Fp8Checkpoint c;
  c.cfg = test::small_llama_config();
  c.cfg["quantization_config"] = ct_config(channel ? "channel" : "tensor", !static_inputs);
  for (StTensor& t : test::llama_tensors(c.cfg, DType::BF16, 3)) {
    const bool linear = t.name.find("_proj.weight") != std::string::npos;
    if (!linear) {
      c.tensors.push_back(t);
      continue;
    }
    const int64_t rows = t.shape[0], cols = t.shape[1];
    std::vector<float> v(size_t(rows * cols));
    for (size_t i = 0; i < v.size(); ++i) v[i] = load_as_f32(t.data.data(), DType::BF16, i);
    StTensor q{t.name, "F8_E4M3", t.shape, std::vector<uint8_t>(v.size())};
    std::vector<float> scales;
    float amax = 0;
    for (float x : v) amax = std::fmax(amax, std::fabs(x));
    for (int64_t r = 0; r < rows; ++r) {
      const float s = channel ? fp8_quantize_row(&v[size_t(r * cols)], size_t(cols), 0.0f,
                                                 &q.data[size_t(r * cols)])
                              : fp8_scale_for(amax);
      if (!channel)
        fp8_quantize_row(&v[size_t(r * cols)], size_t(cols), s, &q.data[size_t(r * cols)]);
      if (channel || r == 0) scales.push_back(s);
    }
    const std::string module = t.name.substr(0, t.name.size() - 7);
    c.tensors.push_back(q);
    c.tensors.push_back(test::make_tensor(module + ".weight_scale", DType::F32,
                                          channel ? std::vector<int64_t>{rows, 1}
                                                  : std::vector<int64_t>{1},
                                          scales));
    if (static_inputs)
      c.tensors.push_back(test::make_tensor(module + ".input_scale", DType::F32, {1},
                                            {module.find("k_proj") != std::string::npos ? 0.5f
                                                                                         : 0.25f}));
  }
  return c;
}

Model load(const std::string& dir) { return load_model(dir, 0, "/nonexistent-assets"); }

// FP8 asked for on a GPU without FP8 tensor cores: the backend's start-up
// check, with the capability faked.
TEST(QuantConfig, Fp8NeedsSm89) {
  EXPECT_ERROR(check_fp8_capability(8, 0, "--kv-cache-dtype fp8"),
               "FP8 (--kv-cache-dtype fp8) needs a GPU with FP8 tensor cores (sm_89 or newer); "
               "this one is sm_80");
  EXPECT_ERROR(check_fp8_capability(8, 6, "fp8 (--quantization fp8)"), "this one is sm_86");
  EXPECT_NO_THROW(check_fp8_capability(8, 9, "fp8"));
  EXPECT_NO_THROW(check_fp8_capability(9, 0, "fp8"));
  EXPECT_NO_THROW(check_fp8_capability(10, 0, "fp8"));
}

TEST(Fp8Loader, LoadsCodesAndScalesPerRow) {
  for (bool channel : {true, false}) {
    TempDir dir("fp8");
    const Fp8Checkpoint c = fp8_checkpoint(channel, true);
    test::write_checkpoint(dir.path(), c.cfg, c.tensors);
    const Model m = load(dir.path());
    ASSERT_TRUE(m.quant.fp8());
    const WeightSource& qkv = m.weight("layers.0.wqkv");
    EXPECT_TRUE(qkv.fp8);
    EXPECT_EQ(qkv.dtype, DType::F8E4M3);
    ASSERT_EQ(qkv.scales.size(), 32u);  // q 16 + k 8 + v 8 rows
    EXPECT_EQ(qkv.input_scale, 0.5f);   // the max over q, k, v (k's 0.5)
    EXPECT_FALSE(m.weight("lm_head").fp8);
    EXPECT_FALSE(m.weight("layers.0.attn_norm").fp8);
    // Dequantized values are the bf16 source within an e4m3 step (2^-3 relative, half of it
    // from rounding), plus the scale's floor near zero.
    std::vector<float> got(size_t(qkv.numel()));
    weight_to_f32(m, qkv, got);
    std::vector<uint8_t> src;
    for (const StTensor& t : test::llama_tensors(c.cfg, DType::BF16, 3))
      if (t.name == "model.layers.0.self_attn.q_proj.weight") src = t.data;
    ASSERT_EQ(src.size(), 16u * 16u * 2u);
    for (size_t i = 0; i < 16 * 16; ++i) {
      const float want = load_as_f32(src.data(), DType::BF16, i);
      EXPECT_NEAR(got[i], want, std::fabs(want) * 0.0625f + qkv.scales[i / 16] * 0.002f) << i;
    }
  }
}

std::vector<StTensor> replaced(std::vector<StTensor> ts, const StTensor& t) {
  for (StTensor& x : ts)
    if (x.name == t.name) x = t;
  return ts;
}

TEST(Fp8Loader, BadScalesAreLoadErrorsNamingTheTensor) {
  const Fp8Checkpoint c = fp8_checkpoint(true, false);
  const std::string scale = "model.layers.1.mlp.down_proj.weight_scale";
  const auto fails = [&](const std::vector<StTensor>& ts, const std::string& msg) {
    TempDir dir("fp8bad");
    test::write_checkpoint(dir.path(), c.cfg, ts);
    EXPECT_ERROR(load(dir.path()), msg);
  };
  std::vector<StTensor> missing = c.tensors;
  std::erase_if(missing, [&](const StTensor& t) { return t.name == scale; });
  fails(missing, "missing tensor '" + scale + "'");
  fails(replaced(c.tensors, test::make_tensor(scale, DType::F32, {16}, std::vector<float>(16, 1))),
        "tensor '" + scale + "' has shape [16]");
  std::vector<float> nan(16, 0.01f);
  nan[3] = NAN;
  fails(replaced(c.tensors, test::make_tensor(scale, DType::F32, {16, 1}, nan)),
        "scale tensor '" + scale + "' holds nan at 3");
  std::vector<float> neg(16, 0.01f);
  neg[0] = -1.0f;
  fails(replaced(c.tensors, test::make_tensor(scale, DType::F32, {16, 1}, neg)),
        "scales must be finite and positive");
  // An e5m2 weight, and a 16-bit weight where the config makes it FP8.
  StTensor w = test::make_tensor("model.layers.0.mlp.up_proj.weight", DType::BF16, {24, 16},
                                 std::vector<float>(24 * 16, 0.5f));
  fails(replaced(c.tensors, w), "has dtype BF16 but config.json's quantization_config makes it");
  w = StTensor{"model.layers.0.mlp.up_proj.weight", "F8_E5M2", {24, 16},
               std::vector<uint8_t>(24 * 16, 0x3c)};
  fails(replaced(c.tensors, w), "is F8_E5M2: hayate reads FP8 weights as F8_E4M3 only");
}

// The KV cache's per-layer scales (self_attn.k_scale / v_scale): loaded where
// present, every layer or none, each a finite positive scalar, the error
// naming the tensor.
TEST(Fp8Loader, KvScalesAreLoadedAndValidated) {
  const Fp8Checkpoint c = fp8_checkpoint(true, false);
  const int layers = c.cfg["num_hidden_layers"].get<int>();
  const auto with_scales = [&](int n_layers, float v1) {
    std::vector<StTensor> ts = c.tensors;
    for (int l = 0; l < n_layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
      ts.push_back(test::make_tensor(p + "k_scale", DType::F32, {1}, {0.02f * float(l + 1)}));
      ts.push_back(test::make_tensor(p + "v_scale", DType::F32, {1}, {l == 1 ? v1 : 0.03f}));
    }
    return ts;
  };
  {
    TempDir dir("fp8kv");
    test::write_checkpoint(dir.path(), c.cfg, with_scales(layers, 0.05f));
    const Model m = load(dir.path());
    ASSERT_EQ(int(m.k_scales.size()), layers);
    ASSERT_EQ(int(m.v_scales.size()), layers);
    EXPECT_FLOAT_EQ(m.k_scales[1], 0.04f);
    EXPECT_FLOAT_EQ(m.v_scales[1], 0.05f);
    EXPECT_FLOAT_EQ(m.v_scales[0], 0.03f);
  }
  const auto fails = [&](const std::vector<StTensor>& ts, const std::string& msg) {
    TempDir dir("fp8kvbad");
    test::write_checkpoint(dir.path(), c.cfg, ts);
    EXPECT_ERROR(load(dir.path()), msg);
  };
  fails(with_scales(layers, NAN),
        "scale tensor 'model.layers.1.self_attn.v_scale' holds nan at 0");
  fails(with_scales(layers, 0.0f), "scales must be finite and positive");
  fails(with_scales(1, 0.05f), "self_attn.k_scale / v_scale are present for 1 of 2 layers");
  std::vector<StTensor> wide = with_scales(layers, 0.05f);
  for (StTensor& t : wide)
    if (t.name == "model.layers.0.self_attn.k_scale")
      t = test::make_tensor(t.name, DType::F32, {2}, {0.1f, 0.2f});
  fails(wide, "tensor 'model.layers.0.self_attn.k_scale' has shape [2]");
}

TEST(Fp8Loader, IgnoreListAndLmHead) {
  Fp8Checkpoint c = fp8_checkpoint(true, false);
  // Ignoring only k_proj splits the fused q/k/v: an error naming it.
  c.cfg["quantization_config"]["ignore"] = {"lm_head", "model.layers.0.self_attn.k_proj"};
  {
    TempDir dir("fp8ign");
    test::write_checkpoint(dir.path(), c.cfg, c.tensors);
    EXPECT_ERROR(load(dir.path()), "ignores some of the parts of layers.0.wqkv");
  }
  // An FP8 lm_head (not in the ignore list) is refused.
  c = fp8_checkpoint(true, false);
  std::vector<StTensor> ts = c.tensors;
  for (StTensor& t : ts)
    if (t.name == "lm_head.weight") t = StTensor{t.name, "F8_E4M3", t.shape,
                                                 std::vector<uint8_t>(t.data.size() / 2, 0x38)};
  TempDir dir("fp8lm");
  test::write_checkpoint(dir.path(), c.cfg, ts);
  EXPECT_ERROR(load(dir.path()), "tensor 'lm_head.weight' has unsupported dtype F8_E4M3");
}

TEST(Fp8Loader, QuantizationFlagOnA16BitCheckpoint) {
  TempDir dir("q16");
  const json cfg = test::small_llama_config();
  test::write_checkpoint(dir.path(), cfg, test::llama_tensors(cfg, DType::F16, 5));
  Model m = load(dir.path());
  EXPECT_ERROR(apply_quantization(m, "int8"), "--quantization: unknown method 'int8'");
  apply_quantization(m, "fp8");
  EXPECT_EQ(m.quant.method, QuantConfig::Method::kOnLoad);
  EXPECT_TRUE(m.weight("layers.1.w_down").fp8);
  EXPECT_EQ(m.weight("layers.1.w_down").dtype, DType::F16);  // quantized by the backend at load
  EXPECT_FALSE(m.weight("lm_head").fp8);
  EXPECT_FALSE(m.weight("embed").fp8);
}

}  // namespace
}  // namespace hayate
