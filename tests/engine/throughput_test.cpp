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
  EXPECT_EQ(bench::throughput_presets().size(), 9u);
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
