// The grammar compilers on arbitrary input: the first byte picks EBNF,
// regex, JSON Schema or a choice list; the rest is the text. Bad input
// must be a hayate::Error, never a crash, a sanitizer report or a hang.
// A grammar that compiles is then driven by the fuzz bytes as input.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/check.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  hayate::grammar::Limits limits;
  limits.max_elements = 1 << 14;
  limits.max_rules = 1 << 12;
  limits.max_repeat = 64;
  limits.max_depth = 32;
  try {
    hayate::grammar::Grammar g;
    switch (data[0] % 4) {
      case 0: g = hayate::grammar::compile_ebnf(text, limits); break;
      case 1: g = hayate::grammar::compile_regex(text, limits); break;
      case 2: g = hayate::grammar::compile_json_schema(std::string_view(text), {}, limits); break;
      default: {
        std::vector<std::string> choices;
        size_t b = 0;
        for (size_t i = 0; i <= text.size(); ++i)
          if (i == text.size() || text[i] == '\n') choices.push_back(text.substr(b, i - b)), b = i + 1;
        g = hayate::grammar::compile_choice(choices, limits);
      }
    }
    hayate::grammar::GrammarMatcher m(std::make_shared<const hayate::grammar::Grammar>(std::move(g)));
    for (char c : text) m.accept_bytes(std::string_view(&c, 1));
    (void)m.can_end();
  } catch (const hayate::Error&) {
  }
  return 0;
}
