// generate() on dummy:tiny with the real Llama 3.1 tokenizer: eos and
// --ignore-eos, max tokens, stop strings that never leak, seeded sampling,
// and that the cached decode loop agrees with recomputing from scratch.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "cpu/cpu_backend.h"
#include "engine/generate.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace hayate {
namespace {

class GenerateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new Model(load_model("dummy:tiny", 2, HAYATE_ASSETS_DIR));
    tok_ = new Tokenizer(Tokenizer::load(model_->tokenizer_dir));
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete model_;
  }
  void SetUp() override {
    BackendOptions o;
    o.max_context = 64;
    backend_ = make_cpu_backend(*model_, o);
    prompt_ = tok_->encode("The quick brown fox");
  }
  GenerateResult gen(const GenerateOptions& o, std::string* streamed = nullptr) {
    GenerateCallbacks cb;
    if (streamed) cb.on_text = [streamed](std::string_view s) { streamed->append(s); };
    return generate(*backend_, *tok_, prompt_, o, cb);
  }
  static Model* model_;
  static Tokenizer* tok_;
  std::unique_ptr<Backend> backend_;
  std::vector<int32_t> prompt_;
};
Model* GenerateTest::model_ = nullptr;
Tokenizer* GenerateTest::tok_ = nullptr;

TEST_F(GenerateTest, GreedyMatchesRecomputingFromScratch) {
  GenerateOptions o;
  o.max_new_tokens = 8;
  o.ignore_eos = true;
  GenerateResult r = gen(o);
  ASSERT_EQ(r.ids.size(), 8u);
  EXPECT_EQ(r.finish, FinishReason::kLength);
  // Reference: forward the whole sequence from position 0 every step.
  std::vector<int32_t> seq = prompt_;
  std::vector<float> row(static_cast<size_t>(model_->config.vocab_size));
  BackendOptions bo;
  bo.max_context = 64;
  auto ref = make_cpu_backend(*model_, bo);
  for (int i = 0; i < 8; ++i) {
    ref->forward(seq, 0, row, false);
    seq.push_back(int32_t(std::max_element(row.begin(), row.end()) - row.begin()));
  }
  EXPECT_EQ(r.ids, std::vector<int32_t>(seq.begin() + long(prompt_.size()), seq.end()));
  EXPECT_EQ(r.text, tok_->decode(r.ids));
}

TEST_F(GenerateTest, EosStopsUnlessIgnored) {
  GenerateOptions o;
  o.max_new_tokens = 10;
  o.ignore_eos = true;
  const std::vector<int32_t> free_run = gen(o).ids;
  // The first id that did not occur before it becomes the "eos".
  size_t k = 1;
  while (k < free_run.size() &&
         std::find(free_run.begin(), free_run.begin() + long(k), free_run[k]) !=
             free_run.begin() + long(k))
    ++k;
  ASSERT_LT(k, free_run.size());
  o.eos_ids = {free_run[k]};
  o.ignore_eos = false;
  GenerateResult stopped = gen(o);
  EXPECT_EQ(stopped.finish, FinishReason::kStop);
  EXPECT_EQ(stopped.ids, std::vector<int32_t>(free_run.begin(), free_run.begin() + long(k) + 1));
  // The eos id ends the sequence but is not part of the text.
  EXPECT_EQ(stopped.text, tok_->decode(std::span(free_run).first(k)));
  o.ignore_eos = true;
  GenerateResult ignored = gen(o);
  EXPECT_EQ(ignored.ids, free_run);
  EXPECT_EQ(ignored.finish, FinishReason::kLength);
}

TEST_F(GenerateTest, StopStringCutsAndNeverLeaks) {
  GenerateOptions o;
  o.max_new_tokens = 16;
  o.ignore_eos = true;
  std::string full;
  GenerateResult r = gen(o, &full);
  EXPECT_EQ(full, r.text);
  // A stop string from the middle of the text: three bytes starting at a
  // character boundary about halfway through.
  size_t at = full.size() / 2;
  while (at > 0 && (static_cast<unsigned char>(full[at]) & 0xC0) == 0x80) --at;
  ASSERT_GT(full.size(), at + 3);
  std::string stop = full.substr(at, 3);
  std::string streamed;
  o.stop = {stop};
  GenerateResult s = gen(o, &streamed);
  EXPECT_EQ(s.finish, FinishReason::kStop);
  EXPECT_EQ(s.text, full.substr(0, full.find(stop)));
  EXPECT_EQ(streamed, s.text);
  EXPECT_LE(s.ids.size(), r.ids.size());
}

TEST_F(GenerateTest, SeededSamplingIsReproducible) {
  GenerateOptions o;
  o.max_new_tokens = 12;
  o.ignore_eos = true;
  o.sampling.temperature = 1.0f;
  o.sampling.seed = 11;
  auto a = gen(o).ids, b = gen(o).ids;
  o.sampling.seed = 12;
  auto c = gen(o).ids;
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST_F(GenerateTest, RejectsBadRequests) {
  GenerateOptions o;
  o.max_new_tokens = 64 - int(prompt_.size()) + 1;  // one past the context
  EXPECT_THROW(gen(o), Error);
  o.max_new_tokens = 64 - int(prompt_.size());
  o.ignore_eos = true;
  EXPECT_EQ(gen(o).ids.size(), size_t(o.max_new_tokens));  // exactly fills the context
  o.max_new_tokens = 0;
  EXPECT_THROW(gen(o), Error);
  o.max_new_tokens = 4;
  o.sampling.temperature = -1.0f;
  EXPECT_THROW(gen(o), Error);
  o.sampling = {};
  o.stop = {""};
  EXPECT_THROW(gen(o), Error);
  std::vector<int32_t> empty;
  EXPECT_THROW(generate(*backend_, *tok_, empty, GenerateOptions{}), Error);
}

}  // namespace
}  // namespace hayate
