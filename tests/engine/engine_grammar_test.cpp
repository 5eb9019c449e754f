// Structured output through the engine: dummy:tiny (random weights, the
// Llama 3.1 vocabulary) on the CPU paged backend, so only the grammar's mask
// can make an output valid. Every sampling mode (greedy, temperature with
// top-k/top-p, the host path of logprobs and penalties) is checked, with
// constrained and free requests in one batch.
#include <gtest/gtest.h>

#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cpu/cpu_paged_backend.h"
#include "engine/engine.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "model/model.h"
#include "engine_fixture.h"
#include "tokenizer/tok_test_util.h"

namespace hayate::testing_engine {
namespace {

using grammar::TokenTables;
using grammar::TokenVocab;

class EngineGrammarTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    model_ = new Model(load_model("dummy:tiny", 11, HAYATE_ASSETS_DIR));
    vocab_ = new std::shared_ptr<const TokenVocab>(std::make_shared<const TokenVocab>(
        TokenVocab::from_tokenizer(test::llama3(), model_->config.eos_ids)));
  }
  static void TearDownTestSuite() {
    delete vocab_;
    delete model_;
  }

  static std::unique_ptr<BatchBackend> backend() {
    BatchBackendOptions o;
    o.num_blocks = 256;
    o.block_size = 16;
    o.max_model_len = 512;
    return make_cpu_paged_backend(*model_, o);
  }
  static std::shared_ptr<const TokenTables> tables(grammar::Grammar g) {
    return std::make_shared<const TokenTables>(
        std::make_shared<const grammar::Grammar>(std::move(g)), *vocab_, TokenTables::Build::kLazy);
  }
  static EngineRequest request(std::shared_ptr<const TokenTables> g, const SamplingParams& p,
                               int max_tokens, Sink& sink) {
    EngineRequest r;
    r.prompt = {128000, 9906, 11, 1917, 13};  // "<|begin_of_text|>Hello, world."
    r.sampling = p;
    r.max_tokens = max_tokens;
    r.grammar = std::move(g);
    r.on_event = sink.callback();
    return r;
  }
  static std::vector<SamplingParams> modes() {
    std::vector<SamplingParams> m(6);
    m[1].temperature = 1.0f;
    m[1].seed = 3;
    m[2].temperature = 0.7f;
    m[2].top_k = 50;
    m[2].top_p = 0.9f;
    m[2].seed = 5;
    m[3].temperature = 1.5f;
    m[3].min_p = 0.05f;
    m[3].seed = 9;
    m[4].logprobs = 2;  // the host path, greedy
    m[5].temperature = 1.0f;
    m[5].repetition_penalty = 1.3f;  // the host path, sampled
    m[5].seed = 4;
    return m;
  }

  static Model* model_;
  static std::shared_ptr<const TokenVocab>* vocab_;
};

Model* EngineGrammarTest::model_ = nullptr;
std::shared_ptr<const TokenVocab>* EngineGrammarTest::vocab_ = nullptr;

// Bounded schemas: every output must parse, match and end with EOS (stop)
// well within max_tokens in every sampling mode.
TEST_F(EngineGrammarTest, JsonSchemaEveryModeValidAndStops) {
  const auto g = tables(grammar::compile_json_schema(std::string_view(R"({
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "color": {"enum": ["red", "green", "blue"]},
                   "n": {"type": "integer", "minimum": 0, "maximum": 99}},
    "required": ["ok", "color", "n"]})")));
  auto be = backend();
  Engine engine(*be, &test::llama3());
  Sink sink;
  std::vector<RequestId> ids;
  for (int rep = 0; rep < 3; ++rep)
    for (SamplingParams p : modes()) {
      p.seed += uint64_t(rep) * 100;
      ids.push_back(engine.submit(request(g, p, 64, sink)));
    }
  engine.run_until_idle();
  for (RequestId id : ids) {
    const Collected c = sink.get(id);
    SCOPED_TRACE(c.text);
    EXPECT_TRUE(c.error.empty()) << c.error;
    EXPECT_EQ(c.finish, FinishReason::kStop);
    EXPECT_LT(c.ids.size(), 64u);
    const nlohmann::json j = nlohmann::json::parse(c.text, nullptr, false);
    ASSERT_TRUE(j.is_object());
    EXPECT_TRUE(j.at("ok").is_boolean());
    EXPECT_TRUE(j.at("color") == "red" || j.at("color") == "green" || j.at("color") == "blue");
    EXPECT_TRUE(j.at("n").is_number_integer() && j.at("n") >= 0 && j.at("n") <= 99);
  }
  EXPECT_EQ(sink.get(ids[4]).logprobs.size(), sink.get(ids[4]).ids.size());
}

