// generate() (one request through the engine) on dummy:tiny with the real
// Llama 3.1 tokenizer: eos and --ignore-eos, max tokens, stop strings that
// never leak, seeded sampling, and that the cached decode loop agrees with
// recomputing from scratch.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "cpu/cpu_paged_backend.h"
#include "engine/engine.h"
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
  // The engine of `hayate generate`: one sequence of up to 64 tokens.
  void SetUp() override {
    prompt_ = tok_->encode("The quick brown fox");
    make_engine(model_->config.eos_ids);
  }
  void make_engine(std::vector<int32_t> eos_ids) {
    engine_.reset();
    const std::vector<int32_t> saved = model_->config.eos_ids;
    model_->config.eos_ids = std::move(eos_ids);
    BatchBackendOptions o;
    o.max_model_len = 64;
    o.num_blocks = 4;
    o.max_num_seqs = 1;
    o.max_num_batched_tokens = 64;
    o.max_logit_rows = 64;  // the reference reads every row of a prompt
    backend_ = make_cpu_paged_backend(*model_, o);
    model_->config.eos_ids = saved;
    engine_ = std::make_unique<Engine>(*backend_, tok_, EngineOptions{1, 64});
  }
  GenerateResult gen(const GenerateOptions& o, std::string* streamed = nullptr) {
    GenerateCallbacks cb;
    if (streamed) cb.on_text = [streamed](std::string_view s) { streamed->append(s); };
    return generate(*engine_, prompt_, o, cb);
  }
  static Model* model_;
  static Tokenizer* tok_;
  std::unique_ptr<BatchBackend> backend_;
  std::unique_ptr<Engine> engine_;
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
  const std::vector<int32_t> table{0, 1, 2, 3};
  for (int i = 0; i < 8; ++i) {
    Batch b;
    b.seqs.push_back(BatchSeq{1, seq, 0, table, false, true, nullptr, 0});
    b.num_tokens = int(seq.size());
    std::vector<int32_t> unused(1);
    backend_->step(b, unused);
    std::vector<float> rows(seq.size() * row.size());
    backend_->last_chunk_logits(0, rows);
    std::copy(rows.end() - ptrdiff_t(row.size()), rows.end(), row.begin());
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
  make_engine({free_run[k]});
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
  EXPECT_THROW(generate(*engine_, empty, GenerateOptions{}), Error);
  EXPECT_EQ(engine_->stats().kv_blocks_used, 0);
}

}  // namespace
}  // namespace hayate
