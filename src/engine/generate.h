// Single-sequence generation: prefill, then token-by-token decode with
// sampling and stop conditions. `hayate generate`, `perplexity` and `bench`
// use it; the batching engine (engine.h) serves many sequences at once.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampling.h"

namespace hayate {

class Backend;
class Tokenizer;

enum class FinishReason { kStop, kLength, kAbort };
std::string_view finish_reason_name(FinishReason r);  // "stop", "length", "abort"

struct GenerateOptions {
  SamplingParams sampling;
  int max_new_tokens = 128;
  bool ignore_eos = false;
  std::vector<int32_t> eos_ids;       // usually the model's; any of them ends the sequence
  std::vector<std::string> stop;      // stop strings: the text before the match is kept
};

struct GenerateResult {
  std::vector<int32_t> ids;           // generated ids (an ending eos id included)
  std::string text;                   // decoded text, cut at a stop string
  FinishReason finish = FinishReason::kLength;
};

struct GenerateCallbacks {
  std::function<void(std::string_view)> on_text;        // text that became final
  std::function<void(int index, int32_t id)> on_token;  // after each sampled id
};

// Throws Error when the prompt is empty or prompt + max_new_tokens exceeds the
// backend's context.
GenerateResult generate(Backend& backend, const Tokenizer& tokenizer,
                        std::span<const int32_t> prompt, const GenerateOptions& options,
                        const GenerateCallbacks& callbacks = {});

}  // namespace hayate
