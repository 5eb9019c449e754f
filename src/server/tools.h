// Tool calling on /v1/chat/completions, as vLLM serves it: the request's
// `tools` and `tool_choice`, the grammar that enforces `required` and a
// named function, and the model's output parsed into OpenAI tool_calls
// (Llama 3.x JSON and Hermes <tool_call> formats). Rendering the tools into
// the prompt is the chat template's business, not this file's.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/structured.h"

namespace hayate::server {

// vLLM's --tool-call-parser: how `auto` reads tool calls out of free text.
enum class ToolParser { kNone, kLlama3Json, kHermes };
ToolParser parse_tool_parser_name(const std::string& name);  // throws Error naming the known ones

struct ToolOptions {
  bool enable_auto_tool_choice = false;  // vLLM's --enable-auto-tool-choice
  ToolParser parser = ToolParser::kNone;
};

struct ToolDef {
  std::string name;
  nlohmann::json parameters;  // a JSON Schema ({"type": "object"} when absent)
};

struct ToolRequest {
  enum class Choice { kNone, kAuto, kRequired, kNamed };
  std::vector<ToolDef> tools;
  Choice choice = Choice::kNone;
  std::string named;  // kNamed: the function
  bool parallel = true;  // OpenAI's parallel_tool_calls: false = at most one call
};

// `tools` and `tool_choice` of a chat request (nullopt without tools, or
// when tool_choice is none). Defaults as vLLM: auto when tools are given
// and the server enables auto tool choice, else none. A malformed tool,
// an unknown named function, or auto on a server without a parser is a 400.
std::optional<ToolRequest> parse_tools(const nlohmann::json& body, const ToolOptions& options);

// The grammar that makes the output a valid call: named, the function's
// arguments (a JSON object of its parameters schema); required, a JSON
// array of at least one {"name": ..., "parameters": ...} of the tools (one
// exactly without parallel tool calls).
// nullopt for auto.
std::optional<StructuredSpec> tool_grammar(const ToolRequest& tools);

struct ToolCall {
  std::string id;         // chatcmpl-tool-...
  std::string name;
  std::string arguments;  // JSON text
};

struct ParsedOutput {
  std::vector<ToolCall> calls;
  std::optional<std::string> content;  // null when the whole text was tool calls
};

// The tool calls in a choice's generated text: named and required read the
// grammar's JSON; auto uses the parser. Text that is not a well-formed call
// (auto) stays content: a model's mistake is never a server error.
ParsedOutput parse_tool_output(const std::string& text, const ToolRequest& tools,
                               ToolParser parser);

// A fresh tool-call id ("chatcmpl-tool-" and 32 hex digits, as vLLM's).
std::string tool_call_id();

// OpenAI's message.tool_calls entries.
nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls);

}  // namespace hayate::server
