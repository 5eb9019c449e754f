// One benchmark result in the documented JSON schema (docs/bench_schema.md,
// "hayate-bench" version 1). `hayate bench` writes it; tools/hf_baseline.py
// writes the same schema for HF eager and torch.compile; `hayate report`
// reads any number of them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace hayate::bench {

inline constexpr const char* kSchemaName = "hayate-bench";
inline constexpr int kSchemaVersion = 1;

struct RunRecord {
  int run = 0;                     // 1-based, as the article counts
  int prompt_index = 0;            // into workload.prompts
  int prompt_tokens = 0;
  int new_tokens = 0;
  double seconds = 0.0;            // the whole request (timed region in workload.timed_region)
  std::optional<double> prefill_ms;           // request start to first sampled id
  std::optional<double> decode_ms_per_token;  // (seconds - prefill) / (new_tokens - 1)
  std::optional<double> tokenize_ms;          // host, outside the timed region
  std::string finish;              // "length" or "stop"
  std::vector<int32_t> output_ids; // the new tokens (may be empty when not recorded)
  std::string error;               // non-empty: the run failed and carries no timing

  bool ok() const { return error.empty(); }
  double tokens_per_s() const { return seconds > 0.0 ? new_tokens / seconds : 0.0; }
};

struct SystemInfo {
  std::string device;        // GPU name, or "cpu"
  std::string driver;        // NVIDIA driver version
  std::string cuda;          // CUDA runtime version
  int sm_count = 0;
  double memory_gb = 0.0;
  std::string host;
  std::string torch;         // baselines only
  std::string transformers;  // baselines only
  std::string python;        // baselines only
};

// What a result row is called in `hayate report`: the engine, and for hayate
// with FP8 "fp8" (weights) and "kv8" (the KV cache), e.g. "hayate fp8 kv8".
struct ModelInfo;
std::string engine_label(const std::string& engine, const ModelInfo& m);

struct ModelInfo {
  std::string spec;    // dummy:NAME or a checkpoint directory
  std::string dtype;   // float16, bfloat16, float32
  std::string quantization = "none";    // none, fp8 (W8A8: checkpoint or --quantization fp8)
  std::string kv_cache_dtype = "auto";  // auto (the dtype), fp8
  uint64_t seed = 0;   // dummy weights
  std::optional<double> weight_bytes_per_token;
};

struct WorkloadInfo {
  std::string trial;   // same, varied, file
  std::string source;
  std::vector<std::string> prompts;
  bool chat_template = false;
  std::optional<int> max_length;      // HF semantics: prompt + new tokens
  std::optional<int> max_new_tokens;  // when given instead of max_length
  bool ignore_eos = true;
  int warmup = 0;                     // untimed requests before run 1
  int runs = 0;
  int summary_from_run = 3;           // the article's mean of runs 3..N
  std::string timer;                  // steady-clock-synced, steady-clock, torch.cuda.Event
  std::string timed_region;           // what one run's seconds cover, in words
};

struct Startup {
  std::optional<double> tokenizer_s;           // tokenizer.json parsed and ready
  std::optional<double> load_s;                // model + backend (weights made or read)
  std::optional<double> read_bandwidth_gbs;    // measured at start; absent on cpu
  std::optional<double> first_token_s;         // process start to the first sampled id
  std::optional<double> first_request_done_s;  // process start to the end of run 1
};

struct Summary {
  int runs_ok = 0;
  std::optional<double> mean_s;   // mean of runs summary_from_run..N (the article's figure)
  std::optional<double> median_s, min_s, max_s, first_s, mean_all_s;
  std::optional<double> max_over_median_after_first;
  std::optional<double> decode_ms_per_token;  // median over runs
  std::optional<double> prefill_ms;           // median over runs
  std::optional<double> tokens_per_s;         // median over runs
  std::optional<double> achieved_gbs;         // weight bytes / decode time per token
  std::optional<double> bandwidth_share;      // achieved / measured read bandwidth
  std::optional<double> floor_ms_per_token;   // weight bytes / measured read bandwidth
  std::optional<double> floor_request_s;      // floor per token x median new tokens
};

struct BenchResult {
  int schema_version = kSchemaVersion;
  std::string engine;          // hayate, hf-eager, hf-compile
  std::string engine_version;
  std::string backend;         // cuda, cpu, torch
  std::string commit;
  std::string created_utc;     // ISO 8601
  SystemInfo system;
  ModelInfo model;
  WorkloadInfo workload;
  Startup startup;
  std::vector<RunRecord> runs;
  Summary summary;
  std::vector<std::string> notes;  // skipped steps, failures, caveats
};

// Computes the summary from the successful runs, the measured bandwidth and
// the model's weight bytes. Every reader recomputes it, so one definition holds.
Summary summarize(const BenchResult& r);

nlohmann::json to_json(const BenchResult& r);
// The "system" and "model" objects of every result file (bench, throughput);
// an empty string is written as null, as null_if_empty does.
nlohmann::json system_json(const SystemInfo& s);
nlohmann::json model_json(const ModelInfo& m);
nlohmann::json null_if_empty(const std::string& s);
// Throws Error naming `source` for a wrong schema name or version, or a
// missing or mistyped required field.
BenchResult result_from_json(const nlohmann::json& j, const std::string& source);
BenchResult read_result_file(const std::string& path);
void write_result_file(const BenchResult& r, const std::string& path);

// "2026-11-30T01:02:03Z"
std::string utc_now_iso8601();

}  // namespace hayate::bench
