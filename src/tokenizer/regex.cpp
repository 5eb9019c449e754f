#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdint>

#include "core/check.h"

namespace hayate {

namespace {
// Unicode White_Space as a class body, usable inside [...] and as [...].
constexpr const char* kSpaceBody =
    "\\t-\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}"
    "\\x{3000}";
}  // namespace

std::string translate_hf_regex(const std::string& p) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char n = p[i + 1];
      if (n == 's') {
        out += in_class ? std::string(kSpaceBody) : cat("[", kSpaceBody, "]");
      } else if (n == 'S') {
        HAYATE_CHECK(!in_class, "regex '", p, "': \\S inside a character class is not supported");
        out += cat("[^", kSpaceBody, "]");
      } else {
        out += c;
        out += n;
      }
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

struct Regex::State {
  pcre2_code* code = nullptr;
  ~State() {
    if (code) pcre2_code_free(code);
  }
};

Regex::Regex(const std::string& pattern, bool literal) : state_(std::make_unique<State>()) {
  std::string p = literal ? pattern : translate_hf_regex(pattern);
  uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK | (literal ? PCRE2_LITERAL : 0);
  int err = 0;
  PCRE2_SIZE err_off = 0;
  state_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(), options, &err,
                               &err_off, nullptr);
  if (!state_->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    fail(cat("regex '", pattern, "' does not compile at offset ", err_off, ": ",
             reinterpret_cast<const char*>(msg)));
  }
  // JIT is an optimisation only; the interpreter gives the same matches.
  pcre2_jit_compile(state_->code, PCRE2_JIT_COMPLETE);
}

Regex::~Regex() = default;

void Regex::find_all(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const {
  out.clear();
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(state_->code, nullptr);
  HAYATE_CHECK(md != nullptr, "regex: out of memory");
  // PCRE2's default match limit (10 million) counts work over the whole
  // subject, so one long run (10 M spaces, which `\s+(?!\S)` takes in one
  // match) exceeds it although the match is linear. The limit scales with
  // the subject instead: still a bound on a pathological pattern's time.
  pcre2_match_context* ctx = pcre2_match_context_create(nullptr);
  HAYATE_CHECK(ctx != nullptr, "regex: out of memory");
  pcre2_set_match_limit(
      ctx, uint32_t(std::min<uint64_t>(10'000'000 + 64 * uint64_t(s.size()), UINT32_MAX)));
  auto subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t pos = 0;
  while (pos <= s.size()) {
    int rc = pcre2_match(state_->code, subject, s.size(), pos, PCRE2_NO_UTF_CHECK, md, ctx);
    // The JIT's stack is small; the interpreter keeps its backtracking on the heap.
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
      rc = pcre2_match(state_->code, subject, s.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
                       ctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(md);
      pcre2_match_context_free(ctx);
      fail(cat("the text could not be split into words (PCRE2 error ", rc,
               "): it is too long or too repetitive for the tokenizer's pattern"));
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t b = ov[0], e = ov[1];
    if (e > b) {
      out.emplace_back(b, e);
      pos = e;
    } else {
      // Empty match: step over one whole character and search again.
      if (b >= s.size()) break;
      pos = b + 1;
      while (pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
  pcre2_match_data_free(md);
  pcre2_match_context_free(ctx);
}

}  // namespace hayate
