#include "server/protocol.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/check.h"
#include "server/api_error.h"

namespace hayate::server {

using nlohmann::json;

namespace {

// The field's value, or nullptr when it is absent or JSON null (OpenAI's
// clients send null for "not set").
double get_number(const json& v, const char* name) {
  if (!v.is_number()) throw bad_request(cat("'", name, "' must be a number"), name);
  double d = v.get<double>();
  if (!std::isfinite(d)) throw bad_request(cat("'", name, "' must be finite"), name);
  return d;
}

int64_t get_int(const json& v, const char* name) {
  if (!v.is_number_integer()) throw bad_request(cat("'", name, "' must be an integer"), name);
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    throw bad_request(cat("'", name, "' is out of range"), name);
  return v.get<int64_t>();
}

bool get_bool(const json& v, const char* name) {
  if (!v.is_boolean()) throw bad_request(cat("'", name, "' must be a boolean"), name);
  return v.get<bool>();
}

const std::string& get_string(const json& v, const char* name) {
  if (!v.is_string()) throw bad_request(cat("'", name, "' must be a string"), name);
  return v.get_ref<const std::string&>();
}

// A token id inside the vocabulary.
int32_t get_token(const json& v, const char* name, int vocab) {
  int64_t id = get_int(v, name);
  if (id < 0 || id >= vocab)
    throw bad_request(cat("token id ", id, " in '", name, "' is out of vocabulary (size ", vocab,
                          ")"),
                      name);
  return int32_t(id);
}

std::vector<int32_t> get_tokens(const json& v, const char* name, int vocab) {
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (const json& x : v) ids.push_back(get_token(x, name, vocab));
  return ids;
}

bool all_integers(const json& a) {
  for (const json& x : a)
    if (!x.is_number_integer()) return false;
  return true;
}

// Completions: a string, a list of token ids, or a list of those (a batch,
// at most lim.max_prompts; any bad one fails the whole request).
std::vector<PromptIds> completion_prompts(const json& body, const Limits& lim,
                                          const Tokenizer& tok) {
  const json* p = field(body, "prompt");
  if (!p) throw bad_request("'prompt' is required", "prompt");
  std::vector<const json*> items;
  if (p->is_array() && !p->empty() && !all_integers(*p)) {
    if (int64_t(p->size()) > lim.max_prompts)
      throw bad_request(cat("too many prompts: ", p->size(), " (at most ", lim.max_prompts,
                            " in one request)"),
                        "prompt");
    for (const json& x : *p) items.push_back(&x);
  } else {
    items.push_back(p);
  }
  std::vector<PromptIds> out;
  for (const json* one : items) {
    const std::string which = items.size() > 1 ? cat(" (prompt ", out.size(), ")") : "";
    PromptIds q;
    if (one->is_string()) {
      q.echo_text = one->get<std::string>();
      q.ids = tok.encode_at_most(q.echo_text, /*add_special_tokens=*/true,
                                 size_t(lim.max_model_len));
    } else if (one->is_array()) {
      if (one->empty()) throw bad_request(cat("'prompt' must not be empty", which), "prompt");
      if (!all_integers(*one))
        throw bad_request(cat("'prompt' must be a string or a list of token ids", which),
                          "prompt");
      for (const json& x : *one) {
        const int64_t id = get_int(x, "prompt");
        if (id < 0 || id >= lim.vocab_size)
          throw bad_request(cat("token id ", id, " in 'prompt' is out of vocabulary (size ",
                                lim.vocab_size, ")", which),
                            "prompt");
        q.ids.push_back(int32_t(id));
      }
    } else {
      throw bad_request(cat("'prompt' must be a string or a list of token ids", which), "prompt");
    }
    out.push_back(std::move(q));
  }
  return out;
}

// The field's value in a J object (json or ordered_json), or nullptr when it
// is absent or null.
template <typename J>
const J* field_of(const J& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

// The messages as the template sees them, as vLLM hands them over: role and
// content (`parsed`: a string; text parts joined; absent or null: empty), an
// assistant's tool_calls (each function's arguments parsed from their JSON
// string into an object, as vLLM does, so `arguments | tojson` writes
// JSON) and reasoning_content, a tool message's tool_call_id, and name. J:
// json, or ordered_json to keep the client's key order.
template <typename J>
J template_messages(const J& m, const std::vector<ChatMessage>& parsed) {
  J out = J::array();
  for (size_t i = 0; i < parsed.size(); ++i) {
    const J& msg = m[i];
    J t = J::object();
    t["role"] = parsed[i].role;
    t["content"] = parsed[i].content;
    if (const J* calls = field_of(msg, "tool_calls")) {
      if (!calls->is_array())
        throw bad_request("an assistant message's 'tool_calls' must be a list", "messages");
      J cs = J::array();
      for (const J& c : *calls) {
        if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
            !c["function"].contains("name") || !c["function"]["name"].is_string())
          throw bad_request("each tool call must be an object with a 'function' holding a 'name'",
                            "messages");
        J call = c;
        J& args = call["function"]["arguments"];
        if (args.is_string()) {
          J parsed_args = J::parse(args.template get<std::string>(), nullptr, false);
          if (parsed_args.is_discarded())
            throw bad_request(cat("tool call '", c["function"]["name"].template get<std::string>(),
                                  "': 'arguments' is not valid JSON"),
                              "messages");
          args = std::move(parsed_args);
        } else if (args.is_null()) {
          args = J::object();
        }
        cs.push_back(std::move(call));
      }
      t["tool_calls"] = std::move(cs);
    }
    for (const char* k : {"tool_call_id", "name", "reasoning_content"})
      if (const J* v = field_of(msg, k)) {
        if (!v->is_string()) throw bad_request(cat("'", k, "' must be a string"), "messages");
        t[k] = *v;
      }
    out.push_back(std::move(t));
  }
  return out;
}

// The request's chat_template (vLLM's: `request.chat_template or
// self.chat_template`, then HF's get_chat_template): a template, or the name
// of one of the model's templates. vLLM refuses it, and a chat_template in
// chat_template_kwargs, unless the server trusts request templates; trusted,
// the one in chat_template_kwargs is still refused (vLLM resolves the
// template before the kwargs reach it).
std::string requested_template(const json& body, const Limits& lim) {
  const json* given = field(body, "chat_template");
  const json* kwargs = field(body, "chat_template_kwargs");
  const json* in_kwargs = kwargs && kwargs->is_object() ? field(*kwargs, "chat_template") : nullptr;
  if ((given || in_kwargs) && !lim.trust_request_chat_template)
    throw bad_request("Chat template is passed with request, but --trust-request-chat-template "
                      "is not set. Refused request with untrusted chat template.",
                      "chat_template");
  if (in_kwargs)
    throw bad_request("'chat_template_kwargs' may not hold 'chat_template': give the template as "
                      "the request's 'chat_template'",
                      "chat_template_kwargs");
  if (!given) return lim.chat_template;
  if (!given->is_string()) throw bad_request("'chat_template' must be a string", "chat_template");
  const std::string& t = given->get_ref<const std::string&>();
  return t.empty() ? lim.chat_template : t;
}

// The chat form's prompt text, as vLLM renders it (its chat completions and
// /tokenize alike): messages, tools, chat_template_kwargs (template
// variables such as enable_thinking; they override the others),
// add_generation_prompt, continue_final_message (the last message left
// open for the model to continue; it excludes add_generation_prompt), and
// the template: the request's chat_template, else --chat-template, else the
// model's (tool_use when tools are given and the model names one). A
// template that fails to render is a 400 naming the error, within the
// template engine's limits. `ordered`: the same body with its objects' key
// order (what the template's `tojson` writes), when the caller has it.
std::string render_chat(const json& body, const nlohmann::ordered_json* ordered,
                        const Limits& lim, const Tokenizer& tok) {
  using ojson = nlohmann::ordered_json;
  const json* m = field(body, "messages");
  if (!m) throw bad_request("'messages' is required", "messages");
  const std::vector<ChatMessage> parsed = parse_messages(*m);  // validates role and content
  (void)template_messages(*m, parsed);  // validates tool calls and the string fields
  bool add_generation_prompt = true, continue_final = false;
  if (const json* v = field(body, "add_generation_prompt"))
    add_generation_prompt = get_bool(*v, "add_generation_prompt");
  if (const json* v = field(body, "continue_final_message"))
    continue_final = get_bool(*v, "continue_final_message");
  if (continue_final && add_generation_prompt)
    throw bad_request("Cannot set both `continue_final_message` and `add_generation_prompt` to "
                      "True.",
                      "continue_final_message");
  if (const json* v = field(body, "tools")) {
    if (!v->is_array()) throw bad_request("'tools' must be a list", "tools");
    for (const json& t : *v)
      if (!t.is_object()) throw bad_request("each tool must be an object", "tools");
  }
  if (const json* v = field(body, "chat_template_kwargs"))
    if (!v->is_object())
      throw bad_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
  const std::string requested = requested_template(body, lim);
  // Everything is valid: the template's values, in the client's key order when known.
  const ojson src = ordered ? *ordered : ojson::parse(body.dump());
  ojson vars = ojson::object();
  if (const ojson* v = field_of(src, "tools")) vars["tools"] = *v;
  if (const ojson* v = field_of(src, "chat_template_kwargs"))
    for (const auto& [k, x] : v->items()) vars[k] = x;
  std::string rendered;
  try {
    const auto dump = [](const ojson& j) {
      return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
    };
    rendered = tok.apply_chat_template_json(dump(template_messages(src["messages"], parsed)),
                                            add_generation_prompt, dump(vars), requested);
    if (continue_final) rendered = cut_after_final_message(rendered, parsed.back().content);
  } catch (const Error& e) {
    throw bad_request(cat("chat template: ", e.what()), "messages");
  }
  return rendered;
}

std::vector<int32_t> chat_prompt(const json& body, const nlohmann::ordered_json* ordered,
                                 const Limits& lim, const Tokenizer& tok) {
  const std::string rendered = render_chat(body, ordered, lim, tok);
  // The template writes the BOS token itself, so no special tokens are added
  // (vLLM does the same).
  return tok.encode_at_most(rendered, /*add_special_tokens=*/false, size_t(lim.max_model_len));
}

// Fields we know but cannot honour yet: a clear 400 instead of a silent
// difference from what the client asked for.
void reject_unsupported(const json& body, Endpoint endpoint) {
  auto unsupported = [](const char* name, const std::string& why) {
    return bad_request(cat("'", name, "' is not supported by this server", why), name);
  };
  if (const json* v = field(body, "tools"); v && endpoint == Endpoint::kCompletions) {
    if (!v->is_array()) throw bad_request("'tools' must be a list", "tools");
    if (!v->empty()) throw unsupported("tools", " on /v1/completions (chat only)");
  }
  if (const json* v = field(body, "best_of")) {
    if (get_int(*v, "best_of") != 1) throw unsupported("best_of", " (only 1 is accepted)");
  }
  if (const json* v = field(body, "use_beam_search"))
    if (get_bool(*v, "use_beam_search")) throw unsupported("use_beam_search", "");
  if (const json* v = field(body, "suffix")) {
    get_string(*v, "suffix");
    throw unsupported("suffix", "");
  }
}

// OpenAI's logit_bias: {"token id": bias in [-100, 100]}, at most one entry
// per vocabulary id; sorted by id for SamplingParams.
std::vector<std::pair<int32_t, float>> parse_logit_bias(const json& v, const Limits& lim) {
  if (!v.is_object())
    throw bad_request("'logit_bias' must be an object mapping token ids to biases", "logit_bias");
  if (v.size() > size_t(lim.vocab_size))
    throw bad_request(cat("'logit_bias' has ", v.size(), " entries, more than the vocabulary (",
                          lim.vocab_size, ")"),
                      "logit_bias");
  std::vector<std::pair<int32_t, float>> out;
  out.reserve(v.size());
  for (const auto& [key, value] : v.items()) {
    int64_t id = -1;
    const bool digits = !key.empty() && key.size() <= 10 &&
                        key.find_first_not_of("0123456789") == std::string::npos;
    if (digits) id = std::stoll(key);
    if (!digits || id >= lim.vocab_size)
      throw bad_request(cat("'logit_bias' key '", key.substr(0, 32), key.size() > 32 ? "..." : "",
                            "' is not a token id in [0, ", lim.vocab_size, ")"),
                        "logit_bias");
    const double b = get_number(value, "logit_bias");
    if (b < -100.0 || b > 100.0)
      throw bad_request(cat("'logit_bias' value ", b, " of token ", id, " is outside [-100, 100]"),
                        "logit_bias");
    out.emplace_back(int32_t(id), float(b));
  }
  std::sort(out.begin(), out.end());
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].first == out[i - 1].first)
      throw bad_request(cat("'logit_bias' names token ", out[i].first, " twice"), "logit_bias");
  return out;
}

