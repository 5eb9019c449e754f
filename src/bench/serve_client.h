// The serving benchmark (`hayate bench --mode serve`): a client that sends
// streaming /v1/completions requests to any OpenAI-compatible server
// (hayate serve, vLLM, llama-server) and measures it the way `vllm bench
// serve` does:
//   TTFT  = first chunk carrying choices - request sent
//   ITL   = gaps between consecutive chunks carrying choices (all requests pooled)
//   TPOT  = (E2E - TTFT) / (output_tokens - 1), one value per request with > 1 token
//   E2E   = last chunk carrying choices - request sent
//   request throughput = completed / duration, output throughput = output tokens / duration
// output_tokens is the server's usage.completion_tokens (stream_options.include_usage);
// the prefix cache hit rate is usage.prompt_tokens_details.cached_tokens over
// prompt tokens (servers that report no cached tokens count as 0).
// Arrivals: Poisson at request_rate (exponential gaps, seeded), or all at once
// for inf; at most max_concurrency requests in flight (0 = no bound).
// Chats (turns > 1): num_prompts conversations arrive as requests do; each
// sends its turns one after another, a turn's prompt being the previous
// prompt, the previous answer and input_len new ids or words, as a chat
// client resends the conversation; a chat holds its concurrency slot across
// its turns. With ids the answer is resent as the ids the server generated
// (vLLM's return_token_ids), so a prefix cache sees exactly what it computed;
// with words as its text (retokenized by the server).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace hayate::bench {

inline constexpr const char* kServeSchemaName = "hayate-bench-serve";
inline constexpr int kServeSchemaVersion = 1;

struct ServeBenchOptions {
  std::string endpoint;              // http://HOST:PORT/v1 (https:// also works)
  std::string model;                 // empty: the first id of GET {endpoint}/models
  std::string api_key;               // sent as Authorization: Bearer KEY when set
  std::string label;                 // what the endpoint runs (hayate, vllm, llama-server): the JSON's engine
  int num_prompts = 100;
  int input_len = 128;               // prompt tokens (ids) or words (words)
  int prefix_len = 0;                // ids (or words) shared by every prompt, before its own
  int output_len = 128;              // max_tokens, with ignore_eos so every request makes them all
  int turns = 1;                     // > 1: num_prompts chats of this many turns
  double request_rate = std::numeric_limits<double>::infinity();  // requests/s
  int max_concurrency = 0;           // 0: no bound
  std::string prompt_kind = "ids";   // ids: random token ids; words: random English words
  int id_low = 1000, id_high = 30000;  // ids drawn from [id_low, id_high): inside any Llama vocab
  uint64_t seed = 0;                 // prompts and arrival times
  double request_timeout_s = 600.0;
};

struct ServeRequestRecord {
  int index = 0;            // chats: chat * turns + turn
  int turn = 0;             // chats: 0 .. turns - 1
  int prompt_tokens = 0;    // usage.prompt_tokens (0 when the server sent no usage)
  int output_tokens = 0;    // usage.completion_tokens, else the number of chunks
  int cached_tokens = 0;    // usage.prompt_tokens_details.cached_tokens (0 when not sent)
  double arrival_s = 0.0;   // scheduled arrival (Poisson process), from the benchmark start
  double send_s = 0.0;      // when it was sent (later when it waited for a concurrency slot)
  double latency_s = 0.0;   // E2E
  std::optional<double> ttft_s;
  std::optional<double> tpot_s;
  std::vector<double> itl_s;
  std::string error;        // non-empty: failed (HTTP status, error event, transport)
  std::string text;         // the streamed completion (chats resend it; not in the JSON)
  std::vector<int32_t> token_ids;  // its ids, when the server returns them (not in the JSON)
  bool ok() const { return error.empty(); }
};

struct LatencyStats {
  double mean = 0, median = 0, p99 = 0, std = 0;
};

struct ServeBenchSummary {
  int completed = 0;
  int failed = 0;
  double duration_s = 0.0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double request_throughput = 0.0;      // completed / duration
  double output_throughput = 0.0;       // output tokens / duration
  double total_token_throughput = 0.0;  // (input + output) / duration
  int max_concurrent = 0;               // most requests in flight at once (observed)
  int64_t cached_tokens = 0;            // prompt tokens the server found computed
  double prefix_cache_hit_rate = 0.0;   // cached_tokens / input_tokens
  std::optional<LatencyStats> ttft_ms, tpot_ms, itl_ms, e2el_ms;
  std::vector<LatencyStats> ttft_ms_by_turn;  // chats: TTFT of each turn's requests
};

struct ServeBenchResult {
  int schema_version = kServeSchemaVersion;
  std::string created_utc;
  std::string engine_version;  // of the client
  std::string commit;          // of the client
  std::string server_model;    // the model name the requests used
  ServeBenchOptions options;
  std::vector<ServeRequestRecord> requests;
  ServeBenchSummary summary;
  std::vector<std::string> notes;
};

// Runs the benchmark. Throws Error for bad options or when the endpoint
// cannot be reached at all (the model lookup fails); failures of single
// requests are recorded, not thrown. Progress lines go to `progress` when given.
ServeBenchResult run_serve_bench(const ServeBenchOptions& opt, std::ostream* progress);

// The summary from the request records (vLLM's definitions, above).
ServeBenchSummary summarize_serve(const std::vector<ServeRequestRecord>& requests,
                                  double duration_s);

nlohmann::json to_json(const ServeBenchResult& r);
// The table `vllm bench serve` prints, with the same row names.
std::string format_serve(const ServeBenchResult& r);

}  // namespace hayate::bench
