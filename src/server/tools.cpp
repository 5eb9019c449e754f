#include "server/tools.h"

#include <algorithm>
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

bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

// Whether `rest` (not empty) is a proper prefix of `tag`.
bool partial_of(std::string_view rest, std::string_view tag) {
  return rest.size() < tag.size() && tag.substr(0, rest.size()) == rest;
}

// Length of the longest suffix of s that is a proper prefix of tag.
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";

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
  ToolStreamParser p(t, parser);
  std::vector<ToolDelta> d = p.push(text);
  std::vector<ToolDelta> rest = p.finish();
  d.insert(d.end(), std::make_move_iterator(rest.begin()), std::make_move_iterator(rest.end()));
  if (p.fell_back()) {  // not (all) well-formed calls: the whole text as content
    out.content = text;
    return out;
  }
  std::string content;
  for (ToolDelta& x : d) {
    if (x.kind == ToolDelta::Kind::kContent) {
      content += x.text;
    } else if (x.kind == ToolDelta::Kind::kCallStart) {
      out.calls.push_back({std::move(x.id), std::move(x.name), ""});
    } else {
      out.calls[size_t(x.index)].arguments += x.text;
    }
  }
  if (!out.calls.empty() && content.empty())
    out.content.reset();
  else
    out.content = std::move(content);
  return out;
}

ToolStreamParser::ToolStreamParser(const ToolRequest& t, ToolParser parser) {
  if (t.choice == ToolRequest::Choice::kNamed) {
    mode_ = Mode::kNamed;
    named_ = t.named;
  } else if (t.choice == ToolRequest::Choice::kRequired) {
    mode_ = Mode::kRequired;
  } else {
    mode_ = parser == ToolParser::kLlama3Json ? Mode::kLlama3
            : parser == ToolParser::kHermes   ? Mode::kHermes
                                              : Mode::kContent;
  }
  if (mode_ == Mode::kHermes) phase_ = Phase::kContent;
  if (mode_ == Mode::kContent) phase_ = Phase::kPassThrough;
}

std::vector<ToolDelta> ToolStreamParser::push(std::string_view text) {
  std::vector<ToolDelta> out;
  if (mode_ == Mode::kNamed) {
    if (text.empty()) return out;
    if (!header_) {
      header_ = true;
      calls_ = 1;
      out.push_back({ToolDelta::Kind::kCallStart, 0, "", tool_call_id(), named_});
    }
    out.push_back({ToolDelta::Kind::kArguments, 0, std::string(text), "", ""});
    return out;
  }
  buf_ += text;
  run(false, out);
  return out;
}

std::vector<ToolDelta> ToolStreamParser::finish() {
  std::vector<ToolDelta> out;
  if (mode_ == Mode::kNamed) {
    if (!header_) {  // an empty output: the call, with empty arguments
      header_ = true;
      calls_ = 1;
      out.push_back({ToolDelta::Kind::kCallStart, 0, "", tool_call_id(), named_});
    }
    return out;
  }
  run(true, out);
  switch (phase_) {
    case Phase::kStart:  // Llama 3: only whitespace or a part of <|python_tag|>
      if (mode_ == Mode::kRequired)
        malformed(out);
      else
        content(unsent_, buf_.size(), out);
      break;
    case Phase::kBeforeCall:  // after <tool_call> or <|python_tag|>, or required's array unclosed
      if (mode_ != Mode::kLlama3 || calls_ == 0) malformed(out);
      break;
    case Phase::kCall:  // cut inside a call
      malformed(out);
      break;
    default:  // kAfterCall: Hermes' last call may lack its </tool_call>
      break;
  }
  return out;
}

void ToolStreamParser::content(size_t from, size_t to, std::vector<ToolDelta>& out) {
  if (to <= from) return;
  if (!out.empty() && out.back().kind == ToolDelta::Kind::kContent)
    out.back().text.append(buf_, from, to - from);
  else
    out.push_back({ToolDelta::Kind::kContent, 0, buf_.substr(from, to - from), "", ""});
  unsent_ = std::max(unsent_, to);
}

void ToolStreamParser::malformed(std::vector<ToolDelta>& out) {
  fell_back_ = true;
  phase_ = Phase::kPassThrough;
  content(unsent_, buf_.size(), out);
  pos_ = buf_.size();
}

void ToolStreamParser::flush_args(std::vector<ToolDelta>& out) {
  if (!header_ || !args_obj_) return;
  const size_t end = args_done_ ? args_end_ : pos_;
  if (end <= args_sent_) return;
  out.push_back({ToolDelta::Kind::kArguments, calls_ - 1, buf_.substr(args_sent_, end - args_sent_), "", ""});
  args_sent_ = end;
  unsent_ = std::max(unsent_, end);
}

