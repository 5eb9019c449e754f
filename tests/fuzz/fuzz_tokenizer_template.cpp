// libFuzzer: random bytes as a chat template, rendered with a fixed
// conversation. Rendering must succeed or throw hayate::Error, within the
// interpreter's step and size limits.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/check.h"
#include "tokenizer/jinja.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 8192) return 0;
  std::string src(reinterpret_cast<const char*>(data), size);
  static const nlohmann::json ctx = {
      {"messages", {{{"role", "system"}, {"content", " sys "}}, {{"role", "user"}, {"content", "日本語"}}}},
      {"bos_token", "<s>"}, {"eos_token", "</s>"}, {"add_generation_prompt", true},
      {"tools", {{{"name", "f"}, {"parameters", {{"x", 1}}}}}}};
  try {
    (void)hayate::jinja::render(src, ctx);
  } catch (const hayate::Error&) {
  }
  return 0;
}
