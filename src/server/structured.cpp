#include "server/structured.h"

#include <chrono>
#include <string_view>

#include "core/check.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/token_tables.h"
#include "server/api_error.h"

namespace hayate::server {

using nlohmann::json;

namespace {

// A schema given as an object (or boolean schema), or as JSON text.
json schema_value(const json& v, const std::string& param) {
  if (v.is_object() || v.is_boolean()) return v;
  if (v.is_string()) {
    json j = json::parse(v.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded() && (j.is_object() || j.is_boolean())) return j;
  }
  throw bad_request(cat("'", param, "' must be a JSON Schema (an object, or its JSON text)"),
                    param);
}

std::string text_value(const json& v, const std::string& param) {
  if (!v.is_string() || v.get_ref<const std::string&>().empty())
    throw bad_request(cat("'", param, "' must be a non-empty string"), param);
  return v.get<std::string>();
}

std::vector<std::string> choice_value(const json& v, const std::string& param) {
  if (!v.is_array() || v.empty())
    throw bad_request(cat("'", param, "' must be a non-empty list of strings"), param);
  std::vector<std::string> out;
  for (const json& c : v) {
    if (!c.is_string() || c.get_ref<const std::string&>().empty())
      throw bad_request(cat("'", param, "' must hold non-empty strings"), param);
    out.push_back(c.get<std::string>());
  }
  return out;
}

StructuredSpec from_response_format(const json& v) {
  const std::string param = "response_format";
  if (!v.is_object() || !v.contains("type") || !v["type"].is_string())
    throw bad_request("'response_format' must be an object with a 'type'", param);
  const std::string& type = v["type"].get_ref<const std::string&>();
  StructuredSpec s;
  s.param = param;
  if (type == "json_object") {
    s.kind = StructuredSpec::Kind::kJsonObject;
    return s;
  }
  if (type != "json_schema")
    throw bad_request(cat("'response_format' type '", type.substr(0, 40),
                          "' is not supported (text, json_object, json_schema)"),
                      param);
  const json* js = field(v, "json_schema");
  if (!js || !js->is_object())
    throw bad_request("'response_format.json_schema' must be an object with a 'schema'", param);
  if (const json* strict = field(*js, "strict"); strict && !strict->is_boolean())
    throw bad_request("'response_format.json_schema.strict' must be a boolean", param);
  // strict or not, the schema is enforced (OpenAI without strict only
  // promises a best effort; a grammar is never less than that).
  const json* schema = field(*js, "schema");
  s.kind = StructuredSpec::Kind::kJsonSchema;
  // No schema: any JSON object (OpenAI treats a missing schema as {}).
  s.schema = schema ? schema_value(*schema, "response_format.json_schema.schema")
                    : json::object({{"type", "object"}});
  return s;
}

StructuredSpec from_structured_outputs(const json& v) {
  const std::string param = "structured_outputs";
  if (!v.is_object()) throw bad_request("'structured_outputs' must be an object", param);
  std::optional<StructuredSpec> out;
  bool compact = false;
  auto set = [&](StructuredSpec s, const char* key) {
    if (out)
      throw bad_request(cat("'structured_outputs' must give exactly one of json, regex, choice, "
                            "grammar, json_object ('",
                            key, "' and another)"),
                        param);
    s.param = param;
    out = std::move(s);
  };
  for (const auto& [key, val] : v.items()) {
    if (val.is_null()) continue;
    StructuredSpec s;
    if (key == "json") {
      s.kind = StructuredSpec::Kind::kJsonSchema;
      s.schema = schema_value(val, "structured_outputs.json");
      set(std::move(s), "json");
    } else if (key == "regex") {
      s.kind = StructuredSpec::Kind::kRegex;
      s.text = text_value(val, "structured_outputs.regex");
      set(std::move(s), "regex");
    } else if (key == "choice") {
      s.kind = StructuredSpec::Kind::kChoice;
      s.choices = choice_value(val, "structured_outputs.choice");
      set(std::move(s), "choice");
    } else if (key == "grammar") {
      s.kind = StructuredSpec::Kind::kGrammar;
      s.text = text_value(val, "structured_outputs.grammar");
      set(std::move(s), "grammar");
    } else if (key == "json_object") {
      if (!val.is_boolean())
        throw bad_request("'structured_outputs.json_object' must be a boolean", param);
      if (!val.get<bool>()) continue;
      s.kind = StructuredSpec::Kind::kJsonObject;
      set(std::move(s), "json_object");
    } else if (key == "disable_any_whitespace") {
      if (!val.is_boolean())
        throw bad_request("'structured_outputs.disable_any_whitespace' must be a boolean", param);
      compact = val.get<bool>();
    } else if (key == "disable_fallback" || key == "disable_additional_properties") {
      // vLLM's backend choices: there is one backend here, and properties
      // are already closed (README of src/grammar).
      if (!val.is_boolean())
        throw bad_request(cat("'structured_outputs.", key, "' must be a boolean"), param);
    } else {
      throw bad_request(cat("'structured_outputs.", key.substr(0, 40), "' is not supported"),
                        param);
    }
  }
  if (!out)
    throw bad_request("'structured_outputs' must give one of json, regex, choice, grammar, "
                      "json_object",
                      param);
  out->compact = compact;
  return *out;
}

}  // namespace

std::string StructuredSpec::key() const {
  json k = {{"kind", int(kind)}, {"compact", compact}};
  switch (kind) {
    case Kind::kJsonObject:
      break;
    case Kind::kJsonSchema:
      k["schema"] = schema;
      break;
    case Kind::kRegex:
    case Kind::kGrammar:
      k["text"] = text;
      break;
    case Kind::kChoice:
      k["choices"] = choices;
      break;
  }
  return k.dump();
}

std::optional<StructuredSpec> parse_structured(const json& body) {
  std::optional<StructuredSpec> out;
  auto set = [&](StructuredSpec s) {
    if (out)
      throw bad_request(cat("'", s.param, "' and '", out->param,
                            "' both ask for structured output; give one"),
                        s.param);
    out = std::move(s);
  };
  if (const json* v = field(body, "response_format")) {
    const bool text = v->is_object() && v->contains("type") && (*v)["type"] == "text";
    if (!text) set(from_response_format(*v));
  }
  if (const json* v = field(body, "structured_outputs")) set(from_structured_outputs(*v));
  // vLLM's older request fields.
  if (const json* v = field(body, "guided_json")) {
    StructuredSpec s;
    s.kind = StructuredSpec::Kind::kJsonSchema;
    s.schema = schema_value(*v, "guided_json");
    s.param = "guided_json";
    set(std::move(s));
  }
  if (const json* v = field(body, "guided_regex")) {
    StructuredSpec s;
    s.kind = StructuredSpec::Kind::kRegex;
    s.text = text_value(*v, "guided_regex");
    s.param = "guided_regex";
    set(std::move(s));
  }
  if (const json* v = field(body, "guided_choice")) {
    StructuredSpec s;
    s.kind = StructuredSpec::Kind::kChoice;
    s.choices = choice_value(*v, "guided_choice");
    s.param = "guided_choice";
    set(std::move(s));
  }
  if (const json* v = field(body, "guided_grammar")) {
    StructuredSpec s;
    s.kind = StructuredSpec::Kind::kGrammar;
    s.text = text_value(*v, "guided_grammar");
    s.param = "guided_grammar";
    set(std::move(s));
  }
  if (field(body, "guided_whitespace_pattern"))
    throw bad_request("'guided_whitespace_pattern' is not supported (JSON allows at most one "
                      "space, newline or tab between tokens)",
                      "guided_whitespace_pattern");
  return out;
}

std::shared_ptr<const grammar::TokenTables> compile_structured(
    const StructuredSpec& spec, const std::shared_ptr<const grammar::TokenVocab>& vocab,
    const StructuredLimits& lim) {
  grammar::Limits gl;
  gl.max_depth = lim.max_depth;
  gl.max_repeat = lim.max_repeat;
  gl.max_elements = lim.max_positions;
  gl.max_rules = lim.max_rules;
  grammar::JsonOptions jo;
  jo.max_schema_nodes = lim.max_schema_nodes;
  // One whitespace character at most between JSON tokens (0 when compact):
  // a model cannot wander in whitespace until max_tokens.
  jo.max_whitespace = spec.compact ? 0 : 1;
  if ((spec.kind == StructuredSpec::Kind::kRegex || spec.kind == StructuredSpec::Kind::kGrammar) &&
      spec.text.size() > lim.max_text_bytes)
    throw bad_request(cat("'", spec.param, "': the ",
                          spec.kind == StructuredSpec::Kind::kRegex ? "regex" : "grammar", " has ",
                          spec.text.size(), " bytes, more than ", lim.max_text_bytes),
                      spec.param);
  if (spec.kind == StructuredSpec::Kind::kChoice && int(spec.choices.size()) > lim.max_choices)
    throw bad_request(cat("'", spec.param, "': ", spec.choices.size(), " choices, more than ",
                          lim.max_choices),
                      spec.param);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(lim.max_compile_ms);
  std::shared_ptr<const grammar::Grammar> g;
  try {
    switch (spec.kind) {
      case StructuredSpec::Kind::kJsonObject:
        g = std::make_shared<const grammar::Grammar>(grammar::compile_json_object(jo, gl));
        break;
      case StructuredSpec::Kind::kJsonSchema:
        g = std::make_shared<const grammar::Grammar>(
            grammar::compile_json_schema(spec.schema, jo, gl));
        break;
      case StructuredSpec::Kind::kRegex:
        g = std::make_shared<const grammar::Grammar>(grammar::compile_regex(spec.text, gl));
        break;
      case StructuredSpec::Kind::kChoice:
        g = std::make_shared<const grammar::Grammar>(grammar::compile_choice(spec.choices, gl));
        break;
      case StructuredSpec::Kind::kGrammar:
        g = std::make_shared<const grammar::Grammar>(grammar::compile_ebnf(spec.text, gl));
        break;
    }
    return std::make_shared<const grammar::TokenTables>(std::move(g), vocab,
                                                        grammar::TokenTables::Build::kEager, deadline);
  } catch (const Error& e) {
    const bool late = std::string_view(e.what()).find("compile time limit") != std::string_view::npos;
    throw bad_request(cat("'", spec.param, "': ", e.what(),
                          late ? cat(" (the compile time limit is ", lim.max_compile_ms, " ms)") : ""),
                      spec.param);
  }
}

std::shared_ptr<const grammar::TokenTables> GrammarCache::get(
    const StructuredSpec& spec, const std::shared_ptr<const grammar::TokenVocab>& vocab,
    const StructuredLimits& limits) {
  const std::string k = spec.key();
  {
    std::lock_guard g(m_);
    auto it = by_key_.find(k);
    if (it != by_key_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  // Compiled outside the lock: other requests' hits do not wait for it.
  std::shared_ptr<const grammar::TokenTables> t = compile_structured(spec, vocab, limits);
  std::lock_guard g(m_);
  if (by_key_.count(k) == 0) {
    lru_.emplace_front(k, t);
    by_key_[k] = lru_.begin();
    if (lru_.size() > capacity_) {
      by_key_.erase(lru_.back().first);
      lru_.pop_back();
    }
  }
  return t;
}

}  // namespace hayate::server
