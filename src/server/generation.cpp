// Generation requests: admission, one engine request per choice, and the
// answer as one JSON body or as server-sent events.
#include <ctime>
#include <random>

#include "core/check.h"
#include "core/rng.h"
#include "grammar/token_tables.h"
#include "grammar/vocab.h"
#include "server/logprobs.h"
#include "server/reasoning.h"
#include "server/server_impl.h"
#include "tokenizer/tokenizer.h"

namespace hayate::server {

using nlohmann::json;

namespace {

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

size_t reason_index(FinishReason r) {
  switch (r) {
    case FinishReason::kStop:
      return 0;
    case FinishReason::kLength:
      return 1;
    default:
      return 2;
  }
}

json usage_json(int64_t prompt, int64_t completion, int64_t cached) {
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

// Cached prompt tokens of a call: each prompt's first choice's (the later
// choices share what it computed). Called with call.m held.
int64_t cached_tokens(const Call& call) {
  int64_t t = 0;
  for (size_t i = 0; i < call.choices.size(); i += size_t(call.req.n))
    t += call.choices[i].cached_tokens;
  return t;
}

std::string sse(const json& j) {
  return "data: " + dump(j) + "\n\n";
}

}  // namespace

std::shared_ptr<const grammar::TokenTables> OpenAIServer::Impl::grammar_for(
    const StructuredSpec& spec) {
  std::call_once(vocab_once, [this] {
    const std::vector<int32_t>& eos = model.engine->backend().config().eos_ids;
    if (eos.empty()) return;  // a grammar could never end
    token_vocab = std::make_shared<const grammar::TokenVocab>(
        grammar::TokenVocab::from_tokenizer(*model.tokenizer, eos));
  });
  if (!token_vocab)
    throw bad_request(cat("'", spec.param, "': the model has no EOS id, so no output could end"),
                      spec.param);
  return grammars.get(spec, token_vocab, structured_limits);
}

std::shared_ptr<Call> OpenAIServer::Impl::start_call(GenRequest r) {
  // Compiled before admission: a grammar that cannot compile is a 400.
  std::shared_ptr<const grammar::TokenTables> tables;
  if (r.structured) tables = grammar_for(*r.structured);
  auto call = std::make_shared<Call>();
  // Every choice of every prompt is one engine sequence.
  const int n = int(r.prompts.size()) * r.n;
  call->req = std::move(r);
  call->id = new_id(call->req.endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-");
  call->created = int64_t(std::time(nullptr));
  call->arrival = Clock::now();
  call->choices.resize(size_t(n));
  call->unfinished = n;
  if (call->req.wants_prompt_logprobs()) call->prompt_lp.resize(call->req.prompts.size());
  if (n > model.max_num_seqs + opt.max_queued)  // could never be admitted: not a retry
    throw bad_request(cat("the request needs ", n, " sequences (", call->req.prompts.size(),
                          " prompts x n = ", call->req.n, "), more than the server holds (",
                          model.max_num_seqs, " running + ", opt.max_queued, " queued)"),
                      call->req.prompts.size() > 1 ? "prompt" : "n");
  {
    std::lock_guard lock(admit_m);
    if (draining) throw ApiError(503, "the server is shutting down", "", "shutting_down");
    if (in_flight + n > model.max_num_seqs + opt.max_queued) {
      metrics.rejected_queue_full++;
      throw ApiError(
          503,
          cat("the server is at capacity (", in_flight, " sequences in flight, at most ",
              model.max_num_seqs, " running + ", opt.max_queued, " queued); retry later"),
          "", "queue_full");
    }
    in_flight += n;
    calls.insert(call);
  }

  const GenRequest& g = call->req;
  uint64_t seed = g.sampling.seed;
  if (!g.seeded && opt.seed)
    seed = mix64(*opt.seed ^ mix64(seed_counter++));  // --seed: repeatable runs
  else if (!g.seeded)
    seed = std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32);
  // One group: all choices are validated before any runs, and the choices of
  // a prompt share its KV blocks (engine.h).
  std::vector<EngineRequest> group;
  for (int i = 0; i < n; ++i) {
    EngineRequest er;
    er.prompt = g.prompts[size_t(i / g.n)].ids;
    er.sampling = g.sampling;
    er.sampling.seed = seed + uint64_t(i);  // choices differ when sampling
    er.max_tokens = g.max_tokens;
    // The first choice of a prompt scores it; max_tokens 0 (echo) runs only the prompt.
    er.prompt_logits = (g.wants_prompt_logprobs() && i % g.n == 0) || g.max_tokens == 0;
    er.ignore_eos = g.ignore_eos;
    er.stop_token_ids = g.stop_token_ids;
    er.stop = g.stop;
    er.skip_special_tokens = g.skip_special_tokens;
    er.include_stop_str_in_output = g.include_stop_str_in_output;
    er.grammar = tables;
    er.on_event = [this, call, i](const EngineEvent& e) { on_event(call, i, e); };
    group.push_back(std::move(er));
  }
  std::vector<RequestId> ids;
  try {
    ids = model.engine->submit(std::move(group));
  } catch (const Error& e) {
    // Nothing reached the engine: release the call here.
    {
      std::lock_guard lock(admit_m);
      in_flight -= n;
      calls.erase(call);
      drained_cv.notify_all();
    }
    throw bad_request(e.what());
  }
  std::lock_guard lock(call->m);
  for (int i = 0; i < n; ++i) {
    call->choices[size_t(i)].id = ids[size_t(i)];
    call->choices[size_t(i)].submitted = true;
  }
  return call;
}

// Runs on the engine's stepping thread: record, wake the connection thread,
// return quickly.
void OpenAIServer::Impl::on_event(const std::shared_ptr<Call>& call, int index,
                                  const EngineEvent& e) {
  const Clock::time_point now = Clock::now();
  bool call_done = false;
  if (!e.prompt_logits.empty() && !call->prompt_lp.empty()) {
    // Scored outside the lock (a row is vocab-wide); only this choice writes this prompt's entries.
    const size_t p = size_t(index / call->req.n);
    std::vector<SampleResult> scored;
    const std::vector<int32_t>& ids = call->req.prompts[p].ids;
    prompt_logprobs(e.prompt_logits, size_t(model.vocab_size), e.prompt_logits_pos, ids,
                    call->req.prompt_top(), scored);
    std::lock_guard lock(call->m);
    std::vector<SampleResult>& all = call->prompt_lp[p];
    all.resize(ids.size() - 1);
    const size_t end = std::min(all.size(), size_t(e.prompt_logits_pos) +
                                                e.prompt_logits.size() / size_t(model.vocab_size));
    for (size_t at = size_t(e.prompt_logits_pos); at < end; ++at) all[at] = std::move(scored[at]);
  }
  // A prompt-logits event carries nothing else for the client.
  if (!e.prompt_logits.empty() && e.token_ids.empty() && !e.finished) return;
  {
    std::lock_guard lock(call->m);
    ChoiceState& c = call->choices[size_t(index)];
    if (!e.token_ids.empty()) {
      if (!c.got_token) {
        metrics.ttft.observe(seconds(now - call->arrival));
        for (size_t k = 1; k < e.token_ids.size(); ++k) metrics.itl.observe(0.0);
      } else {
        double each = seconds(now - c.last_token) / double(e.token_ids.size());
        for (size_t k = 0; k < e.token_ids.size(); ++k) metrics.itl.observe(each);
      }
      c.got_token = true;
      c.last_token = now;
      if (!call->first_token) call->first_token = now;
    }
    c.completion_tokens = e.completion_tokens;
    c.cached_tokens = e.cached_tokens;
    if (call->req.stream)
      call->pending.emplace_back(index, e);
    else {
      c.text += e.text;
      c.logprobs.insert(c.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
      if (call->req.return_token_ids)
        c.token_ids.insert(c.token_ids.end(), e.token_ids.begin(), e.token_ids.end());
    }
    if (e.finished) {
      c.finished = true;
      c.finish = e.finish;
      c.error = e.error;
      call_done = --call->unfinished == 0;
      metrics.e2e.observe(seconds(now - call->arrival));
      metrics.finished[reason_index(e.finish)]++;
    }
  }
  // The count drops before the connection thread is woken: a client that has
  // read its final event and then asks /metrics must not see itself in flight.
  if (e.finished) {
    std::lock_guard lock(admit_m);
    in_flight -= 1;
    if (call_done) calls.erase(call);
    drained_cv.notify_all();
  }
  call->cv.notify_all();
}

void OpenAIServer::Impl::abort_call(Call& call) {
  std::vector<RequestId> ids;
  {
    std::lock_guard lock(call.m);
    for (const ChoiceState& c : call.choices)
      if (c.submitted && !c.finished) ids.push_back(c.id);
  }
  for (RequestId id : ids) model.engine->abort(id);
}

void OpenAIServer::Impl::abort_all() {
  std::vector<std::shared_ptr<Call>> live;
  {
    std::lock_guard lock(admit_m);
    live.assign(calls.begin(), calls.end());
  }
  for (const auto& c : live) abort_call(*c);
}

void OpenAIServer::Impl::handle_generate(const httplib::Request& req, httplib::Response& res,
                                         const std::string& text, Endpoint endpoint) {
  if (!ready) throw ApiError(503, "the model is still loading", "", "loading");
  if (draining) throw ApiError(503, "the server is shutting down", "", "shutting_down");
  json body = parse_json_body(text);
  // Chat: the template writes tools and tool-call arguments in the client's key order.
  const nlohmann::ordered_json ordered =
      endpoint == Endpoint::kChat ? parse_json_body_ordered(text) : nlohmann::ordered_json();
  GenRequest g = parse_request(body, endpoint, limits, model.defaults, *model.tokenizer,
                               opt.served_model_names,
                               endpoint == Endpoint::kChat ? &ordered : nullptr);
  if (endpoint == Endpoint::kChat) g.tools = parse_tools(body, opt.tools);
  if (g.tools) {
    if (std::optional<StructuredSpec> spec = tool_grammar(*g.tools)) {
      if (g.structured)
        throw bad_request(cat("'tool_choice' ", g.tools->choice == ToolRequest::Choice::kNamed
                                                    ? "naming a function"
                                                    : "required",
                              " and '", g.structured->param, "' both constrain the output"),
                          g.structured->param);
      g.structured = std::move(spec);
    }
  }
  std::shared_ptr<Call> call = start_call(std::move(g));
  note_call(req, call);
  if (call->req.stream)
    respond_stream(call, req, res);
  else
    respond_once(*call, req, res);
}

void OpenAIServer::Impl::respond_once(Call& call, const httplib::Request& req,
                                      httplib::Response& res) {
  std::unique_lock lock(call.m);
  // Wakes every 100 ms to notice a client that went away: its requests are
  // aborted (as vLLM does) instead of generating to max_tokens for nobody.
  const ConnectionStream* conn = http.connection_of(req);
  bool gone = false;
  while (!call.cv.wait_for(lock, std::chrono::milliseconds(100),
                           [&] { return call.unfinished == 0; })) {
    if (gone || !conn || !conn->peer_closed()) continue;
    gone = true;
    metrics.client_disconnects++;
    lock.unlock();
    abort_call(call);
    lock.lock();
  }
  const GenRequest& g = call.req;
  const bool chat = g.endpoint == Endpoint::kChat;
  json choices = json::array();
  int completion = 0;
  for (size_t i = 0; i < call.choices.size(); ++i) {
    const ChoiceState& c = call.choices[i];
    if (!c.error.empty()) throw ApiError(500, cat("generation failed: ", c.error));
    if (c.finish == FinishReason::kAbort)
      throw ApiError(503, "the request was aborted: the server is shutting down", "", "aborted");
    completion += c.completion_tokens;
    json choice = {{"index", i},
                   {"logprobs", nullptr},
                   {"finish_reason", finish_reason_name(c.finish)},
                   {"stop_reason", nullptr}};
    const PromptIds& prompt = g.prompts[i / size_t(g.n)];
    const std::vector<SampleResult>* plp =
        call.prompt_lp.empty() ? nullptr : &call.prompt_lp[i / size_t(g.n)];
    if (g.sampling.logprobs >= 0) {
      int64_t offset = 0;
      choice["logprobs"] =
          chat     ? chat_logprobs(*model.tokenizer, c.logprobs)
          : g.echo ? echo_logprobs(*model.tokenizer, prompt.ids, *plp, g.sampling.logprobs,
                                   c.logprobs)
                   : completion_logprobs(*model.tokenizer, c.logprobs, &offset);
    }
    if (g.prompt_logprobs >= 0)
      choice["prompt_logprobs"] =
          prompt_logprobs_json(*model.tokenizer, prompt.ids, *plp, g.prompt_logprobs);
    if (chat) {
      // --reasoning-parser first: the thinking out of the text; tools then
      // parse what is left (tools.h), a malformed call staying content.
      std::optional<ReasoningSplitter::Split> parts;
      if (!opt.reasoning_parser.empty()) parts = ReasoningSplitter::split(c.text);
      const std::string text = parts ? parts->content.value_or("") : c.text;
      choice["message"] = {{"role", "assistant"},
                           {"content", parts && !parts->content ? json(nullptr) : json(text)}};
      if (parts)
        choice["message"]["reasoning_content"] =
            parts->reasoning ? json(*parts->reasoning) : json(nullptr);
      if (g.tools) {
        const ParsedOutput p = parse_tool_output(text, *g.tools, opt.tools.parser);
        choice["message"]["content"] = p.content ? json(*p.content) : json(nullptr);
        choice["message"]["tool_calls"] = tool_calls_json(p.calls);
        // vLLM's: "tool_calls" unless the call was forced by name.
        if (!p.calls.empty() && c.finish == FinishReason::kStop &&
            g.tools->choice != ToolRequest::Choice::kNamed)
          choice["finish_reason"] = "tool_calls";
      }
    } else {
      choice["text"] = g.echo ? prompt.echo_text + c.text : c.text;
    }
    if (g.return_token_ids) {
      choice["token_ids"] = c.token_ids;
      if (!chat) choice["prompt_token_ids"] = prompt.ids;
    }
    choices.push_back(std::move(choice));
  }
  json out = {{"id", call.id},
              {"object", chat ? "chat.completion" : "text_completion"},
              {"created", call.created},
              {"model", g.model},
              {"choices", std::move(choices)},
              {"usage", usage_json(g.prompt_tokens(), completion, cached_tokens(call))}};
  if (chat && g.return_token_ids) out["prompt_token_ids"] = g.prompts.front().ids;
  res.status = 200;
  res.set_content(dump(out), "application/json");
}

namespace {

// Turns a call's events into SSE text, one chunk per event with text or an
// ending; keeps what it needs across provider calls.
struct StreamWriter {
  std::shared_ptr<Call> call;
  const Tokenizer* tok = nullptr;
  bool started = false;
  int completion_total = 0;
  // Per choice, with logprobs: entries not yet sent (chat holds them while
  // the text is held back) and the completions text_offset so far.
  std::vector<std::vector<SampleResult>> held;
  std::vector<int64_t> offset;
  std::vector<bool> sent_prompt_ids;  // completions with return_token_ids, per choice
  // --reasoning-parser on a chat: each choice's deltas split into
  // reasoning_content and content (with tools, the content then goes through
  // the tool parser).
  bool reasoning = false;
  std::vector<ReasoningSplitter> splitters;
  // Chat with tools: each choice's tool parser.
  std::vector<std::unique_ptr<ToolStreamParser>> tool_parsers;
  ToolParser parser = ToolParser::kNone;

  json chunk_base() const {
    const bool chat = call->req.endpoint == Endpoint::kChat;
    json j = {{"id", call->id},
              {"object", chat ? "chat.completion.chunk" : "text_completion"},
              {"created", call->created},
              {"model", call->req.model}};
    if (call->req.include_usage) j["usage"] = nullptr;
    return j;
  }

  json choice(int index, const std::string& text, const char* finish, bool role,
              json logprobs = nullptr, const ReasoningSplitter::Parts* parts = nullptr) const {
    json c = {{"index", index}, {"logprobs", std::move(logprobs)}};
    c["finish_reason"] = finish ? json(finish) : json(nullptr);
    if (call->req.endpoint == Endpoint::kChat) {
      json delta = json::object();
      if (role) delta["role"] = "assistant";
      if (parts) {
        if (!parts->reasoning.empty()) delta["reasoning_content"] = parts->reasoning;
        if (!parts->content.empty()) delta["content"] = parts->content;
      } else if (role || !text.empty()) {
        delta["content"] = text;
      }
      c["delta"] = std::move(delta);
    } else {
      c["text"] = text;
    }
    return c;
  }

  // Chat streams open each choice with the assistant role; echo streams open
  // with the prompt text.
  std::string prelude() {
    std::string out;
    const GenRequest& g = call->req;
    for (int i = 0; i < int(call->choices.size()); ++i) {
      if (g.endpoint == Endpoint::kChat) {
        json j = chunk_base();
        j["choices"] = json::array({choice(i, "", nullptr, true)});
        if (g.return_token_ids && i == 0) j["prompt_token_ids"] = g.prompts.front().ids;
        out += sse(j);
      } else if (g.echo) {
        json j = chunk_base();
        j["choices"] = json::array(
            {choice(i, g.prompts[size_t(i / g.n)].echo_text, nullptr, false)});
        if (g.return_token_ids) {
          j["choices"][0]["token_ids"] = json::array();
          j["choices"][0]["prompt_token_ids"] = g.prompts[size_t(i / g.n)].ids;
          sent_prompt_ids.resize(call->choices.size());
          sent_prompt_ids[size_t(i)] = true;
        }
        out += sse(j);
      }
    }
    return out;
  }

  // Chat with tools, as vLLM streams them (tools.h): content as it comes,
  // each call's first delta with its index, id and name (arguments ""),
  // then its arguments in pieces as they are generated; the thinking first
  // as reasoning_content with --reasoning-parser.
  std::string tool_event(int index, const EngineEvent& e) {
    tool_parsers.resize(call->choices.size());
    std::unique_ptr<ToolStreamParser>& tp = tool_parsers[size_t(index)];
    if (!tp) tp = std::make_unique<ToolStreamParser>(*call->req.tools, parser);
    std::vector<json> deltas;  // this event's chunks, in order
    std::string text = e.text;
    if (reasoning) {
      splitters.resize(call->choices.size());
      ReasoningSplitter& sp = splitters[size_t(index)];
      ReasoningSplitter::Parts parts = sp.push(e.text);
      if (e.finished) {
        ReasoningSplitter::Parts rest = sp.finish();
        parts.reasoning += rest.reasoning;
        parts.content += rest.content;
      }
      if (!parts.reasoning.empty()) deltas.push_back({{"reasoning_content", parts.reasoning}});
      text = std::move(parts.content);
    }
    std::vector<ToolDelta> pieces = tp->push(text);
    if (e.finished) {
      std::vector<ToolDelta> rest = tp->finish();
      pieces.insert(pieces.end(), std::make_move_iterator(rest.begin()),
                    std::make_move_iterator(rest.end()));
    }
    for (const ToolDelta& d : pieces) {
      if (d.kind == ToolDelta::Kind::kContent) {
        if (!d.text.empty()) deltas.push_back({{"content", d.text}});
      } else if (d.kind == ToolDelta::Kind::kCallStart) {
        deltas.push_back({{"tool_calls", json::array({{{"index", d.index},
                                                       {"id", d.id},
                                                       {"type", "function"},
                                                       {"function", {{"name", d.name},
                                                                     {"arguments", ""}}}}})}});
      } else {
        deltas.push_back({{"tool_calls", json::array({{{"index", d.index},
                                                       {"function", {{"arguments", d.text}}}}})}});
      }
    }
    // The event's logprobs, token ids and running usage ride on its last
    // chunk (an empty delta when it made none), as event() sends them.
    const bool want_lp = call->req.sampling.logprobs >= 0;
    if (want_lp) {
      held.resize(call->choices.size());
      auto& h = held[size_t(index)];
      h.insert(h.end(), e.logprobs.begin(), e.logprobs.end());
    }
    const bool extras = want_lp || call->req.return_token_ids || call->req.continuous_usage;
    if (e.finished || (deltas.empty() && extras && !e.token_ids.empty()))
      deltas.push_back(json::object());
    std::string out;
    for (size_t i = 0; i < deltas.size(); ++i) {
      const bool last = i + 1 == deltas.size();
      json c = {{"index", index}, {"logprobs", nullptr}, {"delta", std::move(deltas[i])}};
      c["finish_reason"] = nullptr;
      if (last && e.finished) {
        // vLLM's: "tool_calls" unless the call was forced by name; a reply
        // that fell back to content (tools.h) ends as its non-streamed twin.
        const bool calls = tp->calls() > 0 && !tp->fell_back() &&
                           e.finish == FinishReason::kStop &&
                           call->req.tools->choice != ToolRequest::Choice::kNamed;
        c["finish_reason"] =
            calls ? std::string("tool_calls") : std::string(finish_reason_name(e.finish));
      }
      json j = chunk_base();
      if (last && want_lp) {
        auto& h = held[size_t(index)];
        c["logprobs"] = chat_logprobs(*tok, h);
        h.clear();
      }
      if (last && call->req.return_token_ids) c["token_ids"] = e.token_ids;
      j["choices"] = json::array({std::move(c)});
      if (last && call->req.continuous_usage)
        j["usage"] = usage_json(int64_t(call->req.prompts[size_t(index / call->req.n)].ids.size()),
                                e.completion_tokens, e.cached_tokens);
      out += sse(j);
    }
    return out;
  }

  std::string event(int index, const EngineEvent& e) {
    std::string out;
    if (e.finished) completion_total += e.completion_tokens;
    if (e.finished && !e.error.empty()) {
      out += sse(ApiError(500, cat("generation failed: ", e.error)).to_json());
      return out;
    }
    if (call->req.tools) return tool_event(index, e);
    // Completions send one chunk per token event even when its text is held
    // back (a partial UTF-8 character, a possible stop string), as vLLM
    // does, so clients that time chunks see every token; chat skips empty deltas.
    const bool chat = call->req.endpoint == Endpoint::kChat;
    const bool want_lp = call->req.sampling.logprobs >= 0;
    if (want_lp) {
      held.resize(call->choices.size());
      offset.resize(call->choices.size());
      auto& h = held[size_t(index)];
      h.insert(h.end(), e.logprobs.begin(), e.logprobs.end());
    }
    ReasoningSplitter::Parts parts;
    if (reasoning) {
      splitters.resize(call->choices.size());
      ReasoningSplitter& sp = splitters[size_t(index)];
      parts = sp.push(e.text);
      if (e.finished) {
        ReasoningSplitter::Parts rest = sp.finish();
        parts.reasoning += rest.reasoning;
        parts.content += rest.content;
      }
      if (!e.finished && parts.reasoning.empty() && parts.content.empty()) return out;
    } else if (!e.finished && (chat ? e.text.empty() : e.token_ids.empty())) {
      return out;
    }
    std::string_view reason = finish_reason_name(e.finish);
    std::string reason_s(reason);
    json lp = nullptr;
    if (want_lp) {
      auto& h = held[size_t(index)];
      lp = chat ? chat_logprobs(*tok, h) : completion_logprobs(*tok, h, &offset[size_t(index)]);
      h.clear();
    }
    json j = chunk_base();
    j["choices"] = json::array(
        {choice(index, e.text, e.finished ? reason_s.c_str() : nullptr, false, std::move(lp),
                reasoning ? &parts : nullptr)});
    if (call->req.return_token_ids) {
      json& c = j["choices"][0];
      c["token_ids"] = e.token_ids;
      sent_prompt_ids.resize(call->choices.size());
      if (!chat && !sent_prompt_ids[size_t(index)]) {
        c["prompt_token_ids"] = call->req.prompts[size_t(index / call->req.n)].ids;
        sent_prompt_ids[size_t(index)] = true;
      }
    }
    if (call->req.continuous_usage)
      j["usage"] = usage_json(int64_t(call->req.prompts[size_t(index / call->req.n)].ids.size()),
                              e.completion_tokens, e.cached_tokens);
    out += sse(j);
    return out;
  }

  std::string ending() const {
    std::string out;
    if (call->req.include_usage) {
      json j = chunk_base();
      j["choices"] = json::array();
      std::lock_guard lock(call->m);
      j["usage"] = usage_json(call->req.prompt_tokens(), completion_total, cached_tokens(*call));
      out += sse(j);
    }
    out += "data: [DONE]\n\n";
    return out;
  }
};

}  // namespace

void OpenAIServer::Impl::respond_stream(const std::shared_ptr<Call>& call,
                                        const httplib::Request& req, httplib::Response& res) {
  auto writer = std::make_shared<StreamWriter>();
  writer->call = call;
  writer->tok = model.tokenizer;
  writer->reasoning = call->req.endpoint == Endpoint::kChat && !opt.reasoning_parser.empty();
  writer->parser = opt.tools.parser;
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  auto gone = [this, call] {
    metrics.client_disconnects++;
    abort_call(*call);
  };
  auto provider = [writer, call, gone](size_t, httplib::DataSink& sink) -> bool {
    if (!writer->started) {
      writer->started = true;
      std::string head = writer->prelude();
      if (!head.empty() && !sink.write(head.data(), head.size())) {
        gone();
        return false;
      }
    }
    std::deque<std::pair<int, EngineEvent>> batch;
    bool all_done;
    {
      std::unique_lock lock(call->m);
      // Wake at least every 100 ms to notice a client that went away
      // while nothing was written (a long prefill or a full queue).
      call->cv.wait_for(lock, std::chrono::milliseconds(100),
                        [&] { return !call->pending.empty(); });
      batch.swap(call->pending);
      all_done = call->unfinished == 0;
    }
    if (batch.empty() && !all_done) {
      if (!sink.is_writable()) {
        gone();
        return false;
      }
      return true;
    }
    std::string out;
    for (const auto& [index, e] : batch) out += writer->event(index, e);
    if (all_done) out += writer->ending();
    if (!out.empty() && !sink.write(out.data(), out.size())) {
      if (!all_done) gone();
      return false;
    }
    if (all_done) sink.done();
    return true;
  };
  // Runs when the response ends for any reason; aborting finished requests
  // is a no-op, so this only matters when the stream was cut.
  auto release = [this, call](bool success) {
    if (!success) abort_call(*call);
  };
  // HTTP/1.0 has no chunked encoding: the stream ends with the connection
  // (which the connection loop closes after any HTTP/1.0 request).
  if (req.version == "HTTP/1.0")
    res.set_content_provider("text/event-stream", std::move(provider), std::move(release));
  else
    res.set_chunked_content_provider("text/event-stream", std::move(provider), std::move(release));
}

}  // namespace hayate::server
