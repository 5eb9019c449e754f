// The grammar IR: rules of alternative sequences over byte sets, run by the
// pushdown matcher in matcher.h over UTF-8 bytes. Every compiler (EBNF,
// regex, choice, JSON, JSON Schema) lowers into it through compile().
//
// Layout: every alternative is a run of elements in one flat array ending
// in kEnd, so a parser position is one index. A kRef just before kEnd is a
// tail call (no return frame is pushed), which keeps right recursion such
// as `chars ::= [a-z] chars | ""` at constant stack depth.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/ast.h"

namespace hayate::grammar {

// Compile limits; exceeding one is an Error, never a hang.
struct Limits {
  size_t max_elements = 1 << 20;  // IR elements (positions)
  size_t max_rules = 1 << 18;
  int32_t max_repeat = 10000;     // largest finite bound in X{m,n}
  int32_t max_depth = 128;        // nesting of expressions / schemas
  size_t max_closure_steps = 1 << 20;  // per matcher step, a safety net
};

using ByteSet = std::array<uint64_t, 4>;

inline bool has_byte(const ByteSet& s, uint8_t b) { return (s[b >> 6] >> (b & 63)) & 1; }

class Grammar {
 public:
  enum class Op : uint8_t { kBytes, kRef, kEnd };
  struct Element {
    Op op;
    uint32_t arg;  // kBytes: index into byte_sets; kRef: rule index
  };
  struct Rule {
    std::string name;
    std::vector<uint32_t> alts;  // start positions of the alternatives
  };
  // Where the parser goes when a rule ends with no known caller frame:
  // the single return position all its call sites share, the end of input
  // (only the root is called from there), or several (context-dependent).
  static constexpr int64_t kReturnEndOfInput = -1;
  static constexpr int64_t kReturnMany = -2;

  const std::vector<Element>& elements() const { return elements_; }
  const std::vector<ByteSet>& byte_sets() const { return byte_sets_; }
  const std::vector<Rule>& rules() const { return rules_; }
  uint32_t rule_of(uint32_t pos) const { return rule_of_[pos]; }
  int64_t static_return(uint32_t rule) const { return static_return_[rule]; }
  // The bytes that can come right after the rule ends, in any context.
  const ByteSet& follow(uint32_t rule) const { return follow_[rule]; }
  const Limits& limits() const { return limits_; }
  size_t num_positions() const { return elements_.size(); }
  // A readable GBNF-like listing of the lowered rules (for errors and tests).
  std::string dump() const;

 private:
  friend class Lowering;
  std::vector<Element> elements_;
  std::vector<ByteSet> byte_sets_;
  std::vector<Rule> rules_;  // rules_[0] is the root
  std::vector<uint32_t> rule_of_;
  std::vector<int64_t> static_return_;
  std::vector<ByteSet> follow_;
  Limits limits_;
};

// Lowers a rule set: resolves names (unknown name: Error), splits code point
// classes into UTF-8 byte sequences, expands repetition into helper rules,
// and rejects grammars the matcher could not run: left recursion (also a
// repetition of something that can match empty), rules that derive no
// finite string, rules without alternatives, and size limits.
Grammar compile(const RuleSet& rules, const Limits& limits = {});

// EBNF in llama.cpp's GBNF syntax: `name ::= alternatives`, "literals" with
// \n \t \r \\ \" \xHH \uHHHH \UHHHHHHHH escapes, [classes] (^ negates),
// `.` (any character), (groups), `|`, postfix * + ? {m} {m,} {m,n},
// # comments. The start rule is `root`.
Grammar compile_ebnf(std::string_view text, const Limits& limits = {});

// A regex subset, matched in full (a leading ^ and trailing $ are
// allowed and ignored): literals, escapes (\d \w \s \D \W \S, \n \t \r \f
// \v, \xHH, \uHHHH, \u{H..}, escaped punctuation), [classes] with ranges
// and escapes, `.` (any character but the line terminators \n \r U+2028 U+2029), groups ( ) and (?: ), `|`,
// quantifiers * + ? {m} {m,} {m,n} (a lazy or possessive suffix changes
// nothing for generation). Backreferences, lookaround, named groups and
// other anchors are an Error naming the construct.
Grammar compile_regex(std::string_view pattern, const Limits& limits = {});
Expr regex_to_expr(std::string_view pattern, int32_t max_depth, int32_t max_repeat);

// Exactly one of the given strings (at least one, none empty).
Grammar compile_choice(const std::vector<std::string>& choices, const Limits& limits = {});

}  // namespace hayate::grammar
