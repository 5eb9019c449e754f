// Request validation without HTTP: parse_request on JSON bodies with the real
// Llama 3.1 tokenizer (assets/llama3_1), limits of a 4096-token model.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/check.h"
#include "server/api_error.h"
#include "server/logprobs.h"
#include "server/protocol.h"
#include "tokenizer/tokenizer.h"

namespace hayate::server {
namespace {

using nlohmann::json;

class ProtocolTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tok_ = new Tokenizer(Tokenizer::load(std::string(HAYATE_ASSETS_DIR) + "/llama3_1"));
  }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
  }

  GenRequest parse(const json& body, Endpoint e = Endpoint::kCompletions,
                   const GenerationDefaults& d = {}) {
    return parse_request(body, e, limits_, d, *tok_, {"m", "alias"});
  }
  // The ApiError parse throws (fails the test when it does not throw).
  ApiError error_of(const json& body, Endpoint e = Endpoint::kCompletions) {
    try {
      parse(body, e);
    } catch (const ApiError& err) {
      return err;
    }
    ADD_FAILURE() << "accepted: " << body.dump();
    return ApiError(0, "");
  }

  static Tokenizer* tok_;
  Limits limits_{4096, 128256};
};
Tokenizer* ProtocolTest::tok_ = nullptr;

TEST_F(ProtocolTest, CompletionDefaultsAndFields) {
  GenRequest r = parse({{"prompt", "Hello world"}});
  EXPECT_EQ(r.prompts.at(0).ids, tok_->encode("Hello world", true));
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.max_tokens, 16);  // OpenAI's legacy completions default, as vLLM
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FALSE(r.seeded);
  EXPECT_EQ(r.n, 1);

  r = parse({{"model", "alias"}, {"prompt", json::array({1, 2, 3})}, {"max_tokens", 7},
             {"temperature", 0}, {"top_p", 0.5}, {"top_k", -1}, {"min_p", 0.1}, {"seed", 9},
             {"stop", "x"}, {"stop_token_ids", {5}}, {"n", 2}, {"stream", true},
             {"stream_options", {{"include_usage", true}}}, {"ignore_eos", true},
             {"echo", true}, {"presence_penalty", 0}, {"logprobs", nullptr}});
  EXPECT_EQ(r.model, "alias");
  EXPECT_EQ(r.prompts.at(0).ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_TRUE(r.sampling.greedy());
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_TRUE(r.seeded);
  EXPECT_EQ(r.sampling.seed, 9u);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.stop_token_ids, std::vector<int32_t>{5});
  EXPECT_TRUE(r.stream && r.include_usage && r.ignore_eos && r.echo);
  EXPECT_EQ(r.prompts.at(0).echo_text, tok_->decode(std::vector<int32_t>{1, 2, 3}));
}

TEST_F(ProtocolTest, ChatUsesTemplateAndFillsContext) {
  json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
  GenRequest r = parse({{"messages", messages}}, Endpoint::kChat);
  std::string rendered = tok_->apply_chat_template({{"user", "Hi"}}, true);
  EXPECT_EQ(r.prompts.at(0).ids, tok_->encode(rendered, false));
  EXPECT_EQ(r.max_tokens, 4096 - int(r.prompts.at(0).ids.size()));
  // Content given as text parts joins them.
  json parts = json::array({{{"role", "user"},
                             {"content", json::array({{{"type", "text"}, {"text", "H"}},
                                                      {{"type", "text"}, {"text", "i"}}})}}});
  EXPECT_EQ(parse({{"messages", parts}}, Endpoint::kChat).prompts.at(0).ids, r.prompts.at(0).ids);
  EXPECT_EQ(parse({{"messages", messages}, {"max_completion_tokens", 3}}, Endpoint::kChat)
                .max_tokens,
            3);
}

