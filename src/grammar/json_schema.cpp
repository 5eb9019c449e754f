// JSON Schema -> RuleSet. Each schema node becomes an expression inlined
// at its use (so its rules have one call site and the mask precompute
// decides most tokens statically); $ref targets and the generic JSON value
// become named rules, which is also how recursive schemas stay finite.
#include "grammar/json_schema.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/check.h"
#include "grammar/json_parts.h"

namespace hayate::grammar {

namespace {

using nlohmann::json;

const std::set<std::string> kAnnotations = {"title", "description", "default", "examples", "$schema",
                                            "$id", "$comment", "deprecated", "readOnly", "writeOnly",
                                            "$defs", "definitions", "$anchor"};
const std::set<std::string> kKeywords = {
    "type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "properties", "required",
    "additionalProperties", "items", "prefixItems", "additionalItems", "minItems", "maxItems",
    "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "uniqueItems"};

class SchemaCompiler {
 public:
  SchemaCompiler(const json& root, const JsonOptions& o, const Limits& l) : root_(root), o_(o), l_(l) {}

  RuleSet run(const char* mode) {
    rs_.add("root", empty());
    if (std::string(mode) == "object") {
      rs_.rules[0].second = ref(any("object"));
    } else if (std::string(mode) == "value") {
      rs_.rules[0].second = ref(any("value"));
    } else {
      rs_.rules[0].second = node(root_, 0);
    }
    return std::move(rs_);
  }

 private:
  Expr ws() const { return json_parts::ws(o_); }

  // The generic JSON value rules, made once: value, object, array, string, number.
  std::string any(const std::string& what) {
    const std::string name = "any_" + what;
    if (made_any_) return name;
    made_any_ = true;
    Expr value = alt({ref("any_object"), ref("any_array"), ref("any_string"), ref("any_number"),
                      lit("true"), lit("false"), lit("null")});
    Expr member = seq({ref("any_string"), ws(), lit(":"), ws(), ref("any_value")});
    Expr sep = seq({ws(), lit(","), ws()});
    rs_.add("any_value", std::move(value));
    rs_.add("any_object", seq({lit("{"), ws(), opt(seq({member, rep(seq({sep, member}), 0, -1)})), ws(), lit("}")}));
    rs_.add("any_array", seq({lit("["), ws(), opt(seq({ref("any_value"), rep(seq({sep, ref("any_value")}), 0, -1)})),
                              ws(), lit("]")}));
    rs_.add("any_string", json_parts::quoted(rep(json_parts::string_char(), 0, -1)));
    rs_.add("any_number", json_parts::number(o_));
    return name;
  }

  static bool is_type(const json& v, const std::string& t) {
    if (t == "string") return v.is_string();
    if (t == "integer") return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    if (t == "number") return v.is_number();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    fail(cat("json schema: unknown type '", t, "'"));
  }

  Expr node(const json& s, int depth) {
    HAYATE_CHECK(depth <= l_.max_depth, "json schema: nested deeper than ", l_.max_depth);
    HAYATE_CHECK(++nodes_ <= o_.max_schema_nodes, "json schema: more than ", o_.max_schema_nodes, " schema nodes");
    if (s.is_boolean()) {
      HAYATE_CHECK(s.get<bool>(), "json schema: schema false allows no value");
      return ref(any("value"));
    }
    HAYATE_CHECK(s.is_object(), "json schema: a schema must be an object or a boolean");
    std::set<std::string> present;
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (kAnnotations.count(it.key())) continue;
      HAYATE_CHECK(kKeywords.count(it.key()), "json schema: keyword '", it.key(), "' is not supported");
      present.insert(it.key());
    }
    if (s.contains("uniqueItems")) {
      HAYATE_CHECK(s["uniqueItems"] == false, "json schema: keyword 'uniqueItems' is not supported");
      present.erase("uniqueItems");
    }
    auto only = [&](const std::string& kw, std::set<std::string> allowed) {
      for (const auto& k : present)
        HAYATE_CHECK(k == kw || allowed.count(k), "json schema: keyword '", k, "' next to '", kw,
                     "' is not supported");
    };
    if (present.count("$ref")) {
      only("$ref", {});
      return ref(ref_rule(s["$ref"]));
    }
    if (present.count("allOf")) {
      only("allOf", {});
      HAYATE_CHECK(s["allOf"].is_array() && s["allOf"].size() == 1,
                   "json schema: keyword 'allOf' is supported only with one schema");
      return node(s["allOf"][0], depth + 1);
    }
    for (const char* kw : {"anyOf", "oneOf"}) {
      if (!present.count(kw)) continue;
      only(kw, {});
      HAYATE_CHECK(s[kw].is_array() && !s[kw].empty(), "json schema: '", kw, "' needs a non-empty array");
      if (std::string(kw) == "oneOf") check_disjoint(s[kw]);
      std::vector<Expr> alts;
      for (const json& sub : s[kw]) alts.push_back(node(sub, depth + 1));
      return alts.size() == 1 ? std::move(alts[0]) : alt(std::move(alts));
    }
    std::vector<std::string> types = types_of(s, present);
    if (present.count("const") || present.count("enum")) {
      std::vector<json> values;
      if (present.count("const")) {
        only("const", {"type", "enum"});
        values.push_back(s["const"]);
      } else {
        only("enum", {"type"});
        HAYATE_CHECK(s["enum"].is_array() && !s["enum"].empty(), "json schema: 'enum' needs a non-empty array");
        values.assign(s["enum"].begin(), s["enum"].end());
      }
      std::vector<Expr> alts;
      for (const json& v : values) {
        bool ok = !present.count("type");
        for (const auto& t : types) ok = ok || is_type(v, t);
        if (present.count("enum") && present.count("const")) {
          bool in = false;
          for (const json& e : s["enum"]) in = in || e == v;
          ok = ok && in;
        }
        if (ok) alts.push_back(lit(v.dump()));
      }
      HAYATE_CHECK(!alts.empty(), "json schema: no value of 'enum'/'const' has the schema's type");
      return alts.size() == 1 ? std::move(alts[0]) : alt(std::move(alts));
    }
    if (types.empty()) return ref(any("value"));
    std::vector<Expr> alts;
    for (const auto& t : types) alts.push_back(typed(s, t, depth));
    return alts.size() == 1 ? std::move(alts[0]) : alt(std::move(alts));
  }

  // oneOf is compiled as anyOf, which is exact only when no value matches
  // two branches. Accepted when that is evident: branches of disjoint
  // types (integer and number overlap), or const/enum branches with no
  // value in common.
  static void check_disjoint(const json& branches) {
    struct Shape {
      std::set<std::string> types;
      std::vector<json> values;  // const/enum branches
      bool known = false;
    };
    std::vector<Shape> shapes;
    for (const json& b : branches) {
      Shape sh;
      if (b.is_object() && (b.contains("const") || b.contains("enum"))) {
        if (b.contains("const")) sh.values.push_back(b["const"]);
        if (b.contains("enum") && b["enum"].is_array()) sh.values.insert(sh.values.end(), b["enum"].begin(), b["enum"].end());
        sh.known = true;
      } else if (b.is_object() && b.contains("type")) {
        const json& t = b["type"];
        if (t.is_string()) sh.types.insert(t.get<std::string>());
        if (t.is_array())
          for (const json& x : t)
            if (x.is_string()) sh.types.insert(x.get<std::string>());
        if (sh.types.count("integer")) sh.types.insert("number");
        if (sh.types.count("number")) sh.types.insert("integer");
        sh.known = !sh.types.empty();
      }
      shapes.push_back(std::move(sh));
    }
    auto type_of = [](const json& v) -> std::string {
      return v.is_number() ? "number" : v.is_string() ? "string" : v.is_boolean() ? "boolean"
           : v.is_null() ? "null" : v.is_object() ? "object" : "array";
    };
    for (size_t i = 0; i < shapes.size(); ++i)
      for (size_t j = i + 1; j < shapes.size(); ++j) {
        const Shape &a = shapes[i], &b = shapes[j];
        bool disjoint = a.known && b.known;
        if (disjoint && !a.values.empty() && !b.values.empty()) {
          for (const json& x : a.values)
            for (const json& y : b.values) disjoint = disjoint && x != y;
        } else if (disjoint) {
          const Shape& vals = a.values.empty() ? b : a;
          const Shape& typed = a.values.empty() ? a : b;
          if (vals.values.empty()) {
            for (const auto& t : a.types) disjoint = disjoint && !b.types.count(t);
          } else {
            for (const json& x : vals.values) disjoint = disjoint && !typed.types.count(type_of(x));
          }
        }
        HAYATE_CHECK(disjoint, "json schema: 'oneOf' whose branches may overlap is not supported (anyOf is)");
      }
  }

  // The types a schema allows: its `type`, or those its keywords imply
  // (a value of another type would pass them, but is not needed).
  std::vector<std::string> types_of(const json& s, const std::set<std::string>& present) {
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else {
        HAYATE_CHECK(t.is_array() && !t.empty(), "json schema: 'type' must be a string or an array");
        for (const json& x : t) {
          HAYATE_CHECK(x.is_string(), "json schema: 'type' entries must be strings");
          types.push_back(x.get<std::string>());
        }
      }
      for (const auto& x : types) is_type(json(), x);  // rejects unknown names
      return types;
    }
    auto any_of = [&](std::initializer_list<const char*> kws) {
      for (const char* k : kws)
        if (present.count(k)) return true;
      return false;
    };
    if (any_of({"properties", "required", "additionalProperties"})) types.push_back("object");
    if (any_of({"items", "prefixItems", "additionalItems", "minItems", "maxItems"})) types.push_back("array");
    if (any_of({"minLength", "maxLength", "pattern", "format"})) types.push_back("string");
    if (any_of({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) types.push_back("number");
    return types;
  }

  Expr typed(const json& s, const std::string& t, int depth) {
    if (t == "null") return lit("null");
    if (t == "boolean") return alt({lit("true"), lit("false")});
    if (t == "string") return string_node(s);
    if (t == "integer" || t == "number") return number_node(s, t == "integer");
    if (t == "object") return object_node(s, depth);
    if (t == "array") return array_node(s, depth);
    fail(cat("json schema: unknown type '", t, "'"));
  }

  static int32_t count(const json& s, const char* kw, int32_t fallback, int32_t limit) {
    if (!s.contains(kw)) return fallback;
    const json& v = s[kw];
    HAYATE_CHECK(v.is_number() && v.get<double>() >= 0 && std::floor(v.get<double>()) == v.get<double>(),
                 "json schema: '", kw, "' must be a non-negative integer");
    HAYATE_CHECK(v.get<double>() <= limit, "json schema: '", kw, "' over the limit of ", limit);
    return static_cast<int32_t>(v.get<double>());
  }

  Expr string_node(const json& s) {
    if (s.contains("format")) {
      HAYATE_CHECK(!s.contains("pattern") && !s.contains("minLength") && !s.contains("maxLength"),
                   "json schema: 'format' with 'pattern' or a length is not supported");
      return json_parts::quoted(json_parts::format_contents(s["format"].get<std::string>()));
    }
    if (s.contains("pattern")) {
      HAYATE_CHECK(!s.contains("minLength") && !s.contains("maxLength"),
                   "json schema: 'pattern' with 'minLength'/'maxLength' is not supported");
      HAYATE_CHECK(s["pattern"].is_string(), "json schema: 'pattern' must be a string");
      return json_parts::quoted(json_parts::pattern_contents(s["pattern"].get<std::string>(), l_));
    }
    const int32_t min = count(s, "minLength", 0, l_.max_repeat);
    const int32_t max = count(s, "maxLength", -1, l_.max_repeat);
    HAYATE_CHECK(max < 0 || max >= min, "json schema: maxLength < minLength");
    return json_parts::quoted(rep(json_parts::string_char(), min, max));
  }

  // A bound as an inclusive integer.
  std::optional<int64_t> bound(const json& s, const char* kw, const char* excl, bool lower) {
    std::optional<double> v;
    bool exclusive = false;
    if (s.contains(kw)) {
      HAYATE_CHECK(s[kw].is_number(), "json schema: '", kw, "' must be a number");
      v = s[kw].get<double>();
    }
    if (s.contains(excl)) {
      const json& e = s[excl];
      if (e.is_boolean()) {
        exclusive = e.get<bool>();  // draft 4: modifies kw
      } else {
        HAYATE_CHECK(e.is_number(), "json schema: '", excl, "' must be a number or boolean");
        const double x = e.get<double>();
        if (!v || (lower ? x >= *v : x <= *v)) v = x, exclusive = true;
      }
    }
    if (!v) return std::nullopt;
    HAYATE_CHECK(std::fabs(*v) < 1e15, "json schema: bound '", kw, "' is too large");
    // The integer bound that keeps every generated value (integers, and
    // decimals n.f with n below the upper integer bound) within *v.
    const double b = lower ? (exclusive ? std::floor(*v) + 1 : std::ceil(*v))
                           : (exclusive ? std::ceil(*v) - 1 : std::floor(*v));
    return static_cast<int64_t>(b);
  }

  Expr number_node(const json& s, bool integer) {
    auto lo = bound(s, "minimum", "exclusiveMinimum", true);
    auto hi = bound(s, "maximum", "exclusiveMaximum", false);
    if (!lo && !hi) return integer ? json_parts::integer(o_) : json_parts::number(o_);
    const int64_t cap = 999999999999999;  // max_integer_digits nines
    const int64_t l = lo ? *lo : -cap, h = hi ? *hi : cap;
    return integer ? json_parts::integer_range(l, h) : json_parts::number_range(l, h, o_);
  }

  Expr object_node(const json& s, int depth) {
    const json props = s.value("properties", json::object());
    HAYATE_CHECK(props.is_object(), "json schema: 'properties' must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      HAYATE_CHECK(s["required"].is_array(), "json schema: 'required' must be an array");
      for (const json& r : s["required"]) required.insert(r.get<std::string>());
    }
    // Extra properties: none, or values of this schema.
    std::optional<json> extra;
    if (s.contains("additionalProperties")) {
      const json& a = s["additionalProperties"];
      if (!(a.is_boolean() && !a.get<bool>())) extra = a;
    } else if (!(o_.strict_properties && !props.empty())) {
      extra = json(true);
    }
    struct Prop { std::string name; Expr value; bool required; };
    std::vector<Prop> list;
    for (auto it = props.begin(); it != props.end(); ++it)
      list.push_back({it.key(), node(it.value(), depth + 1), required.count(it.key()) > 0});
    for (const auto& r : required) {
      if (props.contains(r)) continue;
      HAYATE_CHECK(extra || !s.contains("additionalProperties"), "json schema: required property '", r,
                   "' is not in 'properties' and additionalProperties is false");
      list.push_back({r, node(extra ? *extra : json(true), depth + 1), true});
    }
    // A fresh number: nested schemas add their rules while this one is built.
    const std::string base = "obj" + std::to_string(fresh_++);
    Expr sep = seq({ws(), lit(","), ws()});
    auto member = [&](Expr key, Expr value) { return seq({std::move(key), ws(), lit(":"), ws(), std::move(value)}); };
    // tail(i, prev): the members from i on, given whether one came before.
    auto name = [&](size_t i, bool prev) { return base + "_" + std::to_string(i) + (prev ? "c" : "f"); };
    {
      Expr extra_member = extra ? member(ref(any("string")), node(*extra, depth + 1)) : Expr{};
      for (bool prev : {false, true}) {
        Expr tail = empty();
        if (extra) {
          Expr more = rep(seq({sep, extra_member}), 0, -1);
          tail = prev ? std::move(more) : opt(seq({extra_member, std::move(more)}));
        }
        rs_.add(name(list.size(), prev), std::move(tail));
      }
    }
    for (size_t i = list.size(); i-- > 0;) {
      for (bool prev : {false, true}) {
        Expr m = seq({prev ? sep : empty(), member(lit(json(list[i].name).dump()), list[i].value),
                      ref(name(i + 1, true))});
        rs_.add(name(i, prev), list[i].required ? std::move(m) : alt({std::move(m), ref(name(i + 1, prev))}));
      }
    }
    return seq({lit("{"), ws(), ref(name(0, false)), ws(), lit("}")});
  }

  Expr array_node(const json& s, int depth) {
    std::vector<Expr> prefix;
    std::optional<json> rest = json(true);
    const json* tuple = nullptr;
    if (s.contains("prefixItems")) tuple = &s["prefixItems"];
    if (s.contains("items") && s["items"].is_array()) tuple = &s["items"];
    if (tuple) {
      HAYATE_CHECK(tuple->is_array(), "json schema: 'prefixItems' must be an array");
      for (const json& x : *tuple) prefix.push_back(node(x, depth + 1));
      const char* more = s.contains("prefixItems") ? "items" : "additionalItems";
      if (s.contains(more)) rest = s[more];
    } else if (s.contains("items")) {
      rest = s["items"];
    }
    if (rest && rest->is_boolean() && !rest->get<bool>()) rest.reset();
    const auto n_prefix = static_cast<int32_t>(prefix.size());
    const int32_t min = count(s, "minItems", 0, l_.max_repeat);
    int32_t max = count(s, "maxItems", -1, l_.max_repeat);
    if (!rest) max = max < 0 ? n_prefix : std::min(max, n_prefix);
    HAYATE_CHECK(max < 0 || max >= min, "json schema: the array bounds leave no value");
    // Items in order: the prefix, then `rest` items; at least min, at most max.
    std::vector<Expr> items;
    for (int32_t i = 0; i < n_prefix && (max < 0 || i < max); ++i) items.push_back(std::move(prefix[static_cast<size_t>(i)]));
    Expr item_rest;
    if (rest) {
      const std::string r = "item" + std::to_string(fresh_++);
      rs_.add(r, node(*rest, depth + 1));
      item_rest = ref(r);
    }
    Expr sep = seq({ws(), lit(","), ws()});
    // Build from the back: after(k) = the items from index k on, each preceded by sep.
    const int32_t fixed = static_cast<int32_t>(items.size());
    Expr tail = empty();
    if (rest) {
      const int32_t lo = std::max(0, min - fixed);
      const int32_t hi = max < 0 ? -1 : max - fixed;
      tail = rep(seq({sep, item_rest}), lo, hi);
    }
    for (int32_t k = fixed; k-- > 1;) {
      Expr here = seq({sep, std::move(items[static_cast<size_t>(k)]), std::move(tail)});
      tail = k >= min ? opt(std::move(here)) : std::move(here);
    }
    Expr body;
    if (fixed > 0) {
      body = seq({std::move(items[0]), std::move(tail)});
    } else if (rest) {
      const int32_t hi = max < 0 ? -1 : max - 1;
      body = seq({item_rest, rep(seq({sep, item_rest}), std::max(0, min - 1), hi)});
    } else {
      body = empty();
    }
    if (min == 0 && (fixed > 0 || rest)) body = opt(std::move(body));
    return seq({lit("["), ws(), std::move(body), ws(), lit("]")});
  }

  std::string ref_rule(const json& r) {
    HAYATE_CHECK(r.is_string(), "json schema: '$ref' must be a string");
    const std::string p = r.get<std::string>();
    HAYATE_CHECK(!p.empty() && p[0] == '#', "json schema: $ref '", p, "' is not within the document");
    if (auto it = refs_.find(p); it != refs_.end()) return it->second;
    const json* target = &root_;
    std::string pointer = p.substr(1);
    if (!pointer.empty()) {
      try {
        target = &root_.at(json::json_pointer(pointer));
      } catch (const json::exception&) {
        fail(cat("json schema: $ref '", p, "' does not resolve"));
      }
    }
    const std::string name = "ref" + std::to_string(refs_.size());
    refs_[p] = name;
    const size_t slot = rs_.rules.size();
    rs_.add(name, empty());
    Expr body = node(*target, 1);
    rs_.rules[slot].second = std::move(body);
    return name;
  }

  const json& root_;
  const JsonOptions& o_;
  const Limits& l_;
  RuleSet rs_;
  int64_t fresh_ = 0;  // numbers of object and array-item rules
  bool made_any_ = false;
  int32_t nodes_ = 0;
  std::map<std::string, std::string> refs_;
};

}  // namespace

RuleSet json_schema_rules(const nlohmann::json& schema, const JsonOptions& options, const Limits& limits) {
  return SchemaCompiler(schema, options, limits).run("schema");
}

Grammar compile_json_schema(const nlohmann::json& schema, const JsonOptions& options, const Limits& limits) {
  return compile(json_schema_rules(schema, options, limits), limits);
}

Grammar compile_json_schema(std::string_view schema_json, const JsonOptions& options, const Limits& limits) {
  nlohmann::json schema;
  try {
    schema = nlohmann::json::parse(schema_json);
  } catch (const nlohmann::json::exception& e) {
    fail(cat("json schema: not valid JSON: ", e.what()));
  }
  return compile_json_schema(schema, options, limits);
}

Grammar compile_json_object(const JsonOptions& options, const Limits& limits) {
  return compile(SchemaCompiler(nlohmann::json(), options, limits).run("object"), limits);
}

Grammar compile_json_value(const JsonOptions& options, const Limits& limits) {
  return compile(SchemaCompiler(nlohmann::json(), options, limits).run("value"), limits);
}

}  // namespace hayate::grammar
