// Tool calling and structured-output requests without HTTP: tools /
// tool_choice parsing and its 400s, the grammar of required and named, the
// Llama 3 JSON and Hermes parsers (malformed output stays content), and the
// structured-output fields (one at most, each kind, the compile limits).
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/matcher.h"
#include "grammar/token_tables.h"
#include "grammar/vocab.h"
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

// What a stream's deltas add up to: the content, each call's name and
// arguments (ids aside), and how many argument deltas each call had.
struct Streamed {
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;
  std::vector<int> arg_deltas;
  bool fell_back = false;
  bool operator==(const Streamed& o) const {
    return content == o.content && calls == o.calls && fell_back == o.fell_back;
  }
};

Streamed stream_of(const ToolRequest& t, ToolParser parser, const std::vector<std::string_view>& pieces) {
  ToolStreamParser p(t, parser);
  Streamed s;
  auto take = [&](const std::vector<ToolDelta>& ds) {
    for (const ToolDelta& d : ds) {
      if (d.kind == ToolDelta::Kind::kContent) {
        EXPECT_FALSE(d.text.empty());
        s.content += d.text;
      } else if (d.kind == ToolDelta::Kind::kCallStart) {
        EXPECT_EQ(d.index, int(s.calls.size()));
        EXPECT_EQ(d.id.rfind("chatcmpl-tool-", 0), 0u);
        s.calls.emplace_back(d.name, "");
        s.arg_deltas.push_back(0);
      } else {
        EXPECT_EQ(d.index, int(s.calls.size()) - 1) << "arguments of an earlier call";
        s.calls.at(size_t(d.index)).second += d.text;
        s.arg_deltas.at(size_t(d.index))++;
      }
    }
  };
  for (std::string_view piece : pieces) take(p.push(piece));
  take(p.finish());
  EXPECT_EQ(p.calls(), int(s.calls.size()));
  s.fell_back = p.fell_back();
  return s;
}

// Split at every byte boundary, and one byte at a time: the same calls and
// content as the whole text in one piece, which (well-formed) is also the
// non-streamed answer.
Streamed check_splits(const ToolRequest& t, ToolParser parser, const std::string& text) {
  const Streamed whole = stream_of(t, parser, {text});
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    const std::string_view v(text);
    EXPECT_EQ(stream_of(t, parser, {v.substr(0, cut), v.substr(cut)}), whole) << "cut at " << cut << ": " << text;
  }
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < text.size(); ++i) bytes.push_back(std::string_view(text).substr(i, 1));
  const Streamed one = stream_of(t, parser, bytes);
  EXPECT_EQ(one, whole) << text;
  const ParsedOutput p = parse_tool_output(text, t, parser);
  if (!whole.fell_back) {
    EXPECT_EQ(p.content.value_or(""), whole.content) << text;
    EXPECT_EQ(p.content.has_value(), whole.calls.empty() || !whole.content.empty()) << text;
    EXPECT_EQ(p.calls.size(), whole.calls.size()) << text;
    for (size_t i = 0; i < p.calls.size() && i < whole.calls.size(); ++i) {
      EXPECT_EQ(p.calls[i].name, whole.calls[i].first);
      EXPECT_EQ(p.calls[i].arguments, whole.calls[i].second);
      EXPECT_TRUE(json::parse(p.calls[i].arguments).is_object()) << p.calls[i].arguments;
    }
  } else {
    EXPECT_TRUE(p.calls.empty()) << text;
    EXPECT_EQ(p.content, text);
  }
  return one;
}