TEST_F(ProtocolTest, GenerationConfigDefaults) {
  auto dir = std::filesystem::temp_directory_path() / "hayate_protocol_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "generation_config.json")
      << R"({"temperature": 0.6, "top_p": 0.9, "top_k": 20, "max_new_tokens": 5, "eos_token_id": 1})";
  GenerationDefaults d = GenerationDefaults::load(dir.string());
  GenRequest r = parse({{"prompt", "a"}}, Endpoint::kCompletions, d);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.6f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 20);
  EXPECT_EQ(r.max_tokens, 5);
  r = parse({{"prompt", "a"}, {"temperature", 0.0}, {"max_tokens", 9}}, Endpoint::kCompletions, d);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.max_tokens, 9);
  std::ofstream(dir / "generation_config.json") << R"({"top_p": 7})";
  EXPECT_THROW(GenerationDefaults::load(dir.string()), Error);
  std::filesystem::remove_all(dir);
  EXPECT_FALSE(GenerationDefaults::load(dir.string()).temperature.has_value());
}

TEST_F(ProtocolTest, BadFieldsNameTheirParam) {
  const json p = "x";
  struct Case {
    json body;
    const char* param;
  } cases[] = {
      {{{"prompt", p}, {"temperature", -1}}, "temperature"},
      {{{"prompt", p}, {"temperature", "1"}}, "temperature"},
      {{{"prompt", p}, {"top_p", 0}}, "top_p"},
      {{{"prompt", p}, {"top_p", 1.01}}, "top_p"},
      {{{"prompt", p}, {"top_k", -3}}, "top_k"},
      {{{"prompt", p}, {"min_p", -0.1}}, "min_p"},
      {{{"prompt", p}, {"max_tokens", 0}}, "max_tokens"},
      {{{"prompt", p}, {"max_tokens", 4096}}, "max_tokens"},
      {{{"prompt", p}, {"max_tokens", 2.0}}, "max_tokens"},
      {{{"prompt", p}, {"n", 17}}, "n"},
      {{{"prompt", p}, {"stop", json::array({1})}}, "stop"},
      {{{"prompt", p}, {"stop", std::vector<std::string>(17, "s")}}, "stop"},
      {{{"prompt", p}, {"stop", std::string(300, 's')}}, "stop"},
      {{{"prompt", p}, {"stop_token_ids", {128256}}}, "stop_token_ids"},
      {{{"prompt", p}, {"stream_options", {{"include_usage", true}}}}, "stream_options"},
      {{{"prompt", p}, {"logprobs", -1}}, "logprobs"},
      {{{"prompt", p}, {"logprobs", true}}, "logprobs"},
      {{{"prompt", p}, {"logprobs", 21}}, "logprobs"},
      {{{"prompt", p}, {"logprobs", 2}, {"echo", true}, {"stream", true}}, "echo"},
      {{{"prompt", p}, {"prompt_logprobs", 21}}, "prompt_logprobs"},
      {{{"prompt", p}, {"prompt_logprobs", 1}, {"stream", true}}, "prompt_logprobs"},
      {{{"prompt", json::array({json::array({1}), json::array({2, 128256})})}}, "prompt"},
      {{{"prompt", std::vector<std::string>(1025, "a")}}, "prompt"},
      {{{"prompt", json::array({"a", json::array({1}), 3})}}, "prompt"},
      {{{"prompt", json::array({"a", json::array()})}}, "prompt"},
      {{{"prompt", p}, {"frequency_penalty", 3}}, "frequency_penalty"},
      {{{"prompt", p}, {"presence_penalty", -2.5}}, "presence_penalty"},
      {{{"prompt", p}, {"presence_penalty", "1"}}, "presence_penalty"},
      {{{"prompt", p}, {"repetition_penalty", 0}}, "repetition_penalty"},
      {{{"prompt", p}, {"repetition_penalty", -1.5}}, "repetition_penalty"},
      {{{"prompt", p}, {"best_of", 2}}, "best_of"},
      {{{"prompt", p}, {"seed", 18446744073709551615ull}}, "seed"},
      {{{"prompt", json::array({1, -1})}}, "prompt"},
      {{{"prompt", std::vector<int>(4096, 1)}}, "prompt"},
      {{{"prompt", p}, {"model", "other"}}, "model"},
  };
  for (const Case& c : cases) {
    ApiError e = error_of(c.body);
    EXPECT_EQ(e.param(), c.param) << c.body.dump().substr(0, 120) << " -> " << e.what();
    EXPECT_EQ(e.status(), std::string(c.param) == "model" ? 404 : 400) << c.body.dump();
  }
  // max_tokens near 2^63: the sum in the message must not wrap.
  ApiError huge = error_of({{"prompt", json::array({1, 2, 3})},
                            {"max_tokens", std::numeric_limits<int64_t>::max()}});
  EXPECT_EQ(huge.param(), "max_tokens");
  EXPECT_NE(std::string(huge.what()).find("you requested 9223372036854775810 tokens (3 in the "
                                          "prompt, 9223372036854775807 in the completion)"),
            std::string::npos)
      << huge.what();
  // A prompt over the context is refused without tokenizing all of it.
  std::string big;
  for (int i = 0; i < 20000; ++i) big += "many words ";
  ApiError longp = error_of({{"prompt", big}});
  EXPECT_EQ(longp.param(), "prompt");
  EXPECT_NE(std::string(longp.what()).find("your request has at least 4097 input tokens"),
            std::string::npos)
      << longp.what();
  ApiError ctx = error_of({{"prompt", p}, {"max_tokens", 5000}});
  EXPECT_NE(std::string(ctx.what()).find("maximum context length is 4096"), std::string::npos);
  json shape = ctx.to_json();
  EXPECT_EQ(shape["error"]["type"], "invalid_request_error");
  EXPECT_EQ(shape["error"]["param"], "max_tokens");
  EXPECT_TRUE(shape["error"]["code"].is_null());
  EXPECT_EQ(error_of({{"messages", json::array()}}, Endpoint::kChat).param(), "messages");
  const json msg = {{{"role", "user"}, {"content", "x"}}};
  EXPECT_EQ(error_of({{"messages", msg}, {"logprobs", 1}}, Endpoint::kChat).param(), "logprobs");
  EXPECT_EQ(error_of({{"messages", msg}, {"top_logprobs", 2}}, Endpoint::kChat).param(),
            "top_logprobs");
  EXPECT_EQ(error_of({{"messages", msg}, {"logprobs", true}, {"top_logprobs", 21}},
                     Endpoint::kChat)
                .param(),
            "top_logprobs");
  EXPECT_EQ(error_of({{"messages", msg}, {"logprobs", true}, {"top_logprobs", -1}},
                     Endpoint::kChat)
                .param(),
            "top_logprobs");
  EXPECT_THROW(parse_json_body("{\"a\": "), ApiError);
  EXPECT_THROW(parse_json_body("[]"), ApiError);
}

