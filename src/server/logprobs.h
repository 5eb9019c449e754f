// Log-probabilities in OpenAI's response shapes, from the engine's
// SampleResult list (one per generated id). The values are those of the
// model's raw distribution (log_softmax of the logits before penalties and
// temperature: vLLM's default "raw_logprobs"), clamped to >= -9999 as vLLM
// does, since JSON has no -inf.
#pragma once

#include <cstdint>
#include <span>

#include <nlohmann/json.hpp>

#include "engine/sampling.h"
#include "tokenizer/tokenizer.h"

namespace hayate::server {

// Chat: {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob,
// bytes}] (the N most likely, descending)}]}. `token` is the id decoded on its
// own (a partial UTF-8 character comes out as U+FFFD); `bytes` are its raw
// bytes, so clients can join split characters.
nlohmann::json chat_logprobs(const Tokenizer& tok, std::span<const SampleResult> lp);

// Completions: {tokens, token_logprobs, top_logprobs: [{token: logprob}] (the
// N most likely plus the chosen id, so up to N + 1 entries, as OpenAI
// documents), text_offset}. text_offset counts Unicode code points of the
// token strings before each one (Python's len, as vLLM), starting at
// `*offset`, which is advanced past this list (streams continue it).
nlohmann::json completion_logprobs(const Tokenizer& tok, std::span<const SampleResult> lp,
                                   int64_t* offset);

}  // namespace hayate::server
