// hayate generate: one prompt, streamed text (or ids) on stdout.
//   --max-tokens N | --max-length N   new tokens, or HF max_length (prompt included)
//   --temperature/--top-p/--top-k/--min-p, --seed   sampling (default greedy)
//   --stop STR (repeatable; \n, \t, \\ are unescaped), --ignore-eos
//   --chat [--system TEXT]           the prompt as a user message through the chat template
//   --output-ids                     one JSON line {"prompt_ids": [...], "ids": [...]}
//   --json-schema FILE | --json-object | --regex RE | --choice STR... | --grammar FILE
//                                    structured output: the text follows the grammar
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <nlohmann/json.hpp>

#include "apps/common.h"
#include "core/check.h"
#include "engine/generate.h"
#include "grammar/json_schema.h"
#include "grammar/token_tables.h"

namespace hayate {

namespace {

struct GenerateArgs {
  ModelArgs model;
  std::string prompt;
  int max_tokens = 128;
  int max_length = 0;
  float temperature = 0.0f;
  float top_p = 1.0f;
  int top_k = 0;
  float min_p = 0.0f;
  bool ignore_eos = false;
  bool output_ids = false;
  std::vector<std::string> stop;
  bool chat = false;
  std::string system;
  // Structured output (at most one).
  std::string json_schema_file, regex, grammar_file;
  bool json_object = false;
  std::vector<std::string> choice;
};

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  HAYATE_CHECK(f.good(), "cannot read ", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The grammar the structured-output flags ask for (null: free text),
// compiled for the model's vocabulary with the server's JSON whitespace.
std::shared_ptr<const grammar::TokenTables> structured(const GenerateArgs& a, Loaded& L) {
  const int given = int(!a.json_schema_file.empty()) + int(!a.regex.empty()) +
                    int(!a.grammar_file.empty()) + int(a.json_object) + int(!a.choice.empty());
  HAYATE_CHECK(given <= 1,
               "give at most one of --json-schema, --json-object, --regex, --choice, --grammar");
  if (given == 0) return nullptr;
  const std::vector<int32_t>& eos = L.backend().config().eos_ids;
  HAYATE_CHECK(!eos.empty(), "structured output needs a model with an EOS id");
  auto vocab = std::make_shared<const grammar::TokenVocab>(
      grammar::TokenVocab::from_tokenizer(*L.tokenizer, eos));
  std::optional<grammar::Grammar> g;
  if (!a.json_schema_file.empty())
    g = grammar::compile_json_schema(std::string_view(read_file(a.json_schema_file)));
  else if (a.json_object)
    g = grammar::compile_json_object();
  else if (!a.regex.empty())
    g = grammar::compile_regex(a.regex);
  else if (!a.choice.empty())
    g = grammar::compile_choice(a.choice);
  else
    g = grammar::compile_ebnf(read_file(a.grammar_file));
  return std::make_shared<const grammar::TokenTables>(
      std::make_shared<const grammar::Grammar>(std::move(*g)), std::move(vocab));
}

// "\n" typed on a shell arrives as a backslash and an n.
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    char c = s[++i];
    out += c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c == '\\' ? '\\' : c;
    if (c != 'n' && c != 't' && c != 'r' && c != '\\') out.insert(out.size() - 1, 1, '\\');
  }
  return out;
}

void run(const GenerateArgs& a, bool max_length_given) {
  SamplingParams sp;
  sp.temperature = a.temperature;
  sp.top_p = a.top_p;
  sp.top_k = a.top_k;
  sp.min_p = a.min_p;
  sp.seed = a.model.seed;
  sp.validate();  // before loading anything
  HAYATE_CHECK(max_length_given || a.max_tokens >= 1, "--max-tokens must be >= 1, got ",
               a.max_tokens);
  HAYATE_CHECK(!a.chat || !a.prompt.empty() || !a.system.empty(), "--prompt is empty");
  HAYATE_CHECK(a.system.empty() || a.chat, "--system needs --chat");

  Loaded L = load(a.model);
  std::vector<int32_t> prompt;
  if (a.chat) {
    std::vector<ChatMessage> msgs;
    if (!a.system.empty()) msgs.push_back({"system", a.system});
    msgs.push_back({"user", a.prompt});
    // The template already starts with <|begin_of_text|>: add no second BOS.
    prompt = L.tokenizer->encode(L.tokenizer->apply_chat_template(msgs, true), false);
  } else {
    prompt = L.tokenizer->encode(a.prompt, true);
  }
  HAYATE_CHECK(!prompt.empty(), "--prompt is empty (no tokens)");
  int max_new = a.max_tokens;
  if (max_length_given) {
    HAYATE_CHECK(a.max_length > int(prompt.size()), "--max-length ", a.max_length,
                 " leaves no room for new tokens after the prompt of ", prompt.size(), " tokens");
    max_new = a.max_length - int(prompt.size());
  }

  GenerateOptions opt;
  opt.sampling = sp;
  opt.max_new_tokens = max_new;
  opt.ignore_eos = a.ignore_eos;
  opt.grammar = structured(a, L);
  for (const std::string& s : a.stop) opt.stop.push_back(unescape(s));
  GenerateCallbacks cb;
  if (!a.output_ids) {
    cb.on_text = [](std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    };
  }
  const int64_t need = int64_t(prompt.size()) + max_new;
  HAYATE_CHECK(need <= L.backend().max_model_len(), "prompt of ", prompt.size(), " tokens + ",
               max_new, " new tokens exceeds the context of ", L.backend().max_model_len(),
               " tokens (raise --max-model-len)");
  const auto t0 = std::chrono::steady_clock::now();
  GenerateResult r = generate(L.engine(), prompt, opt, cb);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (a.output_ids) {
    std::printf("%s\n", nlohmann::json{{"prompt_ids", prompt}, {"ids", r.ids}}.dump().c_str());
  } else {
    std::printf("\n");
  }
  std::fflush(stdout);
  std::fprintf(stderr, "hayate: %zu prompt + %zu new tokens (%s) in %.2f s on %s\n",
               prompt.size(), r.ids.size(), std::string(finish_reason_name(r.finish)).c_str(), s,
               L.backend().name().c_str());
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "generate text for one prompt (streams to stdout)");
  add_model_options(cmd, a->model);
  cmd->add_option("--prompt,-p", a->prompt, "prompt text")->required();
  auto* mt = cmd->add_option("--max-tokens,-n", a->max_tokens, "new tokens to generate")
                 ->capture_default_str();
  auto* ml = cmd->add_option("--max-length", a->max_length,
                             "total length, prompt included (HF max_length)");
  mt->excludes(ml);
  cmd->add_option("--temperature,-t", a->temperature, "0 = greedy")->capture_default_str();
  cmd->add_option("--top-p", a->top_p, "nucleus sampling, in (0, 1]")->capture_default_str();
  cmd->add_option("--top-k", a->top_k, "keep the k most likely tokens, 0 = off")
      ->capture_default_str();
  cmd->add_option("--min-p", a->min_p, "drop tokens below min_p x the top probability")
      ->capture_default_str();
  cmd->add_flag("--ignore-eos", a->ignore_eos, "keep generating past eos ids");
  cmd->add_flag("--output-ids", a->output_ids,
                "print one JSON line {\"prompt_ids\": [...], \"ids\": [...]} instead of text");
  cmd->add_option("--stop", a->stop, "stop string (repeatable; \\n, \\t unescaped)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_flag("--chat", a->chat, "render the prompt as a user message with the chat template");
  cmd->add_option("--system", a->system, "system message (with --chat)");
  cmd->add_option("--json-schema", a->json_schema_file,
                  "structured output: the text is JSON valid against this JSON Schema file");
  cmd->add_flag("--json-object", a->json_object, "structured output: any JSON object");
  cmd->add_option("--regex", a->regex, "structured output: the text matches this regex in full");
  cmd->add_option("--choice", a->choice, "structured output: exactly one of these (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--grammar", a->grammar_file,
                  "structured output: a GBNF-style EBNF file (start rule root)");
  cmd->callback([a, ml] { run(*a, ml->count() > 0); });
}

}  // namespace hayate