TEST(Tools, StreamedCallsAddUpAtEverySplit) {
  const ToolRequest a = *parse_tools(json{{"tools", kTools}}, auto_on(ToolParser::kLlama3Json));
  const ToolRequest r = *parse_tools(json{{"tools", kTools}, {"tool_choice", "required"}}, {});
  const ToolRequest n = *parse_tools(
      json{{"tools", kTools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}}, {});
  using P = ToolParser;
  // Llama 3 JSON: calls separated by ';', arguments as an object, as JSON
  // text, or after the name; the arguments stream byte by byte.
  Streamed s = check_splits(
      a, P::kLlama3Json,
      R"(<|python_tag|>{"name": "get_weather", "parameters": {"city": "O\"s}lo", "unit": "c"}}; {"name": "get_time", "arguments": {}})");
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[0].first, "get_weather");
  EXPECT_EQ(s.calls[0].second, R"({"city": "O\"s}lo", "unit": "c"})");  // the model's text
  EXPECT_GT(s.arg_deltas[0], 10);
  EXPECT_EQ(s.calls[1].second, "{}");
  EXPECT_TRUE(s.content.empty());
  s = check_splits(a, P::kLlama3Json, R"(  {"parameters": {"city": "Rome"}, "name": "get_weather", "x": [1, {"y": "}"}]})");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].second, R"({"city": "Rome"})");
  s = check_splits(a, P::kLlama3Json, R"({"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"})");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].second, R"({"city": "Oslo"})");
  s = check_splits(a, P::kLlama3Json, R"({"name": "get_time"})");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].second, "{}");
  // Hermes: several calls, content before them, whitespace between dropped.
  s = check_splits(a, P::kHermes,
                   "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                   "\"a</tool_call>b\", \"n\": [1, {\"x\": null}]}}\n</tool_call>\n<tool_call>\n{\"name\": "
                   "\"get_time\", \"arguments\": {}}\n</tool_call>\n");
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.content, "Let me check.\n");
  EXPECT_EQ(s.calls[0].second, R"({"city": "a</tool_call>b", "n": [1, {"x": null}]})");
  EXPECT_GT(s.arg_deltas[0], 10);
  s = check_splits(a, P::kHermes, "\n<tool_call>{\"name\": \"get_time\", \"arguments\": {\"tz\": 1}}");  // cut: no </tool_call>
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_TRUE(s.content.empty());
  s = check_splits(a, P::kHermes, "<tool_call>{\"name\": \"get_time\"}</tool_call> and some text after <tool");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.content, " and some text after <tool");
  // Required: the grammar's array.
  s = check_splits(r, P::kNone,
                   R"([{"name": "get_time", "parameters": {}}, {"name": "get_weather", "parameters": {"city": "X"}}])");
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[1].second, R"({"city": "X"})");
  // Named: the whole output is the arguments.
  s = check_splits(n, P::kNone, R"({"tz": "UTC"})");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].second, R"({"tz": "UTC"})");
  // No call: all content, whitespace included.
  for (const char* text : {"It is sunny.", "  ", "", "<|python", "<tool_call", "a <tool_c"})
    for (P p : {P::kLlama3Json, P::kHermes}) {
      s = check_splits(a, p, text);
      EXPECT_TRUE(s.calls.empty());
      EXPECT_FALSE(s.fell_back);
      EXPECT_EQ(s.content, text);
    }
}

TEST(Tools, MalformedStreamedCallsComeBackAsContent) {
  const ToolRequest a = *parse_tools(json{{"tools", kTools}}, auto_on(ToolParser::kLlama3Json));
  using P = ToolParser;
  // Nothing was sent as a call: all of it is content.
  for (const auto& [p, text] : std::vector<std::pair<P, std::string>>{
           {P::kLlama3Json, R"({"nam": "x"})"},
           {P::kLlama3Json, R"(<|python_tag|>{"name": 3})"},
           {P::kLlama3Json, R"({"name": "get_wea)"},
           {P::kHermes, "Hi <tool_call>{\"name\": }</tool_call>"},
           {P::kHermes, "<tool_call>not json</tool_call> and more"},
           {P::kHermes, "\n<tool_call>\n"}}) {
    const Streamed s = check_splits(a, p, text);
    EXPECT_TRUE(s.fell_back) << text;
    EXPECT_TRUE(s.calls.empty()) << text;
    EXPECT_EQ(s.content, text);
  }
  // A call was under way: it stays sent; the rest is content, nothing lost.
  Streamed s = check_splits(a, P::kLlama3Json, R"({"name": "get_weather", "parameters": {"city": "Pa)");
  EXPECT_TRUE(s.fell_back);
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].second + s.content, R"({"city": "Pa)");
  s = check_splits(a, P::kLlama3Json, R"({"name": "get_time", "parameters": 3} tail)");
  EXPECT_TRUE(s.fell_back);
  EXPECT_EQ(s.content, R"(, "parameters": 3} tail)");
  s = check_splits(a, P::kHermes, "<tool_call>{\"name\": \"get_time\"}</tool_call><tool_call>{\"name\": \"get_time\", x");
  EXPECT_TRUE(s.fell_back);
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.content, ", x");
  s = check_splits(a, P::kHermes, "<tool_call>{\"name\": \"get_time\"} oops </tool_call>");
  EXPECT_TRUE(s.fell_back);
  EXPECT_EQ(s.content, " oops </tool_call>");
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

