// Engine streaming and lifecycle: text and stop strings agree with their
// definition over the oracle's ids, generate() on the engine, stop ids and eos, the background loop with
// concurrent submitters, a failing step, a throwing callback, destruction
// with requests in flight.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "core/check.h"
#include "engine/generate.h"
#include "engine_fixture.h"
#include "tokenizer/tokenizer.h"

namespace hayate::testing_engine {
namespace {

class EngineStreamTest : public EngineTest {
 public:
  static void SetUpTestSuite() {
    EngineTest::SetUpTestSuite();
    tok_ = new Tokenizer(Tokenizer::load(model_->tokenizer_dir));
  }
  static void TearDownTestSuite() {
    delete tok_;
    EngineTest::TearDownTestSuite();
  }
  static Tokenizer* tok_;
};
Tokenizer* EngineStreamTest::tok_ = nullptr;

TEST_F(EngineStreamTest, TextAndStopStringsMatchTheirDefinition) {
  auto backend = paged(64);
  Engine engine(*backend, tok_, {4, 16});
  std::mt19937 rng(21);
  std::vector<int32_t> prompt = random_prompt(rng, 6);
  const std::vector<int32_t> ref = reference(prompt, 24);
  const std::string full_text = tok_->decode(ref, /*skip_special_tokens=*/false);
  ASSERT_GE(full_text.size(), 8u);
  // A stop string taken from the middle of the generated text: the output is
  // the text before its first occurrence, the ids up to the one completing it.
  const std::string stop = full_text.substr(full_text.size() / 2, 3);
  size_t k = 1;
  while (tok_->decode(std::vector<int32_t>(ref.begin(), ref.begin() + ptrdiff_t(k)), false)
             .find(stop) == std::string::npos)
    ++k;

  Sink sink;
  EngineRequest a = request(prompt, 24, sink);
  a.skip_special_tokens = false;
  EngineRequest b = a;
  b.stop = {stop};
  b.on_event = sink.callback();
  RequestId ia = engine.submit(std::move(a));
  RequestId ib = engine.submit(std::move(b));
  engine.run_until_idle();
  Collected ca = sink.get(ia), cb = sink.get(ib);
  EXPECT_EQ(ca.ids, ref);
  EXPECT_EQ(ca.text, full_text);
  EXPECT_EQ(ca.finish, FinishReason::kLength);
  EXPECT_EQ(cb.ids, std::vector<int32_t>(ref.begin(), ref.begin() + ptrdiff_t(k)));
  EXPECT_EQ(cb.text, full_text.substr(0, full_text.find(stop)));
  EXPECT_EQ(cb.finish, FinishReason::kStop);
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);

  // generate() is one such request on an idle engine.
  GenerateOptions g;
  g.max_new_tokens = 24;
  g.stop = {stop};
  std::string streamed;
  GenerateResult r = generate(engine, prompt, g, {[&](std::string_view t) { streamed += t; }, {}});
  EXPECT_EQ(r.ids, cb.ids);
  EXPECT_EQ(r.text, cb.text);
  EXPECT_EQ(streamed, cb.text);
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
}

TEST_F(EngineStreamTest, StopTokenIdsAndEos) {
  std::mt19937 rng(22);
  std::vector<int32_t> prompt = random_prompt(rng, 5);
  std::vector<int32_t> ref = reference(prompt, 10);
  // Expected: the ids up to and including the first occurrence of `stop_id`.
  auto upto = [&](int32_t stop_id) {
    auto it = std::find(ref.begin(), ref.end(), stop_id);
    return std::vector<int32_t>(ref.begin(), it + 1);
  };
  const int32_t stop_id = ref[4], eos_id = ref[3];

  std::vector<int32_t> saved = model_->config.eos_ids;
  model_->config.eos_ids = {eos_id};
  auto backend = paged(64);  // copies the config with the eos id
  model_->config.eos_ids = saved;
  Engine engine(*backend, nullptr, {4, 16});
  Sink sink;
  EngineRequest r1 = request(prompt, 10, sink);
  r1.ignore_eos = true;
  r1.stop_token_ids = {stop_id};
  EngineRequest r2 = request(prompt, 10, sink);
  EngineRequest r3 = request(prompt, 10, sink);
  r3.ignore_eos = true;
  RequestId i1 = engine.submit(std::move(r1));
  RequestId i2 = engine.submit(std::move(r2));
  RequestId i3 = engine.submit(std::move(r3));
  engine.run_until_idle();
  EXPECT_EQ(sink.get(i1).ids, upto(stop_id));
  EXPECT_EQ(sink.get(i1).finish, FinishReason::kStop);
  EXPECT_EQ(sink.get(i2).ids, upto(eos_id));
  EXPECT_EQ(sink.get(i2).finish, FinishReason::kStop);
  EXPECT_EQ(sink.get(i3).ids, ref);
  EXPECT_EQ(sink.get(i3).finish, FinishReason::kLength);
  EngineStats s = engine.stats();
  EXPECT_EQ(s.generation_tokens_total, upto(stop_id).size() + upto(eos_id).size() + ref.size());
  EXPECT_EQ(s.kv_blocks_used, 0);
}

TEST_F(EngineStreamTest, BackgroundLoopServesConcurrentSubmitters) {
  auto backend = paged(40);
  Engine engine(*backend, nullptr, {4, 24});
  engine.start();
  Sink sink;
  std::vector<std::vector<int32_t>> prompts;
  std::mt19937 rng(23);
  for (int i = 0; i < 9; ++i) prompts.push_back(random_prompt(rng, 3 + i * 3));
  std::vector<RequestId> ids(9);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 3; ++k) {
        int i = t * 3 + k;
        ids[size_t(i)] = engine.submit(request(prompts[size_t(i)], 6, sink));
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(sink.wait_finished(9, std::chrono::seconds(120)));
  engine.stop();
  for (int i = 0; i < 9; ++i) {
    Collected c = sink.get(ids[size_t(i)]);
    EXPECT_EQ(c.finals, 1);
    EXPECT_EQ(c.ids, reference(prompts[size_t(i)], 6)) << i;
  }
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
  EXPECT_FALSE(engine.has_work());
}

// Wraps a backend and throws from step() when told to.
class FlakyBackend final : public BatchBackend {
 public:
  explicit FlakyBackend(BatchBackend& inner) : inner_(inner) {}
  std::string name() const override { return "flaky"; }
  const ModelConfig& config() const override { return inner_.config(); }
  int num_blocks() const override { return inner_.num_blocks(); }
  int block_size() const override { return inner_.block_size(); }
  int max_model_len() const override { return inner_.max_model_len(); }
  void launch(const Batch& batch) override {
    if (fail_next) {
      fail_next = false;
      fail("injected device fault");
    }
    inner_.launch(batch);
  }
  void finish(std::span<int32_t> sampled) override { inner_.finish(sampled); }
  void last_logits_row(int j, std::span<float> out) override { inner_.last_logits_row(j, out); }
  void last_chunk_logits(int i, std::span<float> out) override {
    inner_.last_chunk_logits(i, out);
  }
  int max_logit_rows() const override { return inner_.max_logit_rows(); }
  double weight_bytes_per_token() const override { return inner_.weight_bytes_per_token(); }
  bool fail_next = false;