// vLLM's bad_words: each word is tokenized as it stands and with one leading
// space (so it is banned at the start of the text and after a space alike);
// the spaced form counts only when it is a different word of as many ids, as
// vLLM's SamplingParams.update_from_tokenizer decides.
std::vector<std::vector<int32_t>> parse_bad_words(const json& v, const Limits& lim,
                                                  const Tokenizer& tok) {
  if (!v.is_array()) throw bad_request("'bad_words' must be a list of strings", "bad_words");
  if (int(v.size()) > lim.max_bad_words)
    throw bad_request(cat("too many bad_words: ", v.size(), " (at most ", lim.max_bad_words, ")"),
                      "bad_words");
  std::vector<std::vector<int32_t>> out;
  for (const json& w : v) {
    const std::string& word = get_string(w, "bad_words");
    if (int(word.size()) > lim.max_bad_word_len)
      throw bad_request(cat("a bad word is longer than ", lim.max_bad_word_len, " bytes"),
                        "bad_words");
    const std::string_view bare = std::string_view(word).substr(
        std::min(word.size(), word.find_first_not_of(" \t\n\r\f\v")));
    if (bare.empty()) throw bad_request("bad_words must not be empty or blank", "bad_words");
    std::vector<int32_t> plain = tok.encode(bare, /*add_special_tokens=*/false);
    std::vector<int32_t> spaced = tok.encode(cat(" ", bare), /*add_special_tokens=*/false);
    const bool distinct = !spaced.empty() && spaced.size() == plain.size() &&
                          spaced.front() != plain.front();
    out.push_back(std::move(plain));
    if (distinct) out.push_back(std::move(spaced));
  }
  return out;
}

