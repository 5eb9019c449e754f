// libFuzzer: random bytes as the body of /v1/completions (first byte even) or
// /v1/chat/completions (odd), parsed into a generation request with the Llama
// 3.1 tokenizer. Parsing must succeed or throw ApiError / hayate::Error; an
// accepted request's sampling parameters must validate and drive the host
// sampler.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/check.h"
#include "engine/sampling.h"
#include "server/api_error.h"
#include "server/protocol.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hayate;
  if (size < 1 || size > 65536) return 0;
  static const Tokenizer tok = Tokenizer::load(HAYATE_ASSETS_DIR "/llama3_1");
  static const std::vector<float> logits = [] {
    std::vector<float> v(512);
    for (size_t i = 0; i < v.size(); ++i) v[i] = float((i * 2654435761u) % 1000) / 100.0f;
    return v;
  }();
  server::Limits lim;
  lim.max_model_len = 4096;
  lim.vocab_size = tok.vocab_size();
  const auto endpoint = data[0] % 2 ? server::Endpoint::kChat : server::Endpoint::kCompletions;
  std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    server::GenRequest r =
        server::parse_request(server::parse_json_body(body), endpoint, lim, {}, tok, {"m"});
    r.sampling.validate();
    HAYATE_CHECK(!r.prompts.empty() && int(r.prompts.size()) <= lim.max_prompts &&
                     (r.max_tokens >= 1 || (r.max_tokens == 0 && r.echo)),
                 "fuzz: an accepted request breaks the prompt or max_tokens bounds");
    for (const server::PromptIds& q : r.prompts)
      HAYATE_CHECK(!q.ids.empty() && int64_t(q.ids.size()) + r.max_tokens <= lim.max_model_len,
                   "fuzz: an accepted request breaks the context bound");
    SamplingParams p = r.sampling;
    p.top_k = std::min(p.top_k, int(logits.size()));
    (void)sample_token(logits, p, 0);
  } catch (const server::ApiError&) {
  } catch (const Error& e) {
    if (std::string(e.what()).rfind("fuzz:", 0) == 0) __builtin_trap();
  }
  return 0;
}
