// Structured outputs on the OpenAI API: which grammar a request asks for
// (OpenAI's response_format, vLLM's structured_outputs and its older guided_*
// fields), and its compilation into token tables for the engine, bounded so
// that a huge, deep or unbounded schema or regex is a 400, never a hang.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace hayate::grammar {
class TokenTables;
class TokenVocab;
}  // namespace hayate::grammar

namespace hayate::server {

struct StructuredSpec {
  enum class Kind { kJsonObject, kJsonSchema, kRegex, kChoice, kGrammar };
  Kind kind = Kind::kJsonObject;
  nlohmann::json schema;             // kJsonSchema
  std::string text;                  // kRegex, kGrammar (GBNF-style EBNF)
  std::vector<std::string> choices;  // kChoice
  bool compact = false;              // no whitespace between JSON tokens
  std::string param;                 // the request field it came from (errors name it)

  std::string key() const;  // equal for requests that compile to the same grammar
};

// The structured-output fields of a request body; nullopt when it asks for
// none (response_format text). Two different ones, a malformed one or an
// unknown option are a 400 naming the field.
std::optional<StructuredSpec> parse_structured(const nlohmann::json& body);

// Bounds on what a request may compile. Table work grows with the grammar's
// positions (each walks the vocabulary once), so positions bound the time.
struct StructuredLimits {
  int max_depth = 64;            // nesting of schemas, groups and EBNF expressions
  int max_repeat = 4096;         // largest bound of X{m,n}, minItems/maxItems, lengths
  int max_schema_nodes = 4096;   // schema nodes compiled
  size_t max_positions = 16384;  // grammar positions after lowering
  size_t max_rules = 8192;
  int max_choices = 4096;
  size_t max_text_bytes = 65536;  // regex or EBNF text
  // Wall time of one compile, from its start, checked per position while the
  // token tables are built (parsing and lowering are bounded by the limits
  // above): past it the request is a 400 naming the limit. Positions bound
  // the work; this bounds the time whatever the machine's load.
  int64_t max_compile_ms = 10000;
};

// Compiles `spec` for `vocab` (eager tables: the cost is paid here, on the
// caller's thread, not in the engine's step). Throws a 400 ApiError naming
// the field and the grammar compiler's reason (the unsupported keyword).
std::shared_ptr<const grammar::TokenTables> compile_structured(
    const StructuredSpec& spec, const std::shared_ptr<const grammar::TokenVocab>& vocab,
    const StructuredLimits& limits = {});

// Compiled grammars by StructuredSpec::key(), least recently used out
// (agents send the same schema again and again). Thread-safe.
class GrammarCache {
 public:
  explicit GrammarCache(size_t capacity = 64) : capacity_(capacity) {}
  std::shared_ptr<const grammar::TokenTables> get(
      const StructuredSpec& spec, const std::shared_ptr<const grammar::TokenVocab>& vocab,
      const StructuredLimits& limits = {});

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const grammar::TokenTables>>;
  size_t capacity_;
  std::mutex m_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> by_key_;
};

}  // namespace hayate::server