std::vector<std::string> parse_stop(const json& v, const Limits& lim) {
  std::vector<std::string> stop;
  if (v.is_string()) {
    stop.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    if (int(v.size()) > lim.max_stop)
      throw bad_request(cat("too many stop strings: ", v.size(), " (at most ", lim.max_stop, ")"),
                        "stop");
    for (const json& s : v) stop.push_back(get_string(s, "stop"));
  } else {
    throw bad_request("'stop' must be a string or a list of strings", "stop");
  }
  for (const std::string& s : stop) {
    if (s.empty()) throw bad_request("stop strings must not be empty", "stop");
    if (int(s.size()) > lim.max_stop_len)
      throw bad_request(cat("a stop string is longer than ", lim.max_stop_len, " bytes"), "stop");
  }
  return stop;
}

}  // namespace

json parse_json_body(const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw bad_request("the request body is not valid JSON");
  if (!j.is_object()) throw bad_request("the request body must be a JSON object");
  return j;
}

nlohmann::ordered_json parse_json_body_ordered(const std::string& body) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw bad_request("the request body is not valid JSON");
  return j;
}

std::vector<ChatMessage> parse_messages(const json& m) {
  if (!m.is_array() || m.empty())
    throw bad_request("'messages' must be a non-empty list", "messages");
  std::vector<ChatMessage> out;
  for (const json& msg : m) {
    if (!msg.is_object()) throw bad_request("each message must be an object", "messages");
    const json* role = field(msg, "role");
    if (!role || !role->is_string())
      throw bad_request("each message needs a string 'role'", "messages");
    ChatMessage cm{role->get<std::string>(), ""};
    if (const json* c = field(msg, "content")) {
      if (c->is_string()) {
        cm.content = c->get<std::string>();
      } else if (c->is_array()) {
        for (const json& part : *c) {
          if (!part.is_object() || part.value("type", json()) != "text" ||
              !part.contains("text") || !part["text"].is_string())
            throw bad_request("message content parts must be {\"type\": \"text\", \"text\": ...}",
                              "messages");
          cm.content += part["text"].get<std::string>();
        }
      } else {
        throw bad_request("message 'content' must be a string or a list of parts", "messages");
      }
    }
    out.push_back(std::move(cm));
  }
  return out;
}

