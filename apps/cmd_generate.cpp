// hayate generate: one prompt, streamed text (or ids) on stdout.
//   --max-tokens N | --max-length N   new tokens, or HF max_length (prompt included)
//   --temperature/--top-p/--top-k/--min-p, --seed   sampling (default greedy)
//   --stop STR (repeatable; \n, \t, \\ are unescaped), --ignore-eos
//   --chat [--system TEXT]           the prompt as a user message through the chat template
//   --output-ids                     one JSON line {"prompt_ids": [...], "ids": [...]}
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/common.h"
#include "core/check.h"
#include "engine/generate.h"

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
};

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
  cmd->callback([a, ml] { run(*a, ml->count() > 0); });
}

}  // namespace hayate
