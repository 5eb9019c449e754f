// Tool calling and structured-output requests without HTTP: tools /
// tool_choice parsing and its 400s, the grammar of required and named, the
// Llama 3 JSON and Hermes parsers (malformed output stays content), and the
// structured-output fields (one at most, each kind, the compile limits).
#include <gtest/gtest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/structured.h"
#include "server/tools.h"

namespace hayate::server {
namespace {

using nlohmann::json;

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time"}}])");

ToolOptions auto_on(ToolParser p) { return {true, p}; }

std::string param_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param();
  }
  ADD_FAILURE() << "no 400";
  return {};
}

TEST(Tools, ChoiceDefaultsAndErrors) {
  const ToolOptions off;
  EXPECT_FALSE(parse_tools(json{{"tools", kTools}}, off));  // no auto: none
  auto a = parse_tools(json{{"tools", kTools}}, auto_on(ToolParser::kHermes));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->choice, ToolRequest::Choice::kAuto);
  EXPECT_EQ(a->tools.size(), 2u);
  EXPECT_EQ(a->tools[1].parameters["type"], "object");  // no parameters: an empty object
  auto r = parse_tools(json{{"tools", kTools}, {"tool_choice", "required"}}, off);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->choice, ToolRequest::Choice::kRequired);
  auto n = parse_tools(
      json{{"tools", kTools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}},
      off);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->named, "get_time");
  EXPECT_FALSE(parse_tools(json{{"tools", kTools}, {"tool_choice", "none"}}, auto_on(ToolParser::kHermes)));
  EXPECT_EQ(param_of([&] { parse_tools(json{{"tools", kTools}, {"tool_choice", "auto"}}, off); }),
            "tool_choice");
  EXPECT_EQ(param_of([&] {
              parse_tools(json{{"tools", kTools},
                               {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}},
                          off);
            }),
            "tool_choice");
  EXPECT_EQ(param_of([&] { parse_tools(json{{"tool_choice", "required"}}, off); }), "tool_choice");
  EXPECT_EQ(param_of([&] { parse_tools(json{{"tools", json::parse(R"([{"type": "function"}])")}}, off); }),
            "tools");
  EXPECT_EQ(param_of([&] {
              json twice = json::array({kTools[0], kTools[0]});
              parse_tools(json{{"tools", twice}, {"tool_choice", "required"}}, off);
            }),
            "tools");
  EXPECT_EQ(param_of([&] { parse_tools(json{{"tools", kTools}, {"tool_choice", "sometimes"}}, off); }),
            "tool_choice");
}

TEST(Tools, GrammarOfRequiredAndNamed) {
  auto r = parse_tools(json{{"tools", kTools}, {"tool_choice", "required"}}, {});
  auto g = tool_grammar(*r);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->schema["type"], "array");
  EXPECT_EQ(g->schema["minItems"], 1);
  EXPECT_EQ(g->schema["items"]["anyOf"].size(), 2u);
  EXPECT_EQ(g->schema["items"]["anyOf"][0]["properties"]["name"]["const"], "get_weather");
  EXPECT_FALSE(g->schema.contains("maxItems"));
  auto one = parse_tools(json{{"tools", kTools}, {"tool_choice", "required"}, {"parallel_tool_calls", false}}, {});
  EXPECT_EQ(tool_grammar(*one)->schema["maxItems"], 1);
  auto n = parse_tools(
      json{{"tools", kTools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}},
      {});
  EXPECT_EQ(tool_grammar(*n)->schema, kTools[0]["function"]["parameters"]);
  EXPECT_FALSE(tool_grammar(*parse_tools(json{{"tools", kTools}}, auto_on(ToolParser::kLlama3Json))));
}

