// Single-sequence generation: one prefill forward over the prompt, then one
// forward per new token, each followed by the stop checks (eos id, stop
// string, length). Text flows: StreamDecoder (whole UTF-8 characters) ->
// StopMatcher (holds back possible stop-string starts) -> on_text.
#include "engine/generate.h"

#include <algorithm>

#include "core/check.h"
#include "engine/backend.h"
#include "engine/stop.h"
#include "tokenizer/tokenizer.h"

namespace hayate {

std::string_view finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
  }
  return "?";
}

GenerateResult generate(Backend& backend, const Tokenizer& tokenizer,
                        std::span<const int32_t> prompt, const GenerateOptions& options,
                        const GenerateCallbacks& callbacks) {
  HAYATE_CHECK(!prompt.empty(), "the prompt is empty");
  HAYATE_CHECK(options.max_new_tokens >= 1, "max new tokens must be >= 1, got ",
               options.max_new_tokens);
  const int64_t need = int64_t(prompt.size()) + options.max_new_tokens;
  HAYATE_CHECK(need <= backend.max_context(), "prompt of ", prompt.size(), " tokens + ",
               options.max_new_tokens, " new tokens exceeds the context of ",
               backend.max_context(), " tokens");
  options.sampling.validate();

  GenerateResult result;
  StreamDecoder decoder(tokenizer);
  StopMatcher stop(options.stop);
  auto emit = [&](const std::string& text) {
    if (text.empty()) return;
    result.text += text;
    if (callbacks.on_text) callbacks.on_text(text);
  };
  auto is_eos = [&](int32_t id) {
    return !options.ignore_eos &&
           std::find(options.eos_ids.begin(), options.eos_ids.end(), id) != options.eos_ids.end();
  };

  int pos = 0;
  int32_t id = backend.forward_sample(prompt, pos, options.sampling, 0);
  pos += int(prompt.size());
  for (int i = 0;; ++i) {
    result.ids.push_back(id);
    if (callbacks.on_token) callbacks.on_token(i, id);
    if (is_eos(id)) {
      result.finish = FinishReason::kStop;
      break;
    }
    emit(stop.push(decoder.push(id)));
    if (stop.stopped()) {
      result.finish = FinishReason::kStop;
      break;
    }
    if (i + 1 == options.max_new_tokens) {
      result.finish = FinishReason::kLength;
      break;
    }
    const int32_t one[1] = {id};
    id = backend.forward_sample(one, pos, options.sampling, uint64_t(i + 1));
    ++pos;
  }
  if (!stop.stopped()) {
    emit(stop.push(decoder.flush()));
    emit(stop.flush());
    if (stop.stopped()) result.finish = FinishReason::kStop;
  }
  return result;
}

}  // namespace hayate
