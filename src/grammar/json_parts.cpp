#include "grammar/json_parts.h"

#include <algorithm>

#include "core/check.h"
#include "grammar/grammar.h"

namespace hayate::grammar::json_parts {

namespace {

Expr digits(int32_t min, int32_t max) { return rep(cls({{'0', '9'}}), min, max); }
Expr hex() { return cls({{'0', '9'}, {'A', 'F'}, {'a', 'f'}}); }
int64_t pow10(int n) {
  int64_t v = 1;
  while (n-- > 0) v *= 10;
  return v;
}

// Decimal strings a <= b of equal length: the strings between them.
Expr same_length_range(const std::string& a, const std::string& b) {
  if (a.empty()) return empty();
  const bool a_low = a.find_first_not_of('0', 1) == std::string::npos;
  const bool b_high = b.find_first_not_of('9', 1) == std::string::npos;
  const uint32_t a0 = static_cast<uint8_t>(a[0]), b0 = static_cast<uint8_t>(b[0]);
  const auto rest = static_cast<int32_t>(a.size() - 1);
  if (a0 == b0) return seq({lit(std::string(1, a[0])), same_length_range(a.substr(1), b.substr(1))});
  if (a_low && b_high) return seq({cls({{a0, b0}}), digits(rest, rest)});
  std::vector<Expr> alts;
  alts.push_back(seq({lit(std::string(1, a[0])),
                      same_length_range(a.substr(1), std::string(a.size() - 1, '9'))}));
  if (a0 + 1 <= b0 - 1) alts.push_back(seq({cls({{a0 + 1, b0 - 1}}), digits(rest, rest)}));
  alts.push_back(seq({lit(std::string(1, b[0])),
                      same_length_range(std::string(b.size() - 1, '0'), b.substr(1))}));
  return alt(std::move(alts));
}

// Non-negative integers in [a, b], a <= b.
Expr natural_range(int64_t a, int64_t b) {
  std::vector<Expr> alts;
  for (size_t len = std::to_string(a).size(); len <= std::to_string(b).size(); ++len) {
    const int64_t lo = std::max(a, len == 1 ? 0 : pow10(static_cast<int>(len) - 1));
    const int64_t hi = std::min(b, pow10(static_cast<int>(len)) - 1);
    if (lo <= hi) alts.push_back(same_length_range(std::to_string(lo), std::to_string(hi)));
  }
  return alts.size() == 1 ? std::move(alts[0]) : alt(std::move(alts));
}

}  // namespace

Expr ws(const JsonOptions& o) {
  if (o.max_whitespace <= 0) return empty();
  return rep(cls({{' ', ' '}, {'\n', '\n'}, {'\t', '\t'}}), 0, o.max_whitespace);
}

Expr string_char() {
  Expr plain = cls({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}, true);
  // \uXXXX outside D800..DFFF: a first digit other than d/D, or d then 0-7.
  Expr u = alt({seq({cls({{'0', '9'}, {'A', 'C'}, {'E', 'F'}, {'a', 'c'}, {'e', 'f'}}), hex(), hex(), hex()}),
                seq({cls({{'D', 'D'}, {'d', 'd'}}), cls({{'0', '7'}}), hex(), hex()})});
  Expr escape = seq({lit("\\"), alt({cls({{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', 'b'}, {'f', 'f'},
                                          {'n', 'n'}, {'r', 'r'}, {'t', 't'}}),
                                     seq({lit("u"), std::move(u)})})});
  return alt({std::move(plain), std::move(escape)});
}

Expr quoted(Expr contents) { return seq({lit("\""), std::move(contents), lit("\"")}); }

Expr integer(const JsonOptions& o) {
  return seq({opt(lit("-")), alt({lit("0"), seq({cls({{'1', '9'}}), digits(0, o.max_integer_digits - 1)})})});
}

Expr number(const JsonOptions& o) {
  return seq({integer(o), opt(seq({lit("."), digits(1, o.max_fraction_digits)})),
              opt(seq({cls({{'E', 'E'}, {'e', 'e'}}), opt(cls({{'+', '+'}, {'-', '-'}})),
                       digits(1, o.max_exponent_digits)}))});
}

Expr integer_range(int64_t lo, int64_t hi) {
  HAYATE_CHECK(lo <= hi, "json schema: the integer bounds leave no value (", lo, " > ", hi, ")");
  std::vector<Expr> alts;
  if (lo < 0) alts.push_back(seq({lit("-"), natural_range(hi < 0 ? -hi : 1, -lo)}));
  if (hi >= 0) alts.push_back(natural_range(std::max<int64_t>(lo, 0), hi));
  return alts.size() == 1 ? std::move(alts[0]) : alt(std::move(alts));
}

Expr number_range(int64_t lo, int64_t hi, const JsonOptions& o) {
  Expr ints = integer_range(lo, hi);
  if (lo < 0 || hi - 1 < lo) return ints;
  Expr frac = seq({natural_range(lo, hi - 1), lit("."), digits(1, o.max_fraction_digits)});
  return alt({std::move(ints), std::move(frac)});
}

Expr format_contents(const std::string& format) {
  static const std::string date =
      "[0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|"
      "02-(0[1-9]|1[0-9]|2[0-8]))";
  static const std::string time =
      "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
  static const std::string octet = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
  std::string re;
  if (format == "date") re = date;
  else if (format == "time") re = time;
  else if (format == "date-time") re = date + "T" + time;
  else if (format == "uuid") re = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
  else if (format == "ipv4") re = octet + "(\\." + octet + "){3}";
  else if (format == "email") re = "[a-z0-9]+([._-][a-z0-9]+)*@[a-z0-9]+(-[a-z0-9]+)*(\\.[a-z]{2,8})+";
  else fail(cat("json schema: format '", format, "' is not supported"));
  return regex_to_expr(re, 64, 64);
}

namespace {

// Rewrites a regex Expr over decoded characters into one over JSON string
// contents: " and \ appear escaped; control characters and U+2028/U+2029
// are dropped from classes (ECMAScript's `.` does not match the line
// terminators among them) and escaped in literals.
Expr json_escape(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kLiteral: {
      std::string out;
      for (unsigned char c : e.text) {
        if (c == '"' || c == '\\') {
          out += '\\';
          out += static_cast<char>(c);
        } else if (c < 0x20) {
          static const char* hexd = "0123456789abcdef";
          out += "\\u00";
          out += hexd[c >> 4];
          out += hexd[c & 15];
        } else {
          out += static_cast<char>(c);
        }
      }
      return lit(std::move(out));
    }
    case Expr::Kind::kClass: {
      std::vector<Expr> alts;
      std::vector<Range> keep;
      for (Range r : e.ranges) {
        for (uint32_t special : {uint32_t{'"'}, uint32_t{'\\'}})
          if (r.lo <= special && special <= r.hi) alts.push_back(lit(std::string("\\") + static_cast<char>(special)));
        keep.push_back(r);
      }
      Expr c = cls(std::move(keep));
      std::vector<Range> drop = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0x2028, 0x2029}};
      // c minus drop: intersect with the complement of drop.
      Expr allowed = cls(drop, true);
      std::vector<Range> out;
      for (Range a : c.ranges)
        for (Range b : allowed.ranges) {
          const uint32_t lo = std::max(a.lo, b.lo), hi = std::min(a.hi, b.hi);
          if (lo <= hi) out.push_back({lo, hi});
        }
      if (!out.empty()) alts.push_back(cls(std::move(out)));
      HAYATE_CHECK(!alts.empty(), "json schema: pattern has a class of control characters only");
      return alts.size() == 1 ? std::move(alts[0]) : alt(std::move(alts));
    }
    default: {
      Expr out = e;
      for (Expr& i : out.items) i = json_escape(i);
      return out;
    }
  }
}

}  // namespace

Expr pattern_contents(const std::string& pattern, const Limits& limits) {
  const bool start = !pattern.empty() && pattern[0] == '^';
  const bool end = pattern.size() > 1 && pattern.back() == '$' && pattern[pattern.size() - 2] != '\\';
  Expr body = json_escape(regex_to_expr(pattern, limits.max_depth, limits.max_repeat));
  std::vector<Expr> parts;
  if (!start) parts.push_back(rep(string_char(), 0, -1));
  parts.push_back(std::move(body));
  if (!end) parts.push_back(rep(string_char(), 0, -1));
  return seq(std::move(parts));
}

}  // namespace hayate::grammar::json_parts