TEST(Tools, ParsersReadCallsAndLeaveTheRestAsContent) {
  ToolRequest a = *parse_tools(json{{"tools", kTools}}, auto_on(ToolParser::kLlama3Json));
  ParsedOutput p = parse_tool_output(
      R"(<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}; {"name": "get_time", "arguments": {}})",
      a, ToolParser::kLlama3Json);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_FALSE(p.content);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(p.calls[0].arguments), json({{"city", "Oslo"}}));
  EXPECT_EQ(p.calls[1].arguments, "{}");
  EXPECT_EQ(p.calls[0].id.rfind("chatcmpl-tool-", 0), 0u);
  EXPECT_NE(p.calls[0].id, p.calls[1].id);
  for (const char* bad : {"It is sunny.", R"({"name": "get_weather", "parameters": {"city": )",
                          R"({"nam": "x"})", "", R"({"name": "f", "parameters": 3})"}) {
    p = parse_tool_output(bad, a, ToolParser::kLlama3Json);
    EXPECT_TRUE(p.calls.empty()) << bad;
    EXPECT_EQ(p.content, std::string(bad));
  }
  p = parse_tool_output(
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}",  // the last cut
      a, ToolParser::kHermes);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.content, std::string("Let me check.\n"));
  EXPECT_EQ(p.calls[1].name, "get_time");
  p = parse_tool_output("<tool_call>{\"name\": }</tool_call>", a, ToolParser::kHermes);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, std::string("<tool_call>{\"name\": }</tool_call>"));

  ToolRequest r = *parse_tools(json{{"tools", kTools}, {"tool_choice", "required"}}, {});
  p = parse_tool_output(R"([{"name": "get_time", "parameters": {}}])", r, ToolParser::kNone);
  ASSERT_EQ(p.calls.size(), 1u);
  p = parse_tool_output(R"([{"name": "get_time", "para)", r, ToolParser::kNone);  // cut at max_tokens
  EXPECT_TRUE(p.calls.empty());
  ToolRequest n = *parse_tools(
      json{{"tools", kTools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}},
      {});
  p = parse_tool_output("{}", n, ToolParser::kNone);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_time");
  EXPECT_EQ(p.calls[0].arguments, "{}");
  const json calls = tool_calls_json(p.calls);
  EXPECT_EQ(calls[0]["type"], "function");
  EXPECT_EQ(calls[0]["function"]["name"], "get_time");
}

TEST(Structured, OneSpecEachKindAndErrors) {
  EXPECT_FALSE(parse_structured(json::object()));
  EXPECT_FALSE(parse_structured(json{{"response_format", {{"type", "text"}}}}));
  auto s = parse_structured(json{{"response_format", {{"type", "json_object"}}}});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->kind, StructuredSpec::Kind::kJsonObject);
  s = parse_structured(json{{"response_format",
                             {{"type", "json_schema"},
                              {"json_schema", {{"name", "x"}, {"strict", true}, {"schema", {{"type", "integer"}}}}}}}});
  EXPECT_EQ(s->kind, StructuredSpec::Kind::kJsonSchema);
  EXPECT_EQ(s->schema, json({{"type", "integer"}}));
  s = parse_structured(json{{"structured_outputs", {{"json", R"({"type": "boolean"})"}, {"disable_any_whitespace", true}}}});
  EXPECT_EQ(s->schema, json({{"type", "boolean"}}));
  EXPECT_TRUE(s->compact);
  EXPECT_EQ(parse_structured(json{{"guided_regex", "a+"}})->kind, StructuredSpec::Kind::kRegex);
  EXPECT_EQ(parse_structured(json{{"guided_choice", {"a", "b"}}})->choices.size(), 2u);
  EXPECT_EQ(parse_structured(json{{"structured_outputs", {{"grammar", "root ::= \"a\""}}}})->kind,
            StructuredSpec::Kind::kGrammar);
  EXPECT_NE(parse_structured(json{{"guided_regex", "a"}})->key(),
            parse_structured(json{{"guided_regex", "b"}})->key());
  EXPECT_EQ(param_of([] { parse_structured(json{{"guided_regex", "a"}, {"guided_choice", {"b"}}}); }),
            "guided_choice");
  EXPECT_EQ(param_of([] { parse_structured(json{{"structured_outputs", {{"regex", "a"}, {"choice", {"b"}}}}}); }),
            "structured_outputs");
  EXPECT_EQ(param_of([] { parse_structured(json{{"structured_outputs", {{"whitespace_pattern", " "}}}}); }),
            "structured_outputs");
  EXPECT_EQ(param_of([] { parse_structured(json{{"response_format", {{"type", "structural_tag"}}}}); }),
            "response_format");
  EXPECT_EQ(param_of([] { parse_structured(json{{"guided_json", 3}}); }), "guided_json");
}

}  // namespace
}  // namespace hayate::server
