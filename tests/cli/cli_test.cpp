// End-to-end tests of the built `hayate` binary: generate and perplexity on
// dummy:tiny and on the HF golden checkpoint, and bad input -> a one-line
// error and a non-zero exit.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "golden/golden.h"

namespace hayate {
namespace {

struct Proc {
  int code = -1;
  std::string out, err;
};

// Single-quotes an argument for /bin/sh.
std::string quote(const std::string& s) {
  std::string q;
  q.push_back('\'');
  for (char c : s) {
    if (c == '\'') {
      q.append("'\\''");
    } else {
      q.push_back(c);
    }
  }
  q.push_back('\'');
  return q;
}

Proc hayate(const std::vector<std::string>& args) {
  static int counter = 0;
  const std::string err_path =
      ::testing::TempDir() + "/hayate_cli_err_" + std::to_string(::getpid()) + "_" +
      std::to_string(counter++);
  std::string cmd = quote(std::string(HAYATE_BINARY_DIR) + "/hayate");
  for (const std::string& a : args) {
    cmd.push_back(' ');
    cmd.append(quote(a));
  }
  cmd.append(" 2>");
  cmd.append(quote(err_path));
  cmd.append(" </dev/null");
  Proc r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream f(err_path);
  std::stringstream ss;
  ss << f.rdbuf();
  r.err = ss.str();
  std::remove(err_path.c_str());
  return r;
}

std::vector<std::string> tiny(std::vector<std::string> args) {
  args.insert(args.begin() + 1, {"--model", "dummy:tiny", "--backend", "cpu"});
  return args;
}

nlohmann::json ids_of(const Proc& r) {
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(Cli, GenerateIdsAndMaxLength) {
  Proc a = hayate(tiny({"generate", "--prompt", "Hello, world", "--max-tokens", "6",
                       "--ignore-eos", "--output-ids"}));
  nlohmann::json j = ids_of(a);
  auto prompt = j["prompt_ids"].get<std::vector<int>>();
  auto ids = j["ids"].get<std::vector<int>>();
  ASSERT_GE(prompt.size(), 2u);
  EXPECT_EQ(prompt[0], 128000);  // BOS as HF's add_special_tokens=True
  EXPECT_EQ(ids.size(), 6u);
  // --max-length counts the prompt: prompt + 3 gives the first 3 of the same ids.
  Proc b = hayate(tiny({"generate", "--prompt", "Hello, world", "--max-length",
                       std::to_string(prompt.size() + 3), "--ignore-eos", "--output-ids"}));
  auto ids3 = ids_of(b)["ids"].get<std::vector<int>>();
  EXPECT_EQ(ids3, std::vector<int>(ids.begin(), ids.begin() + 3));
  // Streaming text mode prints text and a summary on stderr.
  Proc t = hayate(tiny({"generate", "--prompt", "Hello, world", "--max-tokens", "3",
                       "--ignore-eos"}));
  EXPECT_EQ(t.code, 0) << t.err;
  EXPECT_FALSE(t.out.empty());
  EXPECT_NE(t.err.find("3 new tokens"), std::string::npos) << t.err;
}

// Structured output offline: random weights follow the grammar, end with
// EOS (stop) where it may end; a schema the compiler refuses names the keyword.
TEST(Cli, GenerateFollowsTheGrammar) {
  auto text = [](const Proc& r) {
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("(stop)"), std::string::npos) << r.err;
    return r.out.substr(0, r.out.size() - 1);  // the closing newline
  };
  const std::string c = text(hayate(tiny({"generate", "--prompt", "Pick", "--max-tokens", "8",
                                          "--temperature", "1", "--choice", "yes", "--choice",
                                          "no way"})));
  EXPECT_TRUE(c == "yes" || c == "no way") << c;
  const std::string re = text(hayate(tiny({"generate", "--prompt", "Code", "--max-tokens", "12",
                                           "--regex", "[a-c]{3}-[0-9]{2}"})));
  EXPECT_EQ(re.size(), 6u) << re;
  EXPECT_EQ(re[3], '-') << re;
  const std::string schema = ::testing::TempDir() + "/hayate_cli_schema.json";
  std::ofstream(schema) << R"({"type": "object", "properties": {"ok": {"type": "boolean"}},
                              "required": ["ok"]})";
  const nlohmann::json j = nlohmann::json::parse(text(hayate(
      tiny({"generate", "--prompt", "JSON", "--max-tokens", "16", "--json-schema", schema}))));
  EXPECT_TRUE(j.at("ok").is_boolean());
  std::ofstream(schema) << R"({"not": {"type": "null"}})";
  Proc bad = hayate(tiny({"generate", "--prompt", "x", "--json-schema", schema}));
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("'not'"), std::string::npos) << bad.err;
  Proc two = hayate(tiny({"generate", "--prompt", "x", "--regex", "a", "--choice", "b"}));
  EXPECT_NE(two.code, 0);
  EXPECT_NE(two.err.find("at most one"), std::string::npos) << two.err;
  std::remove(schema.c_str());
}

