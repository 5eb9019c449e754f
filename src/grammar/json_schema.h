// JSON and JSON Schema -> grammar. Output is JSON with bounded
// whitespace, so a model that picks tokens at random still finishes where
// the schema bounds the value. Supported and unsupported keywords: README.md.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string_view>

#include "grammar/grammar.h"

namespace hayate::grammar {

struct JsonOptions {
  // Whitespace allowed between JSON tokens: [ \n\t]{0,max_whitespace}.
  // 0 gives compact JSON. The top-level value has none around it.
  int32_t max_whitespace = 1;
  // additionalProperties absent next to `properties` means false (as
  // OpenAI's strict mode and xgrammar); with false it means true, as the
  // JSON Schema specification says.
  bool strict_properties = true;
  // Digits allowed in an integer part, a fraction and an exponent: keeps
  // every number a finite double and every integer exact (below 2^53).
  int32_t max_integer_digits = 15;
  int32_t max_fraction_digits = 15;
  int32_t max_exponent_digits = 2;
  // Schema nodes compiled (a $ref target counts once): a bound on work.
  int32_t max_schema_nodes = 100000;
};

// Any JSON object (response_format json_object).
Grammar compile_json_object(const JsonOptions& options = {}, const Limits& limits = {});
// Any JSON value.
Grammar compile_json_value(const JsonOptions& options = {}, const Limits& limits = {});
// A JSON Schema (draft 4 to 2020-12 keywords listed in README.md). A
// keyword that is not supported is an Error naming it.
Grammar compile_json_schema(const nlohmann::json& schema, const JsonOptions& options = {},
                            const Limits& limits = {});
Grammar compile_json_schema(std::string_view schema_json, const JsonOptions& options = {},
                            const Limits& limits = {});
// The same, as a rule set (the first rule is the root).
RuleSet json_schema_rules(const nlohmann::json& schema, const JsonOptions& options, const Limits& limits);

}  // namespace hayate::grammar
