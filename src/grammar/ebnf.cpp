// GBNF-style EBNF text -> RuleSet (syntax in grammar.h).
#include <cctype>

#include "core/check.h"
#include "grammar/grammar.h"

namespace hayate::grammar {

namespace {

class EbnfParser {
 public:
  EbnfParser(std::string_view s, const Limits& limits) : s_(s), limits_(limits) {}

  RuleSet parse() {
    RuleSet rs;
    skip_space(true);
    while (i_ < s_.size()) {
      std::string name = parse_name();
      skip_space(true);
      HAYATE_CHECK(s_.compare(i_, 3, "::=") == 0, where(), "expected ::= after rule name '", name, "'");
      i_ += 3;
      skip_space(true);
      rs.add(std::move(name), parse_alternatives(0));
      skip_space(true);
    }
    HAYATE_CHECK(!rs.rules.empty(), "ebnf: the grammar has no rules");
    bool has_root = false;
    for (auto& r : rs.rules) has_root = has_root || r.first == "root";
    HAYATE_CHECK(has_root, "ebnf: no rule named root");
    return rs;
  }

 private:
  std::string where() const {
    size_t line = 1;
    for (size_t k = 0; k < i_ && k < s_.size(); ++k) line += s_[k] == '\n';
    return cat("ebnf: line ", line, ": ");
  }
  static bool name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  }
  // Skips blanks and # comments; newlines only when allowed (inside
  // groups, after | or ::=, and between rules).
  void skip_space(bool newlines) {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++i_;
      } else {
        break;
      }
    }
  }
  std::string parse_name() {
    const size_t b = i_;
    while (i_ < s_.size() && name_char(s_[i_])) ++i_;
    HAYATE_CHECK(i_ > b, where(), "expected a rule name");
    return std::string(s_.substr(b, i_ - b));
  }
  // True if a rule definition `name ::=` starts at the cursor.
  bool at_definition() const {
    size_t k = i_;
    while (k < s_.size() && name_char(s_[k])) ++k;
    if (k == i_) return false;
    while (k < s_.size() && (s_[k] == ' ' || s_[k] == '\t' || s_[k] == '\r' || s_[k] == '\n')) ++k;
    return s_.compare(k, 3, "::=") == 0;
  }

  Expr parse_alternatives(int depth) {
    HAYATE_CHECK(depth <= limits_.max_depth, where(), "nested deeper than ", limits_.max_depth);
    std::vector<Expr> alts{parse_sequence(depth)};
    while (i_ < s_.size() && s_[i_] == '|') {
      ++i_;
      skip_space(true);
      alts.push_back(parse_sequence(depth));
    }
    return alts.size() == 1 ? std::move(alts[0]) : alt(std::move(alts));
  }

  Expr parse_sequence(int depth) {
    std::vector<Expr> items;
    for (;;) {
      skip_space(depth > 0);
      if (i_ >= s_.size()) break;
      const char c = s_[i_];
      if (c == '\n') {
        // A newline ends the rule unless the next line continues it.
        skip_space(true);
        if (i_ >= s_.size() || at_definition() || s_[i_] == '|') break;
        continue;
      }
      if (c == '|' || c == ')') break;
      if (depth == 0 && at_definition()) break;
      Expr atom = parse_atom(depth);
      items.push_back(parse_postfix(std::move(atom)));
    }
    return items.size() == 1 ? std::move(items[0]) : seq(std::move(items));
  }

  Expr parse_postfix(Expr atom) {
    for (;;) {
      if (i_ >= s_.size()) return atom;
      const char c = s_[i_];
      if (c == '*') {
        ++i_, atom = rep(std::move(atom), 0, -1);
      } else if (c == '+') {
        ++i_, atom = rep(std::move(atom), 1, -1);
      } else if (c == '?') {
        ++i_, atom = rep(std::move(atom), 0, 1);
      } else if (c == '{') {
        ++i_;
        const int32_t m = parse_int();
        int32_t n = m;
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          skip_space(false);
          n = i_ < s_.size() && s_[i_] == '}' ? -1 : parse_int();
        }
        skip_space(false);
        HAYATE_CHECK(i_ < s_.size() && s_[i_] == '}', where(), "expected } in a repetition");
        ++i_;
        HAYATE_CHECK(n < 0 || n >= m, where(), "repetition {", m, ",", n, "} has max < min");
        atom = rep(std::move(atom), m, n);
      } else {
        return atom;
      }
    }
  }

  int32_t parse_int() {
    skip_space(false);
    const size_t b = i_;
    int64_t v = 0;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      v = v * 10 + (s_[i_++] - '0');
      HAYATE_CHECK(v <= limits_.max_repeat, where(), "repetition bound over ", limits_.max_repeat);
    }
    HAYATE_CHECK(i_ > b, where(), "expected a number in a repetition");
    skip_space(false);
    return static_cast<int32_t>(v);
  }

  Expr parse_atom(int depth) {
    const char c = s_[i_];
    if (c == '"') return parse_literal();
    if (c == '[') return parse_class();
    if (c == '.') {
      ++i_;
      return cls({{0, 0x10FFFF}});
    }
    if (c == '(') {
      ++i_;
      skip_space(true);
      Expr e = parse_alternatives(depth + 1);
      skip_space(true);
      HAYATE_CHECK(i_ < s_.size() && s_[i_] == ')', where(), "expected )");
      ++i_;
      return e;
    }
    if (name_char(c)) return ref(parse_name());
    fail(cat(where(), "unexpected character '", std::string(1, c), "'"));
  }

  uint32_t parse_hex(size_t digits) {
    HAYATE_CHECK(i_ + digits <= s_.size(), where(), "truncated escape");
    uint32_t v = 0;
    for (size_t k = 0; k < digits; ++k) {
      const char h = s_[i_++];
      HAYATE_CHECK(std::isxdigit(static_cast<unsigned char>(h)), where(), "bad hex digit in escape");
      v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (h | 0x20) - 'a' + 10);
    }
    return v;
  }

  // One character of a literal or class: an escape or a UTF-8 sequence.
  uint32_t parse_char() {
    HAYATE_CHECK(i_ < s_.size(), where(), "unterminated literal or class");
    const auto c = static_cast<unsigned char>(s_[i_]);
    if (c == '\\') {
      ++i_;
      HAYATE_CHECK(i_ < s_.size(), where(), "truncated escape");
      const char e = s_[i_++];
      switch (e) {
        case 'n': return '\n';
        case 't': return '\t';
        case 'r': return '\r';
        case 'x': return parse_hex(2);
        case 'u': return check_scalar(parse_hex(4));
        case 'U': return check_scalar(parse_hex(8));
        case '\\': case '"': case '[': case ']': case '-': case '^': return static_cast<uint8_t>(e);
        default: fail(cat(where(), "unknown escape \\", std::string(1, e)));
      }
    }
    // Decode one UTF-8 character of the grammar text.
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    HAYATE_CHECK(n > 0 && i_ + static_cast<size_t>(n) <= s_.size(), where(), "invalid UTF-8 in the grammar");
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const auto d = static_cast<unsigned char>(s_[i_ + static_cast<size_t>(k)]);
      HAYATE_CHECK((d & 0xC0) == 0x80, where(), "invalid UTF-8 in the grammar");
      cp = (cp << 6) | (d & 0x3F);
    }
    i_ += static_cast<size_t>(n);
    return check_scalar(cp);
  }
  uint32_t check_scalar(uint32_t cp) {
    HAYATE_CHECK(cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF), where(), "escape U+", cp,
                 " is not a Unicode scalar value");
    return cp;
  }

  Expr parse_literal() {
    ++i_;
    std::string bytes;
    while (i_ < s_.size() && s_[i_] != '"') append_utf8(bytes, parse_char());
    HAYATE_CHECK(i_ < s_.size(), where(), "unterminated string literal");
    ++i_;
    return lit(std::move(bytes));
  }

  Expr parse_class() {
    ++i_;
    bool negate = false;
    if (i_ < s_.size() && s_[i_] == '^') negate = true, ++i_;
    std::vector<Range> ranges;
    while (i_ < s_.size() && s_[i_] != ']') {
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (i_ + 1 < s_.size() && s_[i_] == '-' && s_[i_ + 1] != ']') {
        ++i_;
        hi = parse_char();
        HAYATE_CHECK(hi >= lo, where(), "class range is reversed");
      }
      ranges.push_back({lo, hi});
    }
    HAYATE_CHECK(i_ < s_.size(), where(), "unterminated character class");
    ++i_;
    return cls(std::move(ranges), negate);
  }

  std::string_view s_;
  size_t i_ = 0;
  const Limits& limits_;
};

}  // namespace

Grammar compile_ebnf(std::string_view text, const Limits& limits) {
  return compile(EbnfParser(text, limits).parse(), limits);
}

}  // namespace hayate::grammar