void ToolStreamParser::run(bool at_end, std::vector<ToolDelta>& out) {
  while (pos_ < buf_.size() || (at_end && phase_ == Phase::kContent && unsent_ < buf_.size())) {
    const size_t n = buf_.size();
    switch (phase_) {
      case Phase::kPassThrough:
        content(unsent_, n, out);
        pos_ = n;
        return;
      case Phase::kStart: {
        while (pos_ < n && is_ws(buf_[pos_])) ++pos_;
        if (pos_ == n) return;
        const std::string_view rest = std::string_view(buf_).substr(pos_);
        if (mode_ == Mode::kRequired) {
          if (buf_[pos_] != '[') return malformed(out);
          ++pos_;
          phase_ = Phase::kBeforeCall;
          need_item_ = true;
        } else if (rest.substr(0, kPythonTag.size()) == kPythonTag) {
          pos_ += kPythonTag.size();
          phase_ = Phase::kBeforeCall;
        } else if (partial_of(rest, kPythonTag)) {
          if (!at_end) return;
          phase_ = Phase::kPassThrough;
        } else if (buf_[pos_] == '{') {
          phase_ = Phase::kBeforeCall;
        } else {
          phase_ = Phase::kPassThrough;  // no call: the whole output is content
        }
        break;
      }
      case Phase::kContent: {  // Hermes, outside <tool_call> blocks
        const size_t at = buf_.find(kOpen, pos_);
        const size_t limit = at != std::string::npos ? at
                             : at_end                ? n
                                                     : n - partial_tag(buf_, kOpen);
        if (!seg_text_)
          for (size_t i = unsent_; i < limit && !seg_text_; ++i) seg_text_ = !is_ws(buf_[i]);
        // Whitespace alone next to a call is no content; with no call it is.
        if (seg_text_ || (at_end && at == std::string::npos && calls_ == 0))
          content(unsent_, limit, out);
        if (at == std::string::npos) {
          pos_ = at_end ? n : limit;
          if (at_end) {
            unsent_ = n;
            return;
          }
          if (pos_ == n || limit < n) return;
          break;
        }
        pos_ = at + kOpen.size();
        phase_ = Phase::kBeforeCall;
        break;
      }
      case Phase::kBeforeCall: {
        while (pos_ < n && (is_ws(buf_[pos_]) || (mode_ == Mode::kLlama3 && buf_[pos_] == ';'))) ++pos_;
        if (pos_ == n) return;
        const char c = buf_[pos_];
        if (mode_ == Mode::kRequired && !need_item_) {
          if (c == ',') {
            need_item_ = true;
            ++pos_;
            break;
          }
          if (c == ']') {
            ++pos_;
            unsent_ = pos_;
            phase_ = Phase::kDone;
            break;
          }
          return malformed(out);
        }
        if (c != '{') return malformed(out);
        ++pos_;
        phase_ = Phase::kCall;
        sub_ = Sub::kKeyFirst;
        has_name_ = header_ = args_seen_ = args_obj_ = args_done_ = false;
        name_.clear();
        args_text_.reset();
        break;
      }
      case Phase::kCall:
        call_byte(out);
        if (phase_ == Phase::kCall && pos_ == buf_.size()) flush_args(out);
        break;
      case Phase::kAfterCall: {  // Hermes: </tool_call>
        while (pos_ < n && is_ws(buf_[pos_])) ++pos_;
        if (pos_ == n) return;
        const std::string_view rest = std::string_view(buf_).substr(pos_);
        if (rest.substr(0, kClose.size()) == kClose) {
          pos_ += kClose.size();
          unsent_ = pos_;
          phase_ = Phase::kContent;
          seg_text_ = false;
        } else if (partial_of(rest, kClose)) {
          return;  // at the end: a cut closing tag, nothing lost
        } else {
          return malformed(out);
        }
        break;
      }
      case Phase::kDone:  // required: after the array
        while (pos_ < n && is_ws(buf_[pos_])) ++pos_;
        if (pos_ < n) return malformed(out);
        unsent_ = n;
        return;
    }
  }
}