TEST(Cli, SampledRunsFollowTheSeed) {
  auto run = [](const char* seed) {
    return ids_of(hayate(tiny({"generate", "--prompt", "Once upon a time", "--max-tokens", "8",
                               "--ignore-eos", "--output-ids", "--temperature", "1.0",
                               "--top-p", "0.95", "--seed", seed})))["ids"];
  };
  // --seed also seeds dummy weights: same seed -> same model and draws.
  EXPECT_EQ(run("3"), run("3"));
}

TEST(Cli, ChatTemplateHasOneBos) {
  Proc r = hayate(tiny({"generate", "--prompt", "What is 2+2?", "--chat", "--system",
                       "Be brief.", "--max-tokens", "2", "--ignore-eos", "--output-ids"}));
  auto prompt = ids_of(r)["prompt_ids"].get<std::vector<int>>();
  ASSERT_GT(prompt.size(), 10u);
  EXPECT_EQ(prompt[0], 128000);
  EXPECT_EQ(std::count(prompt.begin(), prompt.end(), 128000), 1);
  EXPECT_EQ(std::count(prompt.begin(), prompt.end(), 128006), 3);  // system, user, assistant
}

TEST(Cli, PerplexityMatchesHfOnTheRealVocabCheckpoint) {
  const std::string dir = golden::data_dir() + "/realvocab_tied_bf16";
  const nlohmann::json g = golden::read_json(dir + "/golden.json");
  for (const char* which : {"full", "windowed"}) {
    const nlohmann::json& ref = g["perplexity"][which];
    std::vector<std::string> args = {"perplexity", "--model", dir, "--backend", "cpu",
                                     "--tokenizer", std::string(HAYATE_ASSETS_DIR) + "/llama3_1",
                                     "--file", golden::data_dir() + "/text_ja_en.txt", "--json"};
    if (std::string(which) == "windowed") {
      args.push_back("--context");
      args.push_back(std::to_string(ref["context"].get<int>()));
    }
    Proc r = hayate(args);
    ASSERT_EQ(r.code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["tokens"].get<int64_t>(), ref["count"].get<int64_t>() + 1) << which;
    const double ppl = ref["ppl"].get<double>();
    EXPECT_LT(std::abs(j["perplexity"].get<double>() - ppl) / ppl, 1e-4) << which;
  }
}

// Bad input: non-zero exit, nothing on stdout, and exactly one line on stderr
// that says what was wrong.
void expect_one_line_error(const std::vector<std::string>& args, const std::string& needle) {
  Proc r = hayate(args);
  std::string joined;
  for (const auto& a : args) joined += a + " ";
  EXPECT_NE(r.code, 0) << joined;
  EXPECT_EQ(r.out, "") << joined;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << joined << "\n" << r.err;
  EXPECT_NE(r.err.find("hayate: error:"), std::string::npos) << joined << "\n" << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << joined << "\n" << r.err;
}