GenRequest parse_request(const json& body, Endpoint endpoint, const Limits& lim,
                         const GenerationDefaults& defaults, const Tokenizer& tok,
                         const std::vector<std::string>& served_names,
                         const nlohmann::ordered_json* ordered) {
  GenRequest r;
  r.endpoint = endpoint;
  r.model = served_names.empty() ? "" : served_names.front();
  if (const json* v = field(body, "model")) {
    const std::string& name = get_string(*v, "model");
    bool known = false;
    for (const std::string& s : served_names) known = known || s == name;
    if (!known) throw ApiError(404, cat("The model `", name, "` does not exist."), "model",
                               "model_not_found");
    r.model = name;
  }
  reject_unsupported(body, endpoint);

  // Scalars first, so a wrong type is reported before any tokenization work.
  SamplingParams& s = r.sampling;
  s.temperature = defaults.temperature.value_or(1.0f);
  s.top_p = defaults.top_p.value_or(1.0f);
  s.top_k = defaults.top_k.value_or(0);
  s.min_p = defaults.min_p.value_or(0.0f);
  if (const json* v = field(body, "temperature")) {
    double t = get_number(*v, "temperature");
    if (t < 0.0) throw bad_request("'temperature' must be >= 0", "temperature");
    s.temperature = float(t);
  }
  if (const json* v = field(body, "top_p")) {
    double p = get_number(*v, "top_p");
    if (!(p > 0.0 && p <= 1.0)) throw bad_request("'top_p' must be in (0, 1]", "top_p");
    s.top_p = float(p);
  }
  if (const json* v = field(body, "top_k")) {
    int64_t k = get_int(*v, "top_k");
    if (k < -1) throw bad_request("'top_k' must be -1 or 0 (off) or positive", "top_k");
    s.top_k = k <= 0 ? 0 : int(std::min<int64_t>(k, lim.vocab_size));
  }
  if (const json* v = field(body, "min_p")) {
    double p = get_number(*v, "min_p");
    if (!(p >= 0.0 && p <= 1.0)) throw bad_request("'min_p' must be in [0, 1]", "min_p");
    s.min_p = float(p);
  }
  for (auto [name, dst] : {std::pair{"presence_penalty", &s.presence_penalty},
                            std::pair{"frequency_penalty", &s.frequency_penalty}}) {
    if (const json* v = field(body, name)) {
      double d = get_number(*v, name);
      if (d < -2.0 || d > 2.0) throw bad_request(cat("'", name, "' must be in [-2, 2]"), name);
      *dst = float(d);
    }
  }
  if (const json* v = field(body, "repetition_penalty")) {
    double d = get_number(*v, "repetition_penalty");
    if (d <= 0.0) throw bad_request("'repetition_penalty' must be > 0", "repetition_penalty");
    s.repetition_penalty = float(d);
  }
  // Completions: logprobs is the number of top entries (0 = the chosen id's
  // only). Chat: logprobs is a boolean and top_logprobs the number.
  if (endpoint == Endpoint::kCompletions) {
    if (const json* v = field(body, "logprobs")) {
      int64_t k = get_int(*v, "logprobs");
      if (k < 0 || k > lim.max_logprobs)
        throw bad_request(cat("'logprobs' must be in [0, ", lim.max_logprobs, "]"), "logprobs");
      s.logprobs = int(k);
    }
  } else {
    bool want = false;
    if (const json* v = field(body, "logprobs")) want = get_bool(*v, "logprobs");
    int64_t k = 0;
    if (const json* v = field(body, "top_logprobs")) {
      k = get_int(*v, "top_logprobs");
      if (k < 0 || k > lim.max_logprobs)
        throw bad_request(cat("'top_logprobs' must be in [0, ", lim.max_logprobs, "]"),
                          "top_logprobs");
      if (k > 0 && !want)
        throw bad_request("'top_logprobs' requires 'logprobs': true", "top_logprobs");
    }
    if (want) s.logprobs = int(k);
  }
  if (const json* v = field(body, "seed")) {
    s.seed = uint64_t(get_int(*v, "seed"));
    r.seeded = true;
  }
  if (const json* v = field(body, "n")) {
    int64_t n = get_int(*v, "n");
    if (n < 1 || n > lim.max_n) throw bad_request(cat("'n' must be in [1, ", lim.max_n, "]"), "n");
    r.n = int(n);
  }
  if (const json* v = field(body, "logit_bias")) s.logit_bias = parse_logit_bias(*v, lim);
  if (const json* v = field(body, "bad_words")) s.bad_words = parse_bad_words(*v, lim, tok);
  if (const json* v = field(body, "stop")) r.stop = parse_stop(*v, lim);
  if (const json* v = field(body, "include_stop_str_in_output"))
    r.include_stop_str_in_output = get_bool(*v, "include_stop_str_in_output");
  if (const json* v = field(body, "return_token_ids"))
    r.return_token_ids = get_bool(*v, "return_token_ids");
  int64_t min_tokens = 0;
  if (const json* v = field(body, "min_tokens")) {
    min_tokens = get_int(*v, "min_tokens");
    if (min_tokens < 0) throw bad_request("'min_tokens' must be >= 0", "min_tokens");
  }
  if (const json* v = field(body, "stop_token_ids")) {
    if (!v->is_array()) throw bad_request("'stop_token_ids' must be a list", "stop_token_ids");
    if (int(v->size()) > lim.max_stop * 4)
      throw bad_request("too many stop_token_ids", "stop_token_ids");
    r.stop_token_ids = get_tokens(*v, "stop_token_ids", lim.vocab_size);
  }
  r.structured = parse_structured(body);  // compiled by the server (structured.h)
  if (const json* v = field(body, "stream")) r.stream = get_bool(*v, "stream");
  if (const json* v = field(body, "stream_options")) {
    if (!v->is_object()) throw bad_request("'stream_options' must be an object", "stream_options");
    if (!r.stream)
      throw bad_request("'stream_options' is only allowed when 'stream' is true",
                        "stream_options");
    if (const json* u = field(*v, "include_usage")) r.include_usage = get_bool(*u, "include_usage");
    if (const json* u = field(*v, "continuous_usage_stats"))
      r.continuous_usage = get_bool(*u, "continuous_usage_stats");
  }
  if (const json* v = field(body, "ignore_eos")) r.ignore_eos = get_bool(*v, "ignore_eos");
  if (const json* v = field(body, "skip_special_tokens"))
    r.skip_special_tokens = get_bool(*v, "skip_special_tokens");
  if (const json* v = field(body, "echo")) {
    r.echo = get_bool(*v, "echo");
    if (r.echo && endpoint == Endpoint::kChat)
      throw bad_request("'echo' is supported on /v1/completions only", "echo");
  }
  if (const json* v = field(body, "prompt_logprobs")) {
    int64_t k = get_int(*v, "prompt_logprobs");
    if (endpoint == Endpoint::kChat)
      throw bad_request("'prompt_logprobs' is supported on /v1/completions only",
                        "prompt_logprobs");
    if (k < 0 || k > lim.max_logprobs)
      throw bad_request(cat("'prompt_logprobs' must be in [0, ", lim.max_logprobs, "]"),
                        "prompt_logprobs");
    r.prompt_logprobs = int(k);
  }
  // The prompt's logprobs come with the whole answer; a stream would have to
  // hold its echo back until the prompt is scored.
  if (r.wants_prompt_logprobs() && r.stream)
    throw bad_request("prompt logprobs ('echo' with 'logprobs', or 'prompt_logprobs') are not "
                      "supported with 'stream'",
                      r.prompt_logprobs >= 0 ? "prompt_logprobs" : "echo");
  std::optional<int64_t> max_tokens;
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    if (const json* v = field(body, name)) {
      int64_t m = get_int(*v, name);
      // 0 with echo: the prompt back (and its logprobs), nothing generated (vLLM).
      if (m < 1 && !(m == 0 && r.echo))
        throw bad_request(cat("'", name, "' must be at least 1 (0 with 'echo')"), name);
      max_tokens = m;
    }
  }

  if (endpoint == Endpoint::kCompletions)
    r.prompts = completion_prompts(body, lim, tok);
  else
    r.prompts.push_back({chat_prompt(body, ordered, lim, tok), ""});
  const int64_t L = lim.max_model_len;
  const char* prompt_param = endpoint == Endpoint::kChat ? "messages" : "prompt";
  int64_t P = 0;  // the longest prompt: max_tokens must fit beside it
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    const std::vector<int32_t>& ids = r.prompts[i].ids;
    const std::string which = r.prompts.size() > 1 ? cat(" (prompt ", i, ")") : "";
    if (ids.empty()) throw bad_request(cat("the prompt is empty", which), "prompt");
    for (int32_t id : ids)
      if (id < 0 || id >= lim.vocab_size)
        throw bad_request(cat("prompt token id ", id, " is out of vocabulary", which), "prompt");
    const int64_t n = int64_t(ids.size());
    // Tokenization stops once the prompt is over the context length (so a
    // huge prompt is refused without encoding all of it): n > L is a lower bound.
    if (n >= L)
      throw bad_request(cat("This model's maximum context length is ", L,
                            " tokens. However, your request has ", n > L ? "at least " : "", n,
                            " input tokens", which, ". Please reduce the length of the input."),
                        prompt_param);
    P = std::max(P, n);
  }
  if (max_tokens) {
    // max_tokens may be near 2^63: compare without forming P + max_tokens in int64.
    if (*max_tokens > L - P)
      throw bad_request(cat("This model's maximum context length is ", L,
                            " tokens. However, you requested ", uint64_t(P) + uint64_t(*max_tokens),
                            " tokens (", P,
                            " in the ", prompt_param, ", ", *max_tokens,
                            " in the completion). Please reduce the length of the ", prompt_param,
                            " or completion."),
                        "max_tokens");
    r.max_tokens = int(*max_tokens);
  } else {
    // vLLM: completions default to 16 tokens (OpenAI's legacy default), chat
    // to the rest of the context; generation_config's max_new_tokens caps both.
    int64_t m = endpoint == Endpoint::kCompletions ? std::min<int64_t>(16, L - P) : L - P;
    if (defaults.max_tokens) m = std::min<int64_t>(m, *defaults.max_tokens);
    r.max_tokens = int(std::max<int64_t>(m, 1));
  }
  if (min_tokens > r.max_tokens)
    throw bad_request(cat("'min_tokens' (", min_tokens, ") must be <= max_tokens (", r.max_tokens,
                          ")"),
                      "min_tokens");
  s.min_tokens = int(min_tokens);
  for (PromptIds& q : r.prompts) {
    if (!r.echo)
      q.echo_text.clear();
    else if (q.echo_text.empty())
      q.echo_text = tok.decode(q.ids);
  }
  return r;
}

