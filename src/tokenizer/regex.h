// A compiled PCRE2 pattern (UTF + UCP, JIT) with the matching semantics of
// the Oniguruma engine that Hugging Face tokenizers uses for its regexes.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hayate {

class Regex {
 public:
  // pattern in HF's regex dialect; literal=true matches the text verbatim.
  // Throws Error naming the pattern when it does not compile.
  Regex(const std::string& pattern, bool literal);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Non-empty matches, left to right, as [begin, end) byte offsets into a
  // VALID UTF-8 subject (callers sanitize input first).
  void find_all(std::string_view subject, std::vector<std::pair<size_t, size_t>>& out) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Rewrites \s and \S to Unicode White_Space, which Oniguruma matches and
// PCRE2's UCP \s does not quite (PCRE2 leaves out U+0085 and U+180E rules
// differ by version). Exposed for tests.
std::string translate_hf_regex(const std::string& pattern);

}  // namespace hayate
