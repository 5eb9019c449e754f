#include "server/tools.h"

#include <random>
#include <cctype>

#include "core/check.h"
#include "server/api_error.h"

namespace hayate::server {

using nlohmann::json;

namespace {

bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
      return false;
  return true;
}

// The ends of the top-level JSON values in `s` from `at` (objects and
// arrays, strings inside them skipped); npos when one is unterminated.
size_t value_end(const std::string& s, size_t at) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = at; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
      if (depth < 0) return std::string::npos;
    }
  }
  return std::string::npos;
}

// {"name": ..., "parameters"|"arguments": {...}} as a call; false otherwise.
bool call_of(const json& j, ToolCall& out) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  const json* args = field(j, "parameters");
  if (!args) args = field(j, "arguments");
  if (args && args->is_string()) {  // some models write the arguments as JSON text
    json parsed = json::parse(args->get<std::string>(), nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) return false;
    out.arguments = parsed.dump();
  } else if (args && args->is_object()) {
    out.arguments = args->dump();
  } else if (!args) {
    out.arguments = "{}";
  } else {
    return false;
  }
  out.name = j["name"].get<std::string>();
  out.id = tool_call_id();
  return true;
}

std::string trim(std::string_view s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string_view::npos) return {};
  const size_t b = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(a, b - a + 1));
}

// Llama 3.x: optional <|python_tag|>, then JSON objects separated by ';'.
bool parse_llama3(const std::string& text, std::vector<ToolCall>& calls) {
  std::string s = trim(text);
  constexpr std::string_view kTag = "<|python_tag|>";
  if (s.rfind(kTag, 0) == 0) s = trim(std::string_view(s).substr(kTag.size()));
  if (s.empty() || s[0] != '{') return false;
  size_t at = 0;
  while (at < s.size()) {
    const size_t end = value_end(s, at);
    if (end == std::string::npos) return false;
    json j = json::parse(s.substr(at, end - at), nullptr, false);
    ToolCall c;
    if (j.is_discarded() || !call_of(j, c)) return false;
    calls.push_back(std::move(c));
    at = s.find_first_not_of(" \t\r\n;", end);
    if (at == std::string::npos) break;
    if (s[at] != '{') return false;
  }
  return !calls.empty();
}

// Hermes: <tool_call>{"name": ..., "arguments": {...}}</tool_call> blocks
// (the last may be cut at the end of the output); the text before the first
// is content.
bool parse_hermes(const std::string& text, std::vector<ToolCall>& calls,
                  std::optional<std::string>& content) {
  constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";
  const size_t first = text.find(kOpen);
  if (first == std::string::npos) return false;
  size_t at = first;
  while (at != std::string::npos) {
    const size_t from = at + kOpen.size();
    const size_t close = text.find(kClose, from);
    const std::string body =
        trim(std::string_view(text).substr(from, close == std::string::npos ? std::string::npos
                                                                             : close - from));
    json j = json::parse(body, nullptr, false);
    ToolCall c;
    if (j.is_discarded() || !call_of(j, c)) return false;
    calls.push_back(std::move(c));
    if (close == std::string::npos) break;
    at = text.find(kOpen, close + kClose.size());
  }
  const std::string before = text.substr(0, first);
  if (trim(before).empty())
    content.reset();
  else
    content = before;
  return true;
}

}  // namespace

ToolParser parse_tool_parser_name(const std::string& name) {
  if (name == "llama3_json") return ToolParser::kLlama3Json;
  if (name == "hermes") return ToolParser::kHermes;
  if (name.empty() || name == "none") return ToolParser::kNone;
  fail(cat("--tool-call-parser '", name, "' is not known (llama3_json, hermes)"));
}