 private:
  BatchBackend& inner_;
};

TEST_F(EngineStreamTest, FailureInsideAStepFailsThatBatchOnly) {
  auto inner = paged(64);
  FlakyBackend backend(*inner);
  Engine engine(backend, nullptr, {4, 16});
  Sink sink;
  std::mt19937 rng(24);
  auto p1 = random_prompt(rng, 5), p2 = random_prompt(rng, 7);
  RequestId a = engine.submit(request(p1, 8, sink));
  engine.step();
  engine.step();
  backend.fail_next = true;
  engine.step();
  Collected ca = sink.get(a);
  EXPECT_EQ(ca.finals, 1);
  EXPECT_EQ(ca.finish, FinishReason::kAbort);
  EXPECT_NE(ca.error.find("injected device fault"), std::string::npos) << ca.error;
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
  EXPECT_EQ(engine.stats().requests_failed_total, 1u);
  // The engine keeps serving.
  RequestId b = engine.submit(request(p2, 8, sink));
  engine.run_until_idle();
  EXPECT_EQ(sink.get(b).ids, reference(p2, 8));
}

TEST_F(EngineStreamTest, ThrowingCallbackAbortsItsRequest) {
  auto backend = paged(64);
  Engine engine(*backend, nullptr, {4, 16});
  Sink sink;
  std::mt19937 rng(25);
  auto p = random_prompt(rng, 4);
  int calls = 0;
  bool finished = false;
  EngineRequest r = request(p, 20, sink);
  r.on_event = [&](const EngineEvent& e) {
    ++calls;
    if (e.finished) {
      finished = true;
      EXPECT_EQ(e.finish, FinishReason::kAbort);
      return;
    }
    if (calls == 3) throw std::runtime_error("client went away");
  };
  RequestId other = engine.submit(request(p, 6, sink));
  engine.submit(std::move(r));
  engine.run_until_idle();
  EXPECT_TRUE(finished);
  EXPECT_LE(calls, 5);
  EXPECT_EQ(sink.get(other).ids, reference(p, 6));
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
}

TEST_F(EngineStreamTest, DestructionGivesEveryRequestItsFinalEvent) {
  Sink sink;
  std::mt19937 rng(26);
  std::vector<RequestId> ids;
  {
    auto backend = paged(64);
    Engine engine(*backend, nullptr, {1, 16});
    for (int i = 0; i < 3; ++i)
      ids.push_back(engine.submit(request(random_prompt(rng, 4), 8, sink)));
    engine.step();  // one running, two queued
  }
  for (RequestId id : ids) {
    Collected c = sink.get(id);
    EXPECT_EQ(c.finals, 1) << id;
    EXPECT_EQ(c.finish, FinishReason::kAbort) << id;
  }
}

}  // namespace
}  // namespace hayate::testing_engine
