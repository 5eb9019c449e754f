// The runner through the engine on a scripted backend: its steps return a
// fixed id sequence and advance a fake device clock when the host waits for
// them (prefill 10 ms, 2 ms per decode step), and its timers read that
// clock, so every timing is exact.
#include <gtest/gtest.h>

#include <deque>
#include <sstream>

#include "bench/runner.h"
#include "core/check.h"
#include "engine/batch_backend.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

namespace hayate::bench {
namespace {

constexpr int32_t kEos = 128009;

class FakeClockTimer final : public RegionTimer {
 public:
  explicit FakeClockTimer(const double& clock_ms) : clock_(clock_ms) {}
  void start() override { start_ = clock_; }
  double stop_ms() override { return clock_ - start_; }

 private:
  const double& clock_;
  double start_ = 0.0;
};

class ScriptedBackend final : public BatchBackend {
 public:
  ScriptedBackend() {
    config_.vocab_size = 128256;
    config_.eos_ids = {kEos};
  }
  std::string name() const override { return "cpu"; }
  const ModelConfig& config() const override { return config_; }
  int num_blocks() const override { return 4; }
  int block_size() const override { return 16; }
  int max_model_len() const override { return 64; }
  int max_logit_rows() const override { return 1; }
  void launch(const Batch& batch) override {
    validate_batch(batch, 64, 16, 4, 1, 1);
    EXPECT_EQ(batch.seqs.size(), 1u);  // one request at a time: a batch of one
    const BatchSeq& s = batch.seqs[0];
    EXPECT_TRUE(s.sampling->greedy());
    if (s.start_pos == 0) {
      ++requests;
      if (requests == fail_on_request) fail("scripted device fault");
      prompt_lengths.push_back(int(s.tokens.size()));
    } else {
      EXPECT_EQ(s.tokens.size(), 1u);
    }
    // The eos id comes third: only ignore_eos carries the request past it.
    unfinished.push_back({s.sample_step == 2 ? kEos : int32_t(1000 + s.sample_step),
                          s.start_pos == 0 ? 10.0 : 2.0});
  }
  // The host waits for the step here: the device's clock has run its time.
  void finish(std::span<int32_t> sampled) override {
    sampled[0] = unfinished.front().first;
    clock_ms += unfinished.front().second;
    unfinished.pop_front();
  }
  void last_logits_row(int, std::span<float>) override { fail("not sampled on the host"); }
  void last_chunk_logits(int, std::span<float>) override { fail("no prompt logits"); }
  std::unique_ptr<RegionTimer> make_timer() override {
    return std::make_unique<FakeClockTimer>(clock_ms);
  }
  double weight_bytes_per_token() const override { return 1e6; }

  double clock_ms = 0.0;
  int requests = 0;
  int fail_on_request = -1;
  std::vector<int> prompt_lengths;
  std::deque<std::pair<int32_t, double>> unfinished;  // launched steps: id, device ms

 private:
  ModelConfig config_;
};

// The engine of an offline command over the scripted backend.
struct Scripted {
  ScriptedBackend be;
  Engine engine{be, nullptr, EngineOptions{1, 64}};
};

class RunnerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tok_ = new Tokenizer(Tokenizer::load(std::string(HAYATE_ASSETS_DIR) + "/llama3_1"));
  }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
  }
  static Tokenizer* tok_;
};
Tokenizer* RunnerTest::tok_ = nullptr;

TEST_F(RunnerTest, MaxLengthSemanticsIgnoreEosAndExactTimings) {
  Scripted sc;
  ScriptedBackend& be = sc.be;
  Workload w = make_workload("same", 3);
  BenchOptions opt;
  opt.max_length = 20;
  int prompt_len = int(tok_->encode(w.prompts[0]).size());
  ASSERT_LT(prompt_len, 20);
  std::ostringstream progress;
  int calls = 0;
  BenchResult r = run_bench(sc.engine, *tok_, w, opt, [&] { return double(++calls); }, &progress);

  ASSERT_EQ(r.runs.size(), 3u);
  EXPECT_EQ(be.requests, 3);
  int n = 20 - prompt_len;
  for (const auto& run : r.runs) {
    EXPECT_TRUE(run.ok());
    EXPECT_EQ(run.prompt_tokens, prompt_len);
    EXPECT_EQ(run.new_tokens, n);
    EXPECT_EQ(run.finish, "length");
    EXPECT_DOUBLE_EQ(*run.prefill_ms, 10.0);
    EXPECT_DOUBLE_EQ(run.seconds, (10.0 + 2.0 * (n - 1)) * 1e-3);
    EXPECT_DOUBLE_EQ(*run.decode_ms_per_token, 2.0);
    ASSERT_EQ(run.output_ids.size(), size_t(n));
    EXPECT_EQ(run.output_ids[2], kEos);
    EXPECT_EQ(run.output_ids[3], 1003);
  }
  EXPECT_EQ(r.runs[2].run, 3);
  EXPECT_EQ(be.prompt_lengths, std::vector<int>(3, prompt_len));
  // since_start is read at the first token of run 1, then at its end.
  EXPECT_DOUBLE_EQ(*r.startup.first_token_s, 1.0);
  EXPECT_DOUBLE_EQ(*r.startup.first_request_done_s, 2.0);
  EXPECT_EQ(*r.workload.max_length, 20);
  EXPECT_TRUE(r.workload.ignore_eos);
  EXPECT_NE(progress.str().find("run 3/3"), std::string::npos);
}

