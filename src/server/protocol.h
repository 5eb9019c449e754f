// The OpenAI protocol: request bodies of /v1/completions and
// /v1/chat/completions parsed and validated into one GenRequest, and the
// response, chunk, model-list and tokenize JSON built from results.
// Everything a client can send is checked here; a bad field is an ApiError
// naming it, never an exception of another kind.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampling.h"
#include "tokenizer/tokenizer.h"

namespace hayate::server {

enum class Endpoint { kCompletions, kChat };

// Bounds the server enforces; filled from the model and the command line.
struct Limits {
  int max_model_len = 0;  // prompt + max_tokens must fit
  int vocab_size = 0;     // prompt and stop_token_ids must be below it
  int max_n = 16;         // most choices per request
  int max_stop = 16;      // most stop strings (each at most max_stop_len bytes)
  int max_stop_len = 256;
  int max_logprobs = 20;  // completions logprobs / chat top_logprobs bound (as vLLM)
};

// Sampling defaults from generation_config.json, as vLLM applies them: they
// replace OpenAI's defaults for fields the request leaves out.
struct GenerationDefaults {
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int> top_k;
  std::optional<float> min_p;
  std::optional<int> max_tokens;  // generation_config.max_new_tokens

  // Reads dir/generation_config.json when it exists; empty defaults otherwise.
  // A malformed file is a hayate::Error (the operator's mistake, at startup).
  static GenerationDefaults load(const std::string& dir);
  nlohmann::json to_json() const;
};

// One validated request. Prompt ids are final (chat template applied,
// tokenized); max_tokens is resolved against the context.
struct GenRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;
  std::vector<int32_t> prompt_ids;
  std::string echo_text;      // decoded prompt when echo (completions only)
  SamplingParams sampling;
  bool seeded = false;        // the client gave a seed
  int max_tokens = 0;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool skip_special_tokens = true;
  bool include_stop_str_in_output = false;
  int n = 1;
  bool stream = false;
  bool include_usage = false;       // stream_options.include_usage
  bool continuous_usage = false;    // stream_options.continuous_usage_stats (vLLM)
  bool echo = false;
};

// Parses `body` (already JSON) for `endpoint`. Tokenizes with `tok`. Checks
// the model name against `served_names` (404 when it matches none; a missing
// model field is accepted as the served one, like vLLM).
GenRequest parse_request(const nlohmann::json& body, Endpoint endpoint, const Limits& limits,
                         const GenerationDefaults& defaults, const Tokenizer& tok,
                         const std::vector<std::string>& served_names);

// Parses the raw body text, mapping a syntax error to a 400.
nlohmann::json parse_json_body(const std::string& body);

// Chat messages from a "messages" array: content as a string or as a list of
// {"type": "text", "text": ...} parts (joined).
std::vector<ChatMessage> parse_messages(const nlohmann::json& messages);

// vLLM's /tokenize and /detokenize.
nlohmann::json handle_tokenize(const nlohmann::json& body, const Limits& limits,
                               const Tokenizer& tok);
nlohmann::json handle_detokenize(const nlohmann::json& body, const Limits& limits,
                                 const Tokenizer& tok);

}  // namespace hayate::server
