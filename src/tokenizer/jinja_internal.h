// Jinja subset internals: values (Python semantics), the template's syntax
// tree, and the parser entry point. See jinja.h for what is covered.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace hayate::jinja {

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // insertion-ordered, as Python

// How deeply lists and dicts may nest (built by a template or given in its
// context): destruction, printing and comparison recurse over the nesting.
inline constexpr int kMaxValueDepth = 128;

// Throws Error: a value nests deeper than kMaxValueDepth.
[[noreturn]] void too_deep();

struct Value {
  enum Type { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace };
  Type type = kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<List> list;  // shared: templates never mutate lists
  std::shared_ptr<Dict> dict;  // kDict and kNamespace (whose attributes `set` mutates)
  std::string undefined_name;  // for error messages
  int depth = 0;               // list/dict nesting: 0 for scalars, 1 + the deepest item

  static Value none() { Value x; x.type = kNone; return x; }
  static Value boolean(bool v) { Value x; x.type = kBool; x.b = v; return x; }
  static Value integer(int64_t v) { Value x; x.type = kInt; x.i = v; return x; }
  static Value real(double v) { Value x; x.type = kFloat; x.f = v; return x; }
  static Value str(std::string v) { Value x; x.type = kString; x.s = std::move(v); return x; }
  static Value of_list(List v) {
    Value x; x.type = kList;
    for (const Value& item : v) x.depth = std::max(x.depth, item.depth + 1);
    if (x.depth > kMaxValueDepth) too_deep();
    x.list = std::make_shared<List>(std::move(v));
    return x;
  }
  static Value of_dict(Dict v, Type t = kDict) {
    Value x; x.type = t;
    for (const auto& item : v) x.depth = std::max(x.depth, item.second.depth + 1);
    if (x.depth > kMaxValueDepth) too_deep();
    x.dict = std::make_shared<Dict>(std::move(v));
    return x;
  }
  static Value undefined(std::string name) {
    Value x; x.type = kUndefined;
    x.undefined_name = std::move(name);
    return x;
  }
  bool is_undefined() const { return type == kUndefined; }
  const Value* find(const std::string& key) const;  // dict / namespace lookup
};

// ---- syntax tree

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum Kind {
    kLiteral, kName, kList, kDict, kAttr, kIndex, kSlice, kCall, kFilter, kTest,
    kNot, kNeg, kBinary, kAnd, kOr, kCond
  } kind;
  int line = 0;
  Value literal;
  std::string name;  // name / attribute / filter / test / binary operator
  std::vector<ExprPtr> args;  // operands, positional arguments, list items, dict k/v pairs
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;  // `is not`
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum Kind { kText, kOutput, kIf, kFor, kSet, kBreak, kContinue, kBlock } kind;
  int line = 0;
  std::string text;                             // kText
  ExprPtr expr;                                 // kOutput, kSet value, kFor iterable
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf: (condition, body); else has no condition
  std::vector<std::string> targets;             // kFor loop variables; kSet: name [, attribute]
  ExprPtr filter;                               // kFor inline `if`
  Body body, else_body;                         // kFor, kBlock
};

// Parses a template; throws Error("chat template: line N: ...").
Body parse(const std::string& source);

}  // namespace hayate::jinja