TEST(Cli, BadSamplingValues) {
  const std::vector<std::string> base = {"generate", "--model", "dummy:tiny", "--backend", "cpu",
                                         "--prompt", "hi"};
  auto with = [&](std::vector<std::string> extra) {
    auto a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  expect_one_line_error(with({"--temperature", "-0.5"}), "temperature");
  expect_one_line_error(with({"--top-p", "0"}), "top_p");
  expect_one_line_error(with({"--top-p", "1.5"}), "top_p");
  expect_one_line_error(with({"--top-k", "-1"}), "top_k");
  expect_one_line_error(with({"--min-p", "2"}), "min_p");
  expect_one_line_error(with({"--max-tokens", "0"}), "--max-tokens");
  expect_one_line_error(with({"--system", "x"}), "--chat");
}

TEST(Cli, BadModelsAndLengths) {
  expect_one_line_error({"generate", "--model", "dummy:nope", "--backend", "cpu", "--prompt", "hi"},
                        "dummy:nope");
  expect_one_line_error({"generate", "--model", "/nonexistent/ckpt", "--backend", "cpu",
                         "--prompt", "hi"},
                        "/nonexistent/ckpt");
  expect_one_line_error({"generate", "--model", "dummy:tiny", "--backend", "nope", "--prompt", "hi"},
                        "nope");
  // A model the machine cannot hold in fp32 (about 290 GB): refused before any allocation, not
  // killed by the OOM killer halfway through the load.
  expect_one_line_error(
      {"generate", "--model", "dummy:llama-3.1-70b", "--backend", "cpu", "--prompt", "hi"},
      "of host memory");
  // A prompt longer than the context.
  std::string long_prompt;
  for (int i = 0; i < 40; ++i) long_prompt += "word ";
  expect_one_line_error(tiny({"generate", "--max-context", "16", "--prompt", long_prompt,
                              "--max-tokens", "1"}),
                        "context");
  expect_one_line_error(tiny({"generate", "--prompt", "one two three", "--max-length", "2"}),
                        "--max-length");
  // --max-context: negative, or past the model's max_position_embeddings (a
  // pool the machine cannot hold), is a one-line error before any allocation.
  expect_one_line_error(tiny({"generate", "--max-context", "-1", "--prompt", "hi"}),
                        "--max-context");
  expect_one_line_error(tiny({"generate", "--max-context", "100000000", "--prompt", "hi"}),
                        "max_position_embeddings");
  expect_one_line_error(tiny({"perplexity", "--max-context", "-5", "--file",
                              golden::data_dir() + "/text_ja_en.txt"}),
                        "--max-context");
  expect_one_line_error(tiny({"perplexity", "--file", "/nonexistent/text.txt"}),
                        "/nonexistent/text.txt");
  expect_one_line_error(tiny({"perplexity", "--file", golden::data_dir() + "/text_ja_en.txt",
                              "--context", "1"}),
                        "--context");
}

// FP8: --quantization fp8 and --kv-cache-dtype fp8 run on the CPU backend
// (greedy output of the same length), and bad values are one-line errors
// naming the flag (FP8 checkpoints: tests/golden/fp8_golden_test.cpp).
TEST(Cli, Fp8FlagsAndCheckpoints) {
  const auto run = [](std::vector<std::string> extra) {
    std::vector<std::string> a = tiny({"generate", "--prompt", "hello", "--max-tokens", "6",
                                       "--output-ids"});
    a.insert(a.end(), extra.begin(), extra.end());
    return ids_of(hayate(a))["ids"].size();
  };
  EXPECT_EQ(run({"--quantization", "fp8"}), 6u);
  EXPECT_EQ(run({"--quantization", "fp8", "--kv-cache-dtype", "fp8"}), 6u);
  expect_one_line_error(tiny({"generate", "--quantization", "awq", "--prompt", "hi"}),
                        "--quantization: unknown method 'awq'");
  expect_one_line_error(tiny({"generate", "--kv-cache-dtype", "fp8_e5m2", "--prompt", "hi"}),
                        "--kv-cache-dtype");
}

// --tensor-parallel-size (vLLM's, and -tp): dummy:tiny on 2 simulated CPU
// ranks generates TP 1's greedy ids; a rank count that does not divide the
// heads, or 0, is a one-line error naming the flag.
TEST(Cli, TensorParallelRanks) {
  const auto ids = [](std::vector<std::string> extra) {
    std::vector<std::string> a = tiny({"generate", "--prompt", "hello", "--max-tokens", "8",
                                       "--output-ids"});
    a.insert(a.end(), extra.begin(), extra.end());
    return ids_of(hayate(a))["ids"];
  };
  const nlohmann::json one = ids({});
  ASSERT_EQ(one.size(), 8u);
  EXPECT_EQ(ids({"--tensor-parallel-size", "2"}), one);
  EXPECT_EQ(ids({"-tp", "2"}), one);
  expect_one_line_error(tiny({"generate", "--tensor-parallel-size", "3", "--prompt", "hi"}),
                        "--tensor-parallel-size 3 does not divide num_attention_heads 4");
  expect_one_line_error(tiny({"generate", "--tensor-parallel-size", "0", "--prompt", "hi"}),
                        "--tensor-parallel-size must be >= 1");
}

// A Hugging Face cache as huggingface_hub lays it out, its snapshot's files
// symlinks into blobs/ holding the golden checkpoint's files.
std::string make_hf_cache(const std::string& root, const std::string& ckpt) {
  namespace fs = std::filesystem;
  const std::string commit = "89abcdef0123456789abcdef0123456789abcdef";
  const fs::path repo = fs::path(root) / "models--org--tiny-golden";
  fs::create_directories(repo / "refs");
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "snapshots" / commit);
  std::ofstream(repo / "refs" / "main") << commit;
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors"}) {
    fs::copy_file(fs::path(ckpt) / f, repo / "blobs" / (std::string("blob-") + f));
    fs::create_symlink(std::string("../../blobs/blob-") + f, repo / "snapshots" / commit / f);
  }
  return root;
}