GenerationDefaults GenerationDefaults::load(const std::string& dir) {
  GenerationDefaults d;
  if (dir.empty()) return d;
  std::filesystem::path path = std::filesystem::path(dir) / "generation_config.json";
  if (!std::filesystem::exists(path)) return d;
  std::ifstream in(path);
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  HAYATE_CHECK(j.is_object(), path.string(), ": not a JSON object");
  auto num = [&](const char* k) -> std::optional<double> {
    auto it = j.find(k);
    if (it == j.end() || it->is_null()) return std::nullopt;
    HAYATE_CHECK(it->is_number(), path.string(), ": '", k, "' must be a number");
    return it->get<double>();
  };
  if (auto v = num("temperature")) d.temperature = float(*v);
  if (auto v = num("top_p")) d.top_p = float(*v);
  if (auto v = num("top_k")) d.top_k = int(*v);
  if (auto v = num("min_p")) d.min_p = float(*v);
  if (auto v = num("max_new_tokens")) d.max_tokens = int(*v);
  SamplingParams check;
  check.temperature = d.temperature.value_or(1.0f);
  check.top_p = d.top_p.value_or(1.0f);
  check.top_k = std::max(0, d.top_k.value_or(0));
  check.min_p = d.min_p.value_or(0.0f);
  try {
    check.validate();
  } catch (const Error& e) {
    fail(cat(path.string(), ": ", e.what()));
  }
  if (d.top_k && *d.top_k < 0) d.top_k = 0;
  return d;
}

