// The regex subset (grammar.h) -> Expr.
#include <cctype>

#include "core/check.h"
#include "grammar/grammar.h"

namespace hayate::grammar {

namespace {

const std::vector<Range> kDigit = {{'0', '9'}};
const std::vector<Range> kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const std::vector<Range> kSpace = {{'\t', '\r'}, {' ', ' '}};
// \S leaves out every character that PCRE2 or ECMAScript call a space, so
// what it generates is a non-space under both.
const std::vector<Range> kAnySpace = {{'\t', '\r'}, {' ', ' '}, {0x85, 0x85}, {0xA0, 0xA0},
                                      {0x1680, 0x1680}, {0x180E, 0x180E}, {0x2000, 0x200A},
                                      {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F},
                                      {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};

class RegexParser {
 public:
  RegexParser(std::string_view p, int32_t max_depth, int32_t max_repeat)
      : p_(p), max_depth_(max_depth), max_repeat_(max_repeat) {}

  Expr parse() {
    if (!p_.empty() && p_[0] == '^') ++i_;
    Expr e = parse_alt(0);
    if (i_ < p_.size() && p_[i_] == '$' && i_ + 1 == p_.size()) ++i_;
    HAYATE_CHECK(i_ == p_.size(), err(), "unexpected '", std::string(1, p_[i_]), "'");
    return e;
  }

 private:
  std::string err() const { return cat("regex: at offset ", i_, " of /", std::string(p_), "/: "); }
  bool more() const { return i_ < p_.size(); }

  Expr parse_alt(int depth) {
    HAYATE_CHECK(depth <= max_depth_, err(), "groups nested deeper than ", max_depth_);
    std::vector<Expr> alts{parse_seq(depth)};
    while (more() && p_[i_] == '|') {
      ++i_;
      alts.push_back(parse_seq(depth));
    }
    return alts.size() == 1 ? std::move(alts[0]) : alt(std::move(alts));
  }

  Expr parse_seq(int depth) {
    std::vector<Expr> items;
    while (more() && p_[i_] != '|' && p_[i_] != ')') {
      if (p_[i_] == '$' && i_ + 1 == p_.size() && depth == 0) break;
      Expr a = parse_atom(depth);
      items.push_back(parse_quant(std::move(a)));
    }
    return items.size() == 1 ? std::move(items[0]) : seq(std::move(items));
  }

  int32_t parse_int() {
    const size_t b = i_;
    int64_t v = 0;
    while (more() && std::isdigit(static_cast<unsigned char>(p_[i_]))) {
      v = v * 10 + (p_[i_++] - '0');
      HAYATE_CHECK(v <= max_repeat_, err(), "repetition bound over ", max_repeat_);
    }
    HAYATE_CHECK(i_ > b, err(), "expected a number");
    return static_cast<int32_t>(v);
  }

  Expr parse_quant(Expr a) {
    for (;;) {
      if (!more()) return a;
      const char c = p_[i_];
      int32_t m, n;
      if (c == '*') {
        m = 0, n = -1, ++i_;
      } else if (c == '+') {
        m = 1, n = -1, ++i_;
      } else if (c == '?') {
        m = 0, n = 1, ++i_;
      } else if (c == '{' && i_ + 1 < p_.size() && std::isdigit(static_cast<unsigned char>(p_[i_ + 1]))) {
        ++i_;
        m = n = parse_int();
        if (more() && p_[i_] == ',') {
          ++i_;
          n = more() && p_[i_] == '}' ? -1 : parse_int();
        }
        HAYATE_CHECK(more() && p_[i_] == '}', err(), "expected } in a quantifier");
        ++i_;
        HAYATE_CHECK(n < 0 || n >= m, err(), "quantifier {", m, ",", n, "} has max < min");
      } else {
        return a;
      }
      // Lazy and possessive forms match the same strings.
      if (more() && (p_[i_] == '?' || p_[i_] == '+')) ++i_;
      a = rep(std::move(a), m, n);
    }
  }

  uint32_t parse_hex(size_t digits) {
    uint32_t v = 0;
    for (size_t k = 0; k < digits; ++k) {
      HAYATE_CHECK(more() && std::isxdigit(static_cast<unsigned char>(p_[i_])), err(), "bad hex escape");
      const char h = p_[i_++];
      v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (h | 0x20) - 'a' + 10);
    }
    return v;
  }

  uint32_t scalar(uint32_t cp) {
    HAYATE_CHECK(cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF), err(), "U+", cp,
                 " is not a Unicode scalar value");
    return cp;
  }

  uint32_t utf8_char() {
    const auto c = static_cast<unsigned char>(p_[i_]);
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    HAYATE_CHECK(n > 0 && i_ + static_cast<size_t>(n) <= p_.size(), err(), "invalid UTF-8");
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const auto d = static_cast<unsigned char>(p_[i_ + static_cast<size_t>(k)]);
      HAYATE_CHECK((d & 0xC0) == 0x80, err(), "invalid UTF-8");
      cp = (cp << 6) | (d & 0x3F);
    }
    i_ += static_cast<size_t>(n);
    return scalar(cp);
  }