TEST(Cli, HuggingFaceIdFromTheLocalCacheIsTheCheckpoint) {
  namespace fs = std::filesystem;
  const std::string ckpt = golden::data_dir() + "/realvocab_tied_bf16";
  const std::string cache = ::testing::TempDir() + "/hayate_cli_hf_" + std::to_string(::getpid());
  fs::remove_all(cache);
  make_hf_cache(cache, ckpt);
  const std::string tok = std::string(HAYATE_ASSETS_DIR) + "/llama3_1";
  Proc direct = hayate({"generate", "--model", ckpt, "--tokenizer", tok, "--backend", "cpu",
                        "--prompt", "Hello", "--max-tokens", "4", "--output-ids"});
  ::setenv("HF_HUB_CACHE", cache.c_str(), 1);
  // Positional, as `vllm serve MODEL`; and --model with --revision.
  Proc cached = hayate({"generate", "org/tiny-golden", "--tokenizer", tok, "--backend", "cpu",
                        "--prompt", "Hello", "--max-tokens", "4", "--output-ids"});
  Proc missing_rev = hayate({"generate", "--model", "org/tiny-golden", "--revision", "v9",
                             "--backend", "cpu", "--prompt", "Hello"});
  Proc absent = hayate({"generate", "--model", "org/not-here", "--backend", "cpu", "--prompt", "x"});
  ::unsetenv("HF_HUB_CACHE");
  ASSERT_EQ(direct.code, 0) << direct.err;
  ASSERT_EQ(cached.code, 0) << cached.err;
  EXPECT_EQ(ids_of(cached), ids_of(direct));
  EXPECT_EQ(missing_rev.code, 1);
  EXPECT_NE(missing_rev.err.find("no revision 'v9'"), std::string::npos) << missing_rev.err;
  EXPECT_EQ(absent.code, 1);
  EXPECT_NE(absent.err.find("not in the local Hugging Face cache"), std::string::npos) << absent.err;
  EXPECT_NE(absent.err.find("hf download org/not-here"), std::string::npos) << absent.err;
  fs::remove_all(cache);
}

TEST(Cli, VllmAndLlamaServerNamesAreAliases) {
  std::string long_prompt;
  for (int i = 0; i < 40; ++i) long_prompt += "word ";
  // Each name of the context length bounds it the same way.
  for (const char* name : {"--max-model-len", "--max-context"})
    expect_one_line_error(tiny({"generate", name, "16", "--prompt", long_prompt, "--max-tokens", "1"}),
                          "context of 16 tokens");
  Proc a = hayate(tiny({"generate", "--max-model-len", "64", "--prompt", "hi", "--max-tokens", "3",
                        "--output-ids", "--dtype", "auto"}));
  Proc b = hayate(tiny({"generate", "--max-context", "64", "--prompt", "hi", "--max-tokens", "3",
                        "--output-ids"}));
  EXPECT_EQ(ids_of(a), ids_of(b));
  expect_one_line_error(tiny({"generate", "--dtype", "int4", "--prompt", "hi"}), "--dtype");
  // An unknown flag: the nearest known one is suggested.
  Proc r = hayate(tiny({"generate", "--max-tokenz", "3", "--prompt", "hi"}));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown option --max-tokenz (did you mean --max-tokens?)"),
            std::string::npos)
      << r.err;
}

