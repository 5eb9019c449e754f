// The validity suite: random walks through the mask with the real Llama 3.1
// vocabulary (what a random-weights model does under the grammar) for many
// schemas; every finished output must parse as JSON and validate under
// its schema by ajv (tests/oracle/validate_json.mjs), and where the schema
// bounds the output the walk must finish within its token budget.
#include <filesystem>
#include <fstream>

#include "grammar_util.h"

namespace hayate::test {
namespace {

using namespace hayate::grammar;
using nlohmann::json;

struct Generation {
  json schema;
  std::string draft;
  std::string output;
  std::string label;
};

// Validates all generations in one node run; returns the failures.
std::vector<std::string> validate(const std::vector<Generation>& gens) {
  const std::string path = std::string(HAYATE_BINARY_DIR) + "/grammar_generations.jsonl";
  {
    std::ofstream f(path, std::ios::binary);
    for (const auto& g : gens)
      f << json{{"schema", g.schema}, {"output", g.output}, {"draft", g.draft}}.dump(-1, ' ', false,
                                                                                   json::error_handler_t::replace)
        << "\n";
  }
  auto results = json_lines(run_command("node " + oracle_dir() + "/validate_json.mjs " + path));
  std::vector<std::string> failures;
  EXPECT_EQ(results.size(), gens.size());
  for (size_t i = 0; i < results.size() && i < gens.size(); ++i)
    if (!results[i]["ok"].get<bool>())
      failures.push_back(gens[i].label + ": " + gens[i].output + " -> " + results[i]["error"].get<std::string>());
  return failures;
}

struct Case {
  const char* schema;
  bool bounded;  // the walk must finish
};

const Case kSchemas[] = {
    // A typical tool schema (function parameters).
    {R"({"type": "object", "properties": {
        "location": {"type": "string", "description": "City and country"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14}},
      "required": ["location", "unit"], "additionalProperties": false})", false},
    {R"({"type": "boolean"})", true},
    {R"({"enum": ["a", 1, null, {"k": [true]}, "d\"q"]})", true},
    {R"({"const": {"x": 1.5, "y": "ü"}})", true},
    {R"({"type": "string", "maxLength": 4})", true},
    {R"({"type": "string", "minLength": 2, "maxLength": 3})", true},
    {R"({"type": "array", "items": {"type": "boolean"}, "maxItems": 3})", true},
    {R"({"type": "array", "items": {"enum": [1, 2]}, "minItems": 2, "maxItems": 4})", true},
    {R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "null"}], "items": false})", true},
    {R"({"type": "integer", "minimum": -37, "maximum": 1234})", true},
    {R"({"type": "integer", "exclusiveMinimum": 10})", true},
    {R"({"type": "number", "minimum": 0, "maximum": 1})", true},
    {R"({"type": "number", "exclusiveMinimum": -2.5, "exclusiveMaximum": 7})", true},
    {R"({"type": "number"})", true},
    {R"({"type": "string", "format": "date"})", true},
    {R"({"type": "string", "format": "date-time"})", true},
    {R"({"type": "string", "format": "uuid"})", true},
    {R"({"type": "string", "format": "ipv4"})", true},
    {R"({"type": "string", "format": "email"})", false},
    {R"({"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"})", true},
    {R"({"type": "string", "pattern": "ab+c"})", false},
    {R"({"type": "string", "pattern": "^\"\\\\.$"})", true},
    {R"({"anyOf": [{"type": "integer", "maximum": 3, "minimum": 0}, {"type": "string", "maxLength": 1}]})", true},
    {R"({"type": ["null", "boolean"]})", true},
    {R"({"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "null"},
        "c": {"enum": [1]}}, "required": ["b"]})", true},
    {R"({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
        "additionalProperties": {"type": "boolean"}})", false},
    {R"({"type": "object", "additionalProperties": {"type": "integer"}})", false},
    {R"({"$defs": {"tree": {"type": "object", "properties": {"v": {"type": "integer"},
        "kids": {"type": "array", "items": {"$ref": "#/$defs/tree"}, "maxItems": 2}},
        "required": ["v"], "additionalProperties": false}}, "$ref": "#/$defs/tree"})", false},
    {R"({"type": "object", "properties": {"user": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 8}, "tags": {"type": "array",
        "items": {"type": "string", "enum": ["x", "y"]}, "maxItems": 2}},
        "required": ["name", "tags"], "additionalProperties": false}},
        "required": ["user"], "additionalProperties": false})", true},
    {R"({})", false},
};

TEST(GrammarValidity, HandWrittenSchemasValidateUnderAjv) {
  std::vector<Generation> gens;
  for (const Case& c : kSchemas) {
    const json schema = json::parse(c.schema);
    auto t = tables_for(compile_json_schema(schema));
    int finished = 0;
    const int walks = 6;
    for (int seed = 0; seed < walks; ++seed) {
      Walk w = random_walk(t, static_cast<uint64_t>(seed), 512);
      if (c.bounded) {
        EXPECT_TRUE(w.finished) << c.schema << " seed " << seed << ": " << w.text;
      }
      if (!w.finished) continue;
      ++finished;
      gens.push_back({schema, "2020", w.text, c.schema});
    }
    if (c.bounded) {
      EXPECT_GT(finished, 0) << c.schema;
    }
  }
  const auto failures = validate(gens);
  EXPECT_TRUE(failures.empty()) << failures.size() << " of " << gens.size() << " invalid, first: " << failures[0];
}

TEST(GrammarValidity, JsonObjectIsAnObject) {
  auto t = tables_for(compile_json_object());
  std::vector<Generation> gens;
  for (int seed = 0; seed < 30; ++seed) {
    Walk w = random_walk(t, static_cast<uint64_t>(seed), 512);
    if (w.finished) gens.push_back({json{{"type", "object"}}, "2020", w.text, "json_object"});
  }
  EXPECT_GE(gens.size(), 5u);
  const auto failures = validate(gens);
  EXPECT_TRUE(failures.empty()) << failures.size() << " invalid, first: " << failures[0];
}

// The JSON Schema Test Suite's draft 7 schemas that compile; the others
// must fail with an Error (a named keyword), never a crash.
TEST(GrammarValidity, TestSuiteSchemasValidateUnderAjv) {
  const std::filesystem::path dir = "/usr/share/json-schema-test-suite/tests/draft7";
  ASSERT_TRUE(std::filesystem::exists(dir)) << "install json-schema-test-suite (scripts/setup.sh)";
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<Generation> gens;
  int compiled = 0, refused = 0;
  for (const auto& f : files) {
    const json groups = json::parse(slurp(f.string()));
    for (size_t i = 0; i < groups.size(); ++i) {
      const json& schema = groups[i]["schema"];
      const std::string label = f.filename().string() + "#" + std::to_string(i);
      std::shared_ptr<const TokenTables> t;
      try {
        t = tables_for(compile_json_schema(schema));
      } catch (const Error&) {
        ++refused;
        continue;
      }
      ++compiled;
      for (int seed = 0; seed < 2; ++seed) {
        Walk w = random_walk(t, static_cast<uint64_t>(seed), 256);
        if (w.finished) gens.push_back({schema, "7", w.text, label});
      }
    }
  }
  std::printf("test suite: %d schemas compiled, %d refused, %zu generations\n", compiled, refused, gens.size());
  EXPECT_GE(compiled, 40);
  const auto failures = validate(gens);
  EXPECT_TRUE(failures.empty()) << failures.size() << " of " << gens.size() << " invalid, first: " << failures[0];
}

}  // namespace
}  // namespace hayate::test
