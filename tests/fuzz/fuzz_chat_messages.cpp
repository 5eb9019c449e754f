// libFuzzer: a chat template and a message list from random bytes: the bytes
// before the first 0 byte are the template (the Llama 3.1 template when that
// part is empty), the rest a JSON messages array. Rendering must succeed or
// throw hayate::Error, within the interpreter's step, size and depth limits.
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "core/check.h"
#include "tokenizer/jinja.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;
  static const std::string llama31 = [] {
    std::ifstream f(HAYATE_SOURCE_DIR "/tests/fuzz/corpus/tokenizer_template/llama3_1.jinja");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }();
  std::string all(reinterpret_cast<const char*>(data), size);
  size_t split = all.find('\0');
  if (split == std::string::npos) return 0;
  std::string src = split == 0 ? llama31 : all.substr(0, split);
  nlohmann::json messages = nlohmann::json::parse(all.substr(split + 1), nullptr, false);
  if (messages.is_discarded()) return 0;
  nlohmann::json ctx = {{"messages", messages},
                        {"bos_token", "<s>"},
                        {"eos_token", "</s>"},
                        {"add_generation_prompt", true}};
  try {
    (void)hayate::jinja::render(src, ctx);
  } catch (const hayate::Error&) {
  }
  return 0;
}
