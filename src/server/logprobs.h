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

// Completions with echo: the same shape over the prompt's tokens and then
// the generated ones. The first prompt token has no logprob (null in
// token_logprobs and top_logprobs, as OpenAI and vLLM); prompt_lp[i] scores
// prompt[i + 1], its top list cut to `top`.
nlohmann::json echo_logprobs(const Tokenizer& tok, std::span<const int32_t> prompt,
                             std::span<const SampleResult> prompt_lp, int top,
                             std::span<const SampleResult> generated);

// vLLM's prompt_logprobs: [null, {"<id>": {logprob, rank, decoded_token}}, ...],
// one entry per prompt token, each with the token itself and the `top` most
// likely ids at that position (rank 1 = most likely).
nlohmann::json prompt_logprobs_json(const Tokenizer& tok, std::span<const int32_t> prompt,
                                    std::span<const SampleResult> prompt_lp, int top);


}  // namespace hayate::server