TEST_F(EngineGrammarTest, RegexAndChoiceMatchFully) {
  const auto re = tables(grammar::compile_regex(R"([a-c]{3}-\d{2}(x|yz)?)"));
  const auto choice = tables(grammar::compile_choice({"alpha", "beta gamma", "al"}));
  auto be = backend();
  Engine engine(*be, &test::llama3());
  Sink sink;
  std::vector<RequestId> res, chs;
  for (const SamplingParams& p : modes()) {
    res.push_back(engine.submit(request(re, p, 32, sink)));
    chs.push_back(engine.submit(request(choice, p, 32, sink)));
  }
  engine.run_until_idle();
  for (RequestId id : res) {
    const Collected c = sink.get(id);
    EXPECT_EQ(c.finish, FinishReason::kStop) << c.error;
    EXPECT_TRUE(std::regex_match(c.text, std::regex(R"([a-c]{3}-\d{2}(x|yz)?)"))) << c.text;
  }
  for (RequestId id : chs) {
    const Collected c = sink.get(id);
    EXPECT_EQ(c.finish, FinishReason::kStop) << c.error;
    EXPECT_TRUE(c.text == "alpha" || c.text == "beta gamma" || c.text == "al") << c.text;
  }
}

// A free request batched with constrained ones gets exactly the ids it gets
// alone: the masks touch only the masked rows.
TEST_F(EngineGrammarTest, FreeRequestsUnchangedBesideConstrainedOnes) {
  const auto g = tables(grammar::compile_json_object());
  SamplingParams sampled;
  sampled.temperature = 0.9f;
  sampled.seed = 17;
  std::vector<std::vector<int32_t>> alone;
  for (const SamplingParams& p : {SamplingParams{}, sampled}) {
    auto be = backend();
    Engine engine(*be, &test::llama3());
    Sink sink;
    const RequestId id = engine.submit(request(nullptr, p, 12, sink));
    engine.run_until_idle();
    alone.push_back(sink.get(id).ids);
  }
  auto be = backend();
  Engine engine(*be, &test::llama3());
  Sink sink;
  std::vector<RequestId> free_ids;
  for (int i = 0; i < 3; ++i) {
    engine.submit(request(g, sampled, 24, sink));
    free_ids.push_back(engine.submit(request(nullptr, i % 2 ? sampled : SamplingParams{}, 12, sink)));
  }
  engine.run_until_idle();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(sink.get(free_ids[size_t(i)]).ids, alone[size_t(i % 2)]);
}

// The host path (logprobs) and the backend's masked sampling pick alike.
TEST_F(EngineGrammarTest, HostAndBackendPicksAgree) {
  const auto g = tables(grammar::compile_regex(R"(\{"k": [0-9]{1,3}\})"));
  auto be = backend();
  Engine engine(*be, &test::llama3());
  Sink sink;
  SamplingParams p;
  p.logprobs = 0;  // host path: the same pick, and the raw logprobs reported
  const RequestId host = engine.submit(request(g, p, 20, sink));
  const RequestId dev = engine.submit(request(g, SamplingParams{}, 20, sink));
  engine.run_until_idle();
  EXPECT_EQ(sink.get(host).ids, sink.get(dev).ids);
  EXPECT_EQ(sink.get(dev).finish, FinishReason::kStop);
  EXPECT_TRUE(std::regex_match(sink.get(dev).text, std::regex(R"(\{"k": [0-9]{1,3}\})")))
      << sink.get(dev).text;
}

}  // namespace
}  // namespace hayate::testing_engine
