// Pieces of JSON grammars shared by the JSON Schema compiler: characters
// of a JSON string, numbers, integer ranges, string formats and regex
// patterns rewritten to match inside a JSON string. Internal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "grammar/ast.h"
#include "grammar/json_schema.h"

namespace hayate::grammar::json_parts {

Expr ws(const JsonOptions& o);
// One character of a JSON string's contents as one code point: an
// unescaped character (not ", \ or a control character) or an escape
// (\uXXXX never a surrogate, so a length counts code points).
Expr string_char();
Expr quoted(Expr contents);
// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? with digit counts bounded.
Expr number(const JsonOptions& o);
Expr integer(const JsonOptions& o);
// Integers in [lo, hi] written without leading zeros (and never "-0").
Expr integer_range(int64_t lo, int64_t hi);
// Numbers in [lo, hi] (lo, hi integers): integers in range and, where
// lo >= 0, decimals n.f with n in [lo, hi - 1]. A subset of the values.
Expr number_range(int64_t lo, int64_t hi, const JsonOptions& o);
// The contents (between quotes) of a string of a supported format; Error
// naming any other format.
Expr format_contents(const std::string& format);
// The contents of a string that ECMAScript regex `pattern` (search
// semantics, as JSON Schema) matches, written as JSON string contents.
Expr pattern_contents(const std::string& pattern, const Limits& limits);

}  // namespace hayate::grammar::json_parts
