#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "bench/result.h"
#include "core/check.h"

namespace hayate::bench {
namespace {

using nlohmann::json;

// A result as hayate bench fills it: 4 runs of 117 new tokens.
BenchResult sample_result() {
  BenchResult r;
  r.engine = "hayate";
  r.engine_version = "0.1";
  r.backend = "cuda";
  r.commit = "abc123";
  r.created_utc = "2026-11-30T00:00:00Z";
  r.system.device = "NVIDIA H200";
  r.system.driver = "580.95.05";
  r.system.cuda = "13.0";
  r.system.sm_count = 132;
  r.system.memory_gb = 139.8;
  r.model.spec = "dummy:llama-3.1-8b";
  r.model.dtype = "float16";
  r.model.seed = 7;
  r.model.weight_bytes_per_token = 16.06e9;
  r.workload.trial = "same";
  r.workload.source = "builtin:same";
  r.workload.prompts = {"なぜ犬はこんなにもかわいいの?"};
  r.workload.max_length = 128;
  r.workload.runs = 4;
  r.workload.timer = "cuda-events";
  r.workload.timed_region = "one generate() call";
  r.startup.tokenizer_s = 0.25;
  r.startup.load_s = 3.5;
  r.startup.read_bandwidth_gbs = 4080.0;
  r.startup.first_token_s = 4.25;
  double secs[] = {0.60, 0.52, 0.50, 0.48};
  double decode[] = {4.4, 4.3, 4.2, 4.0};
  for (int i = 0; i < 4; ++i) {
    RunRecord run;
    run.run = i + 1;
    run.prompt_tokens = 11;
    run.new_tokens = 117;
    run.seconds = secs[i];
    run.prefill_ms = 8.0;
    run.decode_ms_per_token = decode[i];
    run.tokenize_ms = 0.05;
    run.finish = "length";
    run.output_ids = {1, 2, 3};
    r.runs.push_back(run);
  }
  r.notes = {"a note"};
  r.summary = summarize(r);
  return r;
}

TEST(Result, SummaryFollowsTheDefinitions) {
  BenchResult r = sample_result();
  const Summary& s = r.summary;
  EXPECT_EQ(s.runs_ok, 4);
  EXPECT_DOUBLE_EQ(*s.mean_s, (0.50 + 0.48) / 2.0);  // runs 3..4
  EXPECT_DOUBLE_EQ(*s.first_s, 0.60);
  EXPECT_DOUBLE_EQ(*s.decode_ms_per_token, (4.3 + 4.2) / 2.0);  // median
  // Achieved rate: bytes per token over seconds per token.
  EXPECT_NEAR(*s.achieved_gbs, 16.06e9 / 4.25e-3 / 1e9, 1e-9);
  EXPECT_NEAR(*s.bandwidth_share, *s.achieved_gbs / 4080.0, 1e-12);
  EXPECT_NEAR(*s.floor_ms_per_token, 16.06e9 / 4080e9 * 1e3, 1e-12);
  EXPECT_NEAR(*s.floor_request_s, *s.floor_ms_per_token * 117 * 1e-3, 1e-12);
}

TEST(Result, FailedRunsAreLeftOutOfTheSummary) {
  BenchResult r = sample_result();
  r.runs[3].error = "CUDA out of memory";
  r.summary = summarize(r);
  EXPECT_EQ(r.summary.runs_ok, 3);
  EXPECT_DOUBLE_EQ(*r.summary.mean_s, 0.50);
  EXPECT_DOUBLE_EQ(*r.summary.max_s, 0.60);
}

TEST(Result, NoBandwidthOnTheCpu) {
  BenchResult r = sample_result();
  r.startup.read_bandwidth_gbs.reset();
  r.summary = summarize(r);
  EXPECT_TRUE(r.summary.achieved_gbs.has_value());
  EXPECT_FALSE(r.summary.bandwidth_share.has_value());
  EXPECT_FALSE(r.summary.floor_ms_per_token.has_value());
}

TEST(Result, JsonRoundTrip) {
  BenchResult a = sample_result();
  json j = to_json(a);
  EXPECT_EQ(j["schema"], kSchemaName);
  EXPECT_EQ(j["schema_version"], kSchemaVersion);
  BenchResult b = result_from_json(json::parse(j.dump()), "roundtrip");
  EXPECT_EQ(to_json(b), j);  // every field survives, the summary is recomputed equal
  EXPECT_EQ(b.workload.prompts, a.workload.prompts);
  EXPECT_EQ(b.runs[2].output_ids, a.runs[2].output_ids);
  EXPECT_EQ(b.model.seed, 7u);
}

TEST(Result, FileRoundTripAndNullsForMissingValues) {
  BenchResult a = sample_result();
  a.engine = "hf-compile";
  a.runs[0].prefill_ms.reset();
  a.runs[1].error = "recompile limit";
  a.summary = summarize(a);
  auto path = (std::filesystem::temp_directory_path() / "hayate_bench_roundtrip.json").string();
  write_result_file(a, path);
  BenchResult b = read_result_file(path);
  EXPECT_EQ(b.engine, "hf-compile");
  EXPECT_FALSE(b.runs[0].prefill_ms.has_value());
  EXPECT_FALSE(b.runs[1].ok());
  EXPECT_EQ(to_json(a)["runs"][1]["seconds"], nullptr);
  EXPECT_EQ(to_json(b), to_json(a));
}

TEST(Result, MinimalBaselineFileReads) {
  // What a baseline needs at least: no startup, no bandwidth, no ids.
  json j = {{"schema", "hayate-bench"},
            {"schema_version", 1},
            {"engine", "hf-eager"},
            {"system", {{"device", "NVIDIA H200"}, {"torch", "2.11.0"}}},
            {"model", {{"spec", "dummy:llama-3.1-8b"}, {"dtype", "float16"}}},
            {"workload", {{"trial", "varied"}, {"runs", 2}}},
            {"runs", {{{"run", 1}, {"seconds", 3.5}, {"new_tokens", 117}},
                      {{"run", 2}, {"seconds", 3.4}, {"new_tokens", 117}}}}};
  BenchResult r = result_from_json(j, "minimal");
  EXPECT_EQ(r.system.torch, "2.11.0");
  EXPECT_EQ(r.summary.runs_ok, 2);
  EXPECT_FALSE(r.summary.mean_s.has_value());  // fewer than 3 runs
  EXPECT_DOUBLE_EQ(*r.summary.median_s, 3.45);
}

TEST(Result, BadFilesAreOneLineErrors) {
  json good = to_json(sample_result());
  auto with = [&](auto edit) {
    json j = good;
    edit(j);
    return j;
  };
  EXPECT_THROW(result_from_json(json::array(), "x"), Error);
  EXPECT_THROW(result_from_json(with([](json& j) { j["schema"] = "other"; }), "x"), Error);
  EXPECT_THROW(result_from_json(with([](json& j) { j["schema_version"] = 2; }), "x"), Error);
  EXPECT_THROW(result_from_json(with([](json& j) { j.erase("engine"); }), "x"), Error);
  EXPECT_THROW(result_from_json(with([](json& j) { j["runs"] = 3; }), "x"), Error);
  EXPECT_THROW(result_from_json(with([](json& j) { j["runs"][0]["seconds"] = "fast"; }), "x"),
               Error);
  EXPECT_THROW(result_from_json(with([](json& j) { j["runs"][0]["seconds"] = nullptr; }), "x"),
               Error);
  EXPECT_THROW(result_from_json(with([](json& j) { j["runs"][0]["seconds"] = -1.0; }), "x"),
               Error);
  EXPECT_THROW(result_from_json(with([](json& j) { j["model"].erase("dtype"); }), "x"), Error);
  EXPECT_THROW(read_result_file("/nonexistent/result.json"), Error);
  try {
    result_from_json(with([](json& j) { j["schema_version"] = 9; }), "results/a.json");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("results/a.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace hayate::bench
