// libFuzzer: random bytes as tokenizer.json (and, after a 0 byte, as
// tokenizer_config.json). Loading must succeed or throw hayate::Error; a
// tokenizer that loads must encode and decode a fixed text without crashing.
#include <cstdint>
#include <string>

#include "core/check.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string all(reinterpret_cast<const char*>(data), size);
  size_t split = all.find('\0');
  std::string tj = all.substr(0, split);
  std::string cfg = split == std::string::npos ? "" : all.substr(split + 1);
  try {
    hayate::Tokenizer tok = hayate::Tokenizer::from_json(tj, cfg);
    auto ids = tok.encode("Hello, 世界! <s> 123 \xF0\x9F\x98\x80 ab", true);
    (void)tok.decode(ids);
    if (tok.has_chat_template()) (void)tok.apply_chat_template({{"user", "hi"}});
  } catch (const hayate::Error&) {
  }
  return 0;
}
