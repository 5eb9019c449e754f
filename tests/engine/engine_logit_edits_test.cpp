// logit_bias and min_tokens through the engine (CPU backend), each against its
// definition written out here on the oracle's logits: OpenAI's logit_bias adds
// the bias to the raw logit before anything else; vLLM's min_tokens makes eos
// and stop_token_ids unsampleable until that many ids were generated; vLLM's
// bad_words bans a word's last id wherever the ids generated so far end with
// the ones before it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/check.h"
#include "engine_fixture.h"

namespace hayate::testing_engine {
namespace {

// Greedy over the oracle's logits with `edit(step, row, ids so far)` applied to
// each step's row (teacher-forced on the ids it picks).
template <typename Edit>
std::vector<int32_t> edited_greedy(const std::vector<int32_t>& prompt, int n, Edit edit) {
  std::vector<int32_t> out;
  std::vector<float> row(static_cast<size_t>(EngineTest::kVocab));
  EngineTest::oracle_logits(prompt, 0, row);
  int pos = int(prompt.size());
  for (int i = 0; i < n; ++i) {
    edit(i, row, out);
    const int32_t best = int32_t(std::max_element(row.begin(), row.end()) - row.begin());
    out.push_back(best);
    const int32_t one[1] = {best};
    if (i + 1 < n) EngineTest::oracle_logits(one, pos++, row);
  }
  return out;
}

Collected run_one(BatchBackend& backend, EngineRequest r) {
  Engine engine(backend, nullptr, {8, 64});
  Sink sink;
  r.on_event = sink.callback();
  const RequestId id = engine.submit(std::move(r));
  engine.run_until_idle();
  return sink.get(id);
}

TEST_F(EngineTest, LogitBiasIsAddedToTheRawLogits) {
  const std::vector<int32_t> prompt = {5, 17, 99, 3, 250, 41};
  const int n = 8;
  const std::vector<int32_t> plain = reference(prompt, n);
  // Push down the ids the model picks, pull up one it does not: the greedy
  // path must follow argmax(logits + bias) at every step.
  std::map<int32_t, float> bias = {{plain[0], -30.0f}, {plain[1], -5.0f}, {77, 2.5f}};
  SamplingParams p;
  for (const auto& [id, b] : bias) p.logit_bias.emplace_back(id, b);
  const std::vector<int32_t> want = edited_greedy(prompt, n, [&](int, std::vector<float>& row, const std::vector<int32_t>&) {
    for (const auto& [id, b] : bias) row[size_t(id)] += b;
  });
  ASSERT_NE(want, plain) << "the bias must change the greedy path for the test to mean anything";
  auto backend = paged(128);
  EngineRequest r;
  r.prompt = prompt;
  r.sampling = p;
  r.max_tokens = n;
  EXPECT_EQ(run_one(*backend, r).ids, want);

  // +100 on one id makes it the only greedy choice.
  r.sampling.logit_bias = {{123, 100.0f}};
  EXPECT_EQ(run_one(*backend, r).ids, std::vector<int32_t>(size_t(n), 123));
}

TEST_F(EngineTest, LogitBiasOutOfRangeIsRefused) {
  auto backend = paged(64);
  Engine engine(*backend, nullptr, {8, 64});
  EngineRequest r;
  r.prompt = {1, 2, 3};
  r.max_tokens = 2;
  r.sampling.logit_bias = {{kVocab, 1.0f}};
  EXPECT_THROW(engine.submit(r), Error);
  r.sampling.logit_bias = {{3, NAN}};
  EXPECT_THROW(engine.submit(r), Error);
  r.sampling.logit_bias = {{3, 101.0f}};
  EXPECT_THROW(engine.submit(r), Error);
  r.sampling.logit_bias = {{4, 1.0f}, {3, 1.0f}};  // unsorted
  EXPECT_THROW(engine.submit(r), Error);
  r.sampling.logit_bias = {};
  r.sampling.min_tokens = 3;  // more than max_tokens
  EXPECT_THROW(engine.submit(r), Error);
}

TEST_F(EngineTest, MinTokensMasksStopIdsUntilReached) {
  const std::vector<int32_t> prompt = {9, 8, 7, 6, 5};
  const int n = 12;
  const std::vector<int32_t> plain = reference(prompt, n);
  // The first greedy id as a stop id: without min_tokens the request ends at once.
  const int32_t stop_id = plain[0];
  auto backend = paged(128);
  EngineRequest r;
  r.prompt = prompt;
  r.max_tokens = n;
  r.stop_token_ids = {stop_id};
  Collected c = run_one(*backend, r);
  EXPECT_EQ(c.ids, std::vector<int32_t>({stop_id}));
  EXPECT_EQ(c.finish, FinishReason::kStop);

  const int min_tokens = 4;
  r.sampling.min_tokens = min_tokens;
  // The definition: the stop id's logit is -inf at steps 0..min_tokens-1;
  // afterwards the request ends at the stop id's first appearance.
  std::vector<int32_t> want = edited_greedy(prompt, n, [&](int i, std::vector<float>& row, const std::vector<int32_t>&) {
    if (i < min_tokens) row[size_t(stop_id)] = -INFINITY;
  });
  auto end = std::find(want.begin() + min_tokens, want.end(), stop_id);
  const bool stops = end != want.end();
  want.erase(stops ? end + 1 : want.end(), want.end());
  c = run_one(*backend, r);
  EXPECT_EQ(c.ids, want);
  EXPECT_GE(int(c.ids.size()), min_tokens);
  EXPECT_EQ(std::count(c.ids.begin(), c.ids.begin() + min_tokens, stop_id), 0);
  EXPECT_EQ(c.finish, stops ? FinishReason::kStop : FinishReason::kLength);
}

// True when `word` occurs in `ids` as consecutive ids.
bool contains_run(const std::vector<int32_t>& ids, const std::vector<int32_t>& word) {
  return std::search(ids.begin(), ids.end(), word.begin(), word.end()) != ids.end();
}

TEST_F(EngineTest, BadWordsBanTheirLastIdAfterTheirPrefix) {
  const std::vector<int32_t> prompt = {12, 4, 77, 31, 8};
  const int n = 10;
  const std::vector<int32_t> plain = reference(prompt, n);
  // A two-id word the greedy path writes at ids 2-3, a one-id word it writes
  // at id 6, and a three-id word whose prefix it never writes.
  const std::vector<std::vector<int32_t>> words = {
      {plain[2], plain[3]}, {plain[6]}, {plain[0], 500, plain[1]}};
  std::vector<int32_t> want = edited_greedy(
      prompt, n, [&](int, std::vector<float>& row, const std::vector<int32_t>& so_far) {
        for (const std::vector<int32_t>& w : words) {
          const size_t k = w.size() - 1;
          if (k <= so_far.size() && std::equal(w.begin(), w.end() - 1, so_far.end() - ptrdiff_t(k)))
            row[size_t(w.back())] = -INFINITY;
        }
      });
  ASSERT_NE(want, plain) << "the words must change the greedy path for the test to mean anything";
  EXPECT_FALSE(contains_run(want, words[0]));
  EXPECT_FALSE(contains_run(want, words[1]));

  auto backend = paged(128);
  EngineRequest r;
  r.prompt = prompt;
  r.max_tokens = n;
  r.sampling.bad_words = words;
  EXPECT_EQ(run_one(*backend, r).ids, want);

  // A word's ids are checked against the vocabulary; an empty word is refused.
  Engine engine(*backend, nullptr, {8, 64});
  r.sampling.bad_words = {{3, kVocab}};
  EXPECT_THROW(engine.submit(r), Error);
  r.sampling.bad_words = {{}};
  EXPECT_THROW(engine.submit(r), Error);
  r.sampling.bad_words = {{-1}};
  EXPECT_THROW(engine.submit(r), Error);
}

}  // namespace
}  // namespace hayate::testing_engine
