// The CUDA backend against the Hugging Face fixtures (tests/golden/data, made
// by tools/make_golden.py), in fp16 and bf16: logits within 2e-2 norm-wise
// relative error per position, greedy ids identical for the fixture's new
// tokens. Covers file weights (bf16, fp16 sharded, fp32 converted on the GPU),
// tied embeddings, head_dim 8/16 and q_dim != hidden.
#include <gtest/gtest.h>

#include "cuda/cuda_backend.h"
#include "golden/golden.h"
#include "gpu/gpu_test_util.h"
#include "model/model.h"

namespace hayate {
namespace {

constexpr double kTol = 2e-2;

class CudaGolden : public ::testing::TestWithParam<std::tuple<std::string, DType>> {
 protected:
  void SetUp() override {
    if (!cuda::test::have_gpu()) GTEST_SKIP() << "no CUDA GPU";
    dir_ = golden::data_dir() + "/" + std::get<0>(GetParam());
    g_ = golden::read_json(dir_ + "/golden.json");
    model_ = std::make_unique<Model>(load_model(dir_, 0, HAYATE_ASSETS_DIR));
    backend_ = make_cuda_backend(*model_, {512, std::get<1>(GetParam()), 0});
  }
  std::string dir_;
  nlohmann::json g_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Backend> backend_;
};

TEST_P(CudaGolden, LogitsMatchHf) {
  const auto prompt = g_["prompt_ids"].get<std::vector<int32_t>>();
  const auto positions = g_["logits_positions"].get<std::vector<int>>();
  const std::vector<float> ref = golden::read_f32(dir_ + "/" + g_["logits_file"].get<std::string>());
  const size_t V = size_t(model_->config.vocab_size);
  ASSERT_EQ(ref.size(), positions.size() * V);
  std::vector<float> all(prompt.size() * V, NAN);
  backend_->forward(prompt, 0, all, true);
  double worst = 0;
  for (size_t r = 0; r < positions.size(); ++r) {
    const double e = golden::rel_err(all.data() + size_t(positions[r]) * V, ref.data() + r * V, V);
    worst = std::isfinite(e) ? std::max(worst, e) : INFINITY;
    EXPECT_LT(e, kTol) << "position " << positions[r];
  }
  std::printf("%s %s: worst logits relative error %.3e over %zu positions\n",
              std::get<0>(GetParam()).c_str(), dtype_name(std::get<1>(GetParam())).data(), worst,
              positions.size());
}

TEST_P(CudaGolden, GreedyIdsMatchHf) {
  const auto prompt = g_["prompt_ids"].get<std::vector<int32_t>>();
  const auto want = g_["greedy_ids"].get<std::vector<int32_t>>();
  // bf16 keeps 8 mantissa bits: its logits differ from HF's fp32 by up to
  // ~2e-2 relative, so a fixture whose decisions are closer than that cannot
  // demand identical ids in bf16 (fp16 must match everywhere).
  const double margin = g_.value("greedy_min_margin", 1.0);
  if (std::get<1>(GetParam()) == DType::BF16 && margin < 0.05)
    GTEST_SKIP() << "HF's smallest top-2 logit margin " << margin << " is within bf16 rounding";
  std::vector<int32_t> got;
  int32_t id = backend_->forward_sample(prompt, 0, SamplingParams{}, 0);  // prefill path
  for (size_t i = 0; i < want.size(); ++i) {
    got.push_back(id);
    if (i + 1 < want.size())  // the captured decode graph
      id = backend_->forward_sample(std::span(&id, 1), int(prompt.size() + i), SamplingParams{}, i + 1);
  }
  EXPECT_EQ(got, want) << "HF's smallest top-2 margin on this run: " << g_.value("greedy_min_margin", 0.0);
}

INSTANTIATE_TEST_SUITE_P(Hf, CudaGolden,
                         ::testing::Combine(::testing::ValuesIn(golden::checkpoints()),
                                            ::testing::Values(DType::F16, DType::BF16)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  std::string(dtype_name(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace hayate