TEST_F(ProtocolTest, PenaltiesAndLogprobsFields) {
  GenRequest r = parse({{"prompt", "a"}});
  EXPECT_EQ(r.sampling.logprobs, -1);
  EXPECT_FALSE(r.sampling.needs_host());  // the plain request keeps the backend's sampler
  r = parse({{"prompt", "a"}, {"presence_penalty", 0.5}, {"frequency_penalty", -2},
             {"repetition_penalty", 1.2}, {"logprobs", 3}});
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, -2.0f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.2f);
  EXPECT_EQ(r.sampling.logprobs, 3);
  EXPECT_EQ(parse({{"prompt", "a"}, {"logprobs", 0}}).sampling.logprobs, 0);
  const json msg = {{{"role", "user"}, {"content", "x"}}};
  EXPECT_EQ(parse({{"messages", msg}, {"logprobs", true}}, Endpoint::kChat).sampling.logprobs, 0);
  EXPECT_EQ(parse({{"messages", msg}, {"logprobs", true}, {"top_logprobs", 20}}, Endpoint::kChat)
                .sampling.logprobs,
            20);
  EXPECT_EQ(parse({{"messages", msg}, {"logprobs", false}, {"top_logprobs", 0}}, Endpoint::kChat)
                .sampling.logprobs,
            -1);
}

