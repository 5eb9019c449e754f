// Jinja subset: evaluation with Python's semantics for values, the filters,
// tests, globals and methods that chat templates use.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "tokenizer/jinja.h"
#include "tokenizer/jinja_internal.h"
#include "tokenizer/utf8.h"

namespace hayate::jinja {

const Value* Value::find(const std::string& key) const {
  if (!dict) return nullptr;
  for (const auto& [k, v] : *dict)
    if (k == key) return &v;
  return nullptr;
}

void too_deep() {
  fail(cat("chat template: a list or dict nests deeper than ", kMaxValueDepth, " levels"));
}

namespace {

[[noreturn]] void error(const Expr& e, const std::string& msg) {
  fail(cat("chat template: line ", e.line, ": ", msg));
}

// J: nlohmann::json, or ordered_json (objects keep the client's key order,
// which `tojson` then writes as Python's json.dumps would).
template <typename J>
Value from_json(const J& j, int depth = 0) {
  if (depth > kMaxValueDepth) too_deep();
  switch (j.type()) {
    case J::value_t::null: return Value::none();
    case J::value_t::boolean: return Value::boolean(j.template get<bool>());
    case J::value_t::number_integer:
    case J::value_t::number_unsigned: return Value::integer(j.template get<int64_t>());
    case J::value_t::number_float: return Value::real(j.template get<double>());
    case J::value_t::string: return Value::str(j.template get<std::string>());
    case J::value_t::array: {
      List l;
      for (const auto& x : j) l.push_back(from_json(x, depth + 1));
      return Value::of_list(std::move(l));
    }
    case J::value_t::object: {
      Dict d;
      for (const auto& [k, v] : j.items()) d.emplace_back(k, from_json(v, depth + 1));
      return Value::of_dict(std::move(d));
    }
    default: return Value::none();
  }
}

const char* type_name(const Value& v) {
  static const char* names[] = {"undefined", "none", "bool", "int", "float",
                                "string", "list", "dict", "namespace"};
  return names[v.type];
}

bool truthy(const Value& v) {
  switch (v.type) {
    case Value::kUndefined:
    case Value::kNone: return false;
    case Value::kBool: return v.b;
    case Value::kInt: return v.i != 0;
    case Value::kFloat: return v.f != 0;
    case Value::kString: return !v.s.empty();
    case Value::kList: return !v.list->empty();
    default: return !v.dict->empty();
  }
}

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, f);
  std::string s(buf, p);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string repr(const Value& v);

// Python's str(): what {{ }} prints.
std::string str(const Value& v) {
  switch (v.type) {
    case Value::kUndefined: return "";
    case Value::kNone: return "None";
    case Value::kBool: return v.b ? "True" : "False";
    case Value::kInt: return std::to_string(v.i);
    case Value::kFloat: return float_repr(v.f);
    case Value::kString: return v.s;
    default: return repr(v);
  }
}

std::string repr(const Value& v) {
  if (v.type == Value::kString) {
    bool dq = v.s.find('\'') != std::string::npos && v.s.find('"') == std::string::npos;
    char q = dq ? '"' : '\'';
    std::string out(1, q);
    for (char c : v.s) {
      if (c == q || c == '\\') out += '\\';
      if (c == '\n') out += "\\n";
      else if (c == '\t') out += "\\t";
      else if (c == '\r') out += "\\r";
      else out += c;
    }
    return out + q;
  }
  if (v.type == Value::kList) {
    std::string out = "[";
    for (size_t i = 0; i < v.list->size(); ++i) out += (i ? ", " : "") + repr((*v.list)[i]);
    return out + "]";
  }
  if (v.type == Value::kDict || v.type == Value::kNamespace) {
    std::string out = v.type == Value::kNamespace ? "<Namespace {" : "{";
    size_t i = 0;
    for (const auto& [k, x] : *v.dict) out += (i++ ? ", " : "") + repr(Value::str(k)) + ": " + repr(x);
    return out + (v.type == Value::kNamespace ? "}>" : "}");
  }
  return str(v);
}

constexpr size_t kMaxJsonBytes = 64u << 20;  // = kMaxBytes below

// Python's json.dumps(ensure_ascii=False, indent=indent), as transformers'
// tojson filter calls it: separators ", " / ": " without indent, "," with.
void to_json(const Value& v, int indent, int depth, std::string& out, const Expr& e) {
  // Python's json.dumps accepts any indent; the output is bounded instead.
  auto newline = [&](int d) {
    if (out.size() + size_t(indent) * size_t(d) + 1 > kMaxJsonBytes)
      error(e, "tojson: output exceeds the template's size limit");
    out += '\n';
    out.append(static_cast<size_t>(indent * d), ' ');
  };
  if (depth > kMaxValueDepth) too_deep();
  if (out.size() > kMaxJsonBytes) error(e, "tojson: output exceeds the template's size limit");
  switch (v.type) {
    case Value::kUndefined: error(e, "tojson: value is undefined");
    case Value::kNone: out += "null"; return;
    case Value::kBool: out += v.b ? "true" : "false"; return;
    case Value::kInt: out += std::to_string(v.i); return;
    case Value::kFloat:
      out += std::isnan(v.f) ? "NaN" : std::isinf(v.f) ? (v.f > 0 ? "Infinity" : "-Infinity") : float_repr(v.f);
      return;
    case Value::kString: out += nlohmann::json(v.s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); return;
    case Value::kList: {
      if (v.list->empty()) { out += "[]"; return; }
      out += '[';
      for (size_t i = 0; i < v.list->size(); ++i) {
        if (i) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        to_json((*v.list)[i], indent, depth + 1, out, e);
      }
      if (indent >= 0) newline(depth);
      out += ']';
      return;
    }
    default: {
      if (v.dict->empty()) { out += "{}"; return; }
      out += '{';
      size_t i = 0;
      for (const auto& [k, x] : *v.dict) {
        if (i++) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        to_json(Value::str(k), indent, depth + 1, out, e);
        out += ": ";
        to_json(x, indent, depth + 1, out, e);
      }
      if (indent >= 0) newline(depth);
      out += '}';
    }
  }
}

bool equal(const Value& a, const Value& b) {
  auto numeric = [](const Value& v) { return v.type == Value::kInt || v.type == Value::kFloat || v.type == Value::kBool; };
  auto num = [](const Value& v) { return v.type == Value::kFloat ? v.f : v.type == Value::kInt ? static_cast<double>(v.i) : v.b ? 1.0 : 0.0; };
  if (numeric(a) && numeric(b)) return num(a) == num(b);
  if (a.type != b.type) return false;
  switch (a.type) {
    case Value::kUndefined:
    case Value::kNone: return true;
    case Value::kString: return a.s == b.s;
    case Value::kList:
      return a.list->size() == b.list->size() &&
             std::equal(a.list->begin(), a.list->end(), b.list->begin(), equal);
    default:
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [k, v] : *a.dict) {
        const Value* o = b.find(k);
        if (!o || !equal(v, *o)) return false;
      }
      return true;
  }
}