  // An escape after '\': a single character (returned) or a class (set in
  // *cls_out, returns UINT32_MAX).
  uint32_t parse_escape(std::vector<Range>* cls_out, bool* negated) {
    HAYATE_CHECK(more(), err(), "trailing backslash");
    const char e = p_[i_++];
    *negated = false;
    switch (e) {
      case 'd': *cls_out = kDigit; return UINT32_MAX;
      case 'w': *cls_out = kWord; return UINT32_MAX;
      case 's': *cls_out = kSpace; return UINT32_MAX;
      case 'D': *cls_out = kDigit, *negated = true; return UINT32_MAX;
      case 'W': *cls_out = kWord, *negated = true; return UINT32_MAX;
      case 'S': *cls_out = kAnySpace, *negated = true; return UINT32_MAX;
      case 'n': return '\n';
      case 't': return '\t';
      case 'r': return '\r';
      case 'f': return '\f';
      case 'v': return '\v';
      case '0': return 0;
      case 'x': return parse_hex(2);
      case 'u':
        if (more() && p_[i_] == '{') {
          ++i_;
          uint32_t v = 0;
          size_t k = 0;
          while (more() && p_[i_] != '}' && k++ < 6) v = v * 16 + parse_hex(1);
          HAYATE_CHECK(more() && p_[i_] == '}' && k > 0, err(), "bad \\u{...} escape");
          ++i_;
          return scalar(v);
        }
        return scalar(parse_hex(4));
      default:
        if (std::isdigit(static_cast<unsigned char>(e))) fail(cat(err(), "backreferences are not supported"));
        if (std::isalnum(static_cast<unsigned char>(e)))
          fail(cat(err(), "escape \\", std::string(1, e), " is not supported"));
        return static_cast<uint8_t>(e);
    }
  }

  Expr parse_atom(int depth) {
    const char c = p_[i_];
    switch (c) {
      case '(': {
        ++i_;
        if (more() && p_[i_] == '?') {
          HAYATE_CHECK(i_ + 1 < p_.size() && p_[i_ + 1] == ':', err(),
                       "group syntax (?", std::string(1, i_ + 1 < p_.size() ? p_[i_ + 1] : ' '),
                       " (lookaround, named group or flags) is not supported");
          i_ += 2;
        }
        Expr e = parse_alt(depth + 1);
        HAYATE_CHECK(more() && p_[i_] == ')', err(), "expected )");
        ++i_;
        return e;
      }
      case '[': return parse_class();
      case '.': ++i_; return cls({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}, true);
      case '^': case '$': fail(cat(err(), "anchors are only supported at the ends of the pattern"));
      case '*': case '+': case '?': fail(cat(err(), "quantifier without an operand"));
      case ')': fail(cat(err(), "unbalanced )"));
      case '\\': {
        ++i_;
        std::vector<Range> r;
        bool neg;
        const uint32_t ch = parse_escape(&r, &neg);
        if (ch == UINT32_MAX) return cls(r, neg);
        return cls({{ch, ch}});
      }
      default: {
        const uint32_t ch = utf8_char();
        std::string s;
        append_utf8(s, ch);
        return lit(std::move(s));
      }
    }
  }

  Expr parse_class() {
    ++i_;
    bool negate = false;
    if (more() && p_[i_] == '^') negate = true, ++i_;
    std::vector<Range> ranges;
    bool first = true;
    while (more() && (p_[i_] != ']' || first)) {
      first = false;
      uint32_t lo;
      if (p_[i_] == '\\') {
        ++i_;
        std::vector<Range> r;
        bool neg;
        lo = parse_escape(&r, &neg);
        if (lo == UINT32_MAX) {
          Expr c = cls(r, neg);
          ranges.insert(ranges.end(), c.ranges.begin(), c.ranges.end());
          continue;
        }
      } else {
        HAYATE_CHECK(p_.compare(i_, 2, "[:") != 0, err(), "POSIX classes are not supported");
        lo = utf8_char();
      }
      uint32_t hi = lo;
      if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        if (p_[i_] == '\\') {
          ++i_;
          std::vector<Range> r;
          bool neg;
          hi = parse_escape(&r, &neg);
          HAYATE_CHECK(hi != UINT32_MAX, err(), "a class cannot end a range");
        } else {
          hi = utf8_char();
        }
        HAYATE_CHECK(hi >= lo, err(), "class range is reversed");
      }
      ranges.push_back({lo, hi});
    }
    HAYATE_CHECK(more(), err(), "unterminated class");
    ++i_;
    return cls(std::move(ranges), negate);
  }

  std::string_view p_;
  size_t i_ = 0;
  int32_t max_depth_, max_repeat_;
};

}  // namespace

Expr regex_to_expr(std::string_view pattern, int32_t max_depth, int32_t max_repeat) {
  return RegexParser(pattern, max_depth, max_repeat).parse();
}

Grammar compile_regex(std::string_view pattern, const Limits& limits) {
  RuleSet rs;
  rs.add("root", regex_to_expr(pattern, limits.max_depth, limits.max_repeat));
  return compile(rs, limits);
}

}  // namespace hayate::grammar