TEST_F(ProtocolTest, LogprobsShapes) {
  // "Hello" " world" and a lone byte token (a partial UTF-8 character).
  const std::vector<int32_t> ids = tok_->encode("Hello world", false);
  ASSERT_EQ(ids.size(), 2u);
  // Byte-level BPE spells the lone byte 0xC3 as the character U+00C3.
  const std::optional<int32_t> byte_tok = tok_->token_to_id("\xC3\x83");
  ASSERT_TRUE(byte_tok.has_value());
  const int32_t byte_id = *byte_tok;
  std::vector<SampleResult> lp(3);
  lp[0] = {ids[0], -0.5f, {{ids[0], -0.5f}, {ids[1], -1.5f}}};
  lp[1] = {ids[1], -3.0f, {{ids[0], -0.25f}}};  // the chosen id is not in the top list
  lp[2] = {byte_id, -INFINITY, {}};
  json chat = chat_logprobs(*tok_, lp);
  ASSERT_EQ(chat["content"].size(), 3u);
  EXPECT_EQ(chat["content"][0]["token"], "Hello");
  EXPECT_EQ(chat["content"][0]["bytes"], json::array({72, 101, 108, 108, 111}));
  EXPECT_DOUBLE_EQ(chat["content"][0]["logprob"].get<double>(), -0.5);
  EXPECT_EQ(chat["content"][0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(chat["content"][0]["top_logprobs"][1]["token"], " world");
  EXPECT_DOUBLE_EQ(chat["content"][0]["top_logprobs"][1]["logprob"].get<double>(), -1.5);
  EXPECT_EQ(chat["content"][2]["bytes"], json::array({0xC3}));
  EXPECT_EQ(chat["content"][2]["token"], tok_->decode(std::vector<int32_t>{byte_id}));
  EXPECT_DOUBLE_EQ(chat["content"][2]["logprob"].get<double>(), -9999.0);  // vLLM's clamp

  int64_t offset = 4;
  json c = completion_logprobs(*tok_, lp, &offset);
  EXPECT_EQ(c["tokens"], json::array({"Hello", " world", tok_->decode(std::vector<int32_t>{byte_id})}));
  EXPECT_EQ(c["text_offset"], json::array({4, 9, 15}));
  EXPECT_EQ(offset, 16);  // U+FFFD is one code point
  EXPECT_DOUBLE_EQ(c["token_logprobs"][1].get<double>(), -3.0);
  EXPECT_EQ(c["top_logprobs"][0].size(), 2u);
  EXPECT_EQ(c["top_logprobs"][1].size(), 2u);  // top 1 + the chosen id
  EXPECT_DOUBLE_EQ(c["top_logprobs"][1][" world"].get<double>(), -3.0);
  EXPECT_EQ(c["top_logprobs"][2].size(), 1u);
}

TEST_F(ProtocolTest, BatchedPromptsAndPromptLogprobsFields) {
  GenRequest r = parse({{"prompt", json::array({"Hello world", json::array({1, 2, 3}), "a"})},
                        {"n", 2}, {"echo", true}, {"max_tokens", 0}, {"logprobs", 1},
                        {"prompt_logprobs", 3}});
  ASSERT_EQ(r.prompts.size(), 3u);
  EXPECT_EQ(r.prompts[0].ids, tok_->encode("Hello world", true));
  EXPECT_EQ(r.prompts[0].echo_text, "Hello world");
  EXPECT_EQ(r.prompts[1].ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r.prompts[1].echo_text, tok_->decode(std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r.prompt_tokens(), int64_t(r.prompts[0].ids.size() + 3 + r.prompts[2].ids.size()));
  EXPECT_EQ(r.max_tokens, 0);  // echo only
  EXPECT_TRUE(r.wants_prompt_logprobs());
  EXPECT_EQ(r.prompt_top(), 3);
  // A list of ids is one prompt; a list holding one list is one prompt too.
  EXPECT_EQ(parse({{"prompt", json::array({4, 5})}}).prompts.size(), 1u);
  EXPECT_EQ(parse({{"prompt", json::array({json::array({4, 5})})}}).prompts.size(), 1u);
  EXPECT_FALSE(parse({{"prompt", "a"}, {"logprobs", 2}}).wants_prompt_logprobs());
  EXPECT_EQ(parse({{"prompt", "a"}, {"echo", false}}).prompts[0].echo_text, "");
  // The longest prompt bounds max_tokens.
  ApiError e = error_of({{"prompt", json::array({json::array({1}), std::vector<int>(4000, 1)})},
                         {"max_tokens", 100}});
  EXPECT_EQ(e.param(), "max_tokens");
  e = error_of({{"prompt", json::array({"a", std::vector<int>(4096, 1)})}});
  EXPECT_NE(std::string(e.what()).find("(prompt 1)"), std::string::npos) << e.what();
  const json msg = {{{"role", "user"}, {"content", "x"}}};
  EXPECT_EQ(error_of({{"messages", msg}, {"prompt_logprobs", 1}}, Endpoint::kChat).param(),
            "prompt_logprobs");
}

TEST_F(ProtocolTest, PromptLogprobsShapes) {
  const std::vector<int32_t> prompt = tok_->encode("Hello world", false);  // 2 tokens
  ASSERT_EQ(prompt.size(), 2u);
  std::vector<SampleResult> plp(1);
  plp[0] = {prompt[1], -2.0f, {{prompt[0], -0.5f}, {prompt[1], -2.0f}}, 2};
  std::vector<SampleResult> gen(1);
  gen[0] = {prompt[0], -0.75f, {{prompt[0], -0.75f}}};
  json c = echo_logprobs(*tok_, prompt, plp, 1, gen);
  EXPECT_EQ(c["tokens"], json::array({"Hello", " world", "Hello"}));
  EXPECT_EQ(c["token_logprobs"][0], nullptr);
  EXPECT_EQ(c["top_logprobs"][0], nullptr);
  EXPECT_DOUBLE_EQ(c["token_logprobs"][1].get<double>(), -2.0);
  EXPECT_DOUBLE_EQ(c["token_logprobs"][2].get<double>(), -0.75);
  EXPECT_EQ(c["top_logprobs"][1].size(), 2u);  // top 1 (cut from 2) + the prompt's own token
  EXPECT_DOUBLE_EQ(c["top_logprobs"][1]["Hello"].get<double>(), -0.5);
  EXPECT_EQ(c["text_offset"], json::array({0, 5, 11}));

  json v = prompt_logprobs_json(*tok_, prompt, plp, 1);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0], nullptr);
  const std::string own = std::to_string(prompt[1]), best = std::to_string(prompt[0]);
  EXPECT_EQ(v[1].size(), 2u);
  EXPECT_EQ(v[1][own]["rank"], 2);
  EXPECT_DOUBLE_EQ(v[1][own]["logprob"].get<double>(), -2.0);
  EXPECT_EQ(v[1][own]["decoded_token"], " world");
  EXPECT_EQ(v[1][best]["rank"], 1);

  // Rows of logits score the next prompt token: log_softmax by hand.
  const std::vector<float> rows = {0.0f, 1.0f, 2.0f, 3.0f,   // position 0 -> prompt[1] = 2
                                   5.0f, 0.0f, 0.0f, 0.0f};  // position 1: past the prompt
  std::vector<SampleResult> out;
  prompt_logprobs(rows, 4, 0, std::vector<int32_t>{7, 2}, 2, out);
  ASSERT_EQ(out.size(), 1u);
  const double lse = std::log(std::exp(0.0) + std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  EXPECT_EQ(out[0].id, 2);
  EXPECT_NEAR(out[0].logprob, 2.0 - lse, 1e-6);
  EXPECT_EQ(out[0].rank, 2);
  ASSERT_EQ(out[0].top.size(), 2u);
  EXPECT_EQ(out[0].top[0].id, 3);
  EXPECT_NEAR(out[0].top[0].logprob, 3.0 - lse, 1e-6);
}

TEST_F(ProtocolTest, TokenizeAndDetokenize) {
  json t = handle_tokenize({{"prompt", "Hello"}}, limits_, *tok_);
  EXPECT_EQ(t["tokens"].get<std::vector<int32_t>>(), tok_->encode("Hello", true));
  EXPECT_EQ(t["count"], t["tokens"].size());
  EXPECT_EQ(t["max_model_len"], 4096);
  json d = handle_detokenize({{"tokens", t["tokens"]}}, limits_, *tok_);
  EXPECT_EQ(d["prompt"], tok_->decode(t["tokens"].get<std::vector<int32_t>>()));
  EXPECT_THROW(handle_detokenize({{"tokens", {1, 200000}}}, limits_, *tok_), ApiError);
  EXPECT_THROW(handle_tokenize({{"prompt", 3}}, limits_, *tok_), ApiError);
}

TEST_F(ProtocolTest, LogitBiasMinTokensAndIncludeStopStr) {
  GenRequest r = parse({{"prompt", "x"}, {"max_tokens", 8}, {"logit_bias", {{"900", -100}, {"5", 2.5}, {"128255", 100}}},
                        {"min_tokens", 3}, {"include_stop_str_in_output", true}});
  EXPECT_EQ(r.sampling.logit_bias, (std::vector<std::pair<int32_t, float>>{
                                       {5, 2.5f}, {900, -100.0f}, {128255, 100.0f}}));
  EXPECT_EQ(r.sampling.min_tokens, 3);
  EXPECT_TRUE(r.include_stop_str_in_output);
  EXPECT_TRUE(r.sampling.needs_host());
  r = parse({{"prompt", "x"}, {"logit_bias", json::object()}});
  EXPECT_TRUE(r.sampling.logit_bias.empty());
  EXPECT_FALSE(r.include_stop_str_in_output);

  // Hostile maps: more entries than the vocabulary, ids out of range or not
  // ids, non-numbers, out-of-range biases, one id twice under two spellings.
  json huge = json::object();
  for (int i = 0; i < 1000000; ++i) huge[std::to_string(i)] = 1;
  for (const json& bias : {huge, json{{"128256", 1}}, json{{"-3", 1}}, json{{"1e3", 1}},
                           json{{"x", 1}}, json{{"5", "NaN"}}, json{{"5", nullptr}},
                           json{{"5", 100.5}}, json{{"5", -1e300}}, json{{"7", 1}, {"007", 2}},
                           json{{"99999999999999999999", 1}}, json::array({1})}) {
    ApiError e = error_of({{"prompt", "x"}, {"logit_bias", bias}});
    EXPECT_EQ(e.status(), 400) << bias.dump().substr(0, 80);
    EXPECT_EQ(e.param(), "logit_bias") << bias.dump().substr(0, 80);
  }
  EXPECT_EQ(error_of({{"prompt", "x"}, {"min_tokens", -1}}).param(), "min_tokens");
  EXPECT_EQ(error_of({{"prompt", "x"}, {"max_tokens", 2}, {"min_tokens", 3}}).param(), "min_tokens");
  EXPECT_EQ(error_of({{"prompt", "x"}, {"min_tokens", 1.5}}).param(), "min_tokens");
  EXPECT_EQ(error_of({{"prompt", "x"}, {"include_stop_str_in_output", 1}}).param(),
            "include_stop_str_in_output");
  EXPECT_TRUE(parse({{"prompt", "x"}, {"return_token_ids", true}}).return_token_ids);
  EXPECT_FALSE(parse({{"prompt", "x"}}).return_token_ids);
  EXPECT_EQ(error_of({{"prompt", "x"}, {"return_token_ids", "yes"}}).param(), "return_token_ids");
}

// vLLM's bad_words: each word as given and with a leading space, the spaced
// form kept only when it is a different word of as many ids. Expected ids from
// tokenizers.js with Llama 3.1's tokenizer.json (tests/oracle/tokenize_oracle.mjs).
TEST_F(ProtocolTest, BadWordsAreTokenizedAsVllmDoes) {
  GenRequest r = parse({{"prompt", "x"}, {"bad_words", {"hello", "  unbelievably", "Hello"}}});
  EXPECT_EQ(r.sampling.bad_words, (std::vector<std::vector<int32_t>>{
                                      {15339}, {24748},          // "hello", " hello"
                                      {359, 32898, 89234},       // "unbelievably" (" unbelievably"
                                                                 // is 2 ids: not kept)
                                      {9906}, {22691}}));        // "Hello", " Hello"
  EXPECT_TRUE(r.sampling.needs_host());
  EXPECT_TRUE(parse({{"prompt", "x"}, {"bad_words", json::array()}}).sampling.bad_words.empty());

  for (const json& words : {json("hello"), json{1}, json{""}, json{"   "}, json{std::string(257, 'a')},
                            json(std::vector<std::string>(257, "a"))}) {
    ApiError e = error_of({{"prompt", "x"}, {"bad_words", words}});
    EXPECT_EQ(e.status(), 400) << words.dump().substr(0, 80);
    EXPECT_EQ(e.param(), "bad_words") << words.dump().substr(0, 80);
  }
}

// The chat form as vLLM renders it, with Qwen3's tokenizer and template:
// tools, assistant tool_calls (arguments parsed from their JSON string) and
// tool results reach the template, chat_template_kwargs set its variables,
// continue_final_message leaves the last message open, the /tokenize chat
// form renders the same, and tools keep the client's key order.
TEST_F(ProtocolTest, ChatTemplateFieldsAsVllm) {
  const Tokenizer qwen = Tokenizer::load(std::string(HAYATE_ASSETS_DIR) + "/qwen3");
  const Limits lim{4096, qwen.vocab_size()};
  const std::string body_text = R"({
    "messages": [
      {"role": "user", "content": "Weather in Tokyo?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Tokyo\", \"unit\": \"c\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "21 C"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    "chat_template_kwargs": {"enable_thinking": false}})";
  const json body = json::parse(body_text);
  const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(body_text);
  const GenRequest r = parse_request(body, Endpoint::kChat, lim, {}, qwen, {"m"}, &ordered);
  const std::string text = qwen.decode(r.prompts.at(0).ids);
  // The tool definition as the client wrote it (type before function), the
  // call's arguments as JSON, the result as a tool response, thinking off.
  EXPECT_NE(text.find(R"({"type": "function", "function": {"name": "get_weather", "description": "d")"),
            std::string::npos) << text;
  EXPECT_NE(text.find(R"(<tool_call>
{"name": "get_weather", "arguments": {"city": "Tokyo", "unit": "c"}}
</tool_call>)"), std::string::npos) << text;
  EXPECT_NE(text.find("<tool_response>\n21 C\n</tool_response>"), std::string::npos) << text;
  EXPECT_TRUE(text.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n")) << text;
  // /tokenize's chat form renders the same ids.
  const json t = handle_tokenize(body, lim, qwen, &ordered);
  EXPECT_EQ(t["tokens"].get<std::vector<int32_t>>(), r.prompts.at(0).ids);

  // continue_final_message: the assistant's message stays open.
  const json cont = {{"messages", {{{"role", "user"}, {"content", "Count"}},
                                   {{"role", "assistant"}, {"content", "One, two"}}}},
                     {"add_generation_prompt", false},
                     {"continue_final_message", true}};
  const GenRequest c = parse_request(cont, Endpoint::kChat, lim, {}, qwen, {"m"});
  EXPECT_TRUE(qwen.decode(c.prompts.at(0).ids).ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\nOne, two"));
  json both = cont;
  both.erase("add_generation_prompt");
  try {
    parse_request(both, Endpoint::kChat, lim, {}, qwen, {"m"});
    ADD_FAILURE() << "continue_final_message with add_generation_prompt accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param(), "continue_final_message");
  }

  // Bad shapes name their field; a template that raises is a 400 naming its error.
  const auto param_of = [&](const json& b) {
    try {
      parse_request(b, Endpoint::kChat, lim, {}, qwen, {"m"});
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      return e.param() + ": " + e.what();
    }
    return std::string("accepted");
  };
  const json user = {{{"role", "user"}, {"content", "x"}}};
  EXPECT_TRUE(param_of({{"messages", user}, {"tools", "x"}}).starts_with("tools"));
  EXPECT_TRUE(param_of({{"messages", user}, {"chat_template_kwargs", 1}})
                  .starts_with("chat_template_kwargs"));
  json bad_args = json::parse(body_text)["messages"];
  bad_args[1]["tool_calls"][0]["function"]["arguments"] = "{not json";
  EXPECT_NE(param_of({{"messages", bad_args}}).find("'arguments' is not valid JSON"),
            std::string::npos);
  Tokenizer raising = Tokenizer::load(std::string(HAYATE_ASSETS_DIR) + "/qwen3");
  raising.set_chat_template("{{ raise_exception('roles must alternate') }}");
  try {
    parse_request({{"messages", user}}, Endpoint::kChat, lim, {}, raising, {"m"});
    ADD_FAILURE() << "a raising template accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("roles must alternate"), std::string::npos) << e.what();
  }
}

// The template a chat request renders with, as vLLM picks it: the request's
// chat_template (refused with a 400 unless the server trusts request
// templates), else --chat-template, else the model's (tool_use with tools
// when its tokenizer_config names one); /tokenize's chat form alike. A
// request template that fails, or hits the template engine's limits, is a
// 400 naming the error.
TEST_F(ProtocolTest, RequestChatTemplateAndNamedTemplates) {
  const auto slurp = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const Tokenizer named = Tokenizer::from_json(
      slurp(std::string(HAYATE_ASSETS_DIR) + "/llama3_1/tokenizer.json"),
      slurp(std::string(HAYATE_SOURCE_DIR) + "/tests/tokenizer/data/named_templates_config.json"));
  Limits lim{4096, named.vocab_size()};
  const json user = {{{"role", "user"}, {"content", "hi"}}};
  const json tools = json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])");
  const auto text_of = [&](const json& body) {
    const std::string chat = named.decode(
        parse_request(body, Endpoint::kChat, lim, {}, named, {"m"}).prompts.at(0).ids);
    // /tokenize's chat form renders the same text.
    EXPECT_EQ(named.decode(handle_tokenize(body, lim, named)["tokens"].get<std::vector<int32_t>>()),
              chat);
    return chat;
  };
  const auto error_of = [&](const json& body) {
    for (bool tokenize : {false, true}) {
      try {
        if (tokenize)
          handle_tokenize(body, lim, named);
        else
          parse_request(body, Endpoint::kChat, lim, {}, named, {"m"});
        ADD_FAILURE() << "accepted: " << body.dump();
      } catch (const ApiError& e) {
        EXPECT_EQ(e.status(), 400);
        if (tokenize) return e.param() + ": " + e.what();
      }
    }
    return std::string();
  };
  // The model's templates: default, tool_use with tools (an empty list too).
  const std::string plain_default = "<|begin_of_text|><|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(text_of({{"messages", user}}), plain_default);
  EXPECT_TRUE(text_of({{"messages", user}, {"tools", tools}}).find("<tools>\n{\"name\": \"f\"") !=
              std::string::npos);
  EXPECT_TRUE(text_of({{"messages", user}, {"tools", json::array()}}).find("<tools>") !=
              std::string::npos);
  EXPECT_EQ(text_of({{"messages", user}, {"tools", nullptr}}), plain_default);

  // Untrusted: a request's template, or one in chat_template_kwargs, is refused.
  const std::string refused = "chat_template: Chat template is passed with request, but "
                              "--trust-request-chat-template is not set.";
  EXPECT_TRUE(error_of({{"messages", user}, {"chat_template", "X"}}).starts_with(refused));
  EXPECT_TRUE(error_of({{"messages", user}, {"chat_template", "plain"}}).starts_with(refused));
  EXPECT_TRUE(error_of({{"messages", user}, {"chat_template_kwargs", {{"chat_template", "X"}}}})
                  .starts_with(refused));
  EXPECT_EQ(text_of({{"messages", user}, {"chat_template", nullptr}}), plain_default);

  // --chat-template naming one of the model's templates applies to every request.
  lim.chat_template = "plain";
  EXPECT_EQ(text_of({{"messages", user}, {"tools", tools}}), "USER: hi\nASSISTANT:");

  // Trusted: the request's template wins, by name or as a template.
  lim.trust_request_chat_template = true;
  EXPECT_EQ(text_of({{"messages", user}, {"chat_template", "default"}}), plain_default);
  EXPECT_EQ(text_of({{"messages", user}, {"chat_template", "<{{ messages[0].content }}>"}}),
            "<hi>");
  EXPECT_EQ(text_of({{"messages", user}, {"chat_template", ""}}), "USER: hi\nASSISTANT:");
  EXPECT_TRUE(error_of({{"messages", user}, {"chat_template", 7}}).starts_with("chat_template: "));
  EXPECT_TRUE(error_of({{"messages", user}, {"chat_template_kwargs", {{"chat_template", "X"}}}})
                  .starts_with("chat_template_kwargs: "));
  // Template errors and hostile templates: a 400 naming the error.
  EXPECT_NE(error_of({{"messages", user}, {"chat_template", "{% macro m() %}{% endmacro %}"}})
                .find("macro"),
            std::string::npos);
  EXPECT_NE(error_of({{"messages", user}, {"chat_template", "{{ raise_exception('no thanks') }}"}})
                .find("no thanks"),
            std::string::npos);
  EXPECT_NE(error_of({{"messages", user},
                      {"chat_template",
                       "{% set ns = namespace(x=1) %}{% set ns.x = [ns] %}{{ ns | tojson }}"}})
                .find("contains the namespace"),
            std::string::npos);
  EXPECT_NE(error_of({{"messages", user}, {"chat_template", "{% for x in y %}"}}).find("chat template: "),
            std::string::npos);
}

}  // namespace
}  // namespace hayate::server