json GenerationDefaults::to_json() const {
  json j = json::object();
  if (temperature) j["temperature"] = *temperature;
  if (top_p) j["top_p"] = *top_p;
  if (top_k) j["top_k"] = *top_k;
  if (min_p) j["min_p"] = *min_p;
  if (max_tokens) j["max_tokens"] = *max_tokens;
  return j;
}

json handle_tokenize(const json& body, const Limits& lim, const Tokenizer& tok,
                     const nlohmann::ordered_json* ordered) {
  if (const json* v = field(body, "return_token_strs"))
    if (get_bool(*v, "return_token_strs"))
      throw bad_request("'return_token_strs' is not supported by this server",
                        "return_token_strs");
  std::vector<int32_t> ids;
  if (field(body, "messages")) {
    bool add_special = false;
    if (const json* v = field(body, "add_special_tokens"))
      add_special = get_bool(*v, "add_special_tokens");
    ids = tok.encode(render_chat(body, ordered, lim, tok), add_special);
  } else {
    const json* p = field(body, "prompt");
    if (!p) throw bad_request("'prompt' or 'messages' is required", "prompt");
    bool add_special = true;
    if (const json* v = field(body, "add_special_tokens"))
      add_special = get_bool(*v, "add_special_tokens");
    ids = tok.encode(get_string(*p, "prompt"), add_special);
  }
  return {{"count", ids.size()},
          {"max_model_len", lim.max_model_len},
          {"tokens", ids},
          {"token_strs", nullptr}};
}

json handle_detokenize(const json& body, const Limits& lim, const Tokenizer& tok) {
  const json* t = field(body, "tokens");
  if (!t || !t->is_array()) throw bad_request("'tokens' must be a list of token ids", "tokens");
  std::vector<int32_t> ids = get_tokens(*t, "tokens", lim.vocab_size);
  return {{"prompt", tok.decode(ids)}};
}

}  // namespace hayate::server
