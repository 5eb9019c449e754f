// Validity of structured output end to end: 1,000+ generations of dummy:tiny
// (random weights: only the grammar can make them valid) through the engine
// on the CPU backend, sampled at temperature 1 with distinct seeds, across
// the JSON Schema Test Suite's draft 7 schemas that compile (Debian's
// json-schema-test-suite), regexes and choices. Every output that ended
// (finish stop) must validate under ajv (tests/oracle/validate_json.mjs),
// match its regex in full under PCRE2, or equal one of its choices; outputs
// of schemas and patterns that bound their length must end within max_tokens.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cpu/cpu_paged_backend.h"
#include "engine/engine.h"
#include "engine_fixture.h"
#include "grammar/json_schema.h"
#include "grammar/token_tables.h"
#include "model/model.h"
#include "tokenizer/tok_test_util.h"

namespace hayate::testing_engine {
namespace {

using grammar::TokenTables;
using grammar::TokenVocab;
using nlohmann::json;

bool pcre2_full_match(const std::string& pattern, const std::string& subject) {
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                 PCRE2_UTF, &err, &off, nullptr);
  if (!re) return false;
  // Match and depth limits: a pattern PCRE2 backtracks on fails, never hangs.
  pcre2_match_context* ctx = pcre2_match_context_create(nullptr);
  pcre2_set_match_limit(ctx, 10'000'000);
  pcre2_set_depth_limit(ctx, 100'000);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(re, nullptr);
  const int rc = pcre2_match(re, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), 0,
                             PCRE2_ANCHORED | PCRE2_ENDANCHORED, md, ctx);
  pcre2_match_data_free(md);
  pcre2_match_context_free(ctx);
  pcre2_code_free(re);
  return rc >= 0;
}

struct Job {
  enum class Kind { kSchema, kRegex, kChoice };
  Job(Kind k, std::string l) : kind(k), label(std::move(l)) {}
  Kind kind;
  std::string label;
  json schema;                       // kSchema
  std::string pattern;               // kRegex
  std::vector<std::string> choices;  // kChoice
  bool bounded = false;              // must end with stop within max_tokens
  std::shared_ptr<const TokenTables> tables;
};

struct Out {
  const Job* job;
  Collected got;
};

constexpr int kMaxTokens = 48;

TEST(EngineGrammarValidity, ThousandGenerationsOfRandomWeightsAreValid) {
  const Model model = load_model("dummy:tiny", 23, HAYATE_ASSETS_DIR);
  const auto vocab = std::make_shared<const TokenVocab>(
      TokenVocab::from_tokenizer(test::llama3(), model.config.eos_ids));
  auto tables = [&](grammar::Grammar g) {
    return std::make_shared<const TokenTables>(std::make_shared<const grammar::Grammar>(std::move(g)),
                                               vocab, TokenTables::Build::kLazy);
  };

  std::vector<Job> jobs;
  const std::filesystem::path dir = "/usr/share/json-schema-test-suite/tests/draft7";
  ASSERT_TRUE(std::filesystem::exists(dir)) << "install json-schema-test-suite (scripts/setup.sh)";
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    const json groups = json::parse(test::slurp(f.string()));
    for (size_t i = 0; i < groups.size(); ++i) {
      Job j{Job::Kind::kSchema, f.filename().string() + "#" + std::to_string(i)};
      j.schema = groups[i]["schema"];
      try {
        j.tables = tables(grammar::compile_json_schema(j.schema));
      } catch (const Error&) {
        continue;  // refused with a named keyword (compile_test covers the messages)
      }
      jobs.push_back(std::move(j));
    }
  }
  const size_t suite = jobs.size();
  EXPECT_GE(suite, 40u);
  // Bounded by construction: these must end (stop) within max_tokens.
  for (const char* s : {R"({"type": "object", "properties": {"ok": {"type": "boolean"},
                            "unit": {"enum": ["c", "f"]}, "n": {"type": "integer", "minimum": 0,
                            "maximum": 999}}, "required": ["ok", "unit", "n"]})",
                        R"({"type": "array", "items": {"type": "boolean"}, "maxItems": 3})",
                        R"({"type": "string", "maxLength": 6})",
                        R"({"enum": ["a", 1, null, {"k": [true]}]})"}) {
    Job j{Job::Kind::kSchema, s};
    j.schema = json::parse(s);
    j.bounded = true;
    j.tables = tables(grammar::compile_json_schema(j.schema));
    jobs.push_back(std::move(j));
  }
  for (const char* p : {R"([a-z]{2,5}-\d{1,3})", R"((yes|no|maybe)!?)", R"(\d{4}-\d{2}-\d{2})",
                        R"([A-F0-9]{8})", R"((ab|c){1,4}x?)"}) {
    Job j{Job::Kind::kRegex, p};
    j.pattern = p;
    j.bounded = true;
    j.tables = tables(grammar::compile_regex(p));
    jobs.push_back(std::move(j));
  }
  for (const std::vector<std::string>& c :
       {std::vector<std::string>{"red", "green", "blue"},
        std::vector<std::string>{"a", "ab", "abc", "b c"},
        std::vector<std::string>{"Paris", "東京", "São Paulo"}}) {
    Job j{Job::Kind::kChoice, "choice"};
    j.choices = c;
    j.bounded = true;
    j.tables = tables(grammar::compile_choice(c));
    jobs.push_back(std::move(j));
  }

  BatchBackendOptions o;
  o.block_size = 16;
  o.max_model_len = 128;
  o.max_num_seqs = 128;
  o.num_blocks = 128 * 5;
  auto backend = make_cpu_paged_backend(model, o);
  EngineOptions eo;
  eo.max_num_seqs = 128;
  Engine engine(*backend, &test::llama3(), eo);
  Sink sink;
  std::vector<std::pair<const Job*, RequestId>> runs;
  const size_t per_job = (1000 + jobs.size() - 1) / jobs.size();
  for (size_t r = 0; r < per_job; ++r)
    for (const Job& j : jobs) {
      EngineRequest q;
      q.prompt = {128000, 791, 4320, 374, 25};  // "<|begin_of_text|>The answer is:"
      q.sampling.temperature = 1.0f;
      q.sampling.seed = runs.size();
      q.max_tokens = kMaxTokens;
      q.grammar = j.tables;
      q.on_event = sink.callback();
      runs.emplace_back(&j, engine.submit(std::move(q)));
    }
  engine.run_until_idle();
  ASSERT_GE(runs.size(), 1000u);

  std::vector<std::pair<const Job*, Collected>> json_outs;
  int stopped = 0, invalid = 0;
  for (const auto& [job, id] : runs) {
    const Collected c = sink.get(id);
    ASSERT_TRUE(c.error.empty()) << job->label << ": " << c.error;
    ASSERT_EQ(c.finals, 1);
    if (job->bounded) {
      EXPECT_EQ(c.finish, FinishReason::kStop) << job->label << ": " << c.text;
    }
    if (c.finish != FinishReason::kStop) {
      EXPECT_EQ(c.finish, FinishReason::kLength);
      EXPECT_EQ(c.ids.size(), size_t(kMaxTokens));
      continue;
    }
    ++stopped;
    if (job->kind == Job::Kind::kSchema) {
      json_outs.emplace_back(job, c);
    } else if (job->kind == Job::Kind::kRegex) {
      if (!pcre2_full_match(job->pattern, c.text)) {
        ++invalid;
        ADD_FAILURE() << job->pattern << " does not match " << c.text;
      }
    } else if (std::find(job->choices.begin(), job->choices.end(), c.text) == job->choices.end()) {
      ++invalid;
      ADD_FAILURE() << "not a choice: " << c.text;
    }
  }
  // The JSON outputs in one ajv run.
  const std::string path = std::string(HAYATE_BINARY_DIR) + "/engine_grammar_generations.jsonl";
  {
    std::ofstream f(path, std::ios::binary);
    for (const auto& [job, c] : json_outs)
      f << json{{"schema", job->schema}, {"output", c.text}, {"draft", job->bounded ? "2020" : "7"}}
               .dump(-1, ' ', false, json::error_handler_t::replace)
        << "\n";
  }
  std::vector<json> results;
  {
    const std::string cmd = "node " + test::oracle_dir() + "/validate_json.mjs " + path;
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    ASSERT_EQ(pclose(p), 0) << out;
    for (size_t at = 0; at < out.size();) {
      const size_t nl = std::min(out.find('\n', at), out.size());
      if (nl > at) results.push_back(json::parse(out.substr(at, nl - at)));
      at = nl + 1;
    }
  }
  ASSERT_EQ(results.size(), json_outs.size());
  for (size_t i = 0; i < results.size(); ++i)
    if (!results[i]["ok"].get<bool>()) {
      ++invalid;
      ADD_FAILURE() << json_outs[i].first->label << ": " << json_outs[i].second.text << " -> "
                    << results[i]["error"].get<std::string>();
    }
  std::printf("engine validity: %zu generations (%zu test-suite schemas + %zu others), %d ended "
              "(stop), %zu JSON validated by ajv, %d invalid\n",
              runs.size(), suite, jobs.size() - suite, stopped, json_outs.size(), invalid);
  EXPECT_EQ(invalid, 0);
  EXPECT_GE(stopped, int(runs.size() / 2));
}

}  // namespace
}  // namespace hayate::testing_engine
