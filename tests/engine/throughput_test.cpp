// The throughput benchmark on the CPU paged backend: token accounting,
// concurrency (visible in the engine's step count), percentiles, presets,
// rejected dataset prompts, and the JSON it writes.
#include "bench/throughput.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "engine_fixture.h"
#include "tokenizer/tokenizer.h"

namespace hayate::testing_engine {
namespace {

using bench::ThroughputOptions;
using bench::ThroughputResult;

ThroughputOptions small_options(int concurrency) {
  ThroughputOptions o;
  o.num_prompts = 6;
  o.input_len = 8;
  o.output_len = 4;
  o.concurrency = concurrency;
  o.seed = 5;
  return o;
}

TEST_F(EngineTest, ThroughputCountsTokensAndTimes) {
  auto backend = paged(64);
  ThroughputResult r = bench::run_throughput(*backend, nullptr, small_options(0), nullptr);
  const auto& s = r.summary;
  EXPECT_EQ(s.requests_ok, 6);
  EXPECT_EQ(s.requests_failed, 0);
  EXPECT_EQ(s.input_tokens, 6 * 8);
  EXPECT_EQ(s.output_tokens, 6 * 4);
  ASSERT_GT(s.total_s, 0.0);
  EXPECT_DOUBLE_EQ(s.total_tokens_per_s, (6 * 8 + 6 * 4) / s.total_s);
  EXPECT_DOUBLE_EQ(s.requests_per_s, 6 / s.total_s);
  ASSERT_TRUE(s.latency_s && s.ttft_s && s.tpot_ms);
  EXPECT_LE(s.latency_s->p50, s.latency_s->p90);
  EXPECT_LE(s.latency_s->p90, s.latency_s->p99);
  EXPECT_LE(s.latency_s->p99, s.latency_s->max);
  EXPECT_LE(s.latency_s->max, s.total_s);
  for (const auto& q : r.requests) {
    EXPECT_EQ(q.finish, "length");
    ASSERT_TRUE(q.ttft_s.has_value());
    EXPECT_LE(*q.ttft_s, q.latency_s);
  }
  // All six at once: one prefill step and three decode steps.
  EXPECT_EQ(s.engine_steps, 4u);
  EXPECT_EQ(s.kv_blocks, 64);
}

TEST_F(EngineTest, ThroughputConcurrencyLimitsRequestsInFlight) {
  auto backend = paged(64);
  ThroughputResult one = bench::run_throughput(*backend, nullptr, small_options(1), nullptr);
  EXPECT_EQ(one.summary.engine_steps, 6u * 4u);  // strictly one request at a time
  ThroughputResult two = bench::run_throughput(*backend, nullptr, small_options(2), nullptr);
  EXPECT_EQ(two.summary.engine_steps, 3u * 4u);  // three waves of two
  EXPECT_EQ(two.summary.output_tokens, 24);
}

TEST_F(EngineTest, ThroughputPresetsAndBadOptions) {
  ThroughputOptions o;
  bench::apply_throughput_preset("llmib-1024-b64", o);
  EXPECT_EQ(o.input_len, 1024);
  EXPECT_EQ(o.output_len, 1024);
  EXPECT_EQ(o.concurrency, 64);
  EXPECT_EQ(o.num_prompts, 256);
  EXPECT_EQ(bench::throughput_presets().size(), 11u);
  ThroughputOptions shared;
  bench::apply_throughput_preset("shared-prefix-2000", shared);
  EXPECT_EQ(shared.prefix_len, 2000);
  EXPECT_EQ(shared.input_len, 100);
  EXPECT_EQ(shared.output_len, 128);
  EXPECT_EQ(shared.num_prompts, 512);
  bench::apply_throughput_preset("chat-5-turn", shared);
  EXPECT_EQ(shared.prefix_len, 0);
  EXPECT_EQ(shared.turns, 5);
  // Only max-load-128 sets engine knobs, and not over ones the user gave.
  EXPECT_EQ(o.max_num_seqs, ThroughputOptions{}.max_num_seqs);
  bench::apply_throughput_preset("max-load-128", o);
  EXPECT_EQ(o.num_prompts, 1024);
  EXPECT_EQ(o.concurrency, 0);
  EXPECT_EQ(o.max_num_seqs, 1024);
  EXPECT_EQ(o.max_num_batched_tokens, 16384);
  ThroughputOptions given;
  given.max_num_seqs = 32;
  given.max_num_batched_tokens = 512;
  bench::apply_throughput_preset("max-load-128", given, /*keep_engine_knobs=*/true);
  EXPECT_EQ(given.num_prompts, 1024);
  EXPECT_EQ(given.max_num_seqs, 32);
  EXPECT_EQ(given.max_num_batched_tokens, 512);
  EXPECT_THROW(bench::apply_throughput_preset("nope", o), Error);
  auto backend = paged(8);
  ThroughputOptions bad = small_options(0);
  bad.output_len = 0;
  EXPECT_THROW(bench::run_throughput(*backend, nullptr, bad, nullptr), Error);
  bad = small_options(0);
  bad.dataset = "prompts.txt";
  EXPECT_THROW(bench::run_throughput(*backend, nullptr, bad, nullptr), Error);  // no tokenizer
}

TEST_F(EngineTest, ThroughputSharedPrefixAndChats) {
  auto backend = paged(256);
  // A 20-id system prompt (5 full blocks of 4) before 5 ids of each
  // request's own; one at a time, so the later three find it.
  ThroughputOptions o = small_options(1);
  o.num_prompts = 4;
  o.prefix_len = 20;
  o.input_len = 5;
  ThroughputResult on = bench::run_throughput(*backend, nullptr, o, nullptr);
  o.enable_prefix_caching = false;
  ThroughputResult off = bench::run_throughput(*backend, nullptr, o, nullptr);
  EXPECT_EQ(on.summary.input_tokens, 4 * 25);
  EXPECT_EQ(on.summary.prefix_cache_queries, 100u);
  EXPECT_EQ(on.summary.prefix_cache_hits, 3u * 20u);
  EXPECT_DOUBLE_EQ(on.summary.prefix_cache_hit_rate, 0.6);
  EXPECT_EQ(off.summary.prefix_cache_queries, 0u);
  EXPECT_EQ(off.summary.prefix_cache_hit_rate, 0.0);

  // Two chats of three turns: each turn resends the conversation (its
  // prompts and answers) and 5 new ids.
  ThroughputOptions c = small_options(0);
  c.num_prompts = 2;
  c.input_len = 5;
  c.turns = 3;
  ThroughputResult chat = bench::run_throughput(*backend, nullptr, c, nullptr);
  c.enable_prefix_caching = false;
  ThroughputResult chat_off = bench::run_throughput(*backend, nullptr, c, nullptr);
  ASSERT_EQ(chat.requests.size(), 6u);
  for (size_t k = 0; k < 6; ++k) {
    EXPECT_EQ(chat.requests[k].turn, int(k % 3));
    EXPECT_EQ(chat.requests[k].prompt_tokens, 5 + int(k % 3) * (4 + 5));  // 5, 14, 23
    EXPECT_EQ(chat.requests[k].prompt_tokens, chat_off.requests[k].prompt_tokens);
    EXPECT_EQ(chat.requests[k].output_tokens, 4);
  }
  ASSERT_EQ(chat.summary.ttft_by_turn_s.size(), 3u);
  EXPECT_EQ(chat.summary.requests_ok, 6);
  // Turn 2 finds turn 1's 8 computed ids (5 + 3: the last answer id never
  // runs), turn 3 turn 2's 16: (8 + 16) per chat.
  EXPECT_EQ(chat.summary.prefix_cache_hits, 2u * (8u + 16u));
  EXPECT_EQ(chat.summary.prefix_cache_queries, 2u * (5u + 14u + 23u));
  const nlohmann::json j = bench::to_json(chat);
  EXPECT_EQ(j["workload"]["turns"], 3);
  EXPECT_EQ(j["summary"]["ttft_by_turn_s"].size(), 3u);
  EXPECT_EQ(j["requests"][4]["turn"], 1);
  const std::string text = bench::format_throughput(chat);
  EXPECT_NE(text.find("ttft turn 3"), std::string::npos) << text;
  EXPECT_NE(text.find("prefix cache    on, hit rate"), std::string::npos) << text;
}

TEST_F(EngineTest, ThroughputRecordsRejectedRequests) {
  // 8 blocks of 4 = 32 slots: prompts of 40 ids cannot fit and are recorded
  // as failed instead of stopping the run.
  auto backend = paged(8);
  ThroughputOptions o = small_options(2);
  o.input_len = 40;
  ThroughputResult r = bench::run_throughput(*backend, nullptr, o, nullptr);
  EXPECT_EQ(r.summary.requests_ok, 0);
  EXPECT_EQ(r.summary.requests_failed, 6);
  EXPECT_NE(r.requests[0].error.find("whole pool"), std::string::npos) << r.requests[0].error;
}

TEST_F(EngineTest, ThroughputJsonHasTheSchemaFields) {
  auto backend = paged(64);
  ThroughputResult r = bench::run_throughput(*backend, nullptr, small_options(3), nullptr);
  nlohmann::json j = bench::to_json(r);
  EXPECT_EQ(j["schema"], bench::kThroughputSchemaName);
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["mode"], "throughput");
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_EQ(j["workload"]["concurrency"], 3);
  EXPECT_EQ(j["workload"]["num_prompts"], 6);
  EXPECT_EQ(j["requests"].size(), 6u);
  EXPECT_DOUBLE_EQ(j["summary"]["total_tokens_per_s"].get<double>(), r.summary.total_tokens_per_s);
  EXPECT_TRUE(j["summary"]["latency_s"].contains("p99"));
  EXPECT_FALSE(bench::format_throughput(r).empty());
}

}  // namespace
}  // namespace hayate::testing_engine