// One step of reading a call object's top level ({"name": ..., "parameters"
// or "arguments": ..., others skipped}); values are scanned by depth and
// string state and checked as JSON when they end.
void ToolStreamParser::call_byte(std::vector<ToolDelta>& out) {
  const char c = buf_[pos_];
  switch (sub_) {
    case Sub::kKeyFirst:
    case Sub::kKeyNext:
      if (is_ws(c)) {
        ++pos_;
      } else if (c == '"') {
        tok_start_ = pos_++;
        esc_ = false;
        sub_ = Sub::kKey;
      } else if (c == '}' && sub_ == Sub::kKeyFirst) {
        ++pos_;
        object_end(out);
      } else {
        malformed(out);
      }
      return;
    case Sub::kKey: {
      ++pos_;
      if (esc_) {
        esc_ = false;
      } else if (c == '\\') {
        esc_ = true;
      } else if (c == '"') {
        json k = json::parse(std::string_view(buf_).substr(tok_start_, pos_ - tok_start_), nullptr, false);
        if (k.is_discarded() || !k.is_string()) return malformed(out);
        const std::string& s = k.get_ref<const std::string&>();
        key_ = s == "name" ? Key::kName
               : (s == "parameters" || s == "arguments") && !args_seen_ ? Key::kArgs
                                                                         : Key::kOther;
        sub_ = Sub::kColon;
      }
      return;
    }
    case Sub::kColon:
      if (is_ws(c)) {
        ++pos_;
      } else if (c == ':') {
        ++pos_;
        sub_ = Sub::kValueStart;
      } else {
        malformed(out);
      }
      return;
    case Sub::kValueStart:
      if (is_ws(c)) {
        ++pos_;
        return;
      }
      if (key_ == Key::kName && (c != '"' || has_name_)) return malformed(out);
      tok_start_ = pos_++;
      in_str_ = c == '"';
      esc_ = false;
      depth_ = c == '{' || c == '[' ? 1 : 0;
      scalar_ = !in_str_ && depth_ == 0;
      if (key_ == Key::kArgs) {
        args_seen_ = true;
        args_obj_ = c == '{';
        args_sent_ = tok_start_;
      }
      sub_ = Sub::kValue;
      return;
    case Sub::kValue:
      if (scalar_) {
        if (is_ws(c) || c == ',' || c == '}' || c == ']') return value_end(pos_, out);
        ++pos_;
        return;
      }
      ++pos_;
      if (in_str_) {
        if (esc_)
          esc_ = false;
        else if (c == '\\')
          esc_ = true;
        else if (c == '"')
          in_str_ = false;
        if (!in_str_ && depth_ == 0) value_end(pos_, out);
        return;
      }
      if (c == '"') {
        in_str_ = true;
      } else if (c == '{' || c == '[') {
        ++depth_;
      } else if (c == '}' || c == ']') {
        if (--depth_ == 0) value_end(pos_, out);
      }
      return;
    case Sub::kComma:
      if (is_ws(c)) {
        ++pos_;
      } else if (c == ',') {
        ++pos_;
        sub_ = Sub::kKeyNext;
      } else if (c == '}') {
        ++pos_;
        object_end(out);
      } else {
        malformed(out);
      }
      return;
  }
}

void ToolStreamParser::value_end(size_t end, std::vector<ToolDelta>& out) {
  const std::string_view raw = std::string_view(buf_).substr(tok_start_, end - tok_start_);
  json v = json::parse(raw, nullptr, false);
  if (v.is_discarded()) return malformed(out);
  sub_ = Sub::kComma;
  if (key_ == Key::kName) {
    name_ = v.get<std::string>();
    has_name_ = header_ = true;
    out.push_back({ToolDelta::Kind::kCallStart, calls_, "", tool_call_id(), name_});
    ++calls_;
    unsent_ = std::max(unsent_, end);
    flush_args(out);  // arguments written before the name go out now
    return;
  }
  if (key_ != Key::kArgs) return;
  if (v.is_object()) {
    args_end_ = end;
    args_done_ = true;
    flush_args(out);
  } else if (v.is_string()) {  // some models write the arguments as JSON text
    json inner = json::parse(v.get<std::string>(), nullptr, false);
    if (inner.is_discarded() || !inner.is_object()) return malformed(out);
    args_text_ = v.get<std::string>();
  } else if (v.is_null()) {
    args_seen_ = false;  // as absent
  } else {
    malformed(out);
  }
}

void ToolStreamParser::object_end(std::vector<ToolDelta>& out) {
  if (!has_name_) return malformed(out);
  if (args_text_)
    out.push_back({ToolDelta::Kind::kArguments, calls_ - 1, *args_text_, "", ""});
  else if (!args_seen_)
    out.push_back({ToolDelta::Kind::kArguments, calls_ - 1, "{}", "", ""});
  unsent_ = pos_;
  if (mode_ == Mode::kHermes) {
    phase_ = Phase::kAfterCall;
  } else {
    phase_ = Phase::kBeforeCall;
    need_item_ = false;
  }
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
