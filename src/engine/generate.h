// One request through the engine, on the calling thread: `hayate generate`,
// `bench` (the article's trials) and the golden tests use it. A single
// request is a batch of one; the stop logic is the engine's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampling.h"

namespace hayate {

class Engine;
namespace grammar {
class TokenTables;
}

enum class FinishReason { kStop, kLength, kAbort };
std::string_view finish_reason_name(FinishReason r);  // "stop", "length", "abort"

struct GenerateOptions {
  SamplingParams sampling;
  int max_new_tokens = 128;
  bool ignore_eos = false;            // keep going past the model's eos ids
  std::vector<std::string> stop;      // stop strings: the text before the match is kept
  std::shared_ptr<const grammar::TokenTables> grammar;  // structured output (EngineRequest)
};

struct GenerateResult {
  std::vector<int32_t> ids;           // generated ids (an ending eos id included)
  std::string text;                   // decoded text (special tokens kept), cut at a stop string
  FinishReason finish = FinishReason::kLength;
};

struct GenerateCallbacks {
  std::function<void(std::string_view)> on_text;        // text that became final
  std::function<void(int index, int32_t id)> on_token;  // after each sampled id
};

// Submits one request and steps `engine` until it has finished; the engine
// must have no background loop running. Throws Error for a request the
// engine refuses (empty prompt, prompt + max_new_tokens beyond the context,
// bad sampling params) or one that failed inside a step.
GenerateResult generate(Engine& engine, std::span<const int32_t> prompt,
                        const GenerateOptions& options, const GenerateCallbacks& callbacks = {});

}  // namespace hayate
