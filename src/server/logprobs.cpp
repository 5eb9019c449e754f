#include "server/logprobs.h"

#include <cmath>
#include <string>

namespace hayate::server {

using nlohmann::json;

namespace {

double clamped(float lp) {
  return std::isnan(lp) ? -9999.0 : std::max(double(lp), -9999.0);
}

// Ids past the tokenizer's vocabulary (the model's padding rows) have no text.
std::string token_text(const Tokenizer& tok, int32_t id) {
  if (id >= tok.vocab_size()) return "";
  return tok.decode(std::span<const int32_t>(&id, 1));
}

json token_bytes(const Tokenizer& tok, int32_t id) {
  std::string raw =
      id >= tok.vocab_size() ? "" : tok.decode_bytes(std::span<const int32_t>(&id, 1));
  json b = json::array();
  for (char c : raw) b.push_back(int(uint8_t(c)));
  return b;
}

json chat_entry(const Tokenizer& tok, int32_t id, float lp) {
  return {
      {"token", token_text(tok, id)}, {"logprob", clamped(lp)}, {"bytes", token_bytes(tok, id)}};
}

// Code points of valid UTF-8 (decode's output): bytes that are not
// continuation bytes (10xxxxxx).
int64_t code_points(const std::string& s) {
  int64_t n = 0;
  for (char c : s) n += (uint8_t(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace

json chat_logprobs(const Tokenizer& tok, std::span<const SampleResult> lp) {
  json content = json::array();
  for (const SampleResult& r : lp) {
    json e = chat_entry(tok, r.id, r.logprob);
    json top = json::array();
    for (const TokenLogprob& t : r.top) top.push_back(chat_entry(tok, t.id, t.logprob));
    e["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  return {{"content", std::move(content)}};
}

json completion_logprobs(const Tokenizer& tok, std::span<const SampleResult> lp, int64_t* offset) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       text_offset = json::array();
  for (const SampleResult& r : lp) {
    std::string text = token_text(tok, r.id);
    tokens.push_back(text);
    token_logprobs.push_back(clamped(r.logprob));
    json d = json::object();
    for (const TokenLogprob& t : r.top) d[token_text(tok, t.id)] = clamped(t.logprob);
    if (!d.contains(text)) d[text] = clamped(r.logprob);
    top.push_back(std::move(d));
    text_offset.push_back(*offset);
    *offset += code_points(text);
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top)},
          {"text_offset", std::move(text_offset)}};
}

json echo_logprobs(const Tokenizer& tok, std::span<const int32_t> prompt,
                   std::span<const SampleResult> prompt_lp, int top,
                   std::span<const SampleResult> generated) {
  std::vector<SampleResult> cut(prompt_lp.begin(), prompt_lp.end());
  for (SampleResult& r : cut)
    if (r.top.size() > size_t(top)) r.top.resize(size_t(top));
  const std::string first = prompt.empty() ? "" : token_text(tok, prompt[0]);
  int64_t offset = code_points(first);
  json p = completion_logprobs(tok, cut, &offset);
  json g = completion_logprobs(tok, generated, &offset);
  json out = {{"tokens", json::array({first})},
              {"token_logprobs", json::array({nullptr})},
              {"top_logprobs", json::array({nullptr})},
              {"text_offset", json::array({0})}};
  for (const char* k : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
    for (const json* part : {&p, &g})
      for (const json& x : (*part)[k]) out[k].push_back(x);
  return out;
}

json prompt_logprobs_json(const Tokenizer& tok, std::span<const int32_t> prompt,
                          std::span<const SampleResult> prompt_lp, int top) {
  json out = json::array({nullptr});
  for (size_t i = 0; i + 1 < prompt.size() && i < prompt_lp.size(); ++i) {
    const SampleResult& r = prompt_lp[i];
    json d = json::object();
    for (size_t k = 0; k < r.top.size() && k < size_t(top); ++k)
      d[std::to_string(r.top[k].id)] = {{"logprob", clamped(r.top[k].logprob)},
                                        {"rank", k + 1},
                                        {"decoded_token", token_text(tok, r.top[k].id)}};
    d[std::to_string(r.id)] = {{"logprob", clamped(r.logprob)},
                               {"rank", r.rank},
                               {"decoded_token", token_text(tok, r.id)}};
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace hayate::server
