// Chat templates rendered (and tokenized) as tokenizers.js renders them:
// the Llama 3 template shipped in tokenizer_config.json, the Llama 3.1
// Instruct template and ChatML (tests/tokenizer/data/*.jinja).
#include "tok_test_util.h"

namespace hayate::test {
namespace {

TEST(Chat, RendersAndTokenizesLikeTokenizersJs) {
  std::string file = data_dir() + "/chats.json";
  auto cases = nlohmann::json::parse(slurp(file));
  ASSERT_GE(cases.size(), 10u);
  auto expected = json_lines(run_command("node " + oracle_dir() + "/chat_oracle.mjs " + file));
  ASSERT_EQ(expected.size(), cases.size());
  Tokenizer tok = Tokenizer::load(assets_llama3());
  const std::string shipped = tok.chat_template();
  ASSERT_FALSE(shipped.empty());
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    std::string name = c["template"].get<std::string>();
    tok.set_chat_template(name == "default" ? shipped : slurp(data_dir() + "/" + name));
    std::string vars = c.contains("vars") ? c["vars"].dump() : "";
    std::string text = tok.apply_chat_template_json(c["messages"].dump(),
                                                    c["add_generation_prompt"].get<bool>(), vars);
    EXPECT_EQ(text, expected[i]["text"].get<std::string>()) << "case " << i << " (" << name << ")";
    EXPECT_EQ(tok.encode(text, false), expected[i]["ids"].get<std::vector<int32_t>>())
        << "case " << i;
  }
}

TEST(Chat, MessagesOverloadMatchesJsonOverload) {
  const Tokenizer& tok = llama3();
  std::vector<ChatMessage> msgs = {{"system", "sys"}, {"user", "こんにちは"}};
  std::string a = tok.apply_chat_template(msgs, true);
  std::string b = tok.apply_chat_template_json(
      R"([{"role":"system","content":"sys"},{"role":"user","content":"こんにちは"}])", true);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, tok.apply_chat_template(msgs, false));
}

TEST(Chat, TemplateErrorsAreClear) {
  Tokenizer tok = Tokenizer::load(assets_llama3());
  tok.set_chat_template("");
  EXPECT_THROW(tok.apply_chat_template({{"user", "x"}}), Error);
  tok.set_chat_template("{% macro m() %}{% endmacro %}");
  try {
    tok.apply_chat_template({{"user", "x"}});
    FAIL() << "macro accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("macro"), std::string::npos) << e.what();
  }
  tok.set_chat_template(slurp(data_dir() + "/llama3_1_instruct.jinja"));
  // The template raises when tools are given but there is no user message.
  try {
    tok.apply_chat_template_json(R"([{"role": "system", "content": "only a system message"}])",
                                 true, R"({"tools": [{"name": "t"}]})");
    FAIL() << "raise_exception ignored";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no first user message"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hayate::test