TEST_F(RunnerTest, RespectEosStopsTheRequest) {
  Scripted sc;
  BenchOptions opt;
  opt.max_new_tokens = 10;
  opt.respect_eos = true;
  BenchResult r = run_bench(sc.engine, *tok_, make_workload("same", 1), opt, {}, nullptr);
  ASSERT_EQ(r.runs.size(), 1u);
  EXPECT_EQ(r.runs[0].new_tokens, 3);  // 1000, 1001, eos
  EXPECT_EQ(r.runs[0].finish, "stop");
  EXPECT_FALSE(r.workload.max_length.has_value());
  EXPECT_EQ(*r.workload.max_new_tokens, 10);
}

TEST_F(RunnerTest, WarmupIsUntimedAndVariedCycles) {
  Scripted sc;
  ScriptedBackend& be = sc.be;
  BenchOptions opt;
  opt.max_new_tokens = 4;
  opt.warmup = 2;
  Workload w = make_workload("varied", 0);
  BenchResult r = run_bench(sc.engine, *tok_, w, opt, {}, nullptr);
  EXPECT_EQ(be.requests, 2 + 11);
  ASSERT_EQ(r.runs.size(), 11u);
  for (size_t i = 0; i < 11; ++i) {
    EXPECT_EQ(r.runs[i].prompt_index, int(i));
    EXPECT_EQ(r.runs[i].prompt_tokens, int(tok_->encode(w.prompts[i]).size()));
  }
  EXPECT_EQ(r.workload.warmup, 2);
}

TEST_F(RunnerTest, AFailingRunIsRecordedAndTheRestGoOn) {
  Scripted sc;
  ScriptedBackend& be = sc.be;
  be.fail_on_request = 2;
  BenchOptions opt;
  opt.max_new_tokens = 4;
  BenchResult r = run_bench(sc.engine, *tok_, make_workload("same", 3), opt, {}, nullptr);
  ASSERT_EQ(r.runs.size(), 3u);
  EXPECT_TRUE(r.runs[0].ok());
  EXPECT_FALSE(r.runs[1].ok());
  EXPECT_NE(r.runs[1].error.find("scripted device fault"), std::string::npos);
  EXPECT_TRUE(r.runs[2].ok());
  EXPECT_EQ(summarize(r).runs_ok, 2);
}

TEST_F(RunnerTest, BadLengthsFailBeforeAnyRequest) {
  Scripted sc;
  ScriptedBackend& be = sc.be;
  BenchOptions small;
  small.max_length = 5;  // shorter than the prompt
  EXPECT_THROW(run_bench(sc.engine, *tok_, make_workload("same", 1), small, {}, nullptr), Error);
  BenchOptions too_long;
  too_long.max_new_tokens = 60;  // prompt + 60 > the 64-token context
  EXPECT_THROW(run_bench(sc.engine, *tok_, make_workload("same", 1), too_long, {}, nullptr), Error);
  EXPECT_EQ(be.requests, 0);
}

TEST_F(RunnerTest, ChatPromptsGoThroughTheTemplate) {
  const std::string p = "なぜ犬はこんなにもかわいいの?";
  auto plain = prompt_ids(*tok_, p, false);
  auto chat = prompt_ids(*tok_, p, true);
  EXPECT_EQ(plain, tok_->encode(p, true));
  EXPECT_EQ(chat, tok_->encode(tok_->apply_chat_template({{"user", p}}, true), false));
  EXPECT_GT(chat.size(), plain.size());
  ASSERT_TRUE(tok_->bos_id().has_value());
  EXPECT_EQ(chat.front(), *tok_->bos_id());  // the template writes BOS once
  EXPECT_NE(chat[1], *tok_->bos_id());
}

TEST(NewTokens, HfMaxLengthSemantics) {
  BenchOptions opt;
  EXPECT_EQ(new_tokens_for(opt, 11), 117);  // the article: max_length 128, 11-token prompt
  opt.max_new_tokens = 50;
  EXPECT_EQ(new_tokens_for(opt, 11), 50);
  opt.max_new_tokens = 0;
  opt.max_length = 11;
  EXPECT_THROW(new_tokens_for(opt, 11), Error);
}

}  // namespace
}  // namespace hayate::bench
