// What `hayate serve` logs: the access-log and stats lines (exact text), load
// progress, and the periodic stats of an in-process server under load
// (lines while busy, none once idle).
// GCC 12 at -O1 under ASan warns inside libstdc++'s <regex> (maybe-uninitialized
// std::function members of the NFA's states, inlined here): a library false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "bench/serve_client.h"
#include "core/check.h"
#include "cpu/cpu_paged_backend.h"
#include "engine/engine.h"
#include "model/model.h"
#include "server/log.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"

namespace hayate::server {
namespace {

std::string read_all(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  return out;
}

TEST(Log, AccessLine) {
  AccessRecord r;
  r.remote = "127.0.0.1:5000";
  r.method = "POST";
  r.path = "/v1/chat/completions";
  r.version = "HTTP/1.1";
  r.status = 200;
  r.request_id = "abc";
  r.prompt_tokens = 12;
  r.completion_tokens = 30;
  r.ttft_s = 0.0451;
  r.duration_s = 0.81234;
  EXPECT_EQ(format_access(r),
            "127.0.0.1:5000 \"POST /v1/chat/completions HTTP/1.1\" 200 prompt_tokens=12 "
            "completion_tokens=30 ttft_ms=45.1 duration_ms=812.3 request_id=abc");
  // A request that generated nothing; a prompt cannot forge a second line.
  r.prompt_tokens = r.completion_tokens = -1;
  r.ttft_s = -1;
  r.path = "/health";
  r.prompt = "a\nINFO fake \"line\"\x01";
  EXPECT_EQ(format_access(r),
            "127.0.0.1:5000 \"POST /health HTTP/1.1\" 200 duration_ms=812.3 request_id=abc "
            "prompt=\"a\\nINFO fake \\\"line\\\"\\x01\"");
}

TEST(Log, StatsLineAndLevels) {
  StatsLine s{1234.56, 78.9, 3, 2, 0.4567};
  EXPECT_EQ(format_stats(s),
            "Avg prompt throughput: 1234.6 tokens/s, Avg generation throughput: 78.9 tokens/s, "
            "Running: 3 reqs, Waiting: 2 reqs, KV cache usage: 45.7%");
  EXPECT_EQ(parse_log_level("warning"), LogLevel::kWarning);
  EXPECT_EQ(parse_log_level("trace"), LogLevel::kTrace);
  EXPECT_THROW(parse_log_level("WARN"), Error);
  std::FILE* f = std::tmpfile();
  Log log(LogLevel::kWarning, f);
  log.line(LogLevel::kInfo, "hidden");
  log.line(LogLevel::kError, "shown");
  EXPECT_TRUE(std::regex_match(read_all(f), std::regex("ERROR \\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d shown\n")));
  std::fclose(f);
}

TEST(Log, LoadProgressPlainLines) {
  std::FILE* f = std::tmpfile();  // not a terminal: plain lines, no bar
  LoadProgress p(true, f);
  p.update(0, 2000000000);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  p.update(2000000000, 2000000000);
  p.finish();
  p.finish();  // once
  const std::string out = read_all(f);
  std::fclose(f);
  EXPECT_EQ(out.find('\r'), std::string::npos);
  EXPECT_TRUE(std::regex_search(
      out, std::regex("^INFO [0-9: -]+loaded weights: 2\\.00 GB in 0\\.0[2-9]\\d* s \\([0-9.]+ GB/s\\)\n$")))
      << out;
}

TEST(Log, PeriodicStatsWhileBusyOnly) {
  std::signal(SIGPIPE, SIG_IGN);
  Model model = load_model("dummy:tiny", 0, HAYATE_ASSETS_DIR);
  Tokenizer tok = Tokenizer::load(model.tokenizer_dir);
  BatchBackendOptions bo;
  bo.max_model_len = 512;
  bo.num_blocks = 256;
  auto backend = make_cpu_paged_backend(model, bo);
  Engine engine(*backend, &tok, EngineOptions{});
  engine.start();
  std::FILE* f = std::tmpfile();
  ServerOptions so;
  so.port = 0;
  so.served_model_names = {"tiny"};
  so.keep_alive_timeout_s = 1;
  so.log.stats_interval_s = 0.1;
  so.log.out = f;
  OpenAIServer srv(so);
  const int port = srv.listen();
  ServingModel sm;
  sm.engine = &engine;
  sm.tokenizer = &tok;
  sm.max_model_len = backend->max_model_len();
  sm.vocab_size = model.config.vocab_size;
  sm.max_num_seqs = 256;
  srv.set_ready(sm);

  bench::ServeBenchOptions o;
  o.endpoint = "http://127.0.0.1:" + std::to_string(port) + "/v1";
  o.num_prompts = 8;
  o.input_len = 64;
  o.output_len = 48;
  o.max_concurrency = 4;
  bench::ServeBenchResult r = bench::run_serve_bench(o, nullptr);
  ASSERT_EQ(r.summary.completed, 8);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // one idle interval or more
  const std::string busy = read_all(f);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::string idle = read_all(f);
  srv.shutdown(std::chrono::milliseconds(1000));
  engine.stop();
  std::fclose(f);

  const std::regex line(
      "INFO [0-9: -]+Avg prompt throughput: ([0-9.]+) tokens/s, Avg generation throughput: "
      "([0-9.]+) tokens/s, Running: (\\d+) reqs, Waiting: (\\d+) reqs, KV cache usage: "
      "[0-9.]+%");
  int lines = 0;
  double gen = 0.0, prompt = 0.0;
  for (auto it = std::sregex_iterator(busy.begin(), busy.end(), line); it != std::sregex_iterator();
       ++it) {
    ++lines;
    prompt = std::max(prompt, std::stod((*it)[1]));
    gen = std::max(gen, std::stod((*it)[2]));
    EXPECT_LE(std::stoi((*it)[3]), 4);  // at most max_concurrency running
  }
  EXPECT_GE(lines, 1) << busy;
  EXPECT_GT(gen, 0.0);
  EXPECT_GT(prompt, 0.0);
  // The access log has one line per request (plus /v1/models of the client).
  size_t access = 0;
  for (size_t p = busy.find("\"POST /v1/completions HTTP/1.1\" 200"); p != std::string::npos;
       p = busy.find("\"POST /v1/completions HTTP/1.1\" 200", p + 1))
    ++access;
  EXPECT_EQ(access, 8u);
  EXPECT_EQ(idle, busy) << "stats lines while idle";
}

}  // namespace
}  // namespace hayate::server