// Code points of a valid UTF-8 string, for Python-style indexing.
std::vector<std::string> chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = std::min(utf8::lead_len(static_cast<unsigned char>(s[i])), s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

std::string py_strip(const std::string& s, bool left, bool right, const Value* set) {
  auto cps = chars(s);
  auto strip_me = [&](const std::string& c) {
    if (set && set->type == Value::kString) return set->s.find(c) != std::string::npos;
    size_t i = 0;
    return utf8::is_python_space(utf8::next(c, i));
  };
  size_t b = 0, e = cps.size();
  if (left) while (b < e && strip_me(cps[b])) ++b;
  if (right) while (e > b && strip_me(cps[e - 1])) --e;
  std::string out;
  for (size_t i = b; i < e; ++i) out += cps[i];
  return out;
}

std::string ascii_case(std::string s, bool upper) {
  for (char& c : s) c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Items a for loop or filter iterates: list items, dict keys, characters.
List iterate(const Value& v, const Expr& e) {
  switch (v.type) {
    case Value::kList: return *v.list;
    case Value::kDict: {
      List l;
      for (const auto& [k, x] : *v.dict) l.push_back(Value::str(k));
      return l;
    }
    case Value::kString: {
      List l;
      for (auto& c : chars(v.s)) l.push_back(Value::str(c));
      return l;
    }
    case Value::kUndefined: return {};
    default: error(e, cat("cannot iterate over a ", type_name(v)));
  }
}

int64_t as_int(const Value& v, const Expr& e) {
  if (v.type == Value::kInt) return v.i;
  if (v.type == Value::kBool) return v.b;
  error(e, cat("expected an integer, got ", type_name(v)));
}

// Python slice semantics over n items.
std::vector<int64_t> slice_indices(int64_t n, const Value& a, const Value& b, const Value& c, const Expr& e) {
  int64_t step = c.type == Value::kNone ? 1 : as_int(c, e);
  if (step == 0) error(e, "slice step cannot be zero");
  auto norm = [&](const Value& v, int64_t def) {
    if (v.type == Value::kNone) return def;
    int64_t x = as_int(v, e);
    if (x < 0) x += n;
    return step > 0 ? std::clamp<int64_t>(x, 0, n) : std::clamp<int64_t>(x, -1, n - 1);
  };
  int64_t start = norm(a, step > 0 ? 0 : n - 1), stop = norm(b, step > 0 ? n : -1);
  std::vector<int64_t> idx;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) idx.push_back(i);
  return idx;
}

struct Scope {
  std::vector<std::pair<std::string, Value>> vars;
  Value* find(const std::string& n) {
    for (auto& [k, v] : vars)
      if (k == n) return &v;
    return nullptr;
  }
  void set(const std::string& n, Value v) {
    if (Value* p = find(n)) *p = std::move(v);
    else vars.emplace_back(n, std::move(v));
  }
};

enum class Flow { kNormal, kBreak, kContinue };

// Work limits: a template is data from a model directory, so a hostile one
// must end with an Error rather than run for hours or fill the memory.
constexpr int64_t kMaxSteps = 10'000'000;
constexpr size_t kMaxBytes = 64u << 20;
constexpr size_t kMaxItems = 1u << 20;
// Bytes of strings and list/dict items a render may create in all. Per-value
// limits alone let a template keep many values at the limit (a list of lists,
// each holding a fresh 64 MB string), so creations draw from one budget.
constexpr size_t kMaxAllocBytes = 512u << 20;

// What copying v's top level costs: its string, or its items with their strings.
size_t bytes_of(const Value& v) {
  size_t n = v.s.size();
  if (v.type == Value::kList)
    for (const Value& x : *v.list) n += sizeof(Value) + x.s.size();
  if (v.type == Value::kDict || v.type == Value::kNamespace)
    for (const auto& [k, x] : *v.dict) n += sizeof(Value) + k.size() + x.s.size();
  return n;
}

// Whether v nests at most `levels` deep without reaching the dict `self`
// (a namespace must not contain itself: a cycle would never be freed, and
// printing it would never end).
bool nests_within(const Value& v, int levels, const Dict* self) {
  if (v.type == Value::kList) {
    if (levels <= 0) return false;
    for (const Value& x : *v.list)
      if (!nests_within(x, levels - 1, self)) return false;
  } else if (v.type == Value::kDict || v.type == Value::kNamespace) {
    if (levels <= 0 || v.dict.get() == self) return false;
    for (const auto& [k, x] : *v.dict)
      if (!nests_within(x, levels - 1, self)) return false;
  }
  return true;
}

void check_size(size_t n, size_t limit, const Expr& e) {
  if (n > limit) error(e, "value too large (template output or list exceeds the limit)");
}

class Renderer {
 public:
  template <typename J>
  explicit Renderer(const J& ctx) {
    scopes_.emplace_back();
    for (const auto& [k, v] : ctx.items()) scopes_.back().set(k, from_json(v));
    scopes_.emplace_back();  // the template's own top-level `set`s
  }

  Flow run(const Body& body, std::string& out) {
    for (const auto& st : body) {
      Flow f = exec(*st, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

 private:
  Value lookup(const std::string& n) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
      if (Value* v = it->find(n)) return *v;
    return Value::undefined(n);
  }

  void step(const Stmt& st) {
    if (++steps_ > kMaxSteps) fail(cat("chat template: line ", st.line, ": too many steps (endless loop?)"));
  }

  Flow exec(const Stmt& st, std::string& out) {
    step(st);
    if (out.size() > kMaxBytes) fail("chat template: output exceeds 64 MB");
    switch (st.kind) {
      case Stmt::kText: out += st.text; return Flow::kNormal;
      case Stmt::kOutput: out += str(eval(*st.expr)); return Flow::kNormal;
      case Stmt::kIf:
        for (const auto& [cond, body] : st.branches)
          if (!cond || truthy(eval(*cond))) return run(body, out);
        return Flow::kNormal;
      case Stmt::kSet: {
        Value v = eval(*st.expr);
        if (st.targets.size() == 1) {
          scopes_.back().set(st.targets[0], std::move(v));
        } else {
          Value ns = lookup(st.targets[0]);
          if (ns.type != Value::kNamespace)
            error(*st.expr, cat("cannot set attribute of '", st.targets[0], "': not a namespace"));
          if (!nests_within(v, kMaxValueDepth - 1, ns.dict.get()))
            error(*st.expr, cat("the value set on '", st.targets[0], "' nests deeper than ",
                                kMaxValueDepth, " levels or contains the namespace itself"));
          for (auto& [k, x] : *ns.dict)
            if (k == st.targets[1]) { x = std::move(v); return Flow::kNormal; }
          ns.dict->emplace_back(st.targets[1], std::move(v));
        }
        return Flow::kNormal;
      }
      case Stmt::kBreak: return Flow::kBreak;
      case Stmt::kContinue: return Flow::kContinue;
      case Stmt::kBlock: return run(st.body, out);
      case Stmt::kFor: return exec_for(st, out);
    }
    return Flow::kNormal;
  }

  Flow exec_for(const Stmt& st, std::string& out) {
    List all = items(eval(*st.expr), *st.expr);
    auto bind = [&](Scope& s, const Value& item) {
      if (st.targets.size() == 1) {
        s.set(st.targets[0], item);
        return;
      }
      if (item.type != Value::kList || item.list->size() != st.targets.size())
        error(*st.expr, cat("cannot unpack into ", st.targets.size(), " loop variables"));
      for (size_t k = 0; k < st.targets.size(); ++k) s.set(st.targets[k], (*item.list)[k]);
    };
    List items;
    for (const Value& item : all) {
      if (st.filter) {
        scopes_.emplace_back();
        bind(scopes_.back(), item);
        bool keep = truthy(eval(*st.filter));
        scopes_.pop_back();
        if (!keep) continue;
      }
      items.push_back(item);
    }
    if (items.empty()) return run(st.else_body, out);
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      step(st);
      scopes_.emplace_back();
      bind(scopes_.back(), items[i]);
      Dict loop = {{"index0", Value::integer(i)},       {"index", Value::integer(i + 1)},
                   {"revindex0", Value::integer(n - i - 1)}, {"revindex", Value::integer(n - i)},
                   {"first", Value::boolean(i == 0)},   {"last", Value::boolean(i == n - 1)},
                   {"length", Value::integer(n)},
                   {"previtem", i > 0 ? items[i - 1] : Value::undefined("loop.previtem")},
                   {"nextitem", i + 1 < n ? items[i + 1] : Value::undefined("loop.nextitem")}};
      scopes_.back().set("loop", Value::of_dict(std::move(loop)));
      Flow f = run(st.body, out);
      scopes_.pop_back();
      if (f == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  Value attribute(const Value& obj, const std::string& name, const Expr& e) {
    if (obj.type == Value::kUndefined)
      error(e, cat("'", obj.undefined_name, "' is undefined (reading .", name, ")"));
    if (obj.type == Value::kDict || obj.type == Value::kNamespace) {
      if (const Value* v = obj.find(name)) return *v;
    }
    return Value::undefined(name);
  }

  Value index(const Value& obj, const Value& key, const Expr& e) {
    if (obj.type == Value::kUndefined)
      error(e, cat("'", obj.undefined_name, "' is undefined (subscripted)"));
    if (obj.type == Value::kDict || obj.type == Value::kNamespace) {
      if (key.type == Value::kString)
        if (const Value* v = obj.find(key.s)) return *v;
      return Value::undefined(str(key));
    }
    if (obj.type == Value::kList || obj.type == Value::kString) {
      if (key.type != Value::kInt) error(e, cat("list indices must be integers, not ", type_name(key)));
      std::vector<std::string> cps;
      int64_t n;
      if (obj.type == Value::kString) {
        cps = chars(obj.s);
        n = static_cast<int64_t>(cps.size());
      } else {
        n = static_cast<int64_t>(obj.list->size());
      }
      int64_t i = key.i < 0 ? key.i + n : key.i;
      if (i < 0 || i >= n) return Value::undefined(cat("index ", key.i));
      return obj.type == Value::kString ? Value::str(cps[i]) : (*obj.list)[i];
    }
    error(e, cat("cannot subscript a ", type_name(obj)));
  }

  Value binary(const std::string& op, const Value& a, const Value& b, const Expr& e) {
    if (op == "==") return Value::boolean(equal(a, b));
    if (op == "!=") return Value::boolean(!equal(a, b));
    if (op == "in" || op == "not in") {
      bool in = false;
      if (b.type == Value::kString) {
        if (a.type != Value::kString) error(e, "'in <string>' needs a string on the left");
        in = b.s.find(a.s) != std::string::npos;
      } else if (b.type == Value::kList) {
        in = std::any_of(b.list->begin(), b.list->end(), [&](const Value& x) { return equal(a, x); });
      } else if (b.type == Value::kDict || b.type == Value::kNamespace) {
        in = a.type == Value::kString && b.find(a.s) != nullptr;
      } else if (b.type != Value::kUndefined) {
        error(e, cat("argument of type ", type_name(b), " is not iterable"));
      }
      return Value::boolean(op == "in" ? in : !in);
    }
    if (op == "~") {
      std::string x = str(a), y = str(b);
      check_size(x.size() + y.size(), kMaxBytes, e);
      return Value::str(x + y);
    }
    bool num_a = a.type == Value::kInt || a.type == Value::kFloat || a.type == Value::kBool;
    bool num_b = b.type == Value::kInt || b.type == Value::kFloat || b.type == Value::kBool;
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int c;
      if (num_a && num_b) {
        double x = a.type == Value::kFloat ? a.f : static_cast<double>(as_int(a, e));
        double y = b.type == Value::kFloat ? b.f : static_cast<double>(as_int(b, e));
        c = x < y ? -1 : x > y ? 1 : 0;
      } else if (a.type == Value::kString && b.type == Value::kString) {
        c = a.s.compare(b.s);
      } else {
        error(e, cat("cannot compare ", type_name(a), " and ", type_name(b)));
      }
      bool r = op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0;
      return Value::boolean(r);
    }
    if (op == "+" && a.type == Value::kString && b.type == Value::kString) {
      check_size(a.s.size() + b.s.size(), kMaxBytes, e);
      return Value::str(a.s + b.s);
    }
    if (op == "+" && a.type == Value::kList && b.type == Value::kList) {
      check_size(a.list->size() + b.list->size(), kMaxItems, e);
      check_size(bytes_of(a) + bytes_of(b), kMaxBytes, e);
      List l = *a.list;
      l.insert(l.end(), b.list->begin(), b.list->end());
      return Value::of_list(std::move(l));
    }
    if (op == "*" && a.type == Value::kString && b.type == Value::kInt) {
      std::string s;
      if (b.i > 0) check_size(static_cast<size_t>(std::min<int64_t>(b.i, kMaxBytes + 1)) * a.s.size(), kMaxBytes, e);
      for (int64_t k = 0; k < b.i; ++k) s += a.s;
      return Value::str(s);
    }
    if (!num_a || !num_b)
      error(e, cat("unsupported operand types for ", op, ": ", type_name(a), " and ", type_name(b)));
    bool ints = a.type != Value::kFloat && b.type != Value::kFloat;
    double x = a.type == Value::kFloat ? a.f : static_cast<double>(as_int(a, e));
    double y = b.type == Value::kFloat ? b.f : static_cast<double>(as_int(b, e));
    if (op == "/") {
      if (y == 0) error(e, "division by zero");
      return Value::real(x / y);
    }
    if (ints) {
      int64_t p = as_int(a, e), q = as_int(b, e), r = 0;
      bool overflow = false;
      if (op == "+") overflow = __builtin_add_overflow(p, q, &r);
      else if (op == "-") overflow = __builtin_sub_overflow(p, q, &r);
      else if (op == "*") overflow = __builtin_mul_overflow(p, q, &r);
      if (overflow || (op == "//" && p == INT64_MIN && q == -1)) error(e, "integer overflow");
      if (op == "+" || op == "-" || op == "*") return Value::integer(r);
      if (q == 0 && (op == "//" || op == "%")) error(e, "division by zero");
      if (q == -1) return Value::integer(op == "//" ? -p : 0);
      int64_t fl = p / q - ((p % q != 0) && ((p < 0) != (q < 0)));  // Python floors
      if (op == "//") return Value::integer(fl);
      if (op == "%") return Value::integer(p - fl * q);
    }
    if (op == "+") return Value::real(x + y);
    if (op == "-") return Value::real(x - y);
    if (op == "*") return Value::real(x * y);
    if (op == "**") return Value::real(std::pow(x, y));
    if (op == "//") return Value::real(std::floor(x / y));
    if (op == "%") return Value::real(x - std::floor(x / y) * y);
    error(e, cat("unsupported operator ", op));
  }

 public:
  // Evaluates e; what it creates is charged to the render's budget.
  Value eval(const Expr& e) {
    Value v = eval_node(e);
    if (e.kind != Expr::kLiteral &&
        (v.type == Value::kString ||
         (e.kind != Expr::kName && e.kind != Expr::kAttr && e.kind != Expr::kIndex)))
      charge(bytes_of(v), e);
    return v;
  }

 private:
  Value eval_node(const Expr& e);
  void charge(size_t bytes, const Expr& e) {
    allocated_ += bytes;
    if (allocated_ > kMaxAllocBytes)
      error(e, cat("the template creates more than ", kMaxAllocBytes >> 20, " MB of values"));
  }
  // iterate(), its copy charged first.
  List items(const Value& v, const Expr& e) {
    charge(v.type == Value::kString ? v.s.size() * (sizeof(Value) + 4) : bytes_of(v), e);
    return iterate(v, e);
  }
  Value call(const Expr& e);
  Value method(const Value& obj, const std::string& name, const std::vector<Value>& args, const Expr& e);
  Value filter(const Expr& e);
  bool test(const std::string& name, const Value& v, const std::vector<Value>& args, const Expr& e);

  std::vector<Scope> scopes_;
  int64_t steps_ = 0;
  size_t allocated_ = 0;
};

}  // namespace
}  // namespace hayate::jinja

#include "tokenizer/jinja_builtins.inc"

namespace hayate::jinja {

namespace {

template <typename J>
std::string render_any(const std::string& source, const J& context) {
  HAYATE_CHECK(context.is_object(), "chat template: context must be a JSON object");
  Body body = parse(source);
  Renderer r(context);
  std::string out;
  Flow f = r.run(body, out);
  HAYATE_CHECK(f == Flow::kNormal, "chat template: break/continue outside a loop");
  return out;
}

}  // namespace

std::string render(const std::string& source, const nlohmann::json& context) {
  return render_any(source, context);
}

std::string render(const std::string& source, const nlohmann::ordered_json& context) {
  return render_any(source, context);
}

}  // namespace hayate::jinja