// Patterns that are catastrophic for backtracking engines compile within
// the server's limits and mask in bounded time (the matcher keeps a set of
// parser stacks, it never backtracks); what would be too big is a 400 that
// names the limit, the compile's wall time included. A small vocabulary
// (every byte and a few longer tokens) keeps this fast under ASan; the
// grammar tests run the same patterns with Llama 3's 128k.
TEST(Structured, LimitsAre400sAndCatastrophicRegexesAreOrdinary) {
  std::vector<std::string> bytes;
  for (int b = 1; b < 128; ++b) bytes.emplace_back(1, char(b));
  for (const char* t : {"aa", "aaaa", "ab", "ba", "xx", "x+", "w1", "w12", "foo", "<eos>"}) bytes.emplace_back(t);
  const auto vocab = std::make_shared<const grammar::TokenVocab>(
      bytes, std::vector<bool>(bytes.size(), false), std::vector<int32_t>{int32_t(bytes.size()) - 1});
  auto regex = [](std::string p) {
    StructuredSpec s;
    s.kind = StructuredSpec::Kind::kRegex;
    s.text = std::move(p);
    s.param = "guided_regex";
    return s;
  };
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  std::string words = "(";
  for (int i = 0; i < 1000; ++i) words += (i ? "|w" : "w") + std::to_string(i * 7919 % 100003);
  words += ")";
  // Each pattern with whether it admits 5,000 a's as a prefix, then a "!".
  // The times are printed, not bounded (a blow-up shows as ctest's timeout).
  struct Case {
    std::string pattern;
    bool as, bang;
  };
  for (const Case& c : {Case{"(a+)+b", true, false}, Case{"(a|aa)*c", true, false},
                        Case{"(.*a){20}", true, true}, Case{"(x+x+)+y", false, false},
                        Case{"(\\w+\\s?)*$", true, false}, Case{words, false, false}}) {
    const std::string& p = c.pattern;
    Clock::time_point t0 = Clock::now();
    const auto t = compile_structured(regex(p), vocab);
    const double compile_ms = ms_since(t0);
    // A random walk of 200 tokens: each mask is bounded work.
    grammar::GrammarMatcher m(t);
    std::mt19937_64 rng(7);
    std::vector<uint32_t> mask;
    double worst_ms = 0;
    for (int step = 0; step < 200; ++step) {
      t0 = Clock::now();
      m.fill_mask(mask);
      worst_ms = std::max(worst_ms, ms_since(t0));
      std::vector<int32_t> ids;
      for (int32_t id = 0; id + 1 < int32_t(bytes.size()); ++id)
        if ((mask[size_t(id) / 32] >> (id % 32)) & 1) ids.push_back(id);
      if (ids.empty()) break;  // only EOS left
      ASSERT_TRUE(m.accept_token(ids[rng() % ids.size()]));
    }
    // The input that makes a backtracking engine explode: linear here.
    grammar::GrammarMatcher b(t);
    EXPECT_EQ(b.accept_bytes(std::string(5000, 'a')), c.as) << p.substr(0, 40);
    EXPECT_EQ(b.accept_bytes("!"), c.bang) << p.substr(0, 40);
    std::printf("%-12.12s compile %.1f ms, worst mask %.3f ms\n", p.c_str(), compile_ms, worst_ms);
  }
  // Too big or too deep: a 400 naming the limit, before any table is built.
  auto refused = [&](const StructuredSpec& s, const std::string& needle, StructuredLimits lim = {}) {
    try {
      compile_structured(s, vocab, lim);
      ADD_FAILURE() << s.text.substr(0, 40) << " compiled";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.param(), s.param);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused(regex("(a{1000}){1000}"), "positions");
  refused(regex("(a{100}){100}x{100}(b{100}){100}"), "positions");
  refused(regex("a{5000}"), "repetition bound over 4096");
  refused(regex(std::string(100, '(') + "a" + std::string(100, ')')), "nested deeper than 64");
  std::string huge = "(";
  for (int i = 0; i < 20000; ++i) huge += (i ? "|w" : "w") + std::to_string(i);
  refused(regex(huge + ")"), "more than 65536");
  StructuredSpec deep;
  deep.kind = StructuredSpec::Kind::kJsonSchema;
  deep.param = "response_format";
  deep.schema = {{"type", "string"}};
  for (int i = 0; i < 100; ++i) deep.schema = {{"type", "array"}, {"items", deep.schema}};
  refused(deep, "deeper");
  // The compile's wall time: past the limit, a 400 naming it.
  StructuredLimits no_time;
  no_time.max_compile_ms = 0;
  refused(regex("[a-z]{1,8}"), "over the compile time limit", no_time);
}

}  // namespace
}  // namespace hayate::server
