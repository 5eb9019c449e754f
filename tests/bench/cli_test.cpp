// `hayate bench` and `hayate report` end to end: dummy:tiny on the CPU, a few
// short runs, the JSON read back, and the comparison against a baseline file.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "bench/result.h"
#include "model/model.h"

namespace hayate::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Outcome {
  int rc = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class BenchCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hayate_bench_cli_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Outcome hayate(const std::string& args) {
    std::string cmd = std::string(HAYATE_BINARY_DIR) + "/hayate " + args + " >" +
                      (dir_ / "out").string() + " 2>" + (dir_ / "err").string();
    int status = std::system(cmd.c_str());
    Outcome o;
    o.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    o.out = slurp(dir_ / "out");
    o.err = slurp(dir_ / "err");
    return o;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(BenchCli, TinyOnCpuWritesTheSchema) {
  Outcome o = hayate("bench --model dummy:tiny --backend cpu --runs 3 --max-length 24 --json " +
                     path("same.json"));
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("mean of runs 3..3"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("decode:"), std::string::npos);
  EXPECT_NE(o.out.find("start to first token:"), std::string::npos);
  EXPECT_NE(o.out.find("text of run 1: "), std::string::npos) << o.out;

  json j = json::parse(slurp(path("same.json")));
  EXPECT_EQ(j["schema"], "hayate-bench");
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["engine"], "hayate");
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_EQ(j["model"]["spec"], "dummy:tiny");
  EXPECT_EQ(j["model"]["dtype"], "float32");
  EXPECT_EQ(j["workload"]["trial"], "same");
  EXPECT_EQ(j["workload"]["max_length"], 24);
  EXPECT_TRUE(j["workload"]["ignore_eos"].get<bool>());
  EXPECT_FALSE(j["workload"]["chat_template"].get<bool>());
  EXPECT_EQ(j["startup"]["read_bandwidth_gbs"], nullptr);  // none on the cpu
  EXPECT_GT(j["startup"]["first_token_s"].get<double>(), 0.0);
  EXPECT_FALSE(j["commit"].get<std::string>().empty());
  ASSERT_EQ(j["runs"].size(), 3u);
  for (const auto& run : j["runs"]) {
    // 11 tokens: the article's prompt with BOS, as tokenizers.js counts it
    // with the Llama 3.1 tokenizer.json.
    EXPECT_EQ(run["prompt_tokens"], 11);
    EXPECT_EQ(run["new_tokens"], 24 - 11);
    EXPECT_EQ(run["output_ids"].size(), 13u);
    EXPECT_EQ(run["finish"], "length");
    EXPECT_GT(run["seconds"].get<double>(), 0.0);
    EXPECT_LE(run["prefill_ms"].get<double>(), run["seconds"].get<double>() * 1e3);
  }
  // Greedy on the same prompt: each request rewinds the KV cache and makes
  // the same tokens.
  EXPECT_EQ(j["runs"][0]["output_ids"], j["runs"][2]["output_ids"]);
  BenchResult r = read_result_file(path("same.json"));
  EXPECT_EQ(r.summary.runs_ok, 3);
  EXPECT_DOUBLE_EQ(*r.summary.mean_s, j["runs"][2]["seconds"].get<double>());
}

TEST_F(BenchCli, ChatTemplateWrapsThePrompt) {
  Outcome o = hayate("bench --model dummy:tiny --backend cpu --runs 1 --chat --max-length 24 "
                     "--no-ids --json " + path("chat.json"));
  ASSERT_EQ(o.rc, 0) << o.err;
  json j = json::parse(slurp(path("chat.json")));
  EXPECT_TRUE(j["workload"]["chat_template"].get<bool>());
  // 20 tokens: tokenizers.js's apply_chat_template(add_generation_prompt)
  // of the article's prompt with the Llama 3.1 tokenizer_config.json.
  EXPECT_EQ(j["runs"][0]["prompt_tokens"], 20);
  EXPECT_EQ(j["runs"][0]["new_tokens"], 4);
  EXPECT_TRUE(j["runs"][0]["output_ids"].empty());
}

TEST_F(BenchCli, ReportComparesAgainstABaseline) {
  ASSERT_EQ(hayate("bench --model dummy:tiny --backend cpu --prompts varied --runs 3 "
                   "--max-new-tokens 4 --commit deadbeef --json " + path("hayate.json")).rc, 0);
  json j = json::parse(slurp(path("hayate.json")));
  EXPECT_EQ(j["commit"], "deadbeef");
  EXPECT_EQ(j["workload"]["trial"], "varied");
  EXPECT_EQ(j["workload"]["prompts"].size(), 11u);
  EXPECT_EQ(j["runs"][1]["prompt_index"], 1);
  EXPECT_EQ(j["runs"][1]["new_tokens"], 4);
  double mean3 = j["runs"][2]["seconds"].get<double>();

  // A baseline of the same trial, each run exactly 10x hayate's run 3.
  json eager = {{"schema", "hayate-bench"}, {"schema_version", 1}, {"engine", "hf-eager"},
                {"system", {{"device", "cpu"}, {"torch", "2.11.0"}}},
                {"model", {{"spec", "dummy:tiny"}, {"dtype", "float32"}}},
                {"workload", {{"trial", "varied"}, {"runs", 3}}},
                {"runs", json::array()}};
  for (int i = 1; i <= 3; ++i)
    eager["runs"].push_back({{"run", i}, {"seconds", 10.0 * mean3}, {"new_tokens", 4}});
  std::ofstream(path("eager.json")) << eager.dump();

  Outcome o = hayate("report " + path("hayate.json") + " " + path("eager.json") + " --markdown");
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("| varied | hayate | 3 |"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("| 10.00x |"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("- torch: 2.11.0"), std::string::npos);
  EXPECT_NE(o.out.find("- hayate commit: deadbeef"), std::string::npos);

  // --png: a chart where python3 has matplotlib, else a one-line error.
  o = hayate("report " + path("hayate.json") + " --png " + path("chart.png"));
  if (o.rc == 0) {
    EXPECT_TRUE(fs::exists(path("chart.png")));
  } else {
    EXPECT_EQ(o.rc, 1);
    EXPECT_NE(o.err.find("hayate: error: --png"), std::string::npos) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  }
}

TEST_F(BenchCli, ThroughputModeRunsTheBatchingEngine) {
  Outcome o = hayate("bench --mode throughput --model dummy:tiny --backend cpu --num-prompts 6 "
                     "--input-len 12 --output-len 5 --concurrency 3 --warmup 2 --json " +
                     path("tp.json"));
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("6 ok, 0 failed"), std::string::npos) << o.out;
  json j = json::parse(slurp(path("tp.json")));
  EXPECT_EQ(j["mode"], "throughput");
  EXPECT_EQ(j["workload"]["warmup"], 2);  // --warmup reaches the throughput mode
  EXPECT_EQ(j["model"]["spec"], "dummy:tiny");
  EXPECT_EQ(j["workload"]["concurrency"], 3);
  ASSERT_EQ(j["requests"].size(), 6u);
  for (const auto& q : j["requests"]) {
    EXPECT_EQ(q["prompt_tokens"], 12);
    EXPECT_EQ(q["output_tokens"], 5);  // EOS ignored: every request makes them all
    EXPECT_EQ(q["error"], nullptr);
  }
  EXPECT_FALSE(j["commit"].get<std::string>().empty());

  // report reads throughput (and serve) results: their figures in a table, and a chart.
  Outcome rep = hayate("report " + path("tp.json") + " --markdown");
  ASSERT_EQ(rep.rc, 0) << rep.err;
  const double out_tps = j["summary"]["output_tokens_per_s"].get<double>();
  char want[64];
  std::snprintf(want, sizeof want, "| %.1f |", out_tps);
  EXPECT_NE(rep.out.find("| throughput | 6 | 12/5 | 3 |"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find(want), std::string::npos) << want << "\n" << rep.out;
  rep = hayate("report " + path("tp.json") + " --png " + path("tp.png"));
  if (rep.rc == 0) EXPECT_GT(fs::file_size(path("tp.png")), 1000u);
  else EXPECT_NE(rep.err.find("matplotlib"), std::string::npos) << rep.err;

  Outcome bad = hayate("bench --mode throughput --model dummy:tiny --backend cpu --preset nope");
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.err.find("hayate: error:"), std::string::npos) << bad.err;
  Outcome no_endpoint = hayate("bench --mode serve");
  EXPECT_EQ(no_endpoint.rc, 1);
  EXPECT_NE(no_endpoint.err.find("--endpoint"), std::string::npos) << no_endpoint.err;
}

TEST_F(BenchCli, PrintConfigIsTheDummyConfig) {
  Outcome o = hayate("bench --print-config dummy:llama-3.1-8b");
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(json::parse(o.out), json::parse(dummy_config_json("llama-3.1-8b")));
}

TEST_F(BenchCli, BadInputIsOneLineError) {
  for (const std::string& args :
       {std::string("bench --model dummy:tiny --backend cpu --prompts /nonexistent/p.txt"),
        std::string("bench --model dummy:tiny --backend cpu --runs 1 --max-length 5"),
        std::string("bench --model dummy:nope --backend cpu --runs 1"),
        std::string("report /nonexistent/a.json"),
        std::string("report " + (fs::path(HAYATE_SOURCE_DIR) / "CMakePresets.json").string())}) {
    Outcome o = hayate(args);
    EXPECT_EQ(o.rc, 1) << args;
    EXPECT_EQ(o.err.rfind("hayate: error: ", 0), 0u) << args << ": " << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << args << ": " << o.err;
  }
}

}  // namespace
}  // namespace hayate::bench
