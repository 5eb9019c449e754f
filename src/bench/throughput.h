// The offline throughput benchmark (`hayate bench --mode throughput`): many
// requests through the batching engine, as vLLM's benchmark_throughput and
// LLM-Inference-Bench measure it. Prompts are random ids of a fixed length
// (seeded) or a prompt file; every request makes exactly output_len tokens
// (EOS ignored). Shared-prefix workloads: a system prompt of prefix_len ids
// before every prompt, or chats of `turns` requests each resending the
// conversation so far (its prompts and answers) plus input_len new ids.
// Reports the wall time of the whole set, requests/s, input, output and
// total tokens/s, per-request latency, TTFT (per turn for chats) and time
// per output token percentiles, and the prefix cache's hit rate.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "bench/result.h"

namespace hayate {
class BatchBackend;
class Tokenizer;
}  // namespace hayate

namespace hayate::bench {

inline constexpr const char* kThroughputSchemaName = "hayate-bench-throughput";
inline constexpr int kThroughputSchemaVersion = 1;

struct ThroughputOptions {
  std::string preset;  // informational: the preset these values came from
  int num_prompts = 256;
  int input_len = 128;     // random prompts: ids per prompt
  int output_len = 128;    // new tokens per request
  int concurrency = 0;     // most requests in flight; 0 = all submitted at once
  std::string dataset;     // prompt file (one per line or JSON, as --workload); needs a tokenizer
  uint64_t seed = 0;       // random prompt ids
  int warmup = 0;          // untimed requests first (graph capture, allocator warm-up)
  int max_num_seqs = 256;  // engine: sequences per step
  int max_num_batched_tokens = 8192;  // engine: tokens per step
  int prefix_len = 0;  // random ids shared by every prompt, before its own input_len
  int turns = 1;       // > 1: num_prompts chats of this many turns (random ids only)
  bool enable_prefix_caching = true;  // engine: reuse computed prompt blocks
  // Structured output: every request (warm-up included) follows this JSON
  // Schema (its text; needs a tokenizer), compiled once before the run.
  std::string json_schema;
};

// LLM-Inference-Bench workloads: llmib-<in>-b<batch> for in = out = 128 or
// 1024 and batch 1, 16, 32, 64 (concurrency = batch, num_prompts = 4 x batch,
// so each point averages four waves), plus max-load-128 (1024 requests of
// 128/128 submitted at once: the engine runs as many as fit). max-load-128
// also sets the engine to 1024 sequences and 16384 tokens per step (vLLM's
// offline defaults on H100-class GPUs); H200: 15,199 output tok/s against
// 13,846 at 256 / 8192 in the same call. Shared prefixes: shared-prefix-2000
// (512 requests of a 2,000-id system prompt + 100 ids of their own, 128 new
// tokens, all at once) and chat-5-turn (64 chats of 5 turns, 100 new ids and
// 128 new tokens a turn, all chats at once).
struct ThroughputPreset {
  std::string name;
  int num_prompts, input_len, output_len, concurrency;
  int max_num_seqs = 0;            // engine knobs; 0 = leave the option's value
  int max_num_batched_tokens = 0;
  int prefix_len = 0;
  int turns = 1;
};
const std::vector<ThroughputPreset>& throughput_presets();
// Sets the preset's fields in `opt` (its engine knobs too, unless
// keep_engine_knobs: the user gave them); throws Error listing the known names.
void apply_throughput_preset(const std::string& name, ThroughputOptions& opt,
                             bool keep_engine_knobs = false);

struct ThroughputRequest {
  int index = 0;
  int turn = 0;  // chats: 0 .. turns - 1 (index = chat * turns + turn)
  int prompt_tokens = 0;
  int output_tokens = 0;
  double latency_s = 0.0;         // submit to final event
  std::optional<double> ttft_s;   // submit to first id
  std::optional<double> tpot_ms;  // (latency - ttft) / (output_tokens - 1)
  std::string finish;             // length, stop, abort
  std::string error;
};

struct Percentiles {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};

struct ThroughputSummary {
  int requests_ok = 0;
  int requests_failed = 0;
  double total_s = 0.0;
  double requests_per_s = 0.0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double input_tokens_per_s = 0.0;
  double output_tokens_per_s = 0.0;
  double total_tokens_per_s = 0.0;  // (input + output) / total_s: LLM-Inference-Bench's figure
  std::optional<Percentiles> latency_s, ttft_s, tpot_ms;
  std::vector<Percentiles> ttft_by_turn_s;  // chats: TTFT of each turn's requests
  uint64_t prefix_cache_queries = 0;        // prompt tokens looked up (engine stats)
  uint64_t prefix_cache_hits = 0;           // of which found computed
  double prefix_cache_hit_rate = 0.0;       // hits / queries (0 with none)
  uint64_t engine_steps = 0;
  uint64_t preemptions = 0;
  int kv_blocks = 0;
  int kv_block_size = 0;
};

struct ThroughputResult {
  int schema_version = kThroughputSchemaVersion;
  std::string engine = "hayate";
  std::string engine_version;
  std::string backend;
  std::string commit;
  std::string created_utc;
  SystemInfo system;  // caller's
  ModelInfo model;    // caller's
  ThroughputOptions options;
  std::vector<ThroughputRequest> requests;
  ThroughputSummary summary;
  std::vector<std::string> notes;
};

// Runs the benchmark on `backend` through an Engine made here with the
// options' limits; the calling thread steps the engine. Fills everything but
// system and model (and engine_version/commit, which the caller knows).
// `tokenizer` may be null unless opt.dataset is set. Progress lines go to
// `progress` when given. Throws Error for bad options.
ThroughputResult run_throughput(BatchBackend& backend, const Tokenizer* tokenizer,
                                const ThroughputOptions& opt, std::ostream* progress);

nlohmann::json to_json(const ThroughputResult& r);
// One line per figure for the terminal.
std::string format_throughput(const ThroughputResult& r);

}  // namespace hayate::bench