std::optional<ToolRequest> parse_tools(const json& body, const ToolOptions& options) {
  const json* tools = field(body, "tools");
  const json* choice = field(body, "tool_choice");
  if (!tools || (tools->is_array() && tools->empty())) {
    if (choice && !(choice->is_string() && *choice == "none"))
      throw bad_request("'tool_choice' needs 'tools'", "tool_choice");
    return std::nullopt;
  }
  if (!tools->is_array()) throw bad_request("'tools' must be a list", "tools");
  ToolRequest r;
  for (const json& t : *tools) {
    if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") ||
        !t["function"].is_object())
      throw bad_request("each tool must be {\"type\": \"function\", \"function\": {...}}", "tools");
    const json& f = t["function"];
    const json* name = field(f, "name");
    if (!name || !name->is_string() || !valid_name(name->get<std::string>()))
      throw bad_request("a tool's function.name must be 1-64 letters, digits, '_', '-' or '.'",
                        "tools");
    ToolDef d;
    d.name = name->get<std::string>();
    for (const ToolDef& o : r.tools)
      if (o.name == d.name) throw bad_request(cat("tool '", d.name, "' is given twice"), "tools");
    const json* params = field(f, "parameters");
    if (params && !params->is_object())
      throw bad_request(cat("tool '", d.name, "': parameters must be a JSON Schema object"),
                        "tools");
    d.parameters = params ? *params : json{{"type", "object"}, {"properties", json::object()}};
    r.tools.push_back(std::move(d));
  }
  const bool auto_ok = options.enable_auto_tool_choice && options.parser != ToolParser::kNone;
  if (!choice) {
    r.choice = auto_ok ? ToolRequest::Choice::kAuto : ToolRequest::Choice::kNone;
  } else if (choice->is_string()) {
    const std::string c = choice->get<std::string>();
    if (c == "none") {
      r.choice = ToolRequest::Choice::kNone;
    } else if (c == "auto") {
      if (!auto_ok)
        throw bad_request("\"auto\" tool choice requires --enable-auto-tool-choice and "
                          "--tool-call-parser to be set",
                          "tool_choice");
      r.choice = ToolRequest::Choice::kAuto;
    } else if (c == "required") {
      r.choice = ToolRequest::Choice::kRequired;
    } else {
      throw bad_request(cat("'tool_choice' must be none, auto, required or a named function, got '",
                            c.substr(0, 40), "'"),
                        "tool_choice");
    }
  } else if (choice->is_object() && choice->value("type", "") == "function" &&
             choice->contains("function") && (*choice)["function"].is_object() &&
             (*choice)["function"].contains("name") && (*choice)["function"]["name"].is_string()) {
    r.choice = ToolRequest::Choice::kNamed;
    r.named = (*choice)["function"]["name"].get<std::string>();
    bool found = false;
    for (const ToolDef& d : r.tools) found = found || d.name == r.named;
    if (!found)
      throw bad_request(cat("tool_choice names '", r.named.substr(0, 64),
                            "', which is not in 'tools'"),
                        "tool_choice");
  } else {
    throw bad_request("'tool_choice' must be none, auto, required or "
                      "{\"type\": \"function\", \"function\": {\"name\": ...}}",
                      "tool_choice");
  }
  if (const json* v = field(body, "parallel_tool_calls")) {
    if (!v->is_boolean())
      throw bad_request("'parallel_tool_calls' must be a boolean", "parallel_tool_calls");
    r.parallel = v->get<bool>();
  }
  if (r.choice == ToolRequest::Choice::kNone) return std::nullopt;
  return r;
}

std::optional<StructuredSpec> tool_grammar(const ToolRequest& t) {
  StructuredSpec s;
  s.kind = StructuredSpec::Kind::kJsonSchema;
  s.param = "tools";
  if (t.choice == ToolRequest::Choice::kNamed) {
    for (const ToolDef& d : t.tools)
      if (d.name == t.named) s.schema = d.parameters;
    return s;
  }
  if (t.choice != ToolRequest::Choice::kRequired) return std::nullopt;
  json items = json::array();
  for (const ToolDef& d : t.tools)
    items.push_back({{"type", "object"},
                     {"properties", {{"name", {{"const", d.name}}}, {"parameters", d.parameters}}},
                     {"required", {"name", "parameters"}},
                     {"additionalProperties", false}});
  s.schema = {{"type", "array"},
              {"minItems", 1},
              {"items", items.size() == 1 ? items[0] : json{{"anyOf", items}}}};
  if (!t.parallel) s.schema["maxItems"] = 1;
  return s;
}

ParsedOutput parse_tool_output(const std::string& text, const ToolRequest& t, ToolParser parser) {
  ParsedOutput out;
  if (t.choice == ToolRequest::Choice::kNamed) {
    out.calls.push_back({tool_call_id(), t.named, text});
    return out;
  }
  if (t.choice == ToolRequest::Choice::kRequired) {
    json j = json::parse(text, nullptr, false);
    bool ok = j.is_array() && !j.empty();
    std::vector<ToolCall> calls;
    for (size_t i = 0; ok && i < j.size(); ++i) {
      ToolCall c;
      ok = call_of(j[i], c);
      calls.push_back(std::move(c));
    }
    if (ok)
      out.calls = std::move(calls);
    else
      out.content = text;  // cut by max_tokens: what there is, as text
    return out;
  }
  std::vector<ToolCall> calls;
  std::optional<std::string> content;
  const bool ok = parser == ToolParser::kLlama3Json ? parse_llama3(text, calls)
                  : parser == ToolParser::kHermes   ? parse_hermes(text, calls, content)
                                                    : false;
  if (!ok) {
    out.content = text;
    return out;
  }
  out.calls = std::move(calls);
  out.content = std::move(content);
  return out;
}

std::string tool_call_id() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* hex = "0123456789abcdef";
  std::string id = "chatcmpl-tool-";
  for (int i = 0; i < 32; ++i) id += hex[rng() & 15];
  return id;
}

json tool_calls_json(const std::vector<ToolCall>& calls) {
  json a = json::array();
  for (const ToolCall& c : calls)
    a.push_back({{"id", c.id},
                 {"type", "function"},
                 {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  return a;
}

}  // namespace hayate::server
