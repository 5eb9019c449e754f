#include "engine/generate.h"

#include "core/check.h"
#include "engine/engine.h"

namespace hayate {

std::string_view finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
  }
  return "?";
}

GenerateResult generate(Engine& engine, std::span<const int32_t> prompt,
                        const GenerateOptions& options, const GenerateCallbacks& callbacks) {
  HAYATE_CHECK(!prompt.empty(), "the prompt is empty");
  HAYATE_CHECK(options.max_new_tokens >= 1, "max new tokens must be >= 1, got ",
               options.max_new_tokens);
  GenerateResult result;
  std::string error;
  bool done = false;
  EngineRequest r;
  r.prompt.assign(prompt.begin(), prompt.end());
  r.sampling = options.sampling;
  r.max_tokens = options.max_new_tokens;
  r.ignore_eos = options.ignore_eos;
  r.stop = options.stop;
  r.grammar = options.grammar;
  r.skip_special_tokens = false;
  r.on_event = [&](const EngineEvent& e) {
    for (int32_t id : e.token_ids) {
      result.ids.push_back(id);
      if (callbacks.on_token) callbacks.on_token(int(result.ids.size()) - 1, id);
    }
    if (!e.text.empty()) {
      result.text += e.text;
      if (callbacks.on_text) callbacks.on_text(e.text);
    }
    if (e.finished) {
      result.finish = e.finish;
      error = e.error;
      done = true;
    }
  };
  engine.submit(std::move(r));
  while (!done)
    HAYATE_CHECK(engine.step() || done, "engine: no progress with a request pending");
  HAYATE_CHECK(error.empty(), error);
  return result;
}

}  // namespace hayate
