// The CUDA backend, through the engine as every command runs it, against the
// Hugging Face fixtures (tests/golden/data, made by tools/make_golden.py) whose
// head sizes its kernels take, in fp16 and bf16: logits within 2e-2
// norm-wise relative error per position (read as perplexity reads them),
// greedy ids identical for the fixture's new tokens (bucket 1 on the
// persistent kernel and on batched GEMVs), perplexity within 1e-2 relative.
// Covers fp16 and bf16 files, tied embeddings, head_dim 64 and 128, GQA 2 and
// 4, and q_dim != hidden.
#include <gtest/gtest.h>

#include "cuda/cuda_batch_backend.h"
#include "engine/generate.h"
#include "engine/perplexity.h"
#include "golden/golden.h"
#include "gpu/gpu_test_util.h"
#include "model/model.h"

namespace hayate {
namespace {

constexpr double kTol = 2e-2;

class CudaGolden
    : public ::testing::TestWithParam<std::tuple<std::string, DType, DecodeMatmul>> {
 protected:
  void SetUp() override {
    if (!cuda::test::have_gpu()) GTEST_SKIP() << "no CUDA GPU";
    dir_ = golden::data_dir() + "/" + std::get<0>(GetParam());
    g_ = golden::read_json(dir_ + "/golden.json");
    model_ = std::make_unique<Model>(load_model(dir_, 0, HAYATE_ASSETS_DIR));
    // The engine of `hayate perplexity`: two windows at a time, chunks of 64 logits rows.
    BatchBackendOptions o;
    o.max_model_len = 512;
    o.num_blocks = 2 * 512 / o.block_size;
    o.max_num_seqs = 2;
    o.max_logit_rows = 64;
    o.dtype = std::get<1>(GetParam());
    backend_ = make_cuda_batch_backend(*model_, o, std::get<2>(GetParam()));
    engine_ = std::make_unique<Engine>(*backend_, nullptr, EngineOptions{2, 512});
  }
  std::string dir_;
  nlohmann::json g_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<BatchBackend> backend_;
  std::unique_ptr<Engine> engine_;
};

TEST_P(CudaGolden, LogitsMatchHf) {
  const auto prompt = g_["prompt_ids"].get<std::vector<int32_t>>();
  const auto positions = g_["logits_positions"].get<std::vector<int>>();
  const std::vector<float> ref = golden::read_f32(dir_ + "/" + g_["logits_file"].get<std::string>());
  const size_t V = size_t(model_->config.vocab_size);
  ASSERT_EQ(ref.size(), positions.size() * V);
  const std::vector<float> all = golden::prompt_logits(*engine_, prompt);
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
  GenerateOptions o;  // prefill, then the captured bucket-1 graph step by step
  o.max_new_tokens = int(want.size());
  o.ignore_eos = true;
  const std::vector<int32_t> got = generate(*engine_, prompt, o).ids;
  EXPECT_EQ(got, want) << "HF's smallest top-2 margin on this run: " << g_.value("greedy_min_margin", 0.0);
}

// 16-bit weights and activations against HF's fp32: the NLL of the text
// moves by ~1e-3 relative (two windowings of the same text).
TEST_P(CudaGolden, PerplexityMatchesHf) {
  const nlohmann::json& p = g_["perplexity"];
  const auto ids = p["ids"].get<std::vector<int32_t>>();
  for (const char* which : {"full", "windowed"}) {
    const nlohmann::json& ref = p[which];
    const int context = std::string(which) == "full" ? 0 : ref["context"].get<int>();
    PerplexityResult r = perplexity(*engine_, ids, context);
    EXPECT_EQ(r.count, ref["count"].get<int64_t>()) << which;
    EXPECT_EQ(r.windows, ref["windows"].get<int>()) << which;
    const double nll = ref["nll_mean"].get<double>();
    EXPECT_LT(std::abs(r.nll_mean - nll) / nll, 1e-2) << which << " nll " << r.nll_mean << " vs "
                                                      << nll;
    std::printf("%s %s: %s perplexity NLL %.6f vs HF %.6f\n", std::get<0>(GetParam()).c_str(),
                dtype_name(std::get<1>(GetParam())).data(), which, r.nll_mean, nll);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Hf, CudaGolden,
    ::testing::Combine(::testing::ValuesIn(golden::cuda_checkpoints()),
                       ::testing::Values(DType::F16, DType::BF16),
                       ::testing::Values(DecodeMatmul::kPersistent, DecodeMatmul::kGemv)),
    [](const auto& info) {
      return std::get<0>(info.param) + "_" + std::string(dtype_name(std::get<1>(info.param))) +
             (std::get<2>(info.param) == DecodeMatmul::kPersistent ? "_persistent" : "_gemv");
    });

}  // namespace
}  // namespace hayate
