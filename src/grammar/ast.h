// The grammar compilers' common front end: a tree of expressions per named
// rule (literal, character class, reference, sequence, alternation,
// repetition). The EBNF parser, the regex parser, the choice list and the
// JSON Schema compiler all build a RuleSet; compile() in grammar.h lowers it
// to the byte-level IR the matcher runs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hayate::grammar {

// An inclusive range of Unicode code points, or of bytes in kBytes classes.
struct Range {
  uint32_t lo = 0, hi = 0;
};

struct Expr {
  enum class Kind : uint8_t {
    kLiteral,  // text: UTF-8 bytes matched verbatim
    kClass,    // ranges: code points (one character, encoded as UTF-8)
    kBytes,    // ranges: single byte values 0..255 (internal: UTF-8 lowering)
    kRef,      // text: rule name, or rule >= 0 once resolved
    kSeq,      // items in order; an empty sequence matches the empty string
    kAlt,      // one of items
    kRepeat,   // items[0] repeated min..max times (max < 0: unbounded)
  };
  Kind kind = Kind::kSeq;
  std::string text;
  std::vector<Range> ranges;  // sorted, disjoint, non-adjacent
  std::vector<Expr> items;
  int32_t rule = -1;
  int32_t min = 0, max = -1;
};

// Builders. cls() sorts and merges ranges; negate=true complements them
// within the Unicode scalar values (surrogates are never matched).
Expr lit(std::string bytes);
Expr cls(std::vector<Range> ranges, bool negate = false);
Expr ref(std::string name);
Expr seq(std::vector<Expr> items);
Expr alt(std::vector<Expr> items);
Expr rep(Expr item, int32_t min, int32_t max);
inline Expr opt(Expr item) { return rep(std::move(item), 0, 1); }
inline Expr empty() { return seq({}); }

// Named rules; the first rule named root (or rules[0] if none is) is the start.
struct RuleSet {
  std::vector<std::pair<std::string, Expr>> rules;
  std::string root = "root";
  void add(std::string name, Expr body) { rules.emplace_back(std::move(name), std::move(body)); }
};

// Sorted, merged ranges (adjacent ones joined).
std::vector<Range> normalize(std::vector<Range> ranges);

// Appends the UTF-8 encoding of a code point (must be a scalar value).
void append_utf8(std::string& out, uint32_t cp);

}  // namespace hayate::grammar
