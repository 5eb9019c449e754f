#include "server/metrics.h"

#include <algorithm>
#include <cstdio>

namespace hayate::server {

namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void gauge(std::string& out, const std::string& name, const std::string& help, double v,
           const char* type = "gauge") {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  out += name + " " + num(v) + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
  std::sort(bounds_.begin(), bounds_.end());
}

void Histogram::observe(double value) {
  size_t i = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  std::lock_guard lock(mutex_);
  counts_[i] += 1;
  sum_ += value;
  count_ += 1;
}

uint64_t Histogram::count() const {
  std::lock_guard lock(mutex_);
  return count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  std::lock_guard lock(mutex_);
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += name + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cum) + "\n";
  }
  cum += counts_.back();
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(cum) + "\n";
  out += name + "_sum " + num(sum_) + "\n";
  out += name + "_count " + std::to_string(count_) + "\n";
}

// Buckets as vLLM's: TTFT from 1 ms to 160 s, inter-token from 10 ms to 80 s
// (with finer steps below 10 ms, which a fast GPU decode step falls under).
Metrics::Metrics()
    : ttft({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
            7.5, 10.0, 20.0, 40.0, 80.0, 160.0}),
      itl({0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4,
           0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}),
      e2e({0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
           120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}) {}

std::string Metrics::render(const EngineStats& s, int in_flight, int max_model_len) const {
  std::string out;
  gauge(out, "hayate:num_requests_running", "Sequences holding KV-cache blocks.", s.num_running);
  gauge(out, "hayate:num_requests_waiting", "Sequences queued or preempted.", s.num_waiting);
  gauge(out, "hayate:num_requests_in_flight", "Requests accepted by the HTTP server, not done.",
        in_flight);
  gauge(out, "hayate:kv_cache_usage_perc", "Share of KV-cache blocks in use (1 = full).",
        s.kv_usage);
  gauge(out, "hayate:kv_cache_blocks_used", "KV-cache blocks in use.", s.kv_blocks_used);
  gauge(out, "hayate:kv_cache_blocks_total", "KV-cache blocks in the pool.", s.kv_blocks_total);
  gauge(out, "hayate:max_model_len", "Longest sequence (prompt + output) in tokens.",
        max_model_len);
  gauge(out, "hayate:prompt_tokens_total", "Prompt tokens of finished requests.",
        double(s.prompt_tokens_total), "counter");
  gauge(out, "hayate:generation_tokens_total", "Generated tokens.",
        double(s.generation_tokens_total), "counter");
  gauge(out, "hayate:num_preemptions_total", "Sequences preempted for KV blocks.",
        double(s.preemptions_total), "counter");
  gauge(out, "hayate:engine_steps_total", "Engine steps run.", double(s.steps), "counter");
  gauge(out, "hayate:prefix_cache_queries_total",
        "Prompt tokens looked up in the prefix cache (vLLM's prefix_cache_queries).",
        double(s.prefix_cache_queries_total), "counter");
  gauge(out, "hayate:prefix_cache_hits_total",
        "Prompt tokens found computed in the prefix cache (vLLM's prefix_cache_hits).",
        double(s.prefix_cache_hits_total), "counter");
  gauge(out, "hayate:kv_cache_blocks_cached", "KV-cache blocks registered in the prefix cache.",
        s.kv_blocks_cached);
  out += "# HELP hayate:request_success_total Finished requests by finish reason.\n"
         "# TYPE hayate:request_success_total counter\n";
  const char* reasons[] = {"stop", "length", "abort"};
  for (size_t i = 0; i < finished.size(); ++i)
    out += std::string("hayate:request_success_total{finished_reason=\"") + reasons[i] + "\"} " +
           std::to_string(finished[i].load()) + "\n";
  gauge(out, "hayate:request_rejected_queue_full_total", "Requests answered 503: queue full.",
        double(rejected_queue_full.load()), "counter");
  gauge(out, "hayate:client_disconnects_total", "Streams aborted because the client went away.",
        double(client_disconnects.load()), "counter");
  ttft.render(out, "hayate:time_to_first_token_seconds", "Time to first token.");
  itl.render(out, "hayate:inter_token_latency_seconds", "Time between generated tokens.");
  e2e.render(out, "hayate:e2e_request_latency_seconds", "End-to-end request latency.");
  return out;
}

}  // namespace hayate::server
