// Tool calling on /v1/chat/completions, as vLLM serves it: the request's
// `tools` and `tool_choice`, the grammar that enforces `required` and a
// named function, and the model's output parsed into OpenAI tool_calls
// (Llama 3.x JSON and Hermes <tool_call> formats). Rendering the tools into
// the prompt is the chat template's business, not this file's.
#pragma once

#include <optional>
#include <string>
#include <string_view>
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
// (auto) stays content: a model's mistake is never a server error. The same
// parser as a stream's (ToolStreamParser over the whole text), so a stream's
// deltas add up to this answer, except where the stream had sent a call's
// start before the text fell back to content (the answer then has that text
// as content and no call; both end with the same finish reason). Arguments
// are the model's JSON text as written (key order and spacing kept), or the
// decoded string where the model wrote them as a JSON string.
ParsedOutput parse_tool_output(const std::string& text, const ToolRequest& tools,
                               ToolParser parser);

// One piece of a streamed answer with tools, as vLLM streams them: content;
// a call's start (its index, id and name; arguments "" in the delta); a
// piece of a call's arguments.
struct ToolDelta {
  enum class Kind { kContent, kCallStart, kArguments };
  Kind kind = Kind::kContent;
  int index = 0;         // the call's (kCallStart, kArguments)
  std::string text;      // content, or a piece of the arguments
  std::string id, name;  // kCallStart
};

// Reads tool calls out of generated text as it arrives (vLLM's streaming
// tool parsers): content before a call streams as content (Hermes: text
// outside <tool_call> blocks; a segment of only whitespace next to a call
// is dropped); a call starts once its name is read, and its arguments
// object streams byte by byte as it is generated (the model's text, checked
// as JSON when it closes). Named: the whole output is the arguments.
// Required: the grammar's [{"name": ..., "parameters": {...}}, ...]. Text
// that began as a call and turns out malformed, or is cut at the end, goes
// out as content from where nothing of it was sent as a call, and the rest
// of the output with it (fell_back()); no text is lost and nothing throws.
// Where the text is split does not change what the deltas add up to.
class ToolStreamParser {
 public:
  ToolStreamParser(const ToolRequest& tools, ToolParser parser);
  std::vector<ToolDelta> push(std::string_view text);
  std::vector<ToolDelta> finish();
  int calls() const { return calls_; }
  bool fell_back() const { return fell_back_; }

 private:
  enum class Mode { kNamed, kRequired, kLlama3, kHermes, kContent };
  enum class Phase { kStart, kContent, kBeforeCall, kCall, kAfterCall, kDone, kPassThrough };
  enum class Sub { kKeyFirst, kKeyNext, kKey, kColon, kValueStart, kValue, kComma };
  enum class Key { kName, kArgs, kOther };
  void run(bool at_end, std::vector<ToolDelta>& out);
  void call_byte(std::vector<ToolDelta>& out);
  void value_end(size_t end, std::vector<ToolDelta>& out);
  void object_end(std::vector<ToolDelta>& out);
  void flush_args(std::vector<ToolDelta>& out);
  void content(size_t from, size_t to, std::vector<ToolDelta>& out);
  void malformed(std::vector<ToolDelta>& out);

  Mode mode_;
  std::string named_;
  Phase phase_ = Phase::kStart;
  std::string buf_;
  size_t pos_ = 0;     // scanned up to here
  size_t unsent_ = 0;  // text from here was neither sent as content nor as part of a call
  bool seg_text_ = false;  // Hermes: the current content segment had text other than whitespace
  bool need_item_ = true;  // required: after '[' or ','
  int calls_ = 0;
  bool fell_back_ = false;
  // The call being read (its object's top level).
  Sub sub_ = Sub::kKeyFirst;
  Key key_ = Key::kOther;
  size_t tok_start_ = 0;  // the key's or the value's first byte
  bool esc_ = false, in_str_ = false;
  int depth_ = 0;
  bool scalar_ = false;
  bool has_name_ = false, header_ = false;
  std::string name_;
  bool args_seen_ = false, args_obj_ = false, args_done_ = false;
  size_t args_sent_ = 0, args_end_ = 0;  // the next byte of the arguments to send; their end
  std::optional<std::string> args_text_;  // arguments written as a JSON string, decoded
};

// A fresh tool-call id ("chatcmpl-tool-" and 32 hex digits, as vLLM's).
std::string tool_call_id();

// OpenAI's message.tool_calls entries.
nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls);

}  // namespace hayate::server
