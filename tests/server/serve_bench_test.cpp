// The serving benchmark client against an in-process OpenAIServer on the
// batching engine (CPU, dummy:tiny), and its statistics on known records.
#include <gtest/gtest.h>

#include <csignal>
#include <cmath>
#include <memory>

#include <nlohmann/json.hpp>

#include "bench/serve_client.h"
#include "core/check.h"
#include "cpu/cpu_paged_backend.h"
#include "engine/engine.h"
#include "model/model.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"

namespace hayate {
namespace {

// dummy:tiny behind `hayate serve`'s server, on a free loopback port.
struct LocalServer {
  Model model;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<BatchBackend> backend;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<server::OpenAIServer> srv;
  int port = 0;

  LocalServer() {
    std::signal(SIGPIPE, SIG_IGN);
    model = load_model("dummy:tiny", 0, HAYATE_ASSETS_DIR);
    tok = std::make_unique<Tokenizer>(Tokenizer::load(model.tokenizer_dir));
    BatchBackendOptions bo;
    bo.max_model_len = 512;
    bo.num_blocks = 256;
    backend = make_cpu_paged_backend(model, bo);
    engine = std::make_unique<Engine>(*backend, tok.get(), EngineOptions{});
    engine->start();
    server::ServerOptions so;
    so.port = 0;
    so.served_model_names = {"tiny"};
    so.keep_alive_timeout_s = 1;
    srv = std::make_unique<server::OpenAIServer>(so);
    port = srv->listen();
    server::ServingModel sm;
    sm.engine = engine.get();
    sm.tokenizer = tok.get();
    sm.max_model_len = backend->max_model_len();
    sm.vocab_size = model.config.vocab_size;
    sm.max_num_seqs = 256;
    sm.root = "dummy:tiny";
    srv->set_ready(sm);
  }
  ~LocalServer() {
    srv->shutdown(std::chrono::milliseconds(2000));
    engine->stop();
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port) + "/v1"; }
};

TEST(ServeBench, MeasuresEveryRequestAgainstHayateServe) {
  LocalServer local;
  bench::ServeBenchOptions o;
  o.endpoint = local.endpoint();
  o.num_prompts = 6;
  o.input_len = 8;
  o.output_len = 4;
  o.max_concurrency = 3;
  bench::ServeBenchResult r = bench::run_serve_bench(o, nullptr);
  EXPECT_EQ(r.server_model, "tiny");  // looked up through /v1/models
  const bench::ServeBenchSummary& s = r.summary;
  ASSERT_EQ(s.completed, 6) << r.notes.front();
  EXPECT_EQ(s.failed, 0);
  EXPECT_EQ(s.output_tokens, 6 * 4);  // usage.completion_tokens, EOS ignored
  EXPECT_EQ(s.input_tokens, 6 * 8);   // id prompts: no BOS added
  EXPECT_LE(s.max_concurrent, 3);
  for (const auto& q : r.requests) {
    ASSERT_TRUE(q.ok()) << q.error;
    ASSERT_TRUE(q.ttft_s && q.tpot_s);
    // One chunk per token: three gaps after the first of four tokens.
    EXPECT_EQ(q.itl_s.size(), 3u);
    double gaps = 0.0;
    for (double g : q.itl_s) gaps += g;
    // E2E = TTFT + the gaps, and TPOT is their mean (vLLM's identities).
    EXPECT_NEAR(q.latency_s, *q.ttft_s + gaps, 1e-9);
    EXPECT_NEAR(*q.tpot_s, gaps / 3.0, 1e-9);
  }
  EXPECT_NEAR(s.request_throughput, 6.0 / s.duration_s, 1e-9);
  EXPECT_NEAR(s.output_throughput, 24.0 / s.duration_s, 1e-9);
  ASSERT_TRUE(s.ttft_ms && s.tpot_ms && s.itl_ms && s.e2el_ms);
  EXPECT_GT(s.ttft_ms->mean, 0.0);
  EXPECT_LE(s.ttft_ms->median, s.ttft_ms->p99);
  nlohmann::json j = bench::to_json(r);
  EXPECT_EQ(j["schema"], "hayate-bench-serve");
  EXPECT_EQ(j["summary"]["completed"], 6);
  EXPECT_EQ(j["requests"].size(), 6u);
  EXPECT_NE(bench::format_serve(r).find("Mean TTFT (ms):"), std::string::npos);
}

TEST(ServeBench, PoissonArrivalsWordPromptsAndFailures) {
  LocalServer local;
  bench::ServeBenchOptions o;
  o.endpoint = local.endpoint();
  o.model = "tiny";
  o.num_prompts = 4;
  o.input_len = 5;
  o.output_len = 2;
  o.request_rate = 40.0;
  o.prompt_kind = "words";
  o.seed = 7;
  bench::ServeBenchResult r = bench::run_serve_bench(o, nullptr);
  EXPECT_EQ(r.summary.completed, 4);
  // Arrivals are a seeded Poisson process: increasing, sent no earlier than scheduled.
  for (size_t i = 0; i < r.requests.size(); ++i) {
    if (i > 0) {
      EXPECT_GT(r.requests[i].arrival_s, r.requests[i - 1].arrival_s);
    }
    EXPECT_GE(r.requests[i].send_s, r.requests[i].arrival_s);
  }
  EXPECT_EQ(r.requests[0].arrival_s, 0.0);
  // A request the server refuses is recorded as failed, not thrown.
  o.output_len = 100000;
  r = bench::run_serve_bench(o, nullptr);
  EXPECT_EQ(r.summary.completed, 0);
  EXPECT_EQ(r.summary.failed, 4);
  EXPECT_NE(r.requests[0].error.find("HTTP 400"), std::string::npos) << r.requests[0].error;
  // An unknown model is a 404 per request.
  o.output_len = 2;
  o.model = "nope";
  r = bench::run_serve_bench(o, nullptr);
  EXPECT_EQ(r.summary.failed, 4);
}

TEST(ServeBench, BadOptionsAndUnreachableEndpoint) {
  bench::ServeBenchOptions o;
  o.endpoint = "localhost:1/v1";
  EXPECT_THROW(bench::run_serve_bench(o, nullptr), Error);
  o.endpoint = "http://127.0.0.1:1/v1";  // nothing listens on port 1
  EXPECT_THROW(bench::run_serve_bench(o, nullptr), Error);
  o.num_prompts = 0;
  EXPECT_THROW(bench::run_serve_bench(o, nullptr), Error);
}

TEST(ServeBench, SummaryFollowsVllmDefinitions) {
  std::vector<bench::ServeRequestRecord> recs(3);
  // Request k: TTFT 0.1 k s, then output_tokens - 1 gaps of 0.01 s.
  for (int k = 0; k < 3; ++k) {
    auto& r = recs[size_t(k)];
    r.prompt_tokens = 10;
    r.output_tokens = 3;
    r.ttft_s = 0.1 * (k + 1);
    r.itl_s = {0.01, 0.01};
    r.latency_s = *r.ttft_s + 0.02;
    r.tpot_s = (r.latency_s - *r.ttft_s) / 2;
  }
  recs.push_back({});
  recs.back().error = "HTTP 503";
  bench::ServeBenchSummary s = bench::summarize_serve(recs, 2.0);
  EXPECT_EQ(s.completed, 3);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.input_tokens, 30);
  EXPECT_EQ(s.output_tokens, 9);
  EXPECT_DOUBLE_EQ(s.request_throughput, 1.5);
  EXPECT_DOUBLE_EQ(s.output_throughput, 4.5);
  EXPECT_DOUBLE_EQ(s.total_token_throughput, 19.5);
  EXPECT_NEAR(s.ttft_ms->mean, 200.0, 1e-9);
  EXPECT_NEAR(s.ttft_ms->median, 200.0, 1e-9);
  EXPECT_NEAR(s.ttft_ms->p99, 100.0 + 200.0 * 0.99, 1e-9);  // numpy linear interpolation
  EXPECT_NEAR(s.tpot_ms->mean, 10.0, 1e-9);
  EXPECT_NEAR(s.itl_ms->median, 10.0, 1e-9);
  EXPECT_NEAR(s.e2el_ms->mean, 220.0, 1e-9);
  EXPECT_NEAR(s.ttft_ms->std, std::sqrt(20000.0 / 3.0), 1e-9);
  EXPECT_TRUE(s.ttft_ms_by_turn.empty());  // no chats

  // Chats: TTFT per turn over that turn's completed requests.
  for (int k = 0; k < 3; ++k) recs[size_t(k)].turn = k == 2 ? 1 : 0;  // turn 0: 0.1, 0.2 s; 1: 0.3
  s = bench::summarize_serve(recs, 2.0);
  ASSERT_EQ(s.ttft_ms_by_turn.size(), 2u);
  EXPECT_NEAR(s.ttft_ms_by_turn[0].median, 150.0, 1e-9);
  EXPECT_NEAR(s.ttft_ms_by_turn[1].median, 300.0, 1e-9);
}

}  // namespace
}  // namespace hayate
