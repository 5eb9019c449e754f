// A Jinja2 subset for chat templates, rendered as transformers'
// apply_chat_template does (trim_blocks, lstrip_blocks, loop controls,
// raise_exception, strftime_now, tojson as Python's json.dumps).
//
// Covers: text, {{ }}, {% %}, {# #} with '-' / '+' whitespace control;
// if/elif/else, for (tuple targets, else, inline if, loop.*), set (names
// and namespace attributes), break/continue, generation blocks; literals,
// lists, dicts, attribute/subscript/slice access, calls, filters, tests,
// arithmetic, comparisons, in, and/or/not, conditional expressions; the
// filters, tests, globals and str/dict methods chat templates use.
// Anything else (macros, call blocks, includes, unknown filters/tests/
// functions) throws Error naming the construct.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace hayate::jinja {

// context: a JSON object of top-level variables (messages, bos_token, ...).
std::string render(const std::string& source, const nlohmann::json& context);
// The same with objects in their given key order (Python dicts keep it, and
// templates write tools and tool-call arguments with `tojson`).
std::string render(const std::string& source, const nlohmann::ordered_json& context);

}  // namespace hayate::jinja
