// FP8 checkpoints (data/fp8, made by tools/make_fp8_fixtures.py in both
// quantization_config formats) through the CPU backend and the engine,
// against the script's independent torch forward with the same fake
// quantization (e4m3 weights from their codes, every linear input quantized
// per token or with its static scale, and for the FP8-KV reference K and V
// rounded to e4m3 with the layer's scales):
//   logits along the reference's greedy path: at least 90 % of the positions
//   within 1e-4 norm-wise relative error (golden_test's bound), every one
//   within 3e-2; and identical greedy ids.
// Why not 1e-4 everywhere: both sides compute in fp32 but sum in different
// orders, and a value that lands within that difference (~1e-7 relative) of
// an e4m3 rounding midpoint rounds the other way, changing one input of a
// product by an e4m3 step (6 %). Over the ~10^5 quantized values of a
// fixture that happens at a position or two or not at all (measured: worst
// 1.2e-2 and 1.5e-2 at one position each of 39, 1e-6..1e-5 everywhere
// else); in these tiny models (hidden 128) one flipped input moves a
// logits row by up to ~1e-2. The greedy paths' smallest top-1 margins
// (reference.json, >= 0.012 in logits of spread ~4) are above what that
// does to a row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/cpu_paged_backend.h"
#include "engine/generate.h"
#include "golden/golden.h"
#include "model/model.h"

namespace hayate {
namespace {

constexpr double kTol = 1e-4;       // most positions
constexpr double kFlipTol = 3e-2;   // a position with a flipped e4m3 rounding
constexpr double kTolShare = 0.9;   // share of positions within kTol

struct Fp8Case {
  std::string name;
  bool kv8;
};

class Fp8Golden : public ::testing::TestWithParam<Fp8Case> {
 protected:
  void SetUp() override {
    dir_ = golden::data_dir() + "/fp8/" + GetParam().name;
    ref_ = golden::read_json(dir_ + "/reference.json");
    model_ = std::make_unique<Model>(load_model(dir_, 0, HAYATE_ASSETS_DIR));
    BatchBackendOptions o;
    o.max_model_len = 64;
    o.num_blocks = 2 * 64 / o.block_size;
    o.max_num_seqs = 2;
    o.max_logit_rows = 64;
    o.kv_cache_dtype = GetParam().kv8 ? KvCacheDtype::kFp8 : KvCacheDtype::kAuto;
    backend_ = make_cpu_paged_backend(*model_, o);
    engine_ = std::make_unique<Engine>(*backend_, nullptr, EngineOptions{2, 64});
  }
  std::string key(const std::string& k) const { return GetParam().kv8 ? k + "_kv8" : k; }
  std::string dir_;
  nlohmann::json ref_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<BatchBackend> backend_;
  std::unique_ptr<Engine> engine_;
};

TEST_P(Fp8Golden, LoadsAsFp8) {
  EXPECT_TRUE(model_->quant.fp8());
  for (const WeightSource& w : model_->weights) {
    const bool linear = w.name.find(".w") != std::string::npos;  // wqkv, wo, w_gate_up, w_down
    EXPECT_EQ(w.fp8, linear) << w.name;
    EXPECT_EQ(w.dtype == DType::F8E4M3, linear) << w.name;
    if (linear) {
      EXPECT_EQ(int64_t(w.scales.size()), w.shape[0]) << w.name;
    }
  }
  const bool kv = GetParam().name.find("kv") != std::string::npos;
  EXPECT_EQ(model_->k_scales.size(), kv ? size_t(model_->config.num_layers) : 0u);
}

TEST_P(Fp8Golden, LogitsMatchTorchAlongTheGreedyPath) {
  const auto prompt = ref_["prompt_ids"].get<std::vector<int32_t>>();
  const auto greedy = ref_[key("greedy_ids")].get<std::vector<int32_t>>();
  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), greedy.begin(), greedy.end() - 1);
  const std::vector<float> want = golden::read_f32(dir_ + "/" + ref_[key("logits") + "_file"].get<std::string>());
  const size_t V = size_t(model_->config.vocab_size);
  ASSERT_EQ(want.size(), seq.size() * V);
  const std::vector<float> got = golden::prompt_logits(*engine_, seq);
  double worst = 0;
  size_t within = 0;
  for (size_t r = 0; r < seq.size(); ++r) {
    const double e = golden::rel_err(got.data() + r * V, want.data() + r * V, V);
    worst = std::max(worst, e);
    within += e < kTol;
    EXPECT_LT(e, kFlipTol) << "position " << r;
  }
  EXPECT_GE(double(within), kTolShare * double(seq.size()));
  std::printf("%s%s: worst logits relative error %.3e, %zu of %zu positions within %.0e\n",
              GetParam().name.c_str(), GetParam().kv8 ? " (fp8 KV)" : "", worst, within,
              seq.size(), kTol);
}

TEST_P(Fp8Golden, GreedyIdsMatchTorch) {
  const auto prompt = ref_["prompt_ids"].get<std::vector<int32_t>>();
  const auto want = ref_[key("greedy_ids")].get<std::vector<int32_t>>();
  GenerateOptions o;
  o.max_new_tokens = int(want.size());
  o.ignore_eos = true;
  EXPECT_EQ(generate(*engine_, prompt, o).ids, want);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Fp8Golden,
                         ::testing::Values(Fp8Case{"ct_channel_dynamic", false},
                                           Fp8Case{"ct_tensor_static_kv", false},
                                           Fp8Case{"fp8_dynamic", false},
                                           Fp8Case{"ct_channel_dynamic", true},
                                           Fp8Case{"ct_tensor_static_kv", true}),
                         [](const auto& info) {
                           return info.param.name + (info.param.kv8 ? "_kv8" : "");
                         });

}  // namespace
}  // namespace hayate