TEST(Cli, ChatKeepsTheConversation) {
  const std::string cmd = std::string("printf 'Hello\\nHow are you?\\n/clear\\nAgain\\n' | ") +
                          quote(std::string(HAYATE_BINARY_DIR) + "/hayate") +
                          " chat dummy:tiny --backend cpu -n 3 --temperature 0 2>&1 >/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string err;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) err.append(buf, n);
  ASSERT_EQ(::pclose(p), 0) << err;
  std::vector<int> prompts;
  for (size_t at = err.find("["); at != std::string::npos; at = err.find("[", at + 1))
    prompts.push_back(std::atoi(err.c_str() + at + 1));
  ASSERT_EQ(prompts.size(), 3u) << err;
  // Turn 2 carries turn 1 (question and reply); after /clear, a turn stands alone.
  EXPECT_GT(prompts[1], prompts[0] + 3 + 3) << err;
  EXPECT_LT(prompts[2], prompts[1]) << err;
  EXPECT_NE(err.find("3 new (length)"), std::string::npos) << err;
}

TEST(Cli, InstalledBinaryFindsItsAssetsNextToItself) {
  namespace fs = std::filesystem;
  const std::string prefix = ::testing::TempDir() + "/hayate_install_" + std::to_string(::getpid());
  fs::remove_all(prefix);
  const std::string install = std::string(HAYATE_CMAKE) + " --install " +
                              quote(HAYATE_BINARY_DIR) + " --prefix " + quote(prefix) +
                              " >/dev/null";
  ASSERT_EQ(std::system(install.c_str()), 0);
  ASSERT_TRUE(fs::exists(prefix + "/bin/hayate"));
  ASSERT_TRUE(fs::exists(prefix + "/share/hayate/assets/llama3_1/tokenizer.json"));
  ASSERT_TRUE(fs::exists(prefix + "/share/hayate/tools/plot_report.py"));
  // From another working directory, with the source tree's assets out of reach.
  const std::string run = "cd / && " + quote(prefix + "/bin/hayate") +
                          " generate dummy:tiny --backend cpu --prompt hi --max-tokens 2 "
                          "--output-ids >/dev/null 2>&1";
  EXPECT_EQ(std::system(run.c_str()), 0);
  const std::string bad = "cd / && HAYATE_HOME=/nonexistent " + quote(prefix + "/bin/hayate") +
                          " generate dummy:tiny --backend cpu --prompt hi 2>&1 | grep -q HAYATE_HOME";
  EXPECT_EQ(std::system(bad.c_str()), 0);
  fs::remove_all(prefix);
}

