// hayate chat MODEL: an interactive chat in the terminal. Each line read from
// stdin is a user turn; the whole conversation goes through the model's chat
// template, and the reply streams to stdout. /clear forgets the
// conversation, /exit (or end of input) leaves. When the conversation no
// longer fits the context, its oldest turns are dropped (the system message
// stays).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "apps/common.h"
#include "core/check.h"
#include "engine/generate.h"
#include "server/protocol.h"

namespace hayate {

namespace {

struct ChatArgs {
  ModelArgs model;
  std::string system;
  int max_tokens = 512;
  float temperature = -1.0f;  // < 0: the model's generation_config, else 1
  float top_p = -1.0f;
  int top_k = -1;
  float min_p = -1.0f;
};

void run_chat(const ChatArgs& a) {
  HAYATE_CHECK(a.max_tokens >= 1, "--max-tokens must be >= 1, got ", a.max_tokens);
  Loaded L = load(a.model);
  HAYATE_CHECK(L.tokenizer->has_chat_template(),
               "chat: this model has no chat template (tokenizer_config.json)");
  const Model& m = *L.model;
  const server::GenerationDefaults d =
      m.is_dummy() ? server::GenerationDefaults{} : server::GenerationDefaults::load(m.spec);
  SamplingParams sp;
  sp.temperature = a.temperature >= 0.0f ? a.temperature : d.temperature.value_or(1.0f);
  sp.top_p = a.top_p >= 0.0f ? a.top_p : d.top_p.value_or(1.0f);
  sp.top_k = a.top_k >= 0 ? a.top_k : d.top_k.value_or(0);
  sp.min_p = a.min_p >= 0.0f ? a.min_p : d.min_p.value_or(0.0f);
  sp.seed = a.model.seed;
  sp.validate();

  const bool tty = isatty(0) == 1;
  const int context = L.backend().max_model_len();
  std::fprintf(stderr, "hayate chat: %s on %s, context %d tokens; /clear forgets, /exit leaves\n",
               a.model.model.empty() ? m.spec.c_str() : a.model.model.c_str(),
               L.backend().name().c_str(), context);
  std::vector<ChatMessage> history;
  for (int turn = 0;; ++turn) {
    if (tty) std::fputs("> ", stdout), std::fflush(stdout);
    std::string line;
    if (!std::getline(std::cin, line) || line == "/exit" || line == "/quit") break;
    if (line == "/clear") {
      history.clear();
      std::fprintf(stderr, "hayate chat: conversation cleared\n");
      continue;
    }
    if (line.empty()) continue;
    history.push_back({"user", line});
    const int budget = context - std::min(a.max_tokens, context / 2);
    std::vector<int32_t> prompt;
    for (;;) {
      std::vector<ChatMessage> msgs;
      if (!a.system.empty()) msgs.push_back({"system", a.system});
      msgs.insert(msgs.end(), history.begin(), history.end());
      // The template writes <|begin_of_text|>: no second BOS.
      prompt = L.tokenizer->encode(L.tokenizer->apply_chat_template(msgs, true), false);
      if (int(prompt.size()) <= budget || history.size() <= 1) break;
      history.erase(history.begin(), history.begin() + std::min<size_t>(2, history.size() - 1));
    }
    if (int(prompt.size()) >= context) {
      std::fprintf(stderr, "hayate chat: that message is %zu tokens, longer than the context\n",
                   prompt.size());
      history.pop_back();
      continue;
    }
    GenerateOptions opt;
    opt.sampling = sp;
    opt.sampling.seed = sp.seed + uint64_t(turn);
    opt.max_new_tokens = std::min(a.max_tokens, context - int(prompt.size()));
    std::string reply;
    GenerateCallbacks cb;
    cb.on_text = [&reply](std::string_view text) {
      reply += text;
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    };
    const auto t0 = std::chrono::steady_clock::now();
    GenerateResult r = generate(L.engine(), prompt, opt, cb);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("\n");
    std::fflush(stdout);
    std::fprintf(stderr, "[%zu prompt tokens, %zu new (%s), %.1f tok/s]\n", prompt.size(),
                 r.ids.size(), std::string(finish_reason_name(r.finish)).c_str(),
                 s > 0 ? double(r.ids.size()) / s : 0.0);
    history.push_back({"assistant", reply});
  }
}

}  // namespace

void add_chat_command(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  auto* cmd = app.add_subcommand("chat", "interactive chat in the terminal (the model's template, "
                                         "with the conversation's history)");
  add_model_options(cmd, a->model);
  cmd->add_option("--system", a->system, "system message");
  cmd->add_option("--max-tokens,-n", a->max_tokens, "most new tokens per reply")
      ->capture_default_str();
  cmd->add_option("--temperature,-t", a->temperature,
                  "default: the model's generation_config.json, else 1");
  cmd->add_option("--top-p", a->top_p, "default: generation_config.json, else 1");
  cmd->add_option("--top-k", a->top_k, "default: generation_config.json, else 0 (off)");
  cmd->add_option("--min-p", a->min_p, "default: generation_config.json, else 0 (off)");
  cmd->callback([a] { run_chat(*a); });
}

}  // namespace hayate
