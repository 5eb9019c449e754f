// The OpenAI protocol: request bodies of /v1/completions and
// /v1/chat/completions parsed and validated into one GenRequest, and the
// response, chunk, model-list and tokenize JSON built from results.
// Everything a client can send is checked here; a bad field is an ApiError
// naming it, never an exception of another kind.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampling.h"
#include "server/structured.h"
#include "server/tools.h"
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
  int max_logprobs = 20;  // logprobs, top_logprobs and prompt_logprobs bound (as vLLM)
  int max_prompts = 1024;  // prompts in one batched completions request
  int max_bad_words = 256;     // vLLM's bad_words: entries, each at most max_bad_word_len bytes
  int max_bad_word_len = 256;
  // vLLM's --chat-template (HF's chat_template argument: one of the model's
  // named templates, or a template; empty: the model's own choice) and
  // --trust-request-chat-template (a request's chat_template is refused
  // with a 400 without it).
  std::string chat_template{};
  bool trust_request_chat_template = false;
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

// One prompt of a request: its final ids (chat template applied, tokenized).
struct PromptIds {
  std::vector<int32_t> ids;
  std::string echo_text;  // the prompt as text when echo (completions only)
};

// One validated request; max_tokens is resolved against the context.
struct GenRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;
  // One, or a batched completions request's list in order: n choices each,
  // choice index = prompt index * n + choice (OpenAI's and vLLM's order).
  std::vector<PromptIds> prompts;
  SamplingParams sampling;
  bool seeded = false;        // the client gave a seed
  int max_tokens = 0;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool skip_special_tokens = true;
  bool include_stop_str_in_output = false;
  // vLLM's return_token_ids: each choice carries its generated ids (token_ids)
  // and the prompt's (prompt_token_ids; chat: at the top level); streams send
  // each chunk's ids and the prompt's ids once, in a choice's first chunk.
  bool return_token_ids = false;
  int n = 1;
  bool stream = false;
  bool include_usage = false;       // stream_options.include_usage
  bool continuous_usage = false;    // stream_options.continuous_usage_stats (vLLM)
  bool echo = false;
  int prompt_logprobs = -1;  // vLLM's prompt_logprobs: top N per prompt position (-1: none)
  // response_format json_object/json_schema, structured_outputs, guided_*:
  // the grammar every choice's output follows.
  std::optional<StructuredSpec> structured;
  // Chat: tools and tool_choice (server.h's generation fills it: it needs
  // the server's tool options); required and named also set `structured`.
  std::optional<ToolRequest> tools;

  // Echo with logprobs (OpenAI) or prompt_logprobs (vLLM): the prompt's
  // positions are scored, the first choice of each prompt carrying the logits.
  bool wants_prompt_logprobs() const {
    return (echo && sampling.logprobs >= 0) || prompt_logprobs >= 0;
  }
  int prompt_top() const { return std::max(echo ? sampling.logprobs : 0, prompt_logprobs); }
  int64_t prompt_tokens() const {  // usage: every prompt of the batch
    int64_t t = 0;
    for (const PromptIds& p : prompts) t += int64_t(p.ids.size());
    return t;
  }
};

// Parses `body` (already JSON) for `endpoint`. Tokenizes with `tok`. Checks
// the model name against `served_names` (404 when it matches none; a missing
// model field is accepted as the served one, like vLLM). `ordered`: the same
// body parsed with its objects' key order (chat: the template writes tools
// and tool-call arguments in it), or null.
GenRequest parse_request(const nlohmann::json& body, Endpoint endpoint, const Limits& limits,
                         const GenerationDefaults& defaults, const Tokenizer& tok,
                         const std::vector<std::string>& served_names,
                         const nlohmann::ordered_json* ordered = nullptr);

// Parses the raw body text, mapping a syntax error to a 400.
nlohmann::json parse_json_body(const std::string& body);
// The same keeping each object's key order (after parse_json_body accepted it).
nlohmann::ordered_json parse_json_body_ordered(const std::string& body);

// Chat messages from a "messages" array: content as a string or as a list of
// {"type": "text", "text": ...} parts (joined).
std::vector<ChatMessage> parse_messages(const nlohmann::json& messages);

// vLLM's /tokenize (a prompt, or its chat form: messages, tools,
// add_generation_prompt, continue_final_message, chat_template_kwargs,
// chat_template,
// rendered as a chat request's) and /detokenize. `ordered`: as parse_request's.
nlohmann::json handle_tokenize(const nlohmann::json& body, const Limits& limits,
                               const Tokenizer& tok,
                               const nlohmann::ordered_json* ordered = nullptr);
nlohmann::json handle_detokenize(const nlohmann::json& body, const Limits& limits,
                                 const Tokenizer& tok);

}  // namespace hayate::server