// `hayate profile` on the CPU: the plan, and every op's bytes and FLOPs as
// dummy:tiny's shapes give them (written out here from its config.json:
// hidden 128, intermediate 384, 4 layers, 4 heads and 2 kv heads of 32, vocab
// 128256, untied; the CPU backend reads and writes fp32).
TEST(Cli, ProfileCountsTheModelsBytes) {
  const std::string path = ::testing::TempDir() + "/hayate_profile_" + std::to_string(::getpid()) + ".json";
  const Proc r = hayate(tiny({"profile", "--batch", "3", "--context", "20", "--prompt-len", "9",
                              "--runs", "2", "--json", path}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("== decode step: batch 3, context 20"), std::string::npos) << r.out;
  std::ifstream f(path);
  const nlohmann::json j = nlohmann::json::parse(f);
  std::remove(path.c_str());
  EXPECT_EQ(j["schema"], "hayate-profile/1");
  ASSERT_EQ(j["steps"].size(), 2u);
  const double D = 128, I = 384, L = 4, qd = 4 * 32, kvd = 2 * 32, V = 128256, B = 4;
  const auto op = [](const nlohmann::json& step, const std::string& name) {
    for (const nlohmann::json& o : step["ops"])
      if (o["name"] == name) return o;
    ADD_FAILURE() << "no op " << name;
    return nlohmann::json();
  };
  for (const nlohmann::json& st : j["steps"]) {
    const bool decode = st["kind"] == "decode";
    const double N = decode ? 3 : 9;           // token rows
    const double m = decode ? 3 : 1;           // logits rows: one per sampling sequence
    const double keys = decode ? 3 * 21 : 9;   // cached keys read, every sequence
    const double attended = decode ? 3 * 21 : 9 * 10 / 2;  // causal (query, key) pairs
    EXPECT_TRUE(st["measured"].get<bool>()) << st["unmeasured_reason"];
    const nlohmann::json qkv = op(st, "qkv");
    EXPECT_EQ(qkv["calls"], 4);
    EXPECT_DOUBLE_EQ(qkv["bytes_read"].get<double>(), L * ((qd + 2 * kvd) * D + N * D) * B);
    EXPECT_DOUBLE_EQ(qkv["bytes_written"].get<double>(), L * N * (qd + 2 * kvd) * B);
    EXPECT_DOUBLE_EQ(qkv["flops"].get<double>(), L * 2 * N * (qd + 2 * kvd) * D);
    const nlohmann::json gu = op(st, "gate_up"), down = op(st, "down");
    EXPECT_DOUBLE_EQ(gu["flops"].get<double>(), L * 2 * N * 2 * I * D);
    EXPECT_DOUBLE_EQ(down["bytes_read"].get<double>(), L * (D * I + N * I + N * D) * B);
    const nlohmann::json att = op(st, "attention");
    EXPECT_DOUBLE_EQ(att["bytes_read"].get<double>(), L * (keys * 2 * kvd + N * qd) * B);
    EXPECT_DOUBLE_EQ(att["flops"].get<double>(), L * 4 * attended * qd);
    const nlohmann::json lm = op(st, "lm_head");
    EXPECT_DOUBLE_EQ(lm["bytes_read"].get<double>(), (V * D + m * D) * B);
    EXPECT_DOUBLE_EQ(lm["bytes_written"].get<double>(), m * V * B);
    // Every op was timed, and the times add up to the step's.
    double sum = 0;
    for (const nlohmann::json& o : st["ops"]) {
      ASSERT_FALSE(o["measured_ms"].is_null()) << o["name"];
      EXPECT_GE(o["measured_ms"].get<double>(), 0.0);
      sum += o["measured_ms"].get<double>();
    }
    EXPECT_NEAR(sum, st["kernel_ms"].get<double>(), 1e-9);
    EXPECT_GT(st["floor_ms"].get<double>(), 0.0);
  }
  // `hayate report` draws it: a bar per op.
  std::ofstream(path) << j.dump();
  const Proc rep = hayate({"report", path});
  std::remove(path.c_str());
  ASSERT_EQ(rep.code, 0) << rep.err;
  EXPECT_NE(rep.out.find("decode step, batch 3, context 20"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("  lm_head"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("|#"), std::string::npos) << rep.out;
}

// bench --explain: per run, the decode step's bytes (every weight once and
// the K/V rows of the run's mean context: dummy:tiny has 4 layers of 2 kv
// heads x 32, fp32 on the CPU) and the bandwidth that decode rate achieves.
TEST(Cli, BenchExplainCountsTheBytesPerToken) {
  const std::string path = ::testing::TempDir() + "/hayate_explain_" + std::to_string(::getpid()) + ".json";
  const Proc r = hayate(tiny({"bench", "--runs", "2", "--max-new-tokens", "6", "--explain",
                              "--json", path}));
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream f(path);
  const nlohmann::json j = nlohmann::json::parse(f);
  std::remove(path.c_str());
  const double weights = j["model"]["weight_bytes_per_token"].get<double>();
  const nlohmann::json run = j["runs"][0];
  const double ctx = run["prompt_tokens"].get<double>() + run["new_tokens"].get<double>() / 2;
  const double bytes = weights + 2.0 * 64 * 4 * 4 * ctx;
  char want[64];
  std::snprintf(want, sizeof want, "%.3f GB/token", bytes / 1e9);
  EXPECT_NE(r.out.find("  run  1: prefill"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
}

TEST(Cli, ProfileRejectsShapesTheModelCannotTake) {
  expect_one_line_error(tiny({"profile", "--context", "5000"}), "max_position_embeddings");
  expect_one_line_error(tiny({"profile", "--batch", "0"}), "--batch");
  expect_one_line_error(tiny({"profile", "--context", "-3"}), "--context");
}

}  // namespace
}  // namespace hayate
