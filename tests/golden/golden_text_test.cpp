// The real-vocabulary golden checkpoint through the text path: hayate's
// tokenizer gives HF tokenizers' ids for the perplexity text, and generate()
// (cached decode, stop checks) reproduces HF's greedy ids.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/mapped_file.h"
#include "cpu/cpu_paged_backend.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "engine/perplexity.h"
#include "golden/golden.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace hayate {
namespace {

class GoldenText : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = golden::data_dir() + "/realvocab_tied_bf16";
    g_ = golden::read_json(dir_ + "/golden.json");
    model_ = std::make_unique<Model>(load_model(dir_, 0, HAYATE_ASSETS_DIR));
    tok_ = std::make_unique<Tokenizer>(Tokenizer::load(std::string(HAYATE_ASSETS_DIR) + "/llama3_1"));
    BatchBackendOptions o;
    o.max_model_len = 512;
    o.num_blocks = 2 * 512 / o.block_size;
    o.max_num_seqs = 2;
    o.max_logit_rows = 64;
    backend_ = make_cpu_paged_backend(*model_, o);
    engine_ = std::make_unique<Engine>(*backend_, tok_.get(), EngineOptions{2, 512});
  }
  std::string dir_;
  nlohmann::json g_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<BatchBackend> backend_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(GoldenText, TokenizerGivesHfIdsAndPerplexity) {
  const std::string text = read_text_file(golden::data_dir() + "/text_ja_en.txt");
  const auto hf_ids = golden::read_json(golden::data_dir() + "/text_ids.json")["ids"]
                          .get<std::vector<int32_t>>();
  const std::vector<int32_t> ids = tok_->encode(text, true);
  ASSERT_EQ(ids, hf_ids);
  const double ppl = g_["perplexity"]["full"]["ppl"].get<double>();
  EXPECT_LT(std::abs(perplexity(*engine_, ids).ppl - ppl) / ppl, 1e-4);
}

TEST_F(GoldenText, GenerateReproducesHfGreedy) {
  EXPECT_EQ(model_->config.eos_ids, (std::vector<int32_t>{128001, 128008, 128009}));
  const auto prompt = g_["prompt_ids"].get<std::vector<int32_t>>();
  const auto want = g_["greedy_ids"].get<std::vector<int32_t>>();
  GenerateOptions o;
  o.max_new_tokens = int(want.size());
  o.ignore_eos = true;
  std::string streamed;
  GenerateCallbacks cb;
  cb.on_text = [&](std::string_view s) { streamed += s; };
  GenerateResult r = generate(*engine_, prompt, o, cb);
  EXPECT_EQ(r.ids, want);
  EXPECT_EQ(r.finish, FinishReason::kLength);
  EXPECT_EQ(streamed, r.text);
  EXPECT_EQ(r.text, tok_->decode(want));
  // Without --ignore-eos the sequence ends at the first eos id HF produced.
  o.ignore_eos = false;
  auto eos = std::find_if(want.begin(), want.end(), [&](int32_t id) {
    const std::vector<int32_t>& eos_ids = model_->config.eos_ids;
    return std::find(eos_ids.begin(), eos_ids.end(), id) != eos_ids.end();
  });
  GenerateResult s = generate(*engine_, prompt, o);
  EXPECT_EQ(s.ids, std::vector<int32_t>(want.begin(), eos == want.end() ? eos : eos + 1));
}

}  // namespace
}  // namespace hayate
