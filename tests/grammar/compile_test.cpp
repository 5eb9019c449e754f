// Compilers: what each accepts, and bad input as an Error that names the
// problem (never a crash or a hang).
#include <chrono>

#include "grammar/grammar.h"
#include "grammar_util.h"

namespace hayate::test {
namespace {

using namespace hayate::grammar;

bool matches(const Grammar& g, std::string_view s) {
  GrammarMatcher m(std::make_shared<const Grammar>(g));
  return m.accept_bytes(s) && m.can_end();
}

void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "expected '" << needle << "' in: " << e.what();
  }
}

TEST(GrammarEbnf, SyntaxOfGbnf) {
  const Grammar g = compile_ebnf(R"(
# a comment
root ::= greeting ws name{1,2}   # trailing comment
greeting ::= "h\x65llo" | "\u00e9t\u00E9"
ws ::= [ \t]?
name ::= [A-Z] [a-z]*
   | "\"" [^"\\]+ "\""
)");
  EXPECT_TRUE(matches(g, "hello Bob"));
  EXPECT_TRUE(matches(g, "étéBobAl"));
  EXPECT_TRUE(matches(g, "hello\"x y\""));
  EXPECT_FALSE(matches(g, "hello BobAlCy"));
  EXPECT_FALSE(matches(g, "hello"));
  EXPECT_FALSE(matches(g, "hello \"\""));
  const Grammar any = compile_ebnf(R"(root ::= . . "!")");
  EXPECT_TRUE(matches(any, "\xF0\x9F\x98\x80\xE2\x82\xAC!"));  // two characters of 4 and 3 bytes
  EXPECT_FALSE(matches(any, "\xED\xA0\x80x!"));                 // a surrogate is not a character
}

TEST(GrammarEbnf, BadGrammarsAreErrors) {
  expect_error([] { compile_ebnf("root ::= foo"); }, "undefined rule 'foo'");
  expect_error([] { compile_ebnf("root ::= root \"a\" | \"b\""); }, "left-recursive");
  expect_error([] { compile_ebnf("root ::= (\"a\"?)*"); }, "left-recursive");
  expect_error([] { compile_ebnf("root ::= \"a\" root"); }, "no finite string");
  expect_error([] { compile_ebnf("root ::= \"a"); }, "unterminated");
  expect_error([] { compile_ebnf("root ::= [b-a]"); }, "reversed");
  expect_error([] { compile_ebnf("root ::= \"a\"{3,2}"); }, "max < min");
  expect_error([] { compile_ebnf("root ::= \"a\"{99999999}"); }, "repetition bound");
  expect_error([] { compile_ebnf("x ::= \"a\""); }, "no rule named root");
  expect_error([] { compile_ebnf("root ::= \"a\"\nroot ::= \"b\""); }, "defined twice");
  expect_error([] { compile_ebnf("root ::= \"\\q\""); }, "unknown escape");
  expect_error([] { compile_ebnf("root ::= " + std::string(10000, '(') + "\"a\"" + std::string(10000, ')')); }, "nested deeper");
  Limits small;
  small.max_elements = 1000;
  expect_error([&] { compile_ebnf("root ::= [a-z]{5000}", small); }, "positions");
}

TEST(GrammarChoice, ExactlyTheChoices) {
  const Grammar g = compile_choice({"yes", "no", "yes!"});
  EXPECT_TRUE(matches(g, "yes"));
  EXPECT_TRUE(matches(g, "yes!"));
  EXPECT_FALSE(matches(g, "ye"));
  EXPECT_FALSE(matches(g, "no!"));
  expect_error([] { compile_choice({}); }, "empty");
  auto t = tables_for(compile_choice({"red", "green", "blue", "dark \"blue\""}));
  for (uint64_t seed = 0; seed < 20; ++seed) {
    Walk w = random_walk(t, seed, 20);
    EXPECT_TRUE(w.finished);
    EXPECT_TRUE(w.text == "red" || w.text == "green" || w.text == "blue" || w.text == "dark \"blue\"") << w.text;
  }
}

TEST(GrammarJsonSchema, UnsupportedKeywordsAreNamed) {
  for (const char* kw : {"not", "patternProperties", "if", "minProperties", "multipleOf", "contains",
                         "propertyNames", "dependentRequired", "unevaluatedProperties"}) {
    const std::string schema = std::string(R"({"type": "object", ")") + kw + R"(": {}})";
    expect_error([&] { compile_json_schema(std::string_view(schema)); }, std::string("'") + kw + "'");
  }
  expect_error([] { compile_json_schema(std::string_view(R"({"allOf": [{}, {}]})")); }, "'allOf'");
  expect_error([] { compile_json_schema(std::string_view(R"({"uniqueItems": true})")); }, "'uniqueItems'");
  expect_error([] { compile_json_schema(std::string_view(R"({"oneOf": [{"type": "integer"}, {"minimum": 2}]})")); },
               "'oneOf'");
  expect_error([] { compile_json_schema(std::string_view(R"({"oneOf": [{"type": "number"}, {"type": "integer"}]})")); },
               "'oneOf'");
  compile_json_schema(std::string_view(R"({"oneOf": [{"type": "string"}, {"type": "integer"}, {"const": true}]})"));
  expect_error([] { compile_json_schema(std::string_view(R"({"type": "string", "format": "hostname"})")); },
               "format 'hostname'");
  expect_error([] { compile_json_schema(std::string_view(R"({"$ref": "#/$defs/missing"})")); }, "does not resolve");
  expect_error([] { compile_json_schema(std::string_view(R"({"$ref": "http://x/y.json"})")); }, "not within");
  expect_error([] { compile_json_schema(std::string_view(R"({"type": "strin"})")); }, "unknown type");
  expect_error([] { compile_json_schema(std::string_view(R"({"type": "integer", "minimum": 5, "maximum": 4})")); },
               "no value");
  expect_error([] { compile_json_schema(std::string_view("{")); }, "not valid JSON");
  expect_error([] { compile_json_schema(std::string_view("false")); }, "allows no value");
}

TEST(GrammarJsonSchema, LimitsStopHugeAndDeepSchemas) {
  std::string deep = "{}";
  for (int i = 0; i < 500; ++i) deep = R"({"type": "array", "items": )" + deep + "}";
  expect_error([&] { compile_json_schema(std::string_view(deep)); }, "nested deeper");
  expect_error([] { compile_json_schema(std::string_view(R"({"type": "array", "maxItems": 1000000})")); },
               "over the limit");
  JsonOptions few;
  few.max_schema_nodes = 50;
  std::string wide = R"({"type": "object", "properties": {)";
  for (int i = 0; i < 100; ++i) {
    if (i) wide += ",";
    wide += "\"p";
    wide += std::to_string(i);
    wide += R"(": {"type": "integer"})";
  }
  wide += "}}";
  expect_error([&] { compile_json_schema(std::string_view(wide), few); }, "schema nodes");
  // A recursive $ref compiles into a recursive rule, quickly.
  const auto start = std::chrono::steady_clock::now();
  const Grammar g = compile_json_schema(std::string_view(R"({"$defs": {"node": {"type": "object",
      "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
      "$ref": "#/$defs/node"})"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(matches(g, R"({"kids":[{"kids":[]},{}]})"));
  EXPECT_FALSE(matches(g, R"({"kids":[{"kid":[]}]})"));
  // Recursion with no way out is refused rather than expanded.
  expect_error([] { compile_json_schema(std::string_view(R"({"$defs": {"a": {"type": "object",
      "properties": {"x": {"$ref": "#/$defs/a"}}, "required": ["x"]}}, "$ref": "#/$defs/a"})")); },
               "no finite string");
}

TEST(GrammarJsonSchema, WhitespaceIsBounded) {
  const Grammar compact = compile_json_object({.max_whitespace = 0});
  EXPECT_TRUE(matches(compact, R"({"a":[1,2],"b":{}})"));
  EXPECT_FALSE(matches(compact, R"({"a": 1})"));
  const Grammar one = compile_json_object();
  EXPECT_TRUE(matches(one, "{\"a\": 1,\n\"b\":2 }"));
  EXPECT_FALSE(matches(one, R"({"a":  1})"));
  EXPECT_FALSE(matches(one, R"( {"a":1})"));
}

}  // namespace
}  // namespace hayate::test

namespace hayate::test {
namespace {

// Rules made while a nested schema is built get names of their own: an array
// of objects holding arrays, and an object whose additionalProperties are
// objects, compile and match (they once named two rules alike).
TEST(GrammarJsonSchema, NestedArraysAndObjectsGetDistinctRules) {
  using namespace hayate::grammar;
  const Grammar arrays = compile_json_schema(std::string_view(R"({"type": "array", "minItems": 2,
      "items": {"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": ["a"]}}},
                "required": ["tags"]}})"));
  GrammarMatcher m(std::make_shared<const Grammar>(arrays));
  EXPECT_TRUE(m.accept_bytes(R"([{"tags": ["a"]}, {"tags": []}])"));
  EXPECT_TRUE(m.can_end());
  const Grammar extra = compile_json_schema(std::string_view(
      R"({"type": "object", "additionalProperties": {"type": "object", "additionalProperties": {"type": "integer"}}})"));
  GrammarMatcher e(std::make_shared<const Grammar>(extra));
  EXPECT_TRUE(e.accept_bytes(R"({"x": {"y": 1}, "z": {}})"));
  EXPECT_TRUE(e.can_end());
}

}  // namespace
}  // namespace hayate::test
